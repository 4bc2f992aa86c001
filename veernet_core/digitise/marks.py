"""The marks of ink along a trace: which connected piece of ink the trace is on, column by column.

A line style is a pattern of marks along the pen's path: one unbroken mark (solid), dashes, dots, or
dashes and dots in turn. Read column by column, as ink or paper under the trace, the pattern is lost
wherever the curve is steep: a gap of a dash is a few pixels of path, and on a curve that moves several
rows a column it falls inside one or two columns whose rows the next dash covers (on the independent
renderer's tuning logs, 16 of 20 dashed curves read solid that way, on their true paths). The marks keep
it: a gap is where the trace leaves one piece of ink for another, however few columns the gap takes.

Ink is labelled in the band the trace sweeps (its rows from midway to the column before to midway to the
column after, `half` rows either side), runs of ink rows per column joined to the runs of the next column
that touch them (8-connected), and, with `bridge` > 0, across paper up to `bridge` pixels: at full
resolution a faint or thin stroke breaks for a pixel or two where its anti-aliased ink falls below the
threshold or the grid remover cut it, while a dash's gap is 8 px or more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

INK_SHARE = 0.3  # a pixel is ink from this share of the band's typical ink darkness (but `least` at least)


@dataclass(frozen=True)
class MarkTrack:
    """Per measured column of a trace: the mark under it (-1: no ink in its band), and per mark its ink
    pixels; the stroke's width in pixels; the trace's path length per column in pixels."""

    label: np.ndarray  # int64 per column
    pixels: np.ndarray  # float64 per mark label
    width: float
    step: np.ndarray  # float64 per column: the path's length from the column before (1 at a trace's start)


def marks_along(gray: np.ndarray, paper: np.ndarray, rows: np.ndarray, cols: np.ndarray, half: int,
                bridge: int, least: float) -> MarkTrack:
    """The marks along a trace at `rows` of columns `cols` (ascending) of a gray scan whose paper gray per
    column is `paper`; a pixel less than `least` gray levels darker than the paper is never ink."""
    height = gray.shape[0]
    follows = np.concatenate([[False], np.diff(cols) == 1])  # the column before is the trace's too
    leads = np.concatenate([follows[1:], [False]])
    before = np.where(follows, np.roll(rows, 1), rows)
    after = np.where(leads, np.roll(rows, -1), rows)
    lo = np.clip(np.floor(np.minimum.reduce([rows, (rows + before) / 2, (rows + after) / 2]) - half), 0, height - 1)
    hi = np.clip(np.ceil(np.maximum.reduce([rows, (rows + before) / 2, (rows + after) / 2]) + half), 0, height - 1)
    lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    count = hi - lo + 1
    first = np.cumsum(count) - count
    column = np.repeat(np.arange(cols.size), count)
    row = np.repeat(lo, count) + (np.arange(int(count.sum())) - np.repeat(first, count))
    darkness = paper[cols[column]] - gray[row, cols[column]]
    on = darkness >= ink_floor(darkness, least)
    opens = np.zeros(on.size, dtype=bool)
    opens[first] = True
    closes = np.zeros(on.size, dtype=bool)
    closes[first + count - 1] = True
    starts = np.flatnonzero(on & (opens | ~np.concatenate([[False], on[:-1]])))
    stops = np.flatnonzero(on & (closes | ~np.concatenate([on[1:], [False]])))
    run_col, run_lo, run_hi = column[starts], row[starts], row[stops]
    parent = _joined(run_col, run_lo, run_hi, cols, bridge)
    pixels = np.bincount(parent, weights=(run_hi - run_lo + 1).astype(np.float64), minlength=parent.size)
    label = np.full(cols.size, -1, dtype=np.int64)
    if parent.size:  # each column's mark: the run nearest the trace's row
        off = np.maximum(0.0, np.maximum(run_lo - rows[run_col], rows[run_col] - run_hi))
        order = np.lexsort((off, run_col))
        nearest = order[np.concatenate([[True], np.diff(run_col[order]) != 0])]
        label[run_col[nearest]] = parent[nearest]
    flat = (np.abs(rows - before) < 0.5)[run_col]  # a run across a flat stroke is as tall as the stroke is wide
    width = float(np.median(run_hi[flat] - run_lo[flat] + 1)) if flat.any() else 1.0
    step = np.where(follows, np.hypot(1.0, rows - before), 1.0)
    return MarkTrack(label, pixels, max(width, 1.0), step)


def ink_floor(darkness: np.ndarray, least: float) -> float:
    """The darkness from which a pixel is ink, among pixels of `darkness`: INK_SHARE of the typical darkness of
    those at least `least` darker than the paper, but `least` at least; infinite where none is."""
    ink = darkness[darkness >= least]
    return max(least, INK_SHARE * float(np.median(ink))) if ink.size else math.inf


def _joined(run_col: np.ndarray, run_lo: np.ndarray, run_hi: np.ndarray, cols: np.ndarray,
            bridge: int) -> np.ndarray:
    """Per run (ordered by column, then row), the smallest run of its connected piece of ink."""
    n = run_col.size
    parent = np.arange(n)
    if n == 0:
        return parent
    pairs_a, pairs_b = [], []
    same = np.flatnonzero((run_col[1:] == run_col[:-1]) & (run_lo[1:] - run_hi[:-1] - 1 <= bridge))
    pairs_a.append(same)
    pairs_b.append(same + 1)
    for step in range(1, bridge + 2):  # runs `step` columns on, within what is left of `bridge` pixels across
        reach = bridge + 2 - step
        apart = np.zeros(cols.size, dtype=bool)
        apart[: cols.size - step] = cols[step:] - cols[:-step] == step  # that column is the trace's too
        a = np.searchsorted(run_col, run_col + step, side="left")
        b = np.searchsorted(run_col, run_col + step, side="right")
        many = np.where(apart[run_col], b - a, 0)
        mine = np.repeat(np.arange(n), many)
        theirs = np.repeat(a, many) + (np.arange(int(many.sum())) - np.repeat(np.cumsum(many) - many, many))
        touch = (run_lo[theirs] <= run_hi[mine] + reach) & (run_hi[theirs] >= run_lo[mine] - reach)
        pairs_a.append(mine[touch])
        pairs_b.append(theirs[touch])
    u, v = np.concatenate(pairs_a), np.concatenate(pairs_b)
    while u.size:  # hook each pair's larger root under the smaller, then jump to the roots
        pu, pv = parent[u], parent[v]
        if np.array_equal(pu, pv):
            break
        np.minimum.at(parent, np.maximum(pu, pv), np.minimum(pu, pv))
        while True:
            jumped = parent[parent]
            if np.array_equal(jumped, parent):
                break
            parent = jumped
    return parent
