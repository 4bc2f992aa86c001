"""A page's log sections, its header block and each section's strip of track headers, from the page's long
horizontal lines.

A section's grid is a run of lines that keep to one spacing (the light depth lines every 10 ft, say);
anything else that crosses the page, a header's frame or the line samples under the track headers, does
not. The track-header strip above a grid is where its track borders carry on upward; the header block is
the ink above the first strip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from veernet_core.digitise.layout.lines import Line, chains, find_lines, typical_gap

LINE_COVERAGE = 0.25  # a depth line crosses every track, most of the page's width, but light ones scan broken
MIN_GRID_LINES = 8
BRIDGE_PX = 3  # a light line scanned to 1 bit loses pixels here and there; text keeps wider gaps


@dataclass(frozen=True)
class Ink:
    """The upright page's ink, and its darkness relative to the paper, as the analysis reads them."""

    gray: np.ndarray  # uint8
    ink: np.ndarray  # bool: gray < threshold
    paper: int  # the paper's gray
    threshold: int = 128
    tones: bool = True  # False for a 1-bit scan, whose inks, light or dark, are all black: no tone can be read

    def row_profiles(self, x0: int, x1: int, y0: int = 0, y1: int | None = None,
                     bridge: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Per row of [y0, y1): the share of columns x0..x1 inked, and their mean darkness (0..1). With
        `bridge`, gaps of up to that many pixels along a row count as ink: a light line scanned to 1 bit
        keeps only every other pixel or so."""
        span = max(x1 - x0, 1)
        coverage = _bridged_counts(self.ink[y0:y1, x0:x1], bridge) / span
        gray = self.gray[y0:y1, x0:x1].sum(axis=1, dtype=np.int64) / span
        return coverage, np.clip((self.paper - gray) / max(self.paper, 1), 0, 1)

    def column_profiles(self, y0: int, y1: int, x0: int = 0, x1: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        span = max(y1 - y0, 1)
        coverage = self.ink[y0:y1, x0:x1].sum(axis=0, dtype=np.int64) / span
        gray = self.gray[y0:y1, x0:x1].sum(axis=0, dtype=np.int64) / span
        return coverage, np.clip((self.paper - gray) / max(self.paper, 1), 0, 1)


def _bridged_counts(ink: np.ndarray, bridge: int, band: int = 2048) -> np.ndarray:
    """Inked pixels per row once gaps of up to `bridge` pixels are closed (a pixel with ink within `bridge`
    on both sides counts), a band of rows at a time."""
    if bridge <= 0:
        return ink.sum(axis=1, dtype=np.int64)
    counts = np.empty(ink.shape[0], dtype=np.int64)
    for y in range(0, ink.shape[0], band):
        rows = ink[y:y + band]
        left, right = np.zeros_like(rows), np.zeros_like(rows)
        for shift in range(1, bridge + 1):
            left[:, shift:] |= rows[:, :-shift]
            right[:, :-shift] |= rows[:, shift:]
        counts[y:y + band] = (rows | (left & right)).sum(axis=1, dtype=np.int64)
    return counts


@dataclass(frozen=True)
class SectionRows:
    lines: tuple[Line, ...]  # the grid's depth lines, top to bottom; the first and last are its frame
    spacing: float  # rows between neighbouring lines

    @property
    def top(self) -> float:
        return self.lines[0].centre

    @property
    def bottom(self) -> float:
        return self.lines[-1].centre


def page_lines(page: Ink) -> list[Line]:
    coverage, darkness = page.row_profiles(0, page.ink.shape[1], bridge=BRIDGE_PX)
    return find_lines(coverage, darkness, LINE_COVERAGE)


def find_sections(lines: list[Line]) -> list[SectionRows]:
    """Runs of at least MIN_GRID_LINES lines at one spacing, top to bottom. Lines crossing much less of the
    page than most (a curve's flat stretch, a row of text) are left out first."""
    if len(lines) < MIN_GRID_LINES:
        return []
    typical = float(np.percentile([line.coverage for line in lines], 90))
    lines = [line for line in lines if line.coverage >= 0.35 * typical]
    centres = np.array([line.centre for line in lines])
    found = []
    for whole in chains(centres, MIN_GRID_LINES):
        for run in _one_spacing(whole, centres):
            if len(run) >= MIN_GRID_LINES:
                run = _framed(_trim(run, centres), lines)
                found.append(SectionRows(tuple(lines[j] for j in run), typical_gap(centres[run])))
    return found


# A grid's lines keep one spacing to a small fraction of it; a run whose spacing over its first lines differs
# from its spacing over the rest by more than this share of it joins two lattices that the run's following
# drifted across: a header block's ruled table, 0.23 in apart, and the log's grid under it at 0.2 in, linked by a
# legend's line samples (the independent page renderer's seed 1 page 1, read upside down for the ink above it).
SPACING_SPLIT = 0.06
SPLIT_MIN = 4  # single steps either side of a split


def _one_spacing(run: list[int], centres: np.ndarray) -> list[list[int]]:
    """The run, or its two parts either side of the place where its spacing changes, where it changes by more
    than SPACING_SPLIT (each step's gap over the whole steps it spans, the median either side)."""
    gaps = np.diff(centres[run])
    typical = typical_gap(centres[run])
    steps = np.maximum(1, np.round(gaps / typical))
    unit = gaps / steps
    if unit.size < 2 * SPLIT_MIN:
        return [run]
    # The change point: the split that leaves each part's steps nearest their own median.
    cuts = range(SPLIT_MIN, unit.size - SPLIT_MIN + 1)
    cut = min(cuts, key=lambda k: float(np.abs(unit[:k] - np.median(unit[:k])).sum()
                                      + np.abs(unit[k:] - np.median(unit[k:])).sum()))
    before, after = float(np.median(unit[:cut])), float(np.median(unit[cut:]))
    if abs(before - after) <= SPACING_SPLIT * min(before, after):
        return [run]
    first, second = run[:cut + 1], run[cut + 1:]
    while len(first) > 1 and abs(centres[second[0]] - centres[first[-1]] - after) <= 0.1 * after:
        first, second = first[:-1], [first[-1], *second]  # a line one step of the later lattice before it is its
    return [first, second]


# A log starts and ends at any depth, its grid's lines at round ones: the frame line that closes a grid may lie
# between two lattice steps, off the run. One within OFF_LATTICE of a step from the run's end line, as heavy and
# as long as the run's lines most often are, is its frame. On the independent page renderer's pages (seed 1),
# a third of the sections begin off the lattice, and the frame was taken for a line sample of the track header.
OFF_LATTICE = (0.15, 0.85)


def _framed(run: list[int], lines: list[Line]) -> list[int]:
    """The run with the frame line just outside either end of it, where there is one off the lattice."""
    spacing = typical_gap(np.array([lines[j].centre for j in run]))
    weight = float(np.median([lines[j].weight for j in run]))
    coverage = float(np.median([lines[j].coverage for j in run]))

    def frame(j: int, end: int) -> bool:
        gap = abs(lines[j].centre - lines[end].centre) / spacing
        return OFF_LATTICE[0] <= gap <= OFF_LATTICE[1] and lines[j].weight >= weight \
            and lines[j].coverage >= coverage
    first, last = run[0], run[-1]
    if first > 0 and frame(first - 1, first):
        run = [first - 1, *run]
    if last + 1 < len(lines) and frame(last + 1, last):
        run = [*run, last + 1]
    return run


def _trim(run: list[int], centres: np.ndarray) -> list[int]:
    """Drop lines at either end that a skipped step separates from the rest: a grid is drawn line by line
    from its frame, so an end reached only over a gap is something else on the lattice's spacing."""
    spacing = typical_gap(centres[run])
    while len(run) > MIN_GRID_LINES and centres[run[1]] - centres[run[0]] > 1.5 * spacing:
        run = run[1:]
    while len(run) > MIN_GRID_LINES and centres[run[-1]] - centres[run[-2]] > 1.5 * spacing:
        run = run[:-1]
    return run


def ink_outside(page: Ink, sections: list[SectionRows]) -> tuple[int, int]:
    """Ink pixels above the first section's grid and below the last one's: the header is at the end with more."""
    if not sections:
        return 0, 0
    top, bottom = int(sections[0].top), int(sections[-1].bottom) + 1
    return int(page.ink[:top].sum()), int(page.ink[bottom:].sum())


def strip_top(page: Ink, body_top: float, borders: list[float], floor: int) -> int:
    """First row of a section's track-header strip: walking up from the grid's top, the rows where most
    track borders are still inked (a pixel either side allowed), stopping at `floor`."""
    cols = np.array([round(b) for b in borders])
    cols = np.clip(np.concatenate([cols - 1, cols, cols + 1]), 0, page.ink.shape[1] - 1)
    top = int(body_top)
    window = page.ink[floor:top][:, cols].reshape(top - floor, 3, len(borders)).any(axis=1)
    inked = window.mean(axis=1) >= 0.6
    gaps = 0
    row = top
    for y in range(inked.size - 1, -1, -1):  # upward, forgiving a few rows lost to dirt or a light scan
        gaps = 0 if inked[y] else gaps + 1
        if gaps > 3:
            break
        if inked[y]:
            row = floor + y
    return row


def header_block(page: Ink, above: int) -> tuple[int, int] | None:
    """Rows of the ink above row `above` (the first track-header strip): the page's header block. Rows with
    ink across less than half a percent of the page, in runs of fewer than 3 rows, are specks unless they
    are a line across the page."""
    if above <= 0:
        return None
    counts = page.ink[:above].sum(axis=1, dtype=np.int64)
    width = page.ink.shape[1]
    inked = counts >= max(3, 0.005 * width)
    edges = np.flatnonzero(np.diff(np.concatenate(([0], inked.astype(np.int8), [0]))))
    runs = [(a, b - 1) for a, b in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True)
            if (b - a >= 3 or counts[a:b].max() >= LINE_COVERAGE * width) and b < above - 3]  # not the strip's own line
    if not runs:
        return None
    return runs[0][0], runs[-1][1]
