"""The full-page generator: deterministic, and its truth is what it draws."""

from __future__ import annotations

import hashlib
import json
from functools import cache

import numpy as np
import pytest

from veernet_core import page_draw
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


def _upright(index: int) -> tuple[np.ndarray, SynthPage]:
    """The page as drawn, before its scan (so the truth can be checked pixel by pixel)."""
    page = _page(index)
    rng = np.random.default_rng([7, index, 0x9A6E])  # the same draws, in the same order, as generate_page
    spec = sample_spec(rng, 7, index, SMALL)
    assert spec == page.spec
    drawn, _ = page_draw.render(rng, spec)
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
