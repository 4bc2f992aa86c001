"""The full-page generator: deterministic, and its truth is what it draws."""

from __future__ import annotations

import hashlib
import json
from functools import cache

import numpy as np
import pytest

from veernet_core import page_draw, synth_factors
from veernet_core.page_spec import TrackSpec
from veernet_core.page_synth import PageOptions, SynthPage, generate_page, sample_spec

SMALL = PageOptions(dpi=150, first_section_in=(5.0, 6.0), second_section_in=(2.0, 3.0))


@cache
def _page(index: int, options: PageOptions = SMALL) -> SynthPage:
    return generate_page(7, index, options)


def _digest(page: SynthPage) -> str:
    return hashlib.sha256(page.image.tobytes() + json.dumps(page.spec.to_dict()).encode()).hexdigest()


def test_same_arguments_give_the_same_page() -> None:
    assert _digest(generate_page(7, 0, SMALL)) == _digest(_page(0))
    assert _digest(_page(1)) != _digest(_page(0))


def test_options_pin_what_they_name() -> None:
    page = _page(2, PageOptions(dpi=200, bitonal=True, turn=90, sections=2, unit="m", first_section_in=(4.0, 5.0),
                                second_section_in=(2.0, 3.0)))
    spec = page.spec
    assert spec.dpi == 200 and spec.scan.bitonal and spec.scan.turn == 90
    assert [s.scale.unit for s in spec.sections] == ["m", "m"]
    assert page.image.shape == (spec.width, spec.height), "turned a quarter: stored landscape"
    assert set(np.unique(page.image).tolist()) <= {0, 255}, "a 1-bit scan holds ink and paper only"
    assert generate_page(7, 3, PageOptions(width_px=2000, dpi=None)).spec.width == 2000


def test_a_second_section_repeats_an_interval_of_the_first() -> None:
    for index in range(6):
        spec = _page(index, PageOptions(dpi=150, sections=2, first_section_in=(5.0, 6.0),
                                        second_section_in=(2.0, 3.0))).spec
        first, second = spec.sections
        assert first.depth_top <= second.depth_top < second.depth_bottom <= first.depth_bottom
        assert second.rows_per_unit > first.rows_per_unit, "the detail section is drawn at a larger scale"
        assert second.header_top > first.bottom


def _upright(index: int, options: PageOptions = SMALL) -> tuple[np.ndarray, SynthPage]:
    """The page as drawn, before its scan (so the truth can be checked pixel by pixel)."""
    page = _page(index, options)
    rng = np.random.default_rng([7, index, 0x9A6E])  # the same draws, in the same order, as generate_page
    spec = sample_spec(rng, 7, index, options)
    assert spec == page.spec
    drawn, _, _ = page_draw.render(rng, spec)
    return drawn, page


@pytest.mark.parametrize("index", [0, 1, 2])
def test_borders_and_depth_lines_are_drawn_where_the_truth_says(index: int) -> None:
    drawn, page = _upright(index)
    ink = drawn < 128
    for section in page.spec.sections:
        body = slice(int(section.top) + 3, int(section.bottom) - 2)
        for track in section.tracks:
            for col in (track.left, track.right):
                assert ink[body, round(col)].mean() == 1.0, f"border at column {col}"
            mid = round((track.left + track.right) / 2 + 3)
            assert ink[body, mid].mean() < 0.3
        scale = section.scale
        for depth in np.arange(section.depth_top, section.depth_bottom, scale.major):
            row = round(float(section.row_of(depth)))
            track = section.tracks[0]
            assert ink[row, round(track.left) + 3:round(track.right) - 3].mean() > 0.95, f"major line at {depth}"
        halfway = float(section.row_of(section.depth_top + scale.minor / 2))
        assert ink[round(halfway), round(track.left) + 3:round(track.right) - 3].mean() < 0.3


def test_value_grid_lines_fall_on_their_fractions() -> None:
    drawn, page = _upright(0)
    ink = drawn < 128
    section = page.spec.sections[0]
    body = slice(int(section.top) + 3, int(section.bottom) - 2)
    for track in section.tracks:
        for f in track.division_fractions():
            col = round(track.left + f * (track.right - track.left))
            assert ink[body, col - 1:col + 2].any(axis=1).mean() == 1.0


def test_log_track_fractions_are_decades() -> None:
    track = TrackSpec(0.0, 100.0, "log", 2, ())
    fractions = track.division_fractions()
    assert len(fractions) == 17 and fractions[8] == pytest.approx(0.5)
    assert fractions[0] == pytest.approx(np.log10(2) / 2)


def test_a_curves_look_is_its_own_not_its_place_in_the_header() -> None:
    """Line style, pen width and ink are drawn per curve: the first curve is not always solid, two curves of a
    track may share a style, pens run 1-4 px at 300 dpi, and some curves are gray."""
    tracks = [track for index in range(40)
              for track in sample_spec(np.random.default_rng([7, index, 0x9A6E]), 7, index, SMALL).sections[0].tracks]
    curves = [(k, curve) for track in tracks for k, curve in enumerate(track.curves)]
    assert {c.style for k, c in curves if k == 0} == {"solid", "dashed", "dotted"}
    assert {round(c.stroke_in * 300) for _, c in curves} == {1, 2, 3, 4}
    assert {c.tone for _, c in curves} == {"dark", "light"}
    assert all(90 <= c.gray <= 140 for _, c in curves if c.gray is not None)
    assert any(len({c.style for c in t.curves}) < len(t.curves) for t in tracks), "two curves of one style"


def test_each_curve_is_drawn_in_its_own_pen_and_ink() -> None:
    """Where a solid curve runs steeply down the page, its run of ink across a row is its pen's width, and its
    gray the pen's: the page's black, or the gray pen's own tone."""
    checked: dict[str, set[int]] = {"dark": set(), "light": set()}  # the pen widths checked, by ink
    for index in range(6):
        drawn, page = _upright(index, PageOptions(dpi=300, sections=1, first_section_in=(1.5, 2.0)))
        section = page.spec.sections[0]
        fractions = iter(page.curve_fractions[0])
        first = int(np.ceil(section.top)) + 1
        for track in section.tracks:
            for curve in track.curves:
                f = next(fractions)
                if curve.style != "solid":
                    continue
                x = track.left + f * (track.right - track.left)
                steep = np.flatnonzero(np.abs(np.diff(x)) < 0.5)[2:-2]  # the pen moves under half a pixel a row
                widths, grays = [], []
                for r in steep[::3]:
                    row, col = first + int(r), int(round(x[r]))
                    line = drawn[row, col - 8 : col + 9].astype(np.float64)
                    inked = line < (255 + line[6:11].min()) / 2  # the curve's own ink about its centre
                    if not inked[6:11].any():
                        continue
                    centre = 6 + int(np.argmin(line[6:11]))
                    lo, hi = centre, centre
                    while lo > 0 and inked[lo - 1]:
                        lo -= 1
                    while hi < inked.size - 1 and inked[hi + 1]:
                        hi += 1
                    widths.append(hi - lo + 1)
                    grays.append(line[centre])
                if len(widths) < 8:
                    continue
                px = curve.stroke_px(page.spec.dpi)
                checked[curve.tone].add(px)
                # A polyline through sub-pixel points covers a column more where it steps across one.
                assert px <= np.median(widths) <= px + 2, f"page {index} {curve.mnemonic}: pen {px} px"
                if curve.gray is None:
                    assert np.median(grays) < 60, f"page {index} {curve.mnemonic}: drawn in the page's black ink"
                else:
                    assert abs(np.median(grays) - curve.gray) < 15, f"page {index} {curve.mnemonic}: its gray pen"
    assert len(checked["dark"] | checked["light"]) >= 3 and checked["light"], checked


def _flat(f: np.ndarray) -> bool:
    return bool(np.mean(np.abs(np.diff(f)) < 1e-12) > 0.95)


def test_some_curves_hold_a_bit_sizes_value_and_every_other_draw_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    """One curve in `synth_factors.CONSTANT_SHARE` holds one to three values along its track (a bit size, often on a
    grid line), from a random stream of its own: with none held, every other curve, and every page without one, is
    drawn as it was."""
    pages = [generate_page(11, index, SMALL) for index in range(24)]
    held = [(p, s, k) for p, page in enumerate(pages) for s, section in enumerate(page.constant)
            for k, constant in enumerate(section) if constant]
    # The truth says which it held, and only those run flat.
    assert held == [(p, s, k) for p, page in enumerate(pages) for s, section in enumerate(page.curve_fractions)
                    for k, f in enumerate(section) if _flat(f)]
    curves = sum(len(section) for page in pages for section in page.curve_fractions)
    assert 0.02 * curves <= len(held) <= 0.15 * curves
    for p, s, k in held:
        f = pages[p].curve_fractions[s][k]
        levels = f[np.r_[True, np.diff(f) != 0]]
        assert 1 <= levels.size <= 3 and np.all((levels > 0) & (levels < 1))
    monkeypatch.setattr(synth_factors, "CONSTANT_SHARE", 0.0)
    for p, page in enumerate(pages):
        plain = generate_page(11, p, SMALL)
        assert not any(any(section) for section in plain.constant)
        if not any(q == p for q, _, _ in held):
            assert _digest(plain) == _digest(page)
            continue
        for s, (section, other) in enumerate(zip(page.curve_fractions, plain.curve_fractions, strict=True)):
            for k, (f, g) in enumerate(zip(section, other, strict=True)):
                if (p, s, k) in held:
                    assert not _flat(g)
                else:
                    np.testing.assert_array_equal(f, g)
