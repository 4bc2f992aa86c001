"""The full-page paper renderer (bench/paper/sheet.py): a pure function of its arguments, loading nothing of
the training generator, its truth where its ink is, its scan undone by the truth's own convention, and its
conventions varied from page to page."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bench.paper import sheet_draw
from bench.paper.sheet import LINEAR, MAX_SKEW_DEG, Design, PaperPage, design, number, render_page
from veernet_core.digitise.layout.scales import scale_named

REPO = Path(__file__).resolve().parents[2]
SURVEY = range(30)
CLEAN = range(4)
BLACK = 5  # a clean page's black ink is 0; its grid and gray pens are lighter than this
TRUTH_FORMAT = ["veernet_core", "veernet_core.digitise", "veernet_core.digitise.layout",
                "veernet_core.digitise.layout.scales", "veernet_core.page_spec", "veernet_core.synth_truth"]


@cache
def _clean(index: int) -> PaperPage:
    return render_page(7, index, clean=True)


@cache
def _survey() -> list[Design]:
    return [design(5, i) for i in SURVEY]


def _digest(page: PaperPage) -> str:
    truth = json.dumps([page.spec.to_dict(), page.header_rows, page.style], sort_keys=True)
    return hashlib.sha256(page.image.tobytes() + str(page.image.shape).encode() + truth.encode()).hexdigest()


@cache
def _child() -> tuple[list[str], str]:
    """A fresh process renders page (3, 1): the veernet_core modules it loaded, and the page's digest."""
    code = ("import hashlib, json, sys; from bench.paper.sheet import render_page; p = render_page(3, 1); "
            "truth = json.dumps([p.spec.to_dict(), p.header_rows, p.style], sort_keys=True); "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('veernet_core')))); "
            "print(hashlib.sha256(p.image.tobytes() + str(p.image.shape).encode() + truth.encode()).hexdigest())")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    modules, digest = done.stdout.strip().splitlines()[-2:]
    return json.loads(modules), digest


def test_a_page_is_a_pure_function_of_its_arguments() -> None:
    page = render_page(3, 1)
    assert _digest(page) == _digest(render_page(3, 1)) == _child()[1]  # in another process too
    assert _digest(render_page(3, 2)) != _digest(page)
    assert _digest(render_page(4, 1)) != _digest(page)
    with pytest.raises(ValueError, match="non-negative"):
        render_page(-1, 0)


def test_rendering_a_page_loads_nothing_of_veernet_core_but_the_truth_format() -> None:
    assert _child()[0] == TRUTH_FORMAT


def _dark_run(profile: np.ndarray, start: int) -> float:
    """The centre of the positions (offset by `start`) whose value is black."""
    black = np.flatnonzero(profile < BLACK)
    assert black.size and np.all(np.diff(black) == 1), f"one run of black expected, got {black + start}"
    return float(black.mean() + start)


@pytest.mark.parametrize("index", CLEAN)
def test_borders_and_frame_lines_are_black_where_the_truth_puts_them(index: int) -> None:
    """On a clean page every track border (and the depth column's) is a black line centred on the truth's column
    from the strip's top rule to the grid's bottom frame, and the grid's top and bottom frame lines are black
    rows centred on the truth's across all the tracks."""
    page = _clean(index)
    image = page.image
    for section in page.spec.sections:
        rows = slice(section.header_top + 1, math.floor(section.bottom))
        borders = {section.tracks[0].left, *section.depth_column, *(t.right for t in section.tracks[1:])}
        for centre in borders:
            lo = math.floor(centre) - 12
            found = _dark_run(image[rows, lo : math.ceil(centre) + 13].max(axis=0), lo)
            assert found == pytest.approx(centre, abs=1e-9)
        cols = slice(round(section.tracks[0].left), round(section.tracks[-1].right) + 1)
        for row in (section.top, section.bottom):
            lo = math.floor(row) - 12
            assert _dark_run(image[lo : math.ceil(row) + 13, cols].max(axis=1), lo) == pytest.approx(row, abs=1e-9)


def _centroid(darkness: np.ndarray, start: int) -> np.ndarray:
    """Per row of `darkness` (lines across a window starting at `start`), the darkness-weighted centre."""
    positions = np.arange(darkness.shape[1]) + start
    return (darkness * positions).sum(axis=1) / np.maximum(darkness.sum(axis=1), 1e-9)


@pytest.mark.parametrize("index", CLEAN)
def test_grid_lines_are_centred_on_the_truths_depths_and_value_fractions(index: int) -> None:
    """Drawn without its curves (which cross the grid everywhere at small scales), a clean page's heaviest
    depth lines lie at `row_of` their depth and its value grid's lines at the track's `division_fractions`, to
    a thousandth of a pixel: the median over the columns or rows a line crosses, most clear of other lines."""
    page = design(7, index, clean=True)
    bare = replace(page.spec, sections=tuple(replace(s, tracks=tuple(replace(t, curves=()) for t in s.tracks))
                                             for s in page.spec.sections))
    darkness = 255.0 - sheet_draw.draw(page.rng, replace(page.plan, samples=[]), bare, 0.0).astype(np.float64)
    checked = 0
    for section in page.spec.sections:
        scale, track = section.scale, section.tracks[0]
        cols = slice(math.ceil(track.left) + 8, math.floor(track.right) - 8)
        first = math.ceil(section.depth_top / scale.major)
        for n in range(first, math.floor(section.depth_bottom / scale.major) + 1):
            row = float(section.row_of(n * scale.major))
            if min(row - section.top, section.bottom - row) < 20:
                continue
            lo = round(row) - 6
            found = np.median(_centroid(darkness[lo : lo + 13, cols].T, lo))
            assert found == pytest.approx(row, abs=1e-3)
            checked += 1
        rows = slice(math.ceil(section.top) + 8, math.floor(section.bottom) - 8)
        for track in section.tracks:
            at = [track.left + f * (track.right - track.left) for f in track.division_fractions()]
            edges = [track.left, *at, track.right]
            for k, column in enumerate(at):
                if min(edges[k + 1] - edges[k], edges[k + 2] - edges[k + 1]) < 12:
                    continue  # too near a neighbour to measure alone
                lo = round(column) - 5
                assert np.median(_centroid(darkness[rows, lo : lo + 11], lo)) == pytest.approx(column, abs=1e-3)
                checked += 1
    assert checked >= 10


@pytest.mark.parametrize("index", CLEAN)
def test_each_curve_name_is_printed_on_its_header_row(index: int) -> None:
    """A header row lies in its section's strip, in the middle of a run of text rows at the middle of its
    track (the name and unit, centred there), each curve of a track lower down than the one before."""
    page = _clean(index)
    ink = page.image < 128
    assert len(page.header_rows) == len(page.spec.sections)
    for section, tracks in zip(page.spec.sections, page.header_rows, strict=True):
        assert [len(rows) for rows in tracks] == [len(t.curves) for t in section.tracks]
        for track, rows in zip(section.tracks, tracks, strict=True):
            assert list(rows) == sorted(rows)
            mid, reach = (track.left + track.right) / 2, round(0.15 * page.spec.dpi)
            band = ink[:, round(mid) - reach : round(mid) + reach].any(axis=1)
            for row in rows:
                assert section.header_top < row < section.top
                r = round(row)
                assert band[r - 1 : r + 2].any()
                top, bottom = r, r
                while band[top - 1]:
                    top -= 1
                while band[bottom + 1]:
                    bottom += 1
                assert bottom - top < 0.2 * page.spec.dpi  # one line of text, not a rule or a border
                assert abs((top + bottom) / 2 - row) <= 0.25 * (bottom - top) + 1


def test_the_scan_is_stored_as_the_truth_says_and_undoing_it_lands_on_the_truth() -> None:
    """A scan is uint8, 0/255 only when 1-bit, a quarter turn swapping its sides; turned back and rotated back
    about its centre, a gray scan's track borders are where the truth puts them (within half a pixel)."""
    pages = _survey()
    bitonal = next(i for i, p in enumerate(pages) if p.spec.scan.bitonal and p.spec.dpi < 260)
    turned = next(i for i, p in enumerate(pages) if not p.spec.scan.bitonal and p.spec.scan.turn in (90, 270)
                  and abs(p.spec.scan.skew_deg) > 0.2)
    for index in (bitonal, turned):
        page = render_page(5, index)
        spec, image = page.spec, page.image
        assert image.dtype == np.uint8 and image.ndim == 2
        assert image.shape == ((spec.width, spec.height) if spec.scan.turn in (90, 270) else (spec.height, spec.width))
        assert set(np.unique(image)) <= {0, 255} if spec.scan.bitonal else len(np.unique(image)) > 2
    page = render_page(5, turned)
    upright = np.rot90(page.image, -(page.spec.scan.turn // 90))
    paper = int(np.median(upright))
    back = np.asarray(Image.fromarray(np.ascontiguousarray(upright)).rotate(
        -page.spec.scan.skew_deg, Image.Resampling.BILINEAR, fillcolor=paper), np.float64)
    section = page.spec.sections[0]
    middle = (section.top + section.bottom) / 2
    rows = slice(round(middle) - 150, round(middle) + 150)
    for centre in (section.tracks[0].left, *section.depth_column, section.tracks[-1].right):
        lo = round(centre) - 8
        darkness = np.clip(paper - back[rows, lo : lo + 17], 0, None)
        assert np.median(_centroid(darkness, lo)) == pytest.approx(centre, abs=0.5)


def test_pages_vary_the_conventions_of_printed_logs_and_keep_their_truth_consistent() -> None:
    """Over 30 pages: every legend layout, gray and 1-bit scans, upright and turned; each page's truth in the
    format's terms (standard scales, depth column between tracks 1 and 2, the legend's printed ends, pens of
    the documented styles), drawn clear of the page's edges by what its skew moves them."""
    pages = _survey()
    seen = {name: {str(p.style[name]) for p in pages} for name in ("legend", "scan", "turn", "header", "units",
                                                                     "numbers", "depth_labels", "tracks", "unit")}
    assert seen["legend"] == {"a", "b", "c", "d"}
    assert "gray" in seen["scan"] and seen["scan"] & {"threshold", "dither"}
    assert "0" in seen["turn"] and seen["turn"] & {"90", "180", "270"}
    for name in ("header", "units", "numbers", "depth_labels", "tracks", "unit"):
        assert len(seen[name]) >= 2, name
    assert sum(p.style["legend"] == "a" for p in pages) <= 0.35 * len(pages)  # the training generator's layout
    for page in pages:
        spec = page.spec
        assert spec.width == round(8.5 * spec.dpi) and 150 <= spec.dpi <= 400
        assert spec.font.startswith("Liberation") and abs(spec.scan.skew_deg) <= MAX_SKEW_DEG
        assert spec.header[0] < spec.header[1] < spec.sections[0].header_top
        margin = math.tan(math.radians(abs(spec.scan.skew_deg))) * spec.height / 2
        for k, section in enumerate(spec.sections):
            assert section.rows_per_unit == scale_named(section.scale_name).rows_per_unit(spec.dpi)
            assert section.header_top < section.top < section.bottom < spec.height
            assert k == 0 or spec.sections[k - 1].bottom < section.header_top
            assert section.depth_column == (section.tracks[0].right, section.tracks[1].left)
            assert section.tracks[0].left > margin and spec.width - section.tracks[-1].right > margin
            assert section.tracks == spec.sections[0].tracks
            for track in section.tracks:
                assert track.grid in ("linear", "log") and 1 <= len(track.curves) <= 4
                for curve in track.curves:
                    assert curve.style in ("solid", "dashed", "dotted") and curve.log == (track.grid == "log")
                    assert curve.gray is None or 60 <= curve.gray <= 150
                    for end in (curve.left, curve.right):
                        assert float(number(end, str(page.style["numbers"]))) == end
                    if curve.log:
                        assert curve.right / curve.left == pytest.approx(10**track.divisions)
                    else:
                        assert curve.unit in LINEAR[curve.mnemonic][0]


def test_each_curves_scale_ends_are_printed_on_its_ends_row() -> None:
    """`ends_rows` is the line of a curve's scale ends: its name's line, but for a legend that prints the ends
    under the sample (layout c), a line below it within the entry, where text is inked at the track's left end."""
    seen = set()
    for index in range(40):
        page = design(7, index, clean=True)
        layout = page.style["legend"] if page.style["legend"] != "d" else page.style["cell"]
        for names, ends in zip(page.header_rows, page.ends_rows, strict=True):
            for name_rows, end_rows in zip(names, ends, strict=True):
                for name, end in zip(name_rows, end_rows, strict=True):
                    if layout == "c":
                        assert 0 < end - name < 0.4 * page.spec.dpi
                    else:
                        assert end == pytest.approx(name, abs=1e-6)
        seen.add(layout)
        if layout == "c" and "checked" not in seen:
            drawn = render_page(7, index, clean=True)
            ink = drawn.image < 128
            section = drawn.spec.sections[0]
            for track, rows in zip(section.tracks, drawn.ends_rows[0], strict=True):
                left = round(track.left) + 4
                for row in rows:
                    r = round(row)
                    assert ink[r - 2:r + 3, left:left + round(0.3 * drawn.spec.dpi)].any()
            seen.add("checked")
    assert {"a", "b", "c", "checked"} <= seen


def test_each_curves_truth_lies_on_its_ink() -> None:
    """`curve_fractions` are where each curve's pen runs: on a clean page, at rows every 40 apart, the nearest ink
    of the row to a solid curve's truth (past 1, one track width back from the left border: its backup scale)
    is under half a pixel away at the median, and within its pen's width and two pixels in most rows (a steep
    pen between two drawn rows lands a row off); NaN only near the frame lines."""
    checked = 0
    for index in range(6):
        page = render_page(11, index, clean=True)
        ink = page.image < 200
        for s, section in enumerate(page.spec.sections):
            first = math.ceil(section.top) + 1
            truths = iter(page.curve_fractions[s])
            for track in section.tracks:
                for curve in track.curves:
                    truth = next(truths)
                    assert truth.size == math.floor(section.bottom) - first
                    assert np.isfinite(truth[10:-10]).all()
                    if curve.style != "solid":
                        continue
                    rows = np.arange(first, first + truth.size)[10:-10:40]
                    at = truth[10:-10:40]
                    cols = track.left + (at - (at > 1)) * (track.right - track.left)
                    off = []
                    for r, c in zip(rows, cols, strict=True):
                        inked = np.flatnonzero(ink[r, math.ceil(track.left) + 3:math.floor(track.right) - 2])
                        off.append(np.abs(inked + math.ceil(track.left) + 3 - c).min() if inked.size else np.inf)
                    assert np.median(off) <= 0.5, (index, curve.mnemonic)
                    assert np.mean(np.array(off) <= curve.stroke_px(page.spec.dpi) + 2) >= 0.8, (index, curve.mnemonic)
                    checked += 1
    assert checked >= 6
