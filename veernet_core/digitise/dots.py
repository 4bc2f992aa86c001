"""Dots along a trace: the share of its columns whose ink is a piece no longer than a few pen widths.

A dotted pen leaves separate round marks. Read column by column (`ink.looks_along`) or as marks joined along
the band a trace sweeps (`ink.marks_evidence`), a dotted curve that moves several rows a column looks solid:
its dots cover most columns, and neighbouring dots touch in the band. On the scan itself the dots stay apart:
each is a connected piece of ink (8-connected, on the scan's own pixels) about a pen's width across. A solid
line is one piece over its whole length, a dash a piece many widths long. So per column the piece of ink under
the trace (its run nearest the trace's row, within `half` rows) is a dot's where it is small against the
trace's pen (`dotted_columns`).

Along the true rows of 30 full-resolution logs (tuning seed 7777), the share of a curve's columns on dots was
0.36-0.81 for dotted curves on the independent renderer (median 0.52), at most 0.21 for dashed and 0.16 for
dash-dot ones, and for solid ones 0.07 at the 90th percentile (0.31 at most); on the generator 0.56-0.88 for
dotted curves, 0.23 for dashed ones at the 90th percentile (0.50 at most), at most 0.24 for dash-dot and 0 for
solid ones (bench/README.md, 2026-12-05). `identity` weighs that share for and against a declared dotted style.
"""

from __future__ import annotations

import math

import numpy as np

from veernet_core.digitise.ink import MIN_DARKNESS, Page, ScanPixels, stroke_widths
from veernet_core.digitise.marks import ink_floor
from veernet_core.digitise.pieces import labelled
from veernet_core.digitise.runs import mask_runs

DOT_WIDTHS = 3.0  # a piece of ink at most this many pen widths across is a dot,
DOT_AREA = 2.0  # and of at most this many squares of a pen width and a pixel (a dash folded on a steep path is not)


def pieces(ink: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The runs of a (H, W) bool ink image (column, first row, last row, ordered by column then row), each
    run's connected piece (8-connected, `pieces.labelled`), and each piece's extent (the larger of its columns
    and rows) and ink pixels, indexed by the piece's label."""
    col, lo, hi = mask_runs(ink)
    label, boxes = labelled(ink)
    piece = label[lo, col].astype(np.int64) - 1
    upper, lower, left, right, pixels = (boxes[:, i] for i in range(5))
    extent = np.maximum(right - left + 1, lower - upper + 1)
    return col, lo, hi, piece, extent, pixels.astype(np.float64)


def dotted_columns(scan: ScanPixels, page: Page, rows: np.ndarray, cols: np.ndarray, half: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Per column of a trace at `rows` (image rows) of columns `cols` (ascending): whether ink lies within `half`
    rows of it, and whether that ink is a dot: a piece at most DOT_WIDTHS of the trace's pen widths across
    (`ink.stroke_widths` over the whole trace) and of at most DOT_AREA squares of a pen width and a pixel (a dash
    folded on a steep path is as compact as a dot, but holds more ink). Ink is what is darker than the paper by
    the marks' share of the typical darkness under the trace (`marks.ink_floor`, MIN_DARKNESS at least)."""
    found = np.zeros(cols.size, dtype=bool)
    dotted = np.zeros(cols.size, dtype=bool)
    if cols.size == 0:
        return found, dotted
    pen = stroke_widths(scan, page, rows, cols, 2 * half + 2, [(int(cols[0]), int(cols[-1]) + 1)])[0]
    if pen is None:
        return found, dotted
    gray = scan.gray
    first = max(0, int(np.floor(rows.min())) - half - 1)
    last = min(gray.shape[0] - 1, int(np.ceil(rows.max())) + half + 1)
    block = page.paper[None, :] - gray[first : last + 1].astype(np.float32)  # darkness, the rows the trace spans
    centre = np.clip(np.rint(rows).astype(np.int64) - first, 0, block.shape[0] - 1)
    under = np.concatenate([block[np.clip(centre + d, 0, block.shape[0] - 1), cols] for d in range(-half, half + 1)])
    floor = ink_floor(under, MIN_DARKNESS)
    if not math.isfinite(floor):
        return found, dotted
    ink = block >= floor
    run_col, run_lo, run_hi, piece, extent, pixels = pieces(ink)
    bounds = np.searchsorted(run_col, np.arange(ink.shape[1] + 1))
    count = bounds[cols + 1] - bounds[cols]
    owner = np.repeat(np.arange(cols.size), count)  # per run in the trace's columns: which of them it is in
    index = np.repeat(bounds[cols] - (np.cumsum(count) - count), count) + np.arange(int(count.sum()))
    off = np.maximum(0, np.maximum(run_lo[index] - centre[owner], centre[owner] - run_hi[index]))
    near = off <= half
    if not near.any():
        return found, dotted
    index, owner, off = index[near], owner[near], off[near]
    order = np.lexsort((off, owner))
    nearest = order[np.concatenate([[True], np.diff(owner[order]) != 0])]
    found[owner[nearest]] = True
    mine = piece[index[nearest]]
    width = max(pen.px, 1.0)
    dotted[owner[nearest]] = (extent[mine] <= DOT_WIDTHS * width) & (pixels[mine] <= DOT_AREA * (width + 1.0) ** 2)
    return found, dotted
