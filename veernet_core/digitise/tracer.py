"""The column tracer: curve probabilities (H, W) -> one sub-pixel centreline per image column and
curve, followed across gaps, crossings and wrap-arounds.

Positions are tracked as *unwrapped fractions* u of the track: 0 at the track's top row (the scale's
left value), 1 at its bottom row (the right value). A curve that leaves the bottom edge and comes
back in at the top is on its backup scale, one track width further on: u = 1 + (its fraction), so
a single linear (or log) map `CurveScale.to_value(u)` reads primary and backup scales alike, and a
trace stays continuous in u across the wrap. Rows are image rows with pixel centres at integers.

Several traces in one channel (a binary model's) are kept apart through crossings by their lines
before the crossing; a short gap, a dashed curve's included, is bridged (`TraceOptions.max_gap`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from veernet_core.digitise.runs import RunTable

__all__ = ["ColumnTrace", "TraceOptions", "trace_curves"]

CHOICES = 4  # the cheapest candidates per trace that the assignment of runs to traces weighs


@dataclass(frozen=True)
class TraceOptions:
    """How curves are followed; the defaults suit one-to-three-pixel strokes on a 40-600 px track."""

    threshold: float = 0.5  # a row is curve where its probability reaches the model's decision boundary
    gate_px: float = 2.0  # distance from the prediction a detection may be: rasterisation slack, in pixels
    gate_per_gap_column: float = 0.04  # extra allowed distance per column without a detection (track fraction)
    far_gate: float = 0.5  # with nothing within the gate, a run this far (track fraction) may still be taken
    max_gap: int = 32  # longest run of columns without a detection that is bridged; longer stays null
    confirm: int = 3  # columns a new trace must continue before it starts (keeps specks out)
    edge_px: float = 1.5  # a wrap needs the trace's last run to reach within this of the edge it leaves by
    history: int = 4  # clean detections fitted for the slope of the linear prediction
    level_cost: float = 0.001  # per column off the primary scale (track fractions): ties go to the primary
    # Tallest track (rows) whose curves of one channel are traced together (`joint.trace_joint`); a taller
    # one is read by the column tracer, its traces named afterwards (`curves.joint_max_rows`).
    joint_max_rows: int = 192


@dataclass
class ColumnTrace:
    """One traced curve per image column: unwrapped fraction u, the drawn row, confidence, flags."""

    u: np.ndarray  # float64, NaN where no curve
    level: np.ndarray  # int8: 0 on the primary scale, +1 / -1 wrapped past right / left
    row: np.ndarray  # float64 image row of the centreline as drawn (the wrapped position), NaN where none
    confidence: np.ndarray  # float32 0..1, 0 where no curve
    bridged: np.ndarray  # bool: interpolated across a short gap, not detected

    @property
    def wrapped(self) -> np.ndarray:
        return self.level != 0



@dataclass
class _Track:
    """A curve being followed. Its prediction comes from clean detections only: inside a crossing,
    where two traces contest one run, the trace coasts on the line it had before."""

    cols: list[int] = field(default_factory=list)  # clean detections: the prediction's history
    us: list[float] = field(default_factory=list)
    last_col: int = -(1 << 30)  # the last detection of any kind
    level: int = 0
    extent: tuple[float, float] | None = None  # unwrapped span of the last run, if it was not contested
    contested: int = 0  # consecutive contested detections
    # The slope `predict` fits to the history (None: fewer than two detections close together), fitted
    # once per change of the history instead of once per column.
    slope: float | None = None
    fitted: bool = False  # whether `slope` is that of the history as it is

    def gap(self, col: int) -> int:
        return col - self.last_col - 1

    def coasting(self, col: int) -> int:
        """Columns since the last clean detection."""
        return col - self.cols[-1] - 1 if self.cols else 0

    def predict(self, col: int, opts: TraceOptions) -> float:
        """Slope of a least-squares line through the last few clean detections (those close together),
        carried on from the last one; without two such detections, the last one."""
        if not self.fitted:
            self.slope, self.fitted = self._fit(opts), True
        slope = self.slope
        if slope is None:
            return self.us[-1]
        # From the last detection, not the fitted line: beds make curves step, and a step the line
        # has not caught up with is still where the curve is.
        return self.us[-1] + slope * (col - self.cols[-1])

    def _fit(self, opts: TraceOptions) -> float | None:
        recent_c, recent_u = self.cols[-opts.history:], self.us[-opts.history:]
        if recent_c[-1] - recent_c[0] > 3 * opts.history:  # columns ascend: the oldest may be too far back
            kept = [i for i, c in enumerate(recent_c) if recent_c[-1] - c <= 3 * opts.history]
            recent_c, recent_u = [recent_c[i] for i in kept], [recent_u[i] for i in kept]
        n = len(recent_c)
        if n < 2:
            return None
        mean_c = sum(recent_c) / n
        mean_u = sum(recent_u) / n
        spread = sum([(c - mean_c) ** 2 for c in recent_c])
        return sum([(c - mean_c) * (u - mean_u) for c, u in zip(recent_c, recent_u, strict=True)]) / spread

    def add(self, col: int, u: float, level: int, extent: tuple[float, float], contested: bool, far: bool,
            opts: TraceOptions) -> None:
        self.last_col, self.level = col, level
        self.contested = self.contested + 1 if contested else 0
        # A contest longer than a bridgeable gap is two curves running together, not a crossing:
        # follow the shared run again.
        uncontested = self.contested == 0 or self.contested > opts.max_gap
        self.extent = extent if uncontested else None
        if uncontested and not far:
            self.cols.append(col)
            self.us.append(u)
            del self.cols[: -opts.history], self.us[: -opts.history]
            self.fitted = False


class _Pick(NamedTuple):  # a tuple: built for every candidate run of every trace in every column
    run: int
    shift: int  # level of the detection: the run's fraction + shift is its unwrapped position
    cost: float
    far: bool = False  # outside the gate: a kick or a step hidden by a gap, not a basis for prediction


class _Tracer:
    """Follows `count` curves through one probability map, column by column."""

    def __init__(self, prob: np.ndarray, top: float, bottom: float, count: int, opts: TraceOptions) -> None:
        self.prob, self.top, self.span, self.opts = prob, top, bottom - top, opts
        self.runs = RunTable(prob, opts.threshold, top, self.span)
        width = prob.shape[1]
        self.tracks = [_Track() for _ in range(count)]
        self.u = np.full((count, width), np.nan)
        self.level = np.zeros((count, width), dtype=np.int8)
        self.conf = np.zeros((count, width), dtype=np.float32)
        self._sliced: tuple[int, list[float], list[float], list[float]] = (-1, [], [], [])
        # `candidates`' constants in track fractions, computed as it computes them
        self._gate_px, self._edge, self._touch = opts.gate_px / self.span, opts.edge_px / self.span, 1.0 / self.span

    def fraction(self, rows: np.ndarray | float) -> np.ndarray:
        return (np.asarray(rows, dtype=np.float64) - self.top) / self.span

    def candidates(self, track: _Track, col: int, p: float) -> list[_Pick]:
        """Runs within the gate of a track's prediction `p`, on its level or across a track edge: per level,
        shifts ascending, the near runs, then the far ones, each top to bottom.

        A run's distance from continuing the trace, read on level `shift`: it continues it if it is near
        the prediction `p` or touches the last run (8-connected, one row of slack); the latter follows
        kicks the prediction overshoots. Computed inline on the run table's lists (this runs for every
        active trace in every column)."""
        opts, span = self.opts, self.span
        f_lo, f_hi, f_c = self._fractions(col)
        gate = opts.gate_px / span + opts.gate_per_gap_column * max(track.gap(col), track.coasting(col))
        far_gate = opts.far_gate
        picks: list[_Pick] = []
        edge = opts.edge_px / span
        # Where the re-entry column fell in a gap, the trace is back in further from the edge.
        entry = edge + opts.gate_per_gap_column * track.gap(col)
        # No wrap without a clean last run, nor for a trace too new to trust (it may have started on a
        # speck at the edge): NaN compares false.
        extent = track.extent
        settled = len(track.cols) >= opts.history
        out_lo, out_hi = extent if extent and settled else (math.nan, math.nan)
        ext_lo, ext_hi = extent if extent is not None else (math.nan, math.nan)
        touch = 1.0 / span
        for shift in (track.level - 1, track.level, track.level + 1):
            if shift not in (-1, 0, 1):
                continue
            # A wrap needs the last run to have reached the edge the trace leaves by; which level a run
            # is then read on is left to the distances, in unwrapped fractions.
            if shift > track.level and not out_hi >= shift - entry:  # out through the bottom, in at the top
                continue
            if shift < track.level and not out_lo <= shift + 1 + entry:  # out through the top, in at the bottom
                continue
            level_cost = edge * abs(shift - track.level)
            far: list[_Pick] = []
            for r, (lo, hi, centre) in enumerate(zip(f_lo, f_hi, f_c, strict=True)):
                a, b = lo + shift - p, p - hi - shift
                distance = b if b > a else a
                if distance < 0.0:
                    distance = 0.0
                if extent is not None:
                    a, b = lo + shift - ext_hi, ext_lo - hi - shift
                    to_last = (b if b > a else a) - touch
                    if to_last < 0.0:
                        to_last = 0.0
                    if to_last < distance:
                        distance = to_last
                if distance <= gate:
                    picks.append(_Pick(r, shift, distance + 0.1 * abs(centre + shift - p) + level_cost))
                elif distance <= far_gate:
                    far.append(_Pick(r, shift, 1.0 + (distance + 0.1 * abs(centre + shift - p) + level_cost), True))
            picks += far
        return picks

    def _fractions(self, col: int) -> tuple[list[float], list[float], list[float]]:
        """The column's runs as track fractions (lo, hi, centre), sliced once for all of its traces."""
        if self._sliced[0] != col:
            lists, first, last = self.runs.column(col)
            self._sliced = (col, lists[4][first:last], lists[5][first:last], lists[6][first:last])
        return self._sliced[1], self._sliced[2], self._sliced[3]

    def run(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Detections per trace and column: unwrapped fraction (NaN: none), level, confidence."""
        single = len(self.tracks) == 1
        for col in range(self.prob.shape[1]):
            if single and self.tracks[0].gap(col) <= self.opts.max_gap:
                self._follow(col)
                continue
            active = [k for k, t in enumerate(self.tracks) if t.gap(col) <= self.opts.max_gap]
            claimed = self._assign(col, active)
            self._births(col, [k for k in range(len(self.tracks)) if k not in active], claimed)
        return self.u, self.level, self.conf

    def _follow(self, col: int) -> None:
        """`_assign` for a channel that carries one active trace: its cheapest candidate (`_cheapest`);
        one trace has no contests, shares or idle partners."""
        run, shift, cost, far, _ = self._cheapest(self.tracks[0], col, self.tracks[0].predict(col, self.opts))
        if run >= 0:
            self._record(0, col, _Pick(run, shift, cost, far))

    def _cheapest(self, track: _Track, col: int, p: float) -> tuple[int, int, float, bool, list[int]]:
        """The first cheapest of a track's `candidates` and the runs of its near ones, computed inline
        without building picks: the same arithmetic in the same order and the same tie-breaking (shifts
        ascending, near runs before far ones, runs top to bottom). Returns (run, shift, cost, far, near
        runs); run -1 where there is no candidate."""
        level, extent, per_gap = track.level, track.extent, self.opts.gate_per_gap_column
        gap = col - track.last_col - 1  # track.gap and track.coasting, inline
        coasting = col - track.cols[-1] - 1 if track.cols else 0
        gate = self._gate_px + per_gap * (gap if gap > coasting else coasting)
        far_gate, edge, touch = self.opts.far_gate, self._edge, self._touch
        entry = edge + per_gap * gap
        out_lo, out_hi = extent if extent and len(track.cols) >= self.opts.history else (math.nan, math.nan)
        ext_lo, ext_hi = extent if extent is not None else (math.nan, math.nan)
        f_lo, f_hi, f_c = self._fractions(col)
        near: list[int] = []
        best_cost, best_run, best_shift, best_far = math.inf, -1, 0, False
        for shift in (level - 1, level, level + 1):
            if shift not in (-1, 0, 1):
                continue
            if shift > level and not out_hi >= shift - entry:
                continue
            if shift < level and not out_lo <= shift + 1 + entry:
                continue
            level_cost = edge * abs(shift - level)
            near_cost, near_run, far_cost, far_run = math.inf, -1, math.inf, -1
            for r, (lo, hi, centre) in enumerate(zip(f_lo, f_hi, f_c, strict=True)):
                a, b = lo + shift - p, p - hi - shift
                distance = b if b > a else a
                if distance < 0.0:
                    distance = 0.0
                if extent is not None:
                    a, b = lo + shift - ext_hi, ext_lo - hi - shift
                    to_last = (b if b > a else a) - touch
                    if to_last < 0.0:
                        to_last = 0.0
                    if to_last < distance:
                        distance = to_last
                if distance <= gate:
                    near.append(r)
                    cost = distance + 0.1 * abs(centre + shift - p) + level_cost
                    if cost < near_cost:
                        near_cost, near_run = cost, r
                elif distance <= far_gate:
                    cost = 1.0 + (distance + 0.1 * abs(centre + shift - p) + level_cost)
                    if cost < far_cost:
                        far_cost, far_run = cost, r
                elif lo + shift - p > far_gate and (extent is None or lo + shift - ext_hi - touch > far_gate):
                    # Runs are ordered top to bottom: every run below this one is as far or farther from the
                    # prediction and the last run (rounding is monotone), out of reach too.
                    break
            if near_run >= 0 and near_cost < best_cost and not far_cost < near_cost:
                best_cost, best_run, best_shift, best_far = near_cost, near_run, shift, False
            elif far_run >= 0 and far_cost < best_cost:
                best_cost, best_run, best_shift, best_far = far_cost, far_run, shift, True
        return best_run, best_shift, best_cost, best_far, near

    def _assign(self, col: int, active: list[int]) -> dict[int, _Pick]:
        """`_assign_searched` where the tracks' cheapest candidates (`_cheapest`) fall on distinct runs:
        each takes its own (`best_combination` would take the same, and no trace is left to share), a
        pick contested where another trace has the run among its near candidates."""
        predicted = [self.tracks[k].predict(col, self.opts) for k in active]
        found = [self._cheapest(self.tracks[k], col, p) for k, p in zip(active, predicted, strict=True)]
        runs = [f[0] for f in found if f[0] >= 0]
        if len(set(runs)) < len(runs):
            return self._assign_searched(col, active)
        wanted = [run for f in found for run in set(f[4])]
        best = {}
        lists, first, _ = self.runs.column(col)
        for k, (run, shift, cost, far, _) in zip(active, found, strict=True):
            if run >= 0:  # `_record`, inline
                best[k] = _Pick(run, shift, cost, far)
                i = first + run
                u = lists[6][i] + shift
                self.tracks[k].add(col, u, shift, (lists[4][i] + shift, lists[5][i] + shift), wanted.count(run) > 1,
                                   far, self.opts)
                self.u[k, col], self.level[k, col] = u, shift
                self.conf[k, col] = lists[3][i]
        return best

    def _assign_searched(self, col: int, active: list[int]) -> dict[int, _Pick]:
        """The most active tracks matched to distinct runs, cheapest first; close misses then share."""
        predicted = {k: self.tracks[k].predict(col, self.opts) for k in active}
        options = {k: self.candidates(self.tracks[k], col, predicted[k]) for k in active}
        if len(active) == 1:  # one trace (a multiclass channel): its cheapest run, as the search below finds
            combo: tuple[_Pick | None, ...] = (min(options[active[0]], key=lambda p: p.cost, default=None),)
        else:
            combo = best_combination([options[k] for k in active])
        best = {k: p for k, p in zip(active, combo, strict=True) if p is not None}
        taken = {p.run for p in best.values()}
        for k in active:  # curves crossing: a trace left without a run of its own shares a near one
            if k not in best and self.tracks[k].gap(col) == 0:
                shared = [p for p in options[k] if p.run in taken and not p.far]
                if shared:
                    best[k] = min(shared, key=lambda p: p.cost)
        # Runs more than one trace could take (one trace may reach a run on two levels: that is no contest).
        wanted = [run for k in active for run in {p.run for p in options[k] if not p.far}]
        for k, pick in best.items():
            others = [predicted[j] - best[j].shift for j in best if j != k and best[j].run == pick.run]
            centre = self._split_centre(col, pick, predicted[k] - pick.shift, others) if others else None
            self._record(k, col, pick, centre, contested=wanted.count(pick.run) > 1)
        self._release_duplicates(best)
        return best

    def _release_duplicates(self, picks: dict[int, _Pick]) -> None:
        """Two traces that have shared one run for longer than a crossing lasts are one curve followed
        twice: the one that coasted longer lets go, free to start again on a curve nobody follows."""
        for k, pick in picks.items():
            partners = [j for j, p in picks.items() if j != k and p.run == pick.run]
            long_shared = self.tracks[k].contested > self.opts.max_gap
            if partners and long_shared and all(self.tracks[j].last_col >= 0 for j in partners):
                loser = max([k, *partners], key=lambda j: (self.tracks[j].coasting(self.tracks[j].last_col), j))
                self.tracks[loser] = _Track()
                return

    def _record(self, k: int, col: int, pick: _Pick, centre: float | None = None, contested: bool = False) -> None:
        lists, first, _ = self.runs.column(col)
        i = first + pick.run
        u = (lists[6][i] if centre is None else (centre - self.top) / self.span) + pick.shift
        extent = (lists[4][i] + pick.shift, lists[5][i] + pick.shift)
        self.tracks[k].add(col, u, pick.shift, extent, contested, pick.far, self.opts)
        self.u[k, col], self.level[k, col] = u, pick.shift
        self.conf[k, col] = lists[3][i]

    def _split_centre(self, col: int, pick: _Pick, mine: float, others: list[float]) -> float:
        """Centroid of the rows of a shared run nearer this trace's prediction than the others'
        (fractions on the run's own level): two curves crossing pull neither centre off."""
        lists, first, _ = self.runs.column(col)
        lo, hi = lists[0][first + pick.run], lists[1][first + pick.run]
        rows = np.arange(max(lo - 1, 0), min(hi + 2, self.prob.shape[0]))
        f = self.fraction(rows)
        nearest = np.ones(rows.shape, dtype=bool)
        for other in others:
            if abs(other - mine) > 1e-9:
                nearest &= np.abs(f - mine) <= np.abs(f - other)
        weights = self.prob[rows, col].astype(np.float64) * nearest
        if weights.sum() <= 1e-6:
            return lists[2][first + pick.run]
        return float((weights * rows).sum() / weights.sum())

    def _births(self, col: int, idle: list[int], claimed: dict[int, _Pick]) -> None:
        """Start idle tracks (never started, or lost for longer than max_gap) on unclaimed, confirmed runs."""
        if not idle:
            return
        lists, first, last = self.runs.column(col)
        confidence = lists[3][first:last]
        taken = {p.run for p in claimed.values()}
        near_active = [float(self.u[k, col]) for k in claimed]
        exclusion = self.opts.gate_px / self.span
        fresh = []
        for r, f in enumerate(lists[6][first:last]):
            if r in taken or any(abs(f - (u - math.floor(u))) <= exclusion for u in near_active):
                continue
            if self._confirmed(col, r):
                fresh.append((f, r))
        fresh.sort(key=lambda item: -confidence[item[1]])  # the surest run starts first
        for f, r in fresh:
            if not idle:
                return
            k = min(idle, key=lambda i: abs(self.tracks[i].us[-1] - f) if self.tracks[i].us else 2.0)
            idle.remove(k)
            self.tracks[k] = _Track()
            self._record(k, col, _Pick(r, 0, 0.0))

    def _confirmed(self, col: int, run: int) -> bool:
        """The run continues in `confirm` of the next 2 * `confirm` columns (a speck or a stray kick
        does not; a dashed curve does). A run continues another if its centre is near, or, in the next
        column, if it touches it (8-connected, as in tracking): a steep stretch is one stroke too."""
        lists, first, _ = self.runs.column(col)
        centre, lo, hi = lists[2][first + run], lists[0][first + run], lists[1][first + run]
        found, last = 0, col
        for c in range(col + 1, min(col + 1 + 2 * self.opts.confirm, len(self.runs))):
            lists, first, stop = self.runs.column(c)
            reach = self.opts.gate_px + self.opts.gate_per_gap_column * self.span * (c - last - 1)
            pick, nearest = -1, math.inf
            for r in range(first, stop):
                r_lo, r_hi, distance = lists[0][r], lists[1][r], abs(lists[2][r] - centre)
                near = distance <= reach + (r_hi - r_lo) / 2 or (c == last + 1 and r_lo <= hi + 1 and r_hi >= lo - 1)
                if near and distance < nearest:
                    pick, nearest = r, distance
            if pick >= 0:
                centre, lo, hi = lists[2][pick], lists[0][pick], lists[1][pick]
                found, last = found + 1, c
                if found >= self.opts.confirm:
                    return True
        return found >= min(self.opts.confirm, len(self.runs) - 1 - col)



def _cost(pick: _Pick) -> float:
    return pick.cost


def best_combination(options: list[list[_Pick]]) -> tuple[_Pick | None, ...]:
    """One pick or none per trace, from its four cheapest (`choices`), on distinct runs: the most picks,
    then the least cost summed in trace order, then the first in the order of `itertools.product` over
    (None, cheapest, ..., fourth cheapest) per trace. Found depth first, cheapest picks first, leaving
    out every branch that cannot beat the best found so far (costs are never negative, so a partial sum
    only grows). tests/core/test_digitise.py holds it to the exhaustive search it stands for."""
    choices = [sorted(opts, key=_cost)[:CHOICES] for opts in options]
    cheapest = tuple(c[0] if c else None for c in choices)
    runs = [p.run for p in cheapest if p is not None]
    if len(set(runs)) == len(runs):
        # Every trace that can take a run takes its cheapest: no combination has more picks or costs less
        # (a rounded sum never falls when a term grows), and of those that tie it comes first.
        return cheapest
    n = len(choices)
    can_take = [0] * (n + 1)  # can_take[i]: how many of traces i.. have a pick to take at all
    for i in range(n - 1, -1, -1):
        can_take[i] = can_take[i + 1] + (1 if choices[i] else 0)
    combo: list[_Pick | None] = [None] * n
    order = [0] * n  # the choice taken per trace: 0 none, 1 + its rank among the cheapest
    used: set[int] = set()
    # (-picks, cost, order) of the best so far, and its combination: none at all, the first of the product.
    best: list[Any] = [(0, 0.0, tuple(order)), tuple(combo)]

    def beaten(count: int, cost: float) -> bool:
        """Whether a branch that can reach at most `count` picks, costing at least `cost`, loses to the best."""
        return (-count, cost) > best[0][:2]

    def visit(i: int, count: int, cost: float) -> None:
        if i == n:
            key = (-count, cost, tuple(order))
            if key < best[0]:
                best[:] = [key, tuple(combo)]
            return
        for rank, pick in enumerate(choices[i], 1):
            total = cost + pick.cost
            if beaten(count + 1 + can_take[i + 1], total):
                break  # the choices that follow cost as much or more
            if pick.run in used:
                continue
            used.add(pick.run)
            combo[i], order[i] = pick, rank
            visit(i + 1, count + 1, total)
            used.discard(pick.run)
        combo[i], order[i] = None, 0
        if not beaten(count + can_take[i + 1], cost):
            visit(i + 1, count, cost)

    visit(0, 0, 0.0)
    return best[1]


def _bridge(u: np.ndarray, level: np.ndarray, conf: np.ndarray, max_gap: int) -> np.ndarray:
    """Interpolate gaps of at most `max_gap` columns between detections, in place; returns the mask."""
    found = np.nonzero(np.isfinite(u))[0]
    bridged = np.zeros(u.shape, dtype=bool)
    for a, b in zip(found[:-1], found[1:], strict=True):
        if 1 < b - a <= max_gap + 1:
            cols = np.arange(a + 1, b)
            t = (cols - a) / (b - a)
            u[cols] = u[a] + t * (u[b] - u[a])
            level[cols] = np.where(t < 0.5, level[a], level[b])
            conf[cols] = 0.5 * min(conf[a], conf[b])  # an interpolation is worth less than a detection
            bridged[cols] = True
    return bridged


def trace_curves(prob: np.ndarray, track_top: float, track_bottom: float, count: int = 1,
                 options: TraceOptions = TraceOptions()) -> list[ColumnTrace]:
    """Follow `count` curves through one (H, W) curve-probability map; traces ordered top to bottom
    by their mean position (nothing on the page tells same-looking curves apart otherwise)."""
    u, level, conf = _Tracer(prob, track_top, track_bottom, count, options).run()
    traces = []
    for k in range(count):
        u[k], level[k] = _relevel(u[k] - level[k], options.level_cost)
        bridged = _bridge(u[k], level[k], conf[k], options.max_gap)
        traces.append(ColumnTrace(u[k], level[k], track_top + (u[k] - level[k]) * (track_bottom - track_top),
                                  conf[k], bridged))
    return sorted(traces, key=lambda t: float(np.nanmean(t.u)) if np.isfinite(t.u).any() else 2.0)


def _relevel(fraction: np.ndarray, level_cost: float) -> tuple[np.ndarray, np.ndarray]:
    """The wrap level of every detection, chosen for the whole trace at once (Viterbi): the levels
    whose unwrapped positions make the trace move least, a small cost per column off the primary scale
    breaking ties. Tracing column by column can take a wrong level at a stray kick across an edge and
    keep it; the whole trace's continuity does not. Returns (unwrapped fraction, level)."""
    cols = np.nonzero(np.isfinite(fraction))[0]
    level = np.zeros(fraction.shape, dtype=np.int8)
    if cols.size == 0:
        return fraction.copy(), level
    states = (-1, 0, 1)
    f = fraction[cols].tolist()
    c0, c1, c2 = (level_cost * abs(s) for s in states)
    spans = np.diff(cols).tolist()
    back: list[tuple[int, int, int]] = []
    # Unrolled over the three states, before and after each step: per state s, the cheapest previous
    # state (the first on ties), and a cost of level_cost per column off the primary scale (nothing on it).
    for here, before, span in zip(f[1:], f[:-1], spans, strict=True):
        moved = here - 1 - before  # to level -1
        j0, b0 = 0, c0 + abs(moved + 1)
        option = c1 + abs(moved)
        if option < b0:
            j0, b0 = 1, option
        option = c2 + abs(moved - 1)
        if option < b0:
            j0, b0 = 2, option
        moved = here - before  # to level 0
        j1, b1 = 0, c0 + abs(moved + 1)
        option = c1 + abs(moved)
        if option < b1:
            j1, b1 = 1, option
        option = c2 + abs(moved - 1)
        if option < b1:
            j1, b1 = 2, option
        moved = here + 1 - before  # to level 1
        j2, b2 = 0, c0 + abs(moved + 1)
        option = c1 + abs(moved)
        if option < b2:
            j2, b2 = 1, option
        option = c2 + abs(moved - 1)
        if option < b2:
            j2, b2 = 2, option
        penalty = level_cost * span
        c0, c1, c2 = b0 + penalty, b1, b2 + penalty
        back.append((j0, j1, j2))
    cost = [c0, c1, c2]
    j = min(range(3), key=cost.__getitem__)
    chosen = [j]
    for links in reversed(back):
        j = links[j]
        chosen.append(j)
    level[cols] = [states[j] for j in reversed(chosen)]
    return fraction + level, level
