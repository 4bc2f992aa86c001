"""Candidate detections of a curve-probability map: in each image column, the runs of rows at or above
the decision threshold, with a probability-weighted centre and a confidence per run. Found on column
blocks with NumPy and kept as flat arrays: the compiled column tracer (`tracer_loop`) reads the arrays,
the joint tracer (`joint`) one column at a time as short lists.
"""

from __future__ import annotations

from typing import Any

import numpy as np

CHUNK_COLUMNS = 2048  # run extraction works on column blocks so its temporaries do not grow with width
CACHED_COLUMNS = 256  # columns whose runs are kept as lists at a time (`RunTable.column`)


class RunTable:
    """The runs of every column of a (H, W) probability map, found on column blocks and kept as flat
    arrays (`arrays`: lo, hi, centre, confidence, and lo, hi and centre as track fractions; column c's runs
    are `bounds[c]` to `bounds[c + 1]`). `column` gives a column's runs as lists, from a chunk of columns
    made lists at a time; only two chunks are kept, so memory follows the number of runs, not Python
    objects per run."""

    def __init__(self, prob: np.ndarray, threshold: float, top: float, span: float) -> None:
        width = prob.shape[1]
        blocks = [_block_runs(prob[:, start : start + CHUNK_COLUMNS], threshold, start)
                  for start in range(0, width, CHUNK_COLUMNS)]
        cols, lo, hi, centre, confidence = (np.concatenate(parts) for parts in zip(*blocks, strict=True))
        self.bounds = np.searchsorted(cols, np.arange(width + 1)).tolist()
        self.arrays = (lo, hi, centre, confidence, (lo - top) / span, (hi - top) / span, (centre - top) / span)
        self.width = width
        self._chunks: dict[int, tuple[int, list[list[Any]]]] = {}

    def column(self, col: int) -> tuple[list[list[Any]], int, int]:
        """A column's runs without copying: the lists of its chunk (lo, hi, centre, confidence, f_lo, f_hi,
        f_c) and the column's index range [i, j) in them."""
        first, lists = self._lists(col // CACHED_COLUMNS)
        return lists, self.bounds[col] - first, self.bounds[col + 1] - first

    def _lists(self, chunk: int) -> tuple[int, list[list[Any]]]:
        """(index of the chunk's first run, its runs as lists) for columns chunk * CACHED_COLUMNS onwards."""
        if chunk not in self._chunks:
            if len(self._chunks) >= 2:  # a column and the next few span at most two chunks
                del self._chunks[min(self._chunks)]
            i = self.bounds[chunk * CACHED_COLUMNS]
            j = self.bounds[min((chunk + 1) * CACHED_COLUMNS, self.width)]
            self._chunks[chunk] = (i, [a[i:j].tolist() for a in self.arrays])
        return self._chunks[chunk]


def mask_runs(on: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(column, first row, last row) of every run of True rows in each column of a (H, W) bool mask, ordered by
    column then row."""
    edges = np.diff(np.pad(on, ((1, 1), (0, 0))).astype(np.int8), axis=0)
    start_row, start_col = np.nonzero(edges == 1)
    stop_row, stop_col = np.nonzero(edges == -1)
    order_a, order_b = np.lexsort((start_row, start_col)), np.lexsort((stop_row, stop_col))
    return start_col[order_a], start_row[order_a], stop_row[order_b] - 1


def _block_runs(prob: np.ndarray, threshold: float, offset: int) -> tuple[np.ndarray, ...]:
    """(column, lo, hi, centre, confidence) of every run in a block of columns, ordered by column then row."""
    height = prob.shape[0]
    cols, lo, hi = mask_runs(prob >= threshold)
    if cols.size == 0:
        empty = np.zeros(0)
        return cols + offset, lo, hi, empty, empty
    a, b = np.maximum(lo - 1, 0), np.minimum(hi + 1, height - 1)  # one row either side: sub-pixel balance
    rows, weights, starts = _gather(prob, cols, a, b)
    mass = np.add.reduceat(weights, starts)
    centre = np.add.reduceat(weights * rows, starts) / mass
    deviation = rows - np.repeat(centre, b - a + 1)
    spread = np.sqrt(np.add.reduceat(weights * deviation**2, starts) / mass)
    peaks = _run_peaks(prob, cols, lo, hi)
    confidence = peaks / (1.0 + np.maximum(spread - 0.5, 0.0))  # a crisp stroke keeps its peak
    return cols + offset, lo, hi, centre, confidence


def _gather(prob: np.ndarray, cols: np.ndarray, first: np.ndarray, last: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows first..last of each run's column, flattened: (row, probability as float64, start of each run)."""
    length = last - first + 1
    starts = np.cumsum(length) - length
    rows = np.repeat(first, length) + (np.arange(int(length.sum())) - np.repeat(starts, length))
    return rows.astype(np.float64), prob[rows, np.repeat(cols, length)].astype(np.float64), starts


def _run_peaks(prob: np.ndarray, cols: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    _, values, starts = _gather(prob, cols, lo, hi)
    return np.maximum.reduceat(values, starts)
