"""Curves held at a track's edge: ink the model does not mark, given back to the tracer.

A curve with no backup scale on a side cannot go past that edge: where its values do, the recorder's pen
(or a plotting program's clip) holds it at the edge, and it runs there as a flat line a few pixels inside
the track's border for as long as its values stay past it. The bundled model, trained on logs whose curves
never run along an edge, reads such a line as part of the printed grid and does not mark it; the tracer,
asked for the track's curves, then takes another curve's ink for it or leaves it null. On the independent
renderer's full-resolution logs (tuning seed 7777), samples within 5 % of an edge were 10 % of the scored
samples and 30 % of the error (bench/README.md, 2026-11-28).

`pinned_ink` finds such lines on the scan: in a band of BAND_SHARE of the track along each edge (less the
rows next to the border, whose own line they are), rows whose ink runs flat for at least RUN_SHARE of the
track's height in columns, in columns whose ink in the band is one thin line (THICK_SHARE), dashes and dots
joined over gaps of up to GAP_SHARE. A row inked along most of the scan (`Page.grid_rows`), or whose runs
together cover more than LINE_SHARE of it, is a grid or border line, or what grid removal left of one.

`with_pinned` adds that ink to a binary model's curve probability, on the model's grid, where the model gave
it less: on scans reduced for the model only (full-resolution ones, whose grid is taken off and whose track
is tall enough to tell a line a few pixels inside the border from the border), and only in a track whose
hints tell every curve from every other (`told_apart`). Where two curves look alike, a line at the edge that
both may run along is one more meeting where their names are a coin flip, and on the tuning logs the held
ink cost those curves more than it gave.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from veernet_core.digitise.calibration import Calibration
from veernet_core.digitise.ink import MIN_DARKNESS, ScanPixels, page_of

if TYPE_CHECKING:
    from veernet_core.digitise.rescale import Resampling

BAND_SHARE = 0.06  # of the track's height: how far inside an edge a held curve is looked for
BORDER_SHARE = 0.008  # of the track's height (at least 2 rows): rows next to the border row left out (its line's)
RUN_SHARE = 0.15  # of the track's height: the least length, in columns, of a flat run of ink
GAP_SHARE = 0.04  # of the track's height: the longest gap (a dash's, a dot's) joined within a run
THICK_SHARE = 0.02  # of the track's height: the most ink a column of the band holds on a held curve's line
FILL = 0.5  # the least share of a run's columns that hold ink
LINE_SHARE = 0.5  # of the scan's width: a run this long is a line across the scan, not a curve
PINNED_PROBABILITY = 0.9  # what the curve probability is raised to on a held curve's ink


def pinned_ink(scan: ScanPixels, top: float, bottom: float) -> np.ndarray:
    """bool (H, W) on the scan's grid: the ink of flat runs along the track's edges (see the module)."""
    gray = scan.gray
    height, width = gray.shape
    span = float(bottom) - float(top)
    found = np.zeros((height, width), dtype=bool)
    if span < 8 or width < 8:
        return found
    page = page_of(scan, top, bottom)
    ink_below = page.paper - MIN_DARKNESS
    band = max(2, math.ceil(BAND_SHARE * span))
    run_min = max(4, round(RUN_SHARE * span))
    gap_max = max(1, round(GAP_SHARE * span))
    top_row, bottom_row = int(round(top)), int(round(bottom))
    thick = max(3, math.ceil(THICK_SHARE * span))
    border = max(2, round(BORDER_SHARE * span))
    for first_row, last_row in ((top_row + border + 1, top_row + band),
                                (bottom_row - band, bottom_row - border - 1)):
        first_row, last_row = max(1, first_row), min(height - 2, last_row)
        if last_row < first_row:
            continue
        inked = gray[first_row : last_row + 1] <= ink_below[None, :]
        flat = np.count_nonzero(inked, axis=0) <= thick  # a column whose ink in the band is one thin line
        found[first_row : last_row + 1] |= _flat_runs(inked, flat, page.grid_rows[first_row : last_row + 1],
                                                      run_min, gap_max, width)
    return found


def _flat_runs(inked: np.ndarray, flat: np.ndarray, grid_rows: np.ndarray, run_min: int, gap_max: int,
               width: int) -> np.ndarray:
    """bool like `inked` (one band's rows): the inked pixels of each row's long flat runs (see the module)."""
    found = np.zeros_like(inked)
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
            found[r, first : last + 1] = inked[r, first : last + 1] & flat[first : last + 1]
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


def told_apart(calibration: Calibration, scan: ScanPixels) -> bool:
    """Whether the hints tell every curve of the track from every other: by line style, or by ink where
    the scan shows its inks (not a thresholded 1-bit scan). A single curve is told apart."""
    looks = [(c.style, None if scan.tones_unread else c.ink) for c in calibration.curves]
    return all(any(x is not None and y is not None and x != y for x, y in zip(a, b, strict=True))
               for i, a in enumerate(looks) for b in looks[i + 1 :])


def with_pinned(probabilities: np.ndarray, scan: ScanPixels | None, calibration: Calibration,
                resampling: Resampling) -> np.ndarray:
    """A binary model's (2, h, w) probabilities with the track's held curves' ink (`pinned_ink`, on the
    scan's grid) raised to PINNED_PROBABILITY on the model's grid, in a track whose hints tell its curves
    apart (`told_apart`); anything else as it is."""
    if scan is None or probabilities.shape[0] != 2 or not resampling.reduced or not told_apart(calibration, scan):
        return probabilities
    found = pinned_ink(scan, calibration.track_top, calibration.track_bottom)
    if not found.any():
        return probabilities
    rows, cols = np.nonzero(found)
    h, w = probabilities.shape[1:]
    fr, fc = h / found.shape[0], w / found.shape[1]
    r = np.clip(np.rint((rows + 0.5) * fr - 0.5).astype(np.int64), 0, h - 1)
    c = np.clip(np.rint((cols + 0.5) * fc - 0.5).astype(np.int64), 0, w - 1)
    out = probabilities.copy()
    raised = np.maximum(out[1, r, c], np.float32(PINNED_PROBABILITY))
    out[1, r, c] = raised
    out[0, r, c] = 1 - raised
    return out
