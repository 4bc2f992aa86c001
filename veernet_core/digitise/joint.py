"""Several curves of one probability channel (a binary model's) traced together, each as the calibrated
curve it is, never as "the upper one" and "the lower one".

Column by column, a binary mask of 2-4 crossing, broken, jumping curves is a cloud of runs that a
greedy tracer cannot keep apart: which run continues which curve is often only clear from what the
curve is (solid ink has no gaps, a dotted one has many; a light curve's ink is pale).
So each curve gets its own path through the whole channel, found at once for all columns (Viterbi over
the track's rows on every wrap level the calibration allows it), at the least cost of:

* paper under the path, per column: dear for a solid curve, cheap for a broken style, whose gaps are
  paper by design (`MISS_COST`);
* movement, per pixel between columns, cheaper along ink (`INK_SPACING`: a steep stretch is drawn as a
  run across the rows it moves over; a jump onto another curve is not), with a cap (`JUMP_COST`) so
  that a curve can come back anywhere on its level after a gap;
* levels: positions are unwrapped, so a curve leaving the bottom edge comes back at the top on the
  backup scale past it in a short step (`WRAP_COST`, between the bins by the edges); a change of level
  anywhere else costs `HOP_COST`, each column on a backup scale `LEVEL_COST`, and levels the curve has no
  backup scale for are never on offer;
* ink whose tone the calibration's `ink` hint contradicts (on logs whose hints name both dark and light
  ink, or, where no hint names two tones, the tones the first paths are found on: `_tones_seen`), or
  whose colour does, on a colour scan (`colours.mismatch`: nearer another declared ink's line of mixes
  with the paper than the curve's own), and
  ink another curve's path already takes (`SHARE` for curves that may look alike, whose touching ink
  could be either's; `SHARE_UNLIKE`, as dear as paper, for curves declared in different line styles).
Anchors are not the tracer's: the naming step (`veernet_core.digitise.identity`) names its paths by them.

The paths are found one curve after another, each against the others' (coordinate descent, `ROUNDS`).
A path only places a curve in a run; where it sits on ink, its position is the run's probability-weighted
centroid (a steep stretch's whole vertical run, whose centre is where the curve is), split between
curves that share the run, except that a curve crossing a steep stretch takes only a stroke's rows about
its own place (`_crossed`); across paper it is bridged up to `max_gap` columns, then null.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from veernet_core.digitise.calibration_fields import INK_COLOURS
from veernet_core.digitise.colours import ink_line, mismatch
from veernet_core.digitise.joint_loop import centroids, cheapest_path, runs_under
from veernet_core.digitise.runs import RunTable
from veernet_core.digitise.tracer import ColumnTrace, TraceOptions, _bridge

MAX_BINS = 128  # rows of a track the paths resolve at most: a tall track is read in bins of several rows
# Paper under the path, per column, by line style: a broken style's gaps are paper (a dotted line has
# about as much paper as ink), so paper tells a solid curve from a broken one, not one broken style from
# another. Unknown style: between the two.
MISS_COST = {"solid": 1.0, "dashed": 0.5, "dash-dot": 0.5, "dotted": 0.4, None: 0.7}
MOVE_COST = 0.005  # per pixel a path moves between columns: ink decides, movement only breaks near ties
INK_SPACING = 0.3  # a move along a run of ink costs this share of a move across paper
JUMP_COST = 2.5  # the most a move within a level costs: after a long gap a curve may come back anywhere
WRAP_COST = 0.02  # a step through the track's edge onto a backup scale (or back)
HOP_COST = 0.5  # a change of level anywhere but at an edge: undoes a wrong wrap
EDGE_MARGIN = 0.15  # share of the track by either edge that a step through that edge may start or end in
SHARE = 0.5  # ink another curve's path takes costs this share of the curve's own cost of paper
SHARE_UNLIKE = 1.0  # the same, for ink of a curve declared in another line style
TONE_COST = 0.6  # ink of the wrong tone (dark for a light curve, light for a dark one), at most, per column
LEVEL_COST = 0.002  # per column on a backup scale: a curve that could be on either is on its own
START_LEVEL_COST = 0.5  # a path that starts on a backup scale, as if it had stepped through the edge to it
TONES_APART = 0.25  # darkness between a track's two tones of ink before they tell its curves apart unasked
ROUNDS = 1  # passes of re-finding every path against the others' after the first


@dataclass(frozen=True)
class CurveHint:
    """What the calibration says of one curve that the tracer can use."""

    style: str | None = None
    ink: str | None = None  # "dark", "light" or a colour name (`calibration_fields.INK_COLOURS`)
    levels: tuple[int, ...] = (0,)  # wrap levels its path may take: 0 and its backup scales' sides


@dataclass
class _Grid:
    """The track's rows in bins, and per bin and column how much ink there is."""

    first: int  # first image row of the track
    step: int  # rows per bin
    ink: np.ndarray  # float32 (bins, W): 0 paper .. 1 ink, from the bin's highest probability
    centre: np.ndarray  # float64 (bins,): image row of each bin's centre


def trace_joint(prob: np.ndarray, top: float, bottom: float, hints: list[CurveHint],
                tone: Tone | None = None, options: TraceOptions | None = None) -> list[ColumnTrace]:
    """One trace per hinted curve (in the hints' order) through one (H, W) probability map; `tone` is the
    scan on the same grid, or None where the scan is not at hand."""
    options = options or TraceOptions()
    span = bottom - top
    grid = _grid(prob, top, bottom, options.threshold, options.border_bins_paper)
    costs = [_own_cost(grid, hint, _tone_cost(grid, tone, hint, hints)) for hint in hints]
    paths: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(hints)
    for k in _order(hints):  # the most telling curves first: they claim their ink before the others guess
        paths[k] = _viterbi(costs[k] + _share_cost(grid, paths, k, hints), grid, hint_levels(hints[k]), top, span)
    seen = _tones_seen(grid, tone, hints, paths)
    if seen is not None:  # the hints name no tones, but the curves found show two: each keeps its own
        costs = [_own_cost(grid, hint, _tone_cost(grid, tone, hint, seen)) for hint in seen]
    for _ in range(ROUNDS if len(hints) > 1 or seen is not None else 0):  # one curve alone: its path again
        for k in range(len(hints)):
            paths[k] = _viterbi(costs[k] + _share_cost(grid, paths, k, hints), grid, hint_levels(hints[k]),
                                top, span)
    found = [p for p in paths if p is not None]
    return _traces(prob, grid, found, top, span, options)


def hint_levels(hint: CurveHint) -> tuple[int, ...]:
    return tuple(sorted(set(hint.levels) | {0}))


def _order(hints: list[CurveHint]) -> list[int]:
    """Solid curves first (their paths are surest), then by how much their hints say."""
    def told(k: int) -> tuple[int, int]:
        h = hints[k]
        return (0 if h.style == "solid" else 1, -(h.style is not None) - (h.ink is not None))
    return sorted(range(len(hints)), key=told)


def _grid(prob: np.ndarray, top: float, bottom: float, threshold: float, border_paper: bool = False) -> _Grid:
    """The track's rows in bins; with `border_paper`, the outermost bin either side (the track's border rows)
    holds no ink for the paths (`TraceOptions.border_bins_paper`)."""
    height = prob.shape[0]
    first = max(0, int(math.ceil(top - 1e-6)))
    last = min(height - 1, int(math.floor(bottom + 1e-6)))
    last = max(last, first)
    rows = last - first + 1
    step = max(1, math.ceil(rows / MAX_BINS))
    bins = math.ceil(rows / step)
    block = np.zeros((bins * step, prob.shape[1]), dtype=np.float32)
    block[:rows] = prob[first : last + 1]
    peak = block.reshape(bins, step, -1).max(axis=1)
    # Full ink from the decision boundary up, none below half of it: a model's soft edges count a little.
    ink = np.clip((peak - 0.5 * threshold) / (0.5 * threshold), 0.0, 1.0).astype(np.float32)
    if border_paper and bins > 4:
        ink[[0, -1]] = 0.0
    centre = first + (np.arange(bins) + 0.5) * step - 0.5
    centre = np.minimum(centre, last)
    return _Grid(first, step, ink, centre)


@dataclass(frozen=True)
class Tone:
    """The scan on the probabilities' grid: darkness (H, W) 0 paper .. 1 black, and on a colour scan the
    colour (H, W, 3) of the darkest pixel within a row of each pixel (a thin stroke's core)."""

    darkness: np.ndarray
    rgb: np.ndarray | None = None
    paper_rgb: np.ndarray | None = None  # (W, 3) the paper's colour per column, on a colour scan


def _binned(grid: _Grid, values: np.ndarray, reduce: str = "max") -> np.ndarray:
    """(bins, W, ...) of a per-pixel array over the track's rows, by bin (max or the first row's value)."""
    first, step = grid.first, grid.step
    bins = grid.ink.shape[0]
    rows = min(values.shape[0] - first, bins * step)
    block = np.zeros((bins * step, *values.shape[1:]), dtype=np.float32)
    block[:rows] = values[first : first + rows]
    shaped = block.reshape(bins, step, *values.shape[1:])
    return shaped.max(axis=1) if reduce == "max" else shaped[:, step // 2]


def _tone_cost(grid: _Grid, tone: Tone | None, hint: CurveHint, hints: list[CurveHint]) -> np.ndarray | None:
    """(bins, W) cost of ink whose tone (dark/light) or colour the curve's hint contradicts; None where
    the track's hints name no two tones or colours (then tone tells no curve from another) or the scan is
    not at hand. On a colour scan whose track declares a colour, every curve with an ink hint pays for ink
    nearer another declared ink's line of mixes than its own (`colours.mismatch`; the gray inks share the
    line to black), and a gray curve besides for the other tone where both tones are declared."""
    if tone is None or hint.ink is None:
        return None
    costs = []
    lines = {ink_line(h.ink) for h in hints if h.ink is not None}
    if tone.rgb is not None and tone.paper_rgb is not None and len(lines) > 1 \
            and any(h.ink in INK_COLOURS for h in hints):
        costs.append(_colour_cost(grid, tone, hint.ink, lines))
    if hint.ink in INK_COLOURS or not {"dark", "light"} <= {h.ink for h in hints}:
        return costs[0] if costs else None
    dark = _binned(grid, tone.darkness)
    # A stroke one pixel wide may fall between two rows: its darkest neighbour row says its tone.
    dark = np.maximum(dark, np.maximum(np.roll(dark, 1, axis=0), np.roll(dark, -1, axis=0)))
    on = grid.ink >= 0.5
    split = _split_tone(dark[on])
    if split is None:
        return costs[0] if costs else None
    low, mid, high = split
    if hint.ink == "dark":
        wrong = np.clip((mid - dark) / max(mid - low, 1e-3), 0.0, 1.0)
    else:
        wrong = np.clip((dark - mid) / max(high - mid, 1e-3), 0.0, 1.0)
    costs.append((TONE_COST * wrong).astype(np.float32))
    return costs[0] if len(costs) == 1 else np.maximum(costs[0], costs[1])


def _tones_seen(grid: _Grid, tone: Tone | None, hints: list[CurveHint],
                paths: list[tuple[np.ndarray, np.ndarray] | None]) -> list[CurveHint] | None:
    """Where the hints name no two tones (so `_tone_cost` has nothing to hold the ink against) but the
    track's ink is of two tones and the first paths found lie each on one: the hints with each curve's
    ink as its path shows it ("dark" or "light"), so that no curve takes the other tone's ink where they
    cross. Two curves declared alike are still not told apart by name: only kept apart along the log."""
    if tone is None or any(h.ink in INK_COLOURS for h in hints) or {"dark", "light"} <= {h.ink for h in hints}:
        return None
    dark = _binned(grid, tone.darkness)
    dark = np.maximum(dark, np.maximum(np.roll(dark, 1, axis=0), np.roll(dark, -1, axis=0)))
    split = _split_tone(dark[grid.ink >= 0.5])
    if split is None or any(p is None for p in paths) or split[2] - split[0] < TONES_APART:
        return None
    low, mid, high = split
    cols = np.arange(grid.ink.shape[1])
    bins = np.stack([p[0] for p in paths if p is not None])  # (curves, W)
    medians = []
    for k in range(len(hints)):
        alone = np.all((np.abs(np.delete(bins, k, axis=0) - bins[k]) > 2), axis=0)
        on = alone & (grid.ink[bins[k], cols] >= 0.5)
        if np.count_nonzero(on) < 20:
            return None
        medians.append(float(np.median(dark[bins[k][on], cols[on]])))
    seen = ["dark" if m >= mid else "light" for m in medians]
    if len(set(seen)) < 2 or max(medians) - min(medians) < 0.5 * (high - low):
        return None
    return [CurveHint(h.style, ink, h.levels) for h, ink in zip(hints, seen, strict=True)]


def _colour_cost(grid: _Grid, tone: Tone, ink: str, lines: set[tuple[int, int, int]]) -> np.ndarray:
    """(bins, W) cost of ink nearer another declared ink's line of mixes with the paper than this curve's."""
    assert tone.rgb is not None and tone.paper_rgb is not None
    rgb = _binned(grid, tone.rgb, reduce="centre")
    own = ink_line(ink)
    paper = tone.paper_rgb[None, :, :]
    others = np.min(np.stack([mismatch(rgb, paper, line) for line in lines if line != own]), axis=0)
    wrong = np.clip((mismatch(rgb, paper, own) - others) / 0.2 + 0.5, 0.0, 1.0)
    return (TONE_COST * wrong).astype(np.float32)


def _split_tone(values: np.ndarray) -> tuple[float, float, float] | None:
    """Two tones of ink on the track (two-means): (light mean, boundary, dark mean), or None where the ink
    is of one tone (a 1-bit scan)."""
    if values.size < 20:
        return None
    lo, hi = float(np.quantile(values, 0.1)), float(np.quantile(values, 0.9))
    if hi - lo < 0.08:
        return None
    mid = 0.5 * (lo + hi)
    for _ in range(10):
        a, b = values[values < mid], values[values >= mid]
        if a.size == 0 or b.size == 0:
            return None
        lo, hi = float(a.mean()), float(b.mean())
        mid = 0.5 * (lo + hi)
    return lo, mid, hi


def _own_cost(grid: _Grid, hint: CurveHint, tone: np.ndarray | None) -> np.ndarray:
    """(W, bins) cost of the curve's path through each bin, before the other curves and the levels."""
    miss = MISS_COST.get(hint.style, MISS_COST[None])
    cost = miss * (1.0 - grid.ink)
    if tone is not None:
        cost = cost + grid.ink * np.minimum(tone, 0.9 * miss)  # tone never makes paper cheaper than ink
    return np.ascontiguousarray(cost.T, dtype=np.float32)


def _share_cost(grid: _Grid, paths: list[tuple[np.ndarray, np.ndarray] | None], k: int,
                hints: list[CurveHint]) -> np.ndarray:
    """(W, bins) cost of ink that other curves' paths take: the whole run of ink each is in (a thick
    stroke's edge rows are as much that curve's as its centre), or the bins beside it on paper. Ink of a
    curve declared in another line style costs SHARE_UNLIKE (as dear as paper: a broken curve's gaps are
    paper, never the other curve's ink), of one that may be drawn alike SHARE: nothing tells which of two
    such curves a touching stretch of ink is (an ink hint tells by tone, `_tone_cost`, not here)."""
    width, bins = grid.ink.shape[1], grid.ink.shape[0]
    share = np.zeros((width, bins), dtype=np.float32)
    cols = np.arange(width)
    on = grid.ink.T >= 0.5  # (W, bins)
    starts = on & ~np.concatenate([np.zeros((width, 1), dtype=bool), on[:, :-1]], axis=1)
    label = np.where(on, np.cumsum(starts, axis=1), 0)  # runs numbered from 1 in each column, 0 on paper
    for j, path in enumerate(paths):
        if j == k or path is None:
            continue
        taken = np.zeros((width, bins), dtype=bool)
        mine = label[cols, path[0]]
        taken |= (label == mine[:, None]) & (mine[:, None] > 0)
        for d in (-1, 0, 1):
            taken[cols, np.clip(path[0] + d, 0, bins - 1)] = True
        unlike = _told_apart(hints[j].style, hints[k].style)
        share = np.maximum(share, (SHARE_UNLIKE if unlike else SHARE) * taken)
    miss = MISS_COST.get(hints[k].style, MISS_COST[None])
    return miss * share * grid.ink.T


def _told_apart(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and a != b


def _viterbi(cost: np.ndarray, grid: _Grid, levels: tuple[int, ...], top: float,
             span: float) -> tuple[np.ndarray, np.ndarray]:
    """The cheapest path of (bin, level) per column: (W,) bins and (W,) levels.

    Positions are unwrapped (level + track fraction, ascending), so a curve leaving the track's bottom
    edge and coming back at its top on the backup scale past it is a short step, and a change of level
    anywhere else is a move across the whole track. A move between two columns costs MOVE_COST per pixel
    of paper it crosses (in either column) and INK_SPACING of that per pixel of ink (a steep stretch or a
    kick is drawn as a run of ink across the rows it moves over; a jump onto another curve is not), plus
    WRAP_COST per edge it passes. After a gap a curve may come back anywhere on its level (JUMP_COST).
    The loop over the columns is compiled (`joint_loop.cheapest_path`): a full-resolution track of tens of
    thousands of columns takes a small share of a second."""
    width, bins = cost.shape
    f = (grid.centre - top) / span
    position = np.concatenate([(f + level) * span for level in levels])  # pixels, unwrapped, ascending
    margin = min(bins, max(1, math.ceil(EDGE_MARGIN * bins)))
    sources, targets, steps = _wrap_steps(position, bins, margin)
    level_of = np.repeat(np.array(levels, dtype=np.int8), bins)
    off_level = np.repeat(np.array([LEVEL_COST * abs(level) for level in levels], dtype=np.float64), bins)
    start = np.repeat(np.array([START_LEVEL_COST * abs(level) for level in levels], dtype=np.float64), bins)
    chosen = cheapest_path(np.ascontiguousarray(cost, dtype=np.float64), np.ascontiguousarray(grid.ink),
                           position, off_level, start, sources, targets, steps,
                           MOVE_COST, INK_SPACING, HOP_COST, JUMP_COST,
                           np.zeros((width, position.size), dtype=np.int16 if position.size < 32000 else np.int32))
    return chosen % bins, level_of[chosen]


def _wrap_steps(position: np.ndarray, bins: int, margin: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sources, targets, cost) of the moves through an edge between two adjacent levels, one row per move
    and way through, from the `margin` bins of one level nearest the edge to those of the other (a curve
    leaving the bottom comes back at the top on the backup scale past it, and the other way): WRAP_COST plus
    MOVE_COST per pixel of unwrapped distance. Shapes (moves, margin), (moves, margin), (moves, margin, margin)."""
    sources, targets, steps = [], [], []
    for first in range(bins, position.size, bins):  # the first bin of each level but the lowest
        below, above = np.arange(first - margin, first), np.arange(first, first + margin)
        for source, target in ((below, above), (above, below)):
            sources.append(source)
            targets.append(target)
            steps.append(WRAP_COST + MOVE_COST * np.abs(position[target][None, :] - position[source][:, None]))
    moves = len(sources)
    return (np.array(sources, dtype=np.int64).reshape(moves, margin),
            np.array(targets, dtype=np.int64).reshape(moves, margin),
            np.array(steps, dtype=np.float64).reshape(moves, margin, margin))


def _traces(prob: np.ndarray, grid: _Grid, paths: list[tuple[np.ndarray, np.ndarray]], top: float, span: float,
            options: TraceOptions) -> list[ColumnTrace]:
    """Paths -> column traces: on ink, the centroid of the run under the path (its share of a run other
    paths are in too); across paper, bridged up to max_gap columns."""
    count = len(paths)
    if count == 0:
        return []
    height, width = prob.shape
    runs = RunTable(prob, options.threshold, top, span)
    rows = np.full((count, width), np.nan)
    conf = np.zeros((count, width), dtype=np.float32)
    ink = grid.ink
    dense = np.ascontiguousarray(prob)
    heights = runs.arrays[1] - runs.arrays[0] + 1
    stroke = float(np.median(heights)) if heights.size else 1.0  # most runs are a stroke across a curve
    lo_all, hi_all, _, confidence_all = runs.arrays[:4]
    under = runs_under(np.ascontiguousarray(ink), np.stack([p[0] for p in paths]).astype(np.int64), lo_all, hi_all,
                       np.asarray(runs.bounds, dtype=np.int64), grid.first, grid.step)
    shared = np.zeros(width, dtype=bool)  # a run two paths are in: split between them below
    for a in range(count):
        for b in range(a + 1, count):
            shared |= (under[a] >= 0) & (under[a] == under[b])
    for k in range(count):
        alone = np.flatnonzero((under[k] >= 0) & ~shared)
        run = under[k, alone]
        rows[k, alone] = centroids(dense, alone, lo_all[run], hi_all[run])
        conf[k, alone] = confidence_all[run]
    for col in np.flatnonzero(shared).tolist():
        lists, first, last = runs.column(col)
        lo, hi, confidence = lists[0], lists[1], lists[3]
        members: dict[int, list[int]] = {}
        for k in range(count):
            if under[k, col] >= 0:
                members.setdefault(int(under[k, col]) - runs.bounds[col] + first, []).append(k)
        for run_index, ks in members.items():
            wanted = [grid.centre[paths[k][0][col]] for k in ks]
            steep = [_steep(grid, paths[k][0], col, stroke) for k in ks]
            if len(ks) > 1 and any(steep) and not all(steep):
                centres = _crossed(dense, col, lo[run_index], hi[run_index], wanted, steep, stroke)
            else:
                centres = _centres(dense, col, lo[run_index], hi[run_index], wanted)
            for k, centre in zip(ks, centres, strict=True):
                rows[k, col], conf[k, col] = centre, confidence[run_index]
    traces = []
    for k, (_, level) in enumerate(paths):
        lev = np.where(np.isfinite(rows[k]), level, 0).astype(np.int8)
        u = (rows[k] - top) / span + lev
        bridged = _bridge(u, lev, conf[k], options.max_gap)
        traces.append(ColumnTrace(u, lev, top + (u - lev) * span, conf[k], bridged))
    return traces


def _steep(grid: _Grid, path: np.ndarray, col: int, stroke: float) -> bool:
    """Whether the path moves more than two strokes between the columns either side of `col`: its ink
    there is a run drawn across the rows it moves over, whose centre is where the curve is."""
    before, after = path[max(col - 1, 0)], path[min(col + 1, path.size - 1)]
    return bool(abs(grid.centre[after] - grid.centre[before]) > 2.0 * stroke)


def _crossed(prob: np.ndarray, col: int, lo: int, hi: int, wanted: list[float], steep: list[bool],
             stroke: float) -> list[float]:
    """A run shared by a steep stretch of one curve and another curve crossing it: the steep ones split
    the whole run (the run is theirs), each other one takes the centroid of a stroke's rows about its own
    bin (splitting the run with it would pull the steep curve half a run away)."""
    steep_wanted = [w for w, s in zip(wanted, steep, strict=True) if s]
    steep_centres = iter(_centres(prob, col, lo, hi, steep_wanted))
    centres = []
    for w, s in zip(wanted, steep, strict=True):
        if s:
            centres.append(next(steep_centres))
            continue
        rows = np.arange(max(lo, math.floor(w - stroke / 2)), min(hi, math.ceil(w + stroke / 2)) + 1)
        weights = prob[rows, col].astype(np.float64)
        centres.append(float((weights * rows).sum() / weights.sum()) if weights.sum() > 1e-9 else float(w))
    return centres


def _centres(prob: np.ndarray, col: int, lo: int, hi: int, wanted: list[float]) -> list[float]:
    """Centroids of a run's rows (one row of margin either side) split between the paths in it: each
    takes the rows nearer its own bin than the others' (paths in one place share them)."""
    if len(wanted) == 1:
        return [float(centroids(prob, np.array([col]), np.array([lo]), np.array([hi]))[0])]
    rows = np.arange(max(lo - 1, 0), min(hi + 2, prob.shape[0]))
    weights = prob[rows, col].astype(np.float64)
    centres = []
    targets = np.array(wanted)
    nearest = np.argmin(np.abs(rows[:, None] - targets[None, :]), axis=1)
    for w in wanted:
        mine = np.abs(targets - w) < 1e-9
        pick = mine[nearest]
        mass = (weights * pick).sum()
        centres.append(float((weights * pick * rows).sum() / mass) if mass > 1e-9 else float(w))
    return centres
