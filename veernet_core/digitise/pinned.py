"""Curves held at a track's edge: ink the model does not mark, given back to the tracer.

A curve with no backup scale on a side cannot go past that edge: where its values do, the recorder's pen
(or a plotting program's clip) holds it at the edge, and it runs there as a flat line a few pixels inside
the track's border for as long as its values stay past it. The bundled model, trained on logs whose curves
never run along an edge, reads such a line as part of the printed grid and does not mark it; the tracer,
asked for the track's curves, then takes another curve's ink for it or leaves it null. On the independent
renderer's full-resolution logs (tuning seed 7777), samples within 5 % of an edge were 10 % of the scored
samples and 30 % of the error (bench/README.md, 2026-11-28).

`pinned_ink` finds such lines on the scan: in a band of BAND_SHARE of the track along each edge (less
BORDER_SHARE next to the border line, which may be thick and a few rows off the calibrated edge:
`_inner_edge`), rows whose ink runs flat for at least RUN_SHARE of the track's height in columns, in columns
whose ink in the band is one thin line (THICK_SHARE), dashes and dots joined over gaps of up to GAP_SHARE. A
row inked along most of the scan (`Page.grid_rows`), or whose runs together cover more than LINE_SHARE of
it, is a grid or border line, or what grid removal left of one.

`with_pinned` adds the ink of the runs that a curve the model marks comes to (at either end, from inside
the track: `_joined`; a piece of a grid line has none) to a binary model's curve probability, on the
model's grid, where the model gave it less. It does so on scans reduced for the model only (full-resolution
ones, whose grid is taken off and whose track is tall enough to tell a line a few pixels inside the border
from the border), in every track. It was once added only where the hints tell every curve of the track from
every other, since in a track of look-alike curves a line at the edge is one more meeting where their names
are a coin flip; with the naming and tracing of 2026-12-05, held ink in every track read lower on the
independent renderer's held-out logs (10.74 -> 10.45 %, its worst curve position 13.68 -> 12.94 %) and on
each of its tuning seeds, and the same on the generator's (bench/README.md, 2026-12-05).
"""

from __future__ import annotations

import math

import numpy as np

from veernet_core.digitise.calibration import Calibration, to_grid
from veernet_core.digitise.ink import MIN_DARKNESS, ScanPixels, page_of

BAND_SHARE = 0.06  # of the track's height: how far inside an edge a held curve is looked for
BORDER_SHARE = 0.008  # of the track's height (at least 2 rows): rows next to the border row left out (its line's)
RUN_SHARE = 0.15  # of the track's height: the least length, in columns, of a flat run of ink
GAP_SHARE = 0.04  # of the track's height: the longest gap (a dash's, a dot's) joined within a run
THICK_SHARE = 0.02  # of the track's height: the most ink a column of the band holds on a held curve's line
FILL = 0.5  # the least share of a run's columns that hold ink
LINE_SHARE = 0.5  # of the scan's width: a run this long is a line across the scan, not a curve
JOIN_SHARE = 0.1  # of the track's height: how far inside the run the curve that comes to it is looked for
JOIN_COLUMNS = 2  # model columns either side of a run's end where the curve that comes to it is looked for
PINNED_PROBABILITY = 0.9  # what the curve probability is raised to on a held curve's ink


Run = tuple[int, int, int, int]  # (row, first column, last column, the way into the track: 1 or -1)


def pinned_ink(scan: ScanPixels, top: float, bottom: float) -> np.ndarray:
    """bool (H, W) on the scan's grid: the ink of flat runs along the track's edges (see the module)."""
    return _pinned(scan, top, bottom)[0]


def _pinned(scan: ScanPixels, top: float, bottom: float) -> tuple[np.ndarray, list[Run]]:
    """`pinned_ink`, and its runs."""
    gray = scan.gray
    height, width = gray.shape
    span = float(bottom) - float(top)
    found = np.zeros((height, width), dtype=bool)
    runs: list[Run] = []
    if span < 8 or width < 8:
        return found, runs
    page = page_of(scan, top, bottom)
    ink_below = page.paper - MIN_DARKNESS
    band = max(2, math.ceil(BAND_SHARE * span))
    run_min = max(4, round(RUN_SHARE * span))
    gap_max = max(1, round(GAP_SHARE * span))
    thick = max(3, math.ceil(THICK_SHARE * span))
    border = max(2, round(BORDER_SHARE * span))
    top_row = _inner_edge(page.grid_rows, int(round(top)), 1, border)
    bottom_row = _inner_edge(page.grid_rows, int(round(bottom)), -1, border)
    for first_row, last_row, inward in ((top_row + border + 1, top_row + band, 1),
                                        (bottom_row - band, bottom_row - border - 1, -1)):
        first_row, last_row = max(1, first_row), min(height - 2, last_row)
        if last_row < first_row:
            continue
        inked = gray[first_row : last_row + 1] <= ink_below[None, :]
        flat = np.count_nonzero(inked, axis=0) <= thick  # a column whose ink in the band is one thin line
        for r, first, last in _flat_runs(inked, flat, page.grid_rows[first_row : last_row + 1], run_min, gap_max,
                                         width):
            found[first_row + r, first : last + 1] = inked[r, first : last + 1] & flat[first : last + 1]
            runs.append((first_row + r, first, last, inward))
    return found, runs


def _inner_edge(grid_rows: np.ndarray, edge: int, inward: int, reach: int) -> int:
    """The row where the track's border line ends on the inside: the innermost line across the scan within
    `reach` rows of the calibrated `edge` (a thick or blurred border, or one a few rows off the calibration),
    else `edge`."""
    rows = np.arange(edge - reach, edge + reach + 1)
    rows = rows[(rows >= 0) & (rows < grid_rows.size)]
    lines = rows[grid_rows[rows]]
    if lines.size == 0:
        return edge
    return int(lines.max() if inward > 0 else lines.min())


def _flat_runs(inked: np.ndarray, flat: np.ndarray, grid_rows: np.ndarray, run_min: int, gap_max: int,
               width: int) -> list[tuple[int, int, int]]:
    """(row, first column, last column) of each long flat run of one band's rows (see the module)."""
    found = []
    for r in range(inked.shape[0]):
        if grid_rows[r]:
            continue
        ink = inked[max(0, r - 1) : r + 2].any(axis=0) & flat  # a pixel of drift either way
        runs = _runs(ink, gap_max)
        if sum(last - first + 1 for first, last in runs) > LINE_SHARE * width:
            continue  # a line along the scan, broken (what is left of a border or grid line)
        for first, last in runs:
            length = last - first + 1
            if length < run_min or length > LINE_SHARE * width:
                continue
            if np.count_nonzero(ink[first : last + 1]) < FILL * length:
                continue
            found.append((r, first, last))
    return found


def _runs(ink: np.ndarray, gap_max: int) -> list[tuple[int, int]]:
    """(first, last) column of every run of ink, gaps of at most `gap_max` columns joined."""
    cols = np.flatnonzero(ink)
    if cols.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(cols) > gap_max + 1)
    firsts = np.concatenate([[cols[0]], cols[breaks + 1]])
    lasts = np.concatenate([cols[breaks], [cols[-1]]])
    return list(zip(firsts.tolist(), lasts.tolist(), strict=True))


def _joined(curve: np.ndarray, row: float, ends: list[float], inward: int, reach: int) -> bool:
    """Whether the model marks a curve coming to the run (on its grid: `row`, the columns of its `ends`) from
    inside the track: within JOIN_COLUMNS of an end, in the `reach` rows inward of the run's row."""
    h, w = curve.shape
    r0 = int(round(row)) + inward
    lo, hi = (r0, r0 + inward * reach) if inward > 0 else (r0 + inward * reach, r0)
    lo, hi = max(0, lo), min(h - 1, hi)
    if lo > hi:
        return False
    return any(curve[lo : hi + 1, max(0, c - JOIN_COLUMNS) : min(w, c + JOIN_COLUMNS + 1)].any()
               for c in (int(round(end)) for end in ends))


def with_pinned(probabilities: np.ndarray, scan: ScanPixels | None, calibration: Calibration,
                reduced: bool, threshold: float) -> np.ndarray:
    """A binary model's (2, h, w) probabilities with the track's held curves' ink (`pinned_ink`, on the
    scan's grid) raised to PINNED_PROBABILITY on the model's grid, where the scan was `reduced` for the model
    (`rescale.Resampling.reduced`); anything else as it is. The model marks a curve where its probability
    reaches `threshold` (the tracer's)."""
    if scan is None or probabilities.shape[0] != 2 or not reduced:
        return probabilities
    ink, runs = _pinned(scan, calibration.track_top, calibration.track_bottom)
    h, w = probabilities.shape[1:]
    fr, fc = h / ink.shape[0], w / ink.shape[1]
    curve = probabilities[1] >= threshold
    reach = max(2, round(JOIN_SHARE * (calibration.track_bottom - calibration.track_top) * fr))
    for row, first, last, inward in runs:  # a row's runs are apart: a run no curve comes to is taken out
        if not _joined(curve, to_grid(row, fr), [to_grid(first, fc), to_grid(last, fc)], inward, reach):
            ink[row, first : last + 1] = False
    if not ink.any():
        return probabilities
    rows, cols = np.nonzero(ink)
    r = np.clip(np.rint(to_grid(rows, fr)).astype(np.int64), 0, h - 1)
    c = np.clip(np.rint(to_grid(cols, fc)).astype(np.int64), 0, w - 1)
    out = probabilities.copy()
    raised = np.maximum(out[1, r, c], np.float32(PINNED_PROBABILITY))
    out[1, r, c] = raised
    out[0, r, c] = 1 - raised
    return out
