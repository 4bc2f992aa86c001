"""Dots along a trace: pieces of ink a few pen widths across, on the scan's own pixels (`dots`)."""

from __future__ import annotations

import numpy as np

from veernet_core.digitise.dots import DOT_WIDTHS, dotted_columns, pieces
from veernet_core.digitise.ink import Page, ScanPixels


def test_each_run_knows_its_piece_and_each_piece_its_extent() -> None:
    ink = np.zeros((40, 60), dtype=bool)
    ink[10, 5:45] = True  # a line 40 px long
    ink[20:23, 50:53] = True  # a dot 3 px across
    ink[30:32, 10:12] = True  # and one 2 px across,
    ink[32:34, 12:14] = True  # touching a second one at a corner (8-connected): one piece, 4 px across
    col, lo, hi, piece, extent, pixels = pieces(ink)
    assert col.tolist() == sorted(col.tolist())
    def extent_at(row: int, column: int) -> int:
        run = np.flatnonzero((col == column) & (lo <= row) & (hi >= row))[0]
        return int(extent[piece[run]])
    assert extent_at(10, 5) == extent_at(10, 44) == 40
    assert extent_at(21, 51) == 3
    assert extent_at(30, 10) == extent_at(33, 13) == 4
    assert len({int(piece[i]) for i in range(col.size)}) == 3


def _page(width: int) -> Page:
    return Page(paper=np.full(width, 235.0), grid_cols=np.zeros(width, bool), grid_rows=np.zeros(400, bool))


def _paper(height: int, width: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(235 + rng.normal(0, 4, (height, width)), 0, 255).astype(np.uint8)


def test_a_dotted_curves_columns_are_on_dots_and_a_solid_or_dashed_ones_are_not() -> None:
    width = 600
    cols = np.arange(width)
    rows = 50.0 + 20.0 * np.sin(cols / 40.0)
    for gray in (30, 150):  # black and light gray ink: ink is read against the trace's own
        dotted = _paper(100, width)
        for x in range(0, width - 3, 8):  # round-ish dots 3 px across, 5 px of paper between
            r = int(round(rows[x]))
            dotted[r - 1 : r + 2, x : x + 3] = gray
        found, dots = dotted_columns(ScanPixels(dotted), _page(width), rows, cols, 2)
        assert found.mean() > 0.3 and dots[found].mean() > 0.95, (gray, found.mean(), dots[found].mean())
    for on, off in ((1, 0), (24, 6)):  # solid, then dashes 8 pen widths and more long
        image = _paper(100, width, seed=1)
        for x in cols[cols % (on + off) < on]:
            r = int(round(rows[x]))
            image[r - 1 : r + 2, x] = 30
        found, dots = dotted_columns(ScanPixels(image), _page(width), rows, cols, 2)
        assert found.mean() > 0.75 and not dots.any(), (on, off)
    assert DOT_WIDTHS * 3 < 24  # a dash of the test is longer than a dot can be


def test_a_trace_over_bare_paper_finds_no_ink() -> None:
    image = _paper(60, 200)
    found, dots = dotted_columns(ScanPixels(image), _page(200), np.full(200, 30.0), np.arange(200), 2)
    assert not found.any() and not dots.any()
    empty = dotted_columns(ScanPixels(image), _page(200), np.zeros(0), np.zeros(0, dtype=np.int64), 2)
    assert empty[0].size == 0 and empty[1].size == 0
