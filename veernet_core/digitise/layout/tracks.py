"""A section's tracks from its vertical lines: the track borders are the heavy lines that run the whole grid,
the depth column is the space between two borders that the depth lines do not cross, and each track's
value grid (its lighter vertical lines) is linear or logarithmic by where its lines fall.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from veernet_core.digitise.layout.lines import Line, find_lines
from veernet_core.digitise.layout.sections import Ink, SectionRows

LINE_COVERAGE = 0.3  # a grid line or border: light lines of a 1-bit scan keep about half their pixels
BORDER_SPLIT = 1.4  # borders are at least this much heavier than the heaviest value-grid line
LINEAR_DIVISIONS = (2, 3, 4, 5, 6, 8, 10, 12, 20)
LOG_DECADES = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class Interval:
    left: Line
    right: Line
    depth_lines: float  # share of the section's depth lines that cross it
    inner: tuple[Line, ...]  # lighter vertical lines inside it

    @property
    def width(self) -> float:
        return self.right.centre - self.left.centre


@dataclass(frozen=True)
class Columns:
    intervals: tuple[Interval, ...]  # between neighbouring borders, left to right
    border_contrast: float  # lightest border over heaviest other line (inf when there are none)

    @property
    def borders(self) -> list[float]:
        return [self.intervals[0].left.centre] + [i.right.centre for i in self.intervals] if self.intervals else []


def section_columns(page: Ink, rows: SectionRows) -> Columns:
    """The section's borders and the intervals between them."""
    y0, y1 = math.ceil(rows.top) + 3, math.floor(rows.bottom) - 2  # inside the frame lines
    coverage, darkness = page.column_profiles(y0, y1)
    lines = find_lines(coverage, darkness, LINE_COVERAGE)
    if len(lines) < 2:
        return Columns((), 0.0)
    borders, contrast = _split_borders(lines)
    boxed = _rising(page, lines, rows)
    if len(boxed) >= 3:
        usual = float(np.median([line.weight for line in boxed]))
        borders = [line for line in boxed if line.weight >= 0.6 * usual]  # not a light line text happens to cross
    intervals = []
    for left, right in zip(borders, borders[1:], strict=False):
        inner = tuple(line for line in lines if left.last < line.first and line.last < right.first)
        intervals.append(Interval(left, right, _crossing_share(page, rows, left, right), inner))
    return Columns(tuple(intervals), contrast)


def _split_borders(lines: list[Line]) -> tuple[list[Line], float]:
    """Borders: the lines above the highest step (a ratio of at least BORDER_SPLIT) in their sorted weights;
    all lines when no such step stands out, as where every line is printed alike."""
    weights = np.sort([line.weight for line in lines])
    ratios = weights[1:] / np.maximum(weights[:-1], 1e-9)
    steps = np.flatnonzero(ratios >= BORDER_SPLIT)
    if steps.size == 0:
        return list(lines), math.inf
    step = int(steps[-1])
    cut = float(weights[step + 1])
    return [line for line in lines if line.weight >= cut], float(ratios[step])


def _rising(page: Ink, lines: list[Line], rows: SectionRows) -> list[Line]:
    """The lines that carry on above the grid's top frame, into the track-header boxes: on printed logs the
    track borders do and the value grids do not, whatever their weights."""
    y1 = math.floor(rows.top - 2 - max(line.last - line.first for line in rows.lines[:1]))
    y0 = max(0, math.floor(y1 - 3 * rows.spacing))
    if y1 - y0 < 4:
        return []
    rising = []
    for line in lines:
        band = page.ink[y0:y1, max(0, line.first - 1):line.last + 2]
        if band.any(axis=1).mean() >= 0.6:
            rising.append(line)
    return rising


def _crossing_share(page: Ink, rows: SectionRows, left: Line, right: Line) -> float:
    """Share of the section's depth lines whose ink spans at least half of the interval's inside."""
    x0, x1 = left.last + 2, right.first - 1
    if x1 - x0 < 4:
        return 0.0
    crossed = 0
    for line in rows.lines[1:-1]:  # not the frame lines, which close the depth column too
        band = page.ink[line.first:line.last + 1, x0:x1]
        crossed += band.any(axis=0).mean() >= 0.3
    return crossed / max(len(rows.lines) - 2, 1)


@dataclass(frozen=True)
class ValueGrid:
    scale: str  # "linear" or "log"
    divisions: int  # linear: divisions across the track; log: decades
    score: float  # F1 of the matched lines, 0..1
    margin: float  # over the best model of the other kind
    lines: int


def value_grid(interval: Interval) -> ValueGrid | None:
    """The linear or logarithmic grid whose lines best match the track's inner lines; None without any."""
    width = interval.width
    if not interval.inner or width <= 0:
        return None
    found = np.array([(line.centre - interval.left.centre) / width for line in interval.inner])
    tolerance = max(2.5, 0.004 * width) / width
    scored = [("linear", n, _f1(found, _linear(n), tolerance)) for n in LINEAR_DIVISIONS]
    scored += [("log", k, _f1(found, _log(k), tolerance)) for k in LOG_DECADES]
    best = max(scored, key=lambda s: (s[2], -s[1]))
    other = max(s[2] for s in scored if s[0] != best[0])
    return ValueGrid(best[0], best[1], best[2], best[2] - other, len(interval.inner))


def _linear(n: int) -> np.ndarray:
    return np.arange(1, n) / n


def _log(decades: int) -> np.ndarray:
    positions = np.array([(d + math.log10(m)) / decades for d in range(decades) for m in range(1, 10)])
    return positions[(positions > 0) & (positions < 1)]


def _f1(found: np.ndarray, expected: np.ndarray, tolerance: float) -> float:
    if expected.size == 0 or found.size == 0:
        return 0.0
    distance = np.abs(found[:, None] - expected[None, :])
    precision = float((distance.min(axis=1) <= tolerance).mean())
    recall = float((distance.min(axis=0) <= tolerance).mean())
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
