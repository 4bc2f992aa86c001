"""Straight lines from projection profiles: a grid line or a track border is a run of rows (or columns) whose
ink covers most of the span it crosses. Its position is the centroid of its darkness, to a fraction of a
pixel; its weight is its darkness summed across it (stroke width times ink), which tells a heavy line from
a light one whatever the blur.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Line:
    centre: float  # darkness centroid, in pixels along the profile
    first: int  # first and last index of its run over the coverage threshold
    last: int
    coverage: float  # the largest share of the span its ink covers
    weight: float  # darkness summed across the line, per unit of length (about its width in pixels)


def find_lines(coverage: np.ndarray, darkness: np.ndarray, threshold: float) -> list[Line]:
    """Runs of `coverage` (share of the span inked, 0..1) at or above `threshold`, with their weight from
    `darkness` (mean darkness 0..1 along the span), taken over the run and one index either side."""
    above = coverage >= threshold
    edges = np.flatnonzero(np.diff(np.concatenate(([0], above.astype(np.int8), [0]))))
    lines = []
    for first, stop in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
        lo, hi = max(0, first - 1), min(coverage.size, stop + 1)
        dark = np.clip(darkness[lo:hi], 0, None)
        total = float(dark.sum())
        centre = float((np.arange(lo, hi) * dark).sum() / total) if total > 0 else (first + stop - 1) / 2
        lines.append(Line(centre, first, stop - 1, float(coverage[first:stop].max()), total))
    return lines


@dataclass(frozen=True)
class Lattice:
    """Lines at `origin + k * spacing` for integer k: a depth grid. `index[j]` is line j's k."""

    origin: float
    spacing: float
    index: np.ndarray  # int64 per line
    residual_px: float  # RMS distance of the lines from their lattice positions


def fit_lattice(centres: np.ndarray, spacing_guess: float) -> Lattice:
    """Least-squares lattice through line centres. Lines are indexed by their distance from the first in
    spacings, a few lines at first and then twice as many at each round, refitting origin and spacing each
    time: a spacing a hair off would mis-index lines a hundred spacings away, never the next few."""
    origin, spacing = float(centres[0]), spacing_guess
    index = np.zeros(centres.size, dtype=np.int64)
    reach = 8.0
    while True:
        index = np.rint((centres - origin) / spacing).astype(np.int64)
        near = index <= reach
        if np.unique(index[near]).size >= 2:
            spacing, origin = (float(v) for v in np.polyfit(index[near].astype(np.float64), centres[near], 1))
        if near.all():
            break
        reach *= 2
    index = np.rint((centres - origin) / spacing).astype(np.int64)
    shift = int(index.min())
    residual = centres - (origin + spacing * index)
    return Lattice(origin + spacing * shift, spacing, index - shift,
                   float(np.sqrt(np.mean(residual**2))) if residual.size else 0.0)


def typical_gap(centres: np.ndarray) -> float:
    """The spacing of neighbouring lines: the mean of the gaps within a quarter of the median gap among the
    shorter half, so missing lines, strays and whole-pixel rounding neither pull it up nor down."""
    gaps = np.diff(np.sort(centres))
    gaps = gaps[gaps > 0]
    if gaps.size == 0:
        return 0.0
    short = np.sort(gaps)[: max(1, (gaps.size + 1) // 2 + gaps.size // 4)]
    typical = float(np.median(short))
    single = gaps[np.abs(gaps - typical) <= 0.25 * typical]
    return float(single.mean()) if single.size else typical


def chains(centres: np.ndarray, min_lines: int, max_skip: int = 2) -> list[list[int]]:
    """Runs of lines (their indices, in order) that keep to a lattice: each gap a whole number
    (1..max_skip + 1) of the run's own spacing, so sections drawn at different spacings each make their own
    run, and a light line lost here and there does not break one. A run starts at four evenly spaced lines
    (three could be a header's lines by chance) and is followed both ways from there."""
    runs: list[list[int]] = []
    i = 0
    while i < centres.size - 3:
        spacing = _seed(centres, i)
        run = _follow(centres, i, spacing, max_skip) if spacing else []
        if len(run) >= min_lines and not _too_coarse(centres, run):
            back = _follow(-centres[::-1], centres.size - 1 - i, spacing, max_skip)
            earlier = [centres.size - 1 - j for j in reversed(back[1:])]
            floor = runs[-1][-1] if runs else -1
            runs.append([j for j in earlier if j > floor] + run)
            i = run[-1] + 1
        else:
            i += 1
    return runs


# A run whose single steps hold another line at their middle in more than this share of them is a lattice too
# coarse for its lines: the grid's every other line, followed with the lines between passed over one at a time as
# strays. On the independent page renderer's seed 1 page 20, a run seeded on a legend's four evenly spaced line
# samples went on into the grid below at twice its spacing.
COARSE_SHARE = 0.5
MIDDLE = 0.15  # of a step: how near its middle a line is at it


def _too_coarse(centres: np.ndarray, run: list[int]) -> bool:
    """Whether lines outside the run lie at the middle of most of its single steps."""
    at = centres[run]
    gaps = np.diff(at)
    single = gaps <= 1.5 * float(np.median(gaps))
    if not single.any():
        return False
    middles = (at[:-1] + gaps / 2)[single]
    reach = MIDDLE * gaps[single]
    others = np.delete(centres, run)
    if others.size == 0:
        return False
    k = np.searchsorted(others, middles)
    before, after = others[np.clip(k - 1, 0, others.size - 1)], others[np.clip(k, 0, others.size - 1)]
    nearest = np.minimum(np.abs(before - middles), np.abs(after - middles))
    return float(np.mean(nearest <= reach)) > COARSE_SHARE


def _seed(centres: np.ndarray, i: int) -> float:
    """The spacing of lines i..i+3 when their three gaps are equal (a grid's neighbouring lines); else 0."""
    gaps = np.diff(centres[i:i + 4])
    short = float(gaps.min())
    return short if short > 0 and _whole_steps(float(gaps.max()), short, 1, 0.06) else 0.0


def _follow(centres: np.ndarray, i: int, spacing: float, max_skip: int) -> list[int]:
    """Lines from i on that fall on the lattice, its spacing following the run (the median of its last
    gaps). Of lines on one step of it, the nearest is taken. One line off the lattice between two on it (a
    curve's flat stretch) is passed over; a second, or a longer gap, ends the run, and so does a second
    skipped line right after one: a grid loses a light line here and there, while a lattice too coarse for
    the lines around it, or lines of text every other spacing, would otherwise pass for one."""
    run, recent, strays, skipped = [i], [spacing], 0, False
    j = i
    while j + 1 < centres.size:
        j += 1
        gap = centres[j] - centres[run[-1]]
        steps = _whole_steps(gap, spacing, max_skip + 1)
        if steps > 1 and skipped:
            break
        if steps:
            # Of the lines on the same step (a curve's flat stretch a few rows off a depth line), the nearest
            # to the lattice.
            same = j
            while same + 1 < centres.size and _whole_steps(centres[same + 1] - centres[run[-1]], spacing,
                                                          max_skip + 1) == steps:
                same += 1
            j = min(range(j, same + 1), key=lambda k: abs(centres[k] - centres[run[-1]] - steps * spacing))
            gap = centres[j] - centres[run[-1]]
            skipped = steps > 1
            recent = (recent + [gap / steps])[-9:]
            spacing = float(np.median(recent))
            run.append(j)
            strays = 0
        elif gap > spacing * (max_skip + 1.5) or strays >= 2:
            break
        else:
            strays += 1
    return run


def _whole_steps(gap: float, spacing: float, most: int, tolerance: float = 0.12) -> int:
    """How many spacings `gap` is, if a whole number 1..most of them, within `tolerance` of a spacing plus
    a pixel and a half (lines are printed on whole pixels); else 0."""
    steps = round(gap / spacing)
    return steps if 1 <= steps <= most and abs(gap - steps * spacing) <= tolerance * spacing + 1.5 else 0
