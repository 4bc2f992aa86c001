"""A section's depth: the grid's lattice of depth lines (rows per line, to a fraction of a pixel over
hundreds of lines), the pattern of its heavier lines, the scale that pattern and the scan's resolution
name, and the depth numbers read in the depth column, fitted robustly onto the lattice.

The fit is depth = first + per_line * k at lattice line k. Every pair of readable numbers votes for
`per_line` (it must be positive: depth increases down the page), every number then votes for `first`;
a misread number votes alone and is outvoted. The residual is how far the numbers' own rows sit from
the fit, in depth units.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from veernet_core.digitise.layout.lines import Lattice, Line, find_lines, fit_lattice
from veernet_core.digitise.layout.scales import SCALES, DepthScale
from veernet_core.digitise.layout.sections import Ink, SectionRows
from veernet_core.digitise.layout.tracks import Interval

GRID_COVERAGE = 0.3


@dataclass(frozen=True)
class Grid:
    lattice: Lattice
    weights: np.ndarray  # per lattice index: the heaviest line's weight there, 0 where none was found
    lines: int

    def row(self, k: float) -> float:
        return self.lattice.origin + self.lattice.spacing * k


def depth_grid(page: Ink, rows: SectionRows, tracks: list[Interval]) -> Grid | None:
    """The depth lines across the section's tracks as a lattice."""
    y0 = max(0, math.floor(rows.top - rows.spacing / 2))
    y1 = min(page.ink.shape[0], math.ceil(rows.bottom + rows.spacing / 2) + 1)
    coverage, darkness, span = np.zeros(y1 - y0), np.zeros(y1 - y0), 0
    for track in tracks:
        x0, x1 = track.left.last + 2, track.right.first - 1
        c, d = page.row_profiles(x0, x1, y0, y1, bridge=2)
        coverage += c * (x1 - x0)
        darkness += d * (x1 - x0)
        span += x1 - x0
    if span == 0:
        return None
    lines = find_lines(coverage / span, darkness / span, GRID_COVERAGE)
    lines = [Line(line.centre + y0, line.first + y0, line.last + y0, line.coverage, line.weight) for line in lines]
    return _lattice(lines, rows.spacing)


def _lattice(lines: list[Line], spacing: float) -> Grid | None:
    """Fit the lattice, drop lines off it by more than a fifth of a spacing (curves' flat stretches), fit again.
    The spacing is the section's (`SectionRows.spacing`: the gaps of the run of lines that keep to one lattice):
    the gaps between every line found across the tracks are split by curves' flat stretches, and
    where they are many, most gaps are such pieces (the independent renderer's seed 2, page 2: 19.4 px lines
    read at 14.4 px, every depth number then off the lattice and the section left without a depth fit)."""
    centres = np.array([line.centre for line in lines])
    if centres.size < 4:
        return None
    lattice = fit_lattice(centres, spacing)
    # The origin at the median of the lines' offsets, not their least-squares mean: where curves' flat stretches
    # lie beside many of the lines, they pull the mean towards themselves and are then kept as lattice lines.
    origin = lattice.origin + float(np.median(centres - (lattice.origin + lattice.spacing * lattice.index)))
    on = np.abs(centres - (origin + lattice.spacing * lattice.index)) <= 0.2 * lattice.spacing
    kept = [line for line, keep in zip(lines, on, strict=True) if keep]
    if len(kept) < 4:
        return None
    lattice = fit_lattice(np.array([line.centre for line in kept]), lattice.spacing)
    weights = np.zeros(int(lattice.index.max()) + 1)
    for k, line in zip(lattice.index.tolist(), kept, strict=True):
        weights[k] = max(weights[k], line.weight)
    return Grid(lattice, weights, len(kept))


@dataclass(frozen=True)
class Pattern:
    medium_every: int
    major_every: int
    phase: int  # lattice index of the first major line
    score: float  # correlation of line weights with the pattern, -1..1
    # The patterns (medium, major) the weights fit about as well (within PATTERN_TIE), this one's included: where
    # a scan draws medium and major lines alike, every fifth line is heavier and the major spacing is unknown.
    alike: frozenset[tuple[int, int]] = frozenset()


def weight_pattern(grid: Grid) -> Pattern | None:
    """Which lines are heavier: the (medium, major) spacing in lines and the phase of the major lines that
    best match the weights, among the patterns of the standard scales."""
    weights = grid.weights.copy()
    weights[[0, -1]] = 0  # the frame lines, drawn as heavy as the track borders whatever their depth
    present = weights > 0
    if present.sum() < 6 or np.ptp(weights[present]) <= 0:
        return None
    families = sorted({(s.medium_every, s.major_every) for s in SCALES})
    best: Pattern | None = None
    family_best: dict[tuple[int, int], float] = {}
    k = np.arange(weights.size)
    for medium, major in families:
        for phase in range(min(major, weights.size)):
            expected = np.where((k - phase) % major == 0, 2.0, np.where((k - phase) % medium == 0, 1.0, 0.0))
            if np.ptp(expected[present]) == 0:
                continue
            score = float(np.corrcoef(weights[present], expected[present])[0, 1])
            family_best[(medium, major)] = max(score, family_best.get((medium, major), -1.0))
            if best is None or score > best.score + 1e-9:
                best = Pattern(medium, major, phase, score)
    if best is None:
        return None
    alike = frozenset(f for f, score in family_best.items() if score >= best.score - PATTERN_TIE)
    return replace(best, alike=alike)


# Two patterns whose best fits are this close are told apart by the scan's noise, not its lines: at 300 dpi a
# generated page draws medium and major lines 2 px wide alike, and seed 777's page 45 (bench/analyse_eval.py)
# fitted every-5th-and-25th 0.934 and every-5th-and-10th 0.920 on a grid of 1 in per 100 ft (5th and 10th).
PATTERN_TIE = 0.03


@dataclass(frozen=True)
class ScaleGuess:
    scale: DepthScale
    off: float  # factor between the measured paper length per depth unit and the scale's, >= 1
    dpi_source: str  # "file" or "page width"
    # A scale of another depth per line that fits the grid about as well (within RIVAL_COST): at 0.1 in per
    # line, 1 in per 100 ft (10 ft a line) and 5 in per 100 ft (2 ft) where the heavy lines cannot tell them apart.
    rival: str | None = None


PATTERN_MISMATCH = 0.15  # in log units of scale: a grid pattern that disagrees counts as 16 % off in size


def name_scale(grid: Grid, pattern: Pattern | None, dpi: float | None, page_width: int,
               per_line: float | None) -> ScaleGuess | None:
    """The standard scale whose paper length per grid line is closest to the grid's, at the file's
    resolution (or one guessed from an 8.5 in wide page), a scale whose heavy-line pattern disagrees with
    the grid's counting as further off. When the depth numbers gave the depth per line, only scales with
    that minor interval compete."""
    source = "file" if dpi else "page width"
    dpi = dpi or page_width / 8.5
    candidates = list(SCALES)
    if per_line is not None:
        candidates = [s for s in candidates if math.isclose(s.minor, per_line, rel_tol=1e-6)] or candidates

    def off(scale: DepthScale) -> float:
        return abs(math.log(grid.lattice.spacing / scale.minor / dpi / scale.inches_per_unit))

    def cost(scale: DepthScale) -> float:
        family = (scale.medium_every, scale.major_every)
        agrees = pattern is None or family == (pattern.medium_every, pattern.major_every) or family in pattern.alike
        return off(scale) + (0.0 if agrees else PATTERN_MISMATCH)
    best = min(candidates, key=cost)
    rival = next((s.name for s in candidates if not math.isclose(s.minor, best.minor, rel_tol=1e-6)
                  and cost(s) <= cost(best) + RIVAL_COST), None)
    return ScaleGuess(best, math.exp(off(best)), source, rival)


# A scale this much dearer (in log units of size) than the best is no rival: the grid's spacing is measured to
# a small fraction of a per cent at the file's resolution, and 1:200 and 2 in per 100 ft, alike in pattern, lie
# 1.6 % apart in size.
RIVAL_COST = 0.01


@dataclass(frozen=True)
class Label:
    row: float  # centre of the number's box
    text: str
    value: float | None  # None when it is not a number
    confidence: float  # Tesseract's
    inlier: bool = False


@dataclass(frozen=True)
class DepthFit:
    first: float  # depth at lattice line 0
    per_line: float  # depth units between neighbouring lattice lines
    labels: tuple[Label, ...]  # with `inlier` set
    residual: float  # RMS of inlier numbers from the fit at their own rows, in depth units
    votes: int  # numbers that agree with the fit

    def depth_at(self, grid: Grid, row: float) -> float:
        return self.first + self.per_line * (row - grid.lattice.origin) / grid.lattice.spacing


def fit_depth(grid: Grid, labels: list[Label], per_line_prior: float | None,
              label_every: float | None = None, pattern: Pattern | None = None) -> DepthFit | None:
    """Robust fit of the numbers onto the lattice; None when fewer than two agree (or one, given the depth
    per line from a confidently named scale), or fewer than half of those any digit was read in. With
    `label_every` (the scale's), a number that is not a multiple of it is a misreading and takes no part.

    A log prints its numbers one way (`PLACEMENTS`): each at the line nearest its middle, or each sitting over
    its line (the line under its middle), or hanging under it. The placement more numbers agree on is kept; on
    a tie, the one that puts the numbers on the grid's heavier lines (medium and major lines by `pattern`, the
    weights' where there is none), then the nearest."""
    read = [label for label in labels if label.value is not None and
            (label_every is None or math.isclose(label.value / label_every, round(label.value / label_every)))]
    index = {id(label): (label.row - grid.lattice.origin) / grid.lattice.spacing for label in labels}
    heavy_at = _heaviness(grid, pattern)
    best: tuple[int, float, DepthFit] | None = None
    for place in PLACEMENTS:
        line = {key: place(at) for key, at in index.items()}
        fit = _fit_on(labels, read, index, line, per_line_prior)
        if fit is None:
            continue
        heavy = float(np.mean([heavy_at(line[id(label)])
                               for label, marked in zip(labels, fit.labels, strict=True) if marked.inlier]))
        if best is None or (fit.votes, heavy) > best[:2]:
            best = (fit.votes, heavy, fit)
    return best[2] if best is not None else None


# Where a number is printed beside the line it names, from its middle's fractional lattice index: nearest it,
# sitting over it (the independent page renderer's "above_line" numbers, whose middles lie nearer the light
# line above; their fits all fell one light line off), hanging under it.
PLACEMENTS: tuple[Callable[[float], int], ...] = (round, lambda at: math.floor(at) + 1, math.floor)


def _heaviness(grid: Grid, pattern: Pattern | None) -> Callable[[int], float]:
    """How heavy a lattice line k is: 1 on a medium or major line of the pattern, else 0; without a pattern, its
    weight over the grid's median line's (0 off the grid, or where no line was found)."""
    if pattern is not None:
        return lambda k: float((k - pattern.phase) % pattern.medium_every == 0)
    found = grid.weights[grid.weights > 0]
    typical = float(np.median(found)) if found.size else 0.0
    return lambda k: float(grid.weights[k] / typical) if typical and 0 <= k < grid.weights.size else 0.0


def _fit_on(labels: list[Label], read: list[Label], index: dict[int, float], line: dict[int, int],
            per_line_prior: float | None) -> DepthFit | None:
    """The fit with each number on lattice line `line[id(number)]`."""
    usable = {id(label) for label in read}
    per_line = _vote_per_line(read, line) or per_line_prior
    if per_line is None or per_line <= 0:
        return None
    starts = Counter(round((label.value or 0) - per_line * line[id(label)], 6) for label in read)
    if not starts:
        return None
    first, votes = starts.most_common(1)[0]
    # Half of the numbers anything was read in must agree: two misread alike (a 5 read as 3 twice) must not
    # carry a fit over the others.
    attempted = sum(any(ch.isdigit() for ch in label.text) for label in labels)
    if votes < max(1 if per_line_prior is not None else 2, math.ceil(attempted / 2)):
        return None
    def agrees(label: Label) -> bool:
        expected = first + per_line * line[id(label)]
        return id(label) in usable and abs((label.value or 0) - expected) < per_line / 2

    marked = tuple(replace(label, inlier=agrees(label)) for label in labels)
    # Against the rows the numbers sit at beside their lines (over them, or centred on them), so that the numbers'
    # placement is not counted as error.
    inliers = [label for label in labels if agrees(label)]
    placed = float(np.median([index[id(label)] - line[id(label)] for label in inliers]))
    residuals = [(label.value or 0) - (first + per_line * (index[id(label)] - placed)) for label in inliers]
    return DepthFit(first, per_line, marked, float(np.sqrt(np.mean(np.square(residuals)))), votes)


def _vote_per_line(read: list[Label], line: dict[int, int]) -> float | None:
    """The depth per lattice line that more pairs of numbers agree on than on any other: positive (depth
    increases down the page) and a round number (1, 2, 2.5 or 5 times a power of ten), as grids are
    drawn. None when no such value wins outright."""
    votes: Counter[float] = Counter()
    for a in range(len(read)):
        for b in range(a + 1, len(read)):
            steps = line[id(read[b])] - line[id(read[a])]
            if steps != 0:
                per_line = round(((read[b].value or 0) - (read[a].value or 0)) / steps, 6)
                if per_line > 0 and _round_number(per_line):
                    votes[per_line] += 1
    ranked = votes.most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[1][1] == ranked[0][1]):
        return None
    return ranked[0][0]


def _round_number(value: float) -> bool:
    mantissa = value / 10 ** math.floor(math.log10(value))
    return any(math.isclose(mantissa, m, rel_tol=1e-6) for m in (1.0, 2.0, 2.5, 5.0, 10.0))
