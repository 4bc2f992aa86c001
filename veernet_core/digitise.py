"""Curves from probabilities: a sub-pixel centreline per depth column, tracked across gaps, crossings
and wrap-arounds, calibrated to values and depths and resampled onto a regular depth step.

Positions are tracked as *unwrapped fractions* u of the track: 0 at the track's top row (the scale's
left value), 1 at its bottom row (the right value). A curve that leaves the bottom edge and comes
back in at the top is on its backup scale, one track width further on: u = 1 + (its fraction), so
a single linear (or log) map `CurveScale.to_value(u)` reads primary and backup scales alike, and a
trace stays continuous in u across the wrap. Rows are image rows with pixel centres at integers.

A binary model puts every curve in one channel; the tracer then follows several traces at once and
keeps them apart through crossings by their lines before the crossing. Curves that look alike and
cross often can still swap identity: nothing on the page tells them apart but their wraps (used to
order them, see `_match_wraps`) and the user's check of the overlay. A multiclass model tells the
curves apart by their line style (on the synthetic logs curve 1 is solid, curve 2 dashed) and gives
each its own channel (`channel_plan`), so crossings cannot swap them; a dashed curve's gaps are
bridged like any short gap (`TraceOptions.max_gap`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from veernet_core.calibration import Calibration, CalibrationError, CurveScale, DepthScale

__all__ = ["Calibration", "CalibrationError", "CurveScale", "DepthScale", "Digitised", "DigitisedCurve",
           "TraceOptions", "calibrate", "channel_plan", "depth_grid", "digitise", "trace_channels", "trace_curves"]

CHUNK_COLUMNS = 2048  # run extraction works on column blocks so its temporaries do not grow with width
CACHED_COLUMNS = 256  # columns whose runs are kept as lists at a time: the tracer looks a few columns ahead


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
class DigitisedCurve:
    mnemonic: str
    unit: str
    values: np.ndarray  # float64 per output depth, NaN = null
    confidence: np.ndarray  # float32 per output depth, 0 where null
    wrapped: np.ndarray  # bool per output depth: read on the backup scale (null when it is unknown)
    trace: ColumnTrace  # the same curve per image column, for overlays and checks


@dataclass
class Digitised:
    depth: np.ndarray  # regular: depth[0] + k * step
    depth_unit: str
    step: float
    curves: list[DigitisedCurve]
    calibration: Calibration
    image_size: tuple[int, int] = field(default=(0, 0))  # (height, width) of the scan


@dataclass
class _Runs:
    """Candidate detections of one column: runs of rows at or above the threshold. Plain lists: the
    tracer reads a handful of runs per column, where NumPy's cost per call would dominate."""

    lo: list[int]  # first row
    hi: list[int]  # last row
    centre: list[float]  # probability-weighted centroid over the run and one row either side
    confidence: list[float]  # peak probability, discounted by the run's spread
    f_lo: list[float]  # lo, hi and centre as track fractions (0 at the top border row, 1 at the bottom)
    f_hi: list[float]
    f_c: list[float]


class _RunTable:
    """The runs of every column of a (H, W) probability map, found on column blocks and kept as flat
    arrays; a column's runs become lists when the tracer reaches it, and only a few columns' lists
    are kept, so memory follows the number of runs, not Python objects per run."""

    def __init__(self, prob: np.ndarray, threshold: float, top: float, span: float) -> None:
        width = prob.shape[1]
        blocks = [_block_runs(prob[:, start : start + CHUNK_COLUMNS], threshold, start)
                  for start in range(0, width, CHUNK_COLUMNS)]
        cols, lo, hi, centre, confidence = (np.concatenate(parts) for parts in zip(*blocks, strict=True))
        self.bounds = np.searchsorted(cols, np.arange(width + 1)).tolist()
        self.arrays = (lo, hi, centre, confidence, (lo - top) / span, (hi - top) / span, (centre - top) / span)
        self.width = width
        self._cache: dict[int, _Runs] = {}
        self._chunks: dict[int, tuple[int, list[list[Any]]]] = {}

    def __len__(self) -> int:
        return self.width

    def __getitem__(self, col: int) -> _Runs:
        runs = self._cache.get(col)
        if runs is None:
            if len(self._cache) > 4 * CACHED_COLUMNS:
                self._cache = {c: r for c, r in self._cache.items() if c >= col - CACHED_COLUMNS}
            first, lists = self._lists(col // CACHED_COLUMNS)
            i, j = self.bounds[col] - first, self.bounds[col + 1] - first
            runs = self._cache[col] = _Runs(*(values[i:j] for values in lists))
        return runs

    def column(self, col: int) -> tuple[list[list[Any]], int, int]:
        """A column's runs without copying: the lists of its chunk (lo, hi, centre, confidence, f_lo, f_hi,
        f_c) and the column's index range [i, j) in them."""
        first, lists = self._lists(col // CACHED_COLUMNS)
        return lists, self.bounds[col] - first, self.bounds[col + 1] - first

    def _lists(self, chunk: int) -> tuple[int, list[list[Any]]]:
        """(index of the chunk's first run, its runs as lists) for columns chunk * CACHED_COLUMNS onwards."""
        if chunk not in self._chunks:
            if len(self._chunks) >= 2:  # the tracer's column and its look-ahead span at most two chunks
                del self._chunks[min(self._chunks)]
            i = self.bounds[chunk * CACHED_COLUMNS]
            j = self.bounds[min((chunk + 1) * CACHED_COLUMNS, self.width)]
            self._chunks[chunk] = (i, [a[i:j].tolist() for a in self.arrays])
        return self._chunks[chunk]


def _block_runs(prob: np.ndarray, threshold: float, offset: int) -> tuple[np.ndarray, ...]:
    """(column, lo, hi, centre, confidence) of every run in a block of columns, ordered by column then row."""
    height = prob.shape[0]
    on = prob >= threshold
    edges = np.diff(np.pad(on, ((1, 1), (0, 0))).astype(np.int8), axis=0)
    start_row, start_col = np.nonzero(edges == 1)
    stop_row, stop_col = np.nonzero(edges == -1)
    order_a, order_b = np.lexsort((start_row, start_col)), np.lexsort((stop_row, stop_col))
    cols, lo, hi = start_col[order_a], start_row[order_a], stop_row[order_b] - 1
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

    def gap(self, col: int) -> int:
        return col - self.last_col - 1

    def coasting(self, col: int) -> int:
        """Columns since the last clean detection."""
        return col - self.cols[-1] - 1 if self.cols else 0

    def predict(self, col: int, opts: TraceOptions) -> float:
        """Slope of a least-squares line through the last few clean detections (those close together),
        carried on from the last one; without two such detections, the last one."""
        recent_c: list[int] = []
        recent_u: list[float] = []
        for c, u in zip(self.cols[-opts.history:], self.us[-opts.history:], strict=True):
            if self.cols[-1] - c <= 3 * opts.history:
                recent_c.append(c)
                recent_u.append(u)
        n = len(recent_c)
        if n < 2:
            return self.us[-1]
        mean_c = sum(recent_c) / n
        mean_u = sum(recent_u) / n
        spread = sum([(c - mean_c) ** 2 for c in recent_c])
        slope = sum([(c - mean_c) * (u - mean_u) for c, u in zip(recent_c, recent_u, strict=True)]) / spread
        # From the last detection, not the fitted line: beds make curves step, and a step the line
        # has not caught up with is still where the curve is.
        return self.us[-1] + slope * (col - self.cols[-1])

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


@dataclass(frozen=True)
class _Pick:
    run: int
    shift: int  # level of the detection: the run's fraction + shift is its unwrapped position
    cost: float
    far: bool = False  # outside the gate: a kick or a step hidden by a gap, not a basis for prediction


class _Tracer:
    """Follows `count` curves through one probability map, column by column."""

    def __init__(self, prob: np.ndarray, top: float, bottom: float, count: int, opts: TraceOptions) -> None:
        self.prob, self.top, self.span, self.opts = prob, top, bottom - top, opts
        self.runs = _RunTable(prob, opts.threshold, top, self.span)
        width = prob.shape[1]
        self.tracks = [_Track() for _ in range(count)]
        self.u = np.full((count, width), np.nan)
        self.level = np.zeros((count, width), dtype=np.int8)
        self.conf = np.zeros((count, width), dtype=np.float32)

    def fraction(self, rows: np.ndarray | float) -> np.ndarray:
        return (np.asarray(rows, dtype=np.float64) - self.top) / self.span

    def candidates(self, track: _Track, col: int, p: float) -> list[_Pick]:
        """Runs within the gate of a track's prediction `p`, on its level or across a track edge."""
        opts, runs = self.opts, self.runs[col]
        gate = opts.gate_px / self.span + opts.gate_per_gap_column * max(track.gap(col), track.coasting(col))
        picks: list[_Pick] = []
        edge = opts.edge_px / self.span
        # Where the re-entry column fell in a gap, the trace is back in further from the edge.
        entry = edge + opts.gate_per_gap_column * track.gap(col)
        # No wrap without a clean last run, nor for a trace too new to trust (it may have started on a
        # speck at the edge): NaN compares false.
        settled = len(track.cols) >= opts.history
        out_lo, out_hi = track.extent if track.extent and settled else (math.nan, math.nan)
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
            near, far = [], []
            for r, (f_lo, f_hi, f_c) in enumerate(zip(runs.f_lo, runs.f_hi, runs.f_c, strict=True)):
                distance = self._distance(track.extent, f_lo, f_hi, shift, p)
                if distance <= gate:
                    near.append(_Pick(r, shift, distance + 0.1 * abs(f_c + shift - p) + level_cost))
                elif distance <= opts.far_gate:
                    far.append(_Pick(r, shift, 1.0 + (distance + 0.1 * abs(f_c + shift - p) + level_cost), far=True))
            picks += near + far
        return picks

    def _distance(self, extent: tuple[float, float] | None, f_lo: float, f_hi: float, shift: int, p: float) -> float:
        """How far a run (fractions f_lo..f_hi, read on level `shift`) is from continuing a trace: it
        continues it if it is near the prediction `p` or touches the last run (8-connected, one row of
        slack); the latter follows kicks the prediction overshoots."""
        to_prediction = max(0.0, max(f_lo + shift - p, p - f_hi - shift))
        if extent is None:
            return to_prediction
        to_last = max(0.0, max(f_lo + shift - extent[1], extent[0] - f_hi - shift) - 1.0 / self.span)
        return min(to_prediction, to_last)

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
        """`_assign` for a channel that carries one active trace: its cheapest candidate, as `candidates`
        and `_distance` find it, computed inline without building picks. The same arithmetic in the same
        order and the same tie-breaking (the first cheapest: shifts ascending, near runs before far ones,
        runs top to bottom), so the same trace; one trace has no contests, shares or idle partners."""
        track, opts, span = self.tracks[0], self.opts, self.span
        level, extent, gap = track.level, track.extent, track.gap(col)
        p = track.predict(col, opts)
        gate = opts.gate_px / span + opts.gate_per_gap_column * max(gap, track.coasting(col))
        edge = opts.edge_px / span
        entry = edge + opts.gate_per_gap_column * gap
        out_lo, out_hi = extent if extent and len(track.cols) >= opts.history else (math.nan, math.nan)
        ext_lo, ext_hi = extent if extent is not None else (math.nan, math.nan)
        touch = 1.0 / span
        lists, first, last = self.runs.column(col)
        f_lo, f_hi, f_c = lists[4], lists[5], lists[6]
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
            for r in range(first, last):
                a, b = f_lo[r] + shift - p, p - f_hi[r] - shift
                distance = b if b > a else a
                if distance < 0.0:
                    distance = 0.0
                if extent is not None:
                    a, b = f_lo[r] + shift - ext_hi, ext_lo - f_hi[r] - shift
                    to_last = (b if b > a else a) - touch
                    if to_last < 0.0:
                        to_last = 0.0
                    if to_last < distance:
                        distance = to_last
                if distance <= gate:
                    cost = distance + 0.1 * abs(f_c[r] + shift - p) + level_cost
                    if cost < near_cost:
                        near_cost, near_run = cost, r
                elif distance <= opts.far_gate:
                    cost = 1.0 + (distance + 0.1 * abs(f_c[r] + shift - p) + level_cost)
                    if cost < far_cost:
                        far_cost, far_run = cost, r
            if near_run >= 0 and near_cost < best_cost and not far_cost < near_cost:
                best_cost, best_run, best_shift, best_far = near_cost, near_run, shift, False
            elif far_run >= 0 and far_cost < best_cost:
                best_cost, best_run, best_shift, best_far = far_cost, far_run, shift, True
        if best_run >= 0:
            u = f_c[best_run] + best_shift
            spans = (f_lo[best_run] + best_shift, f_hi[best_run] + best_shift)
            track.add(col, u, best_shift, spans, False, best_far, opts)
            self.u[0, col], self.level[0, col] = u, best_shift
            self.conf[0, col] = lists[3][best_run]

    def _assign(self, col: int, active: list[int]) -> dict[int, _Pick]:
        """The most active tracks matched to distinct runs, cheapest first; close misses then share."""
        predicted = {k: self.tracks[k].predict(col, self.opts) for k in active}
        options = {k: self.candidates(self.tracks[k], col, predicted[k]) for k in active}
        best: dict[int, _Pick] = {}
        best_key = (0, 0.0)
        combos: list[tuple[_Pick | None, ...]]
        if len(active) == 1:  # one trace (a multiclass channel): its cheapest run, as the search below finds
            combos = [] if not options[active[0]] else [(min(options[active[0]], key=lambda p: p.cost),)]
        else:
            combos = _combinations([options[k] for k in active])
        for combo in combos:
            runs_used = [p.run for p in combo if p is not None]
            if len(set(runs_used)) < len(runs_used):
                continue
            key = (-len(runs_used), sum(p.cost for p in combo if p is not None))
            if not best or key < best_key:
                best, best_key = {k: p for k, p in zip(active, combo, strict=True) if p is not None}, key
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
        runs = self.runs[col]
        u = (runs.f_c[pick.run] if centre is None else (centre - self.top) / self.span) + pick.shift
        extent = (runs.f_lo[pick.run] + pick.shift, runs.f_hi[pick.run] + pick.shift)
        self.tracks[k].add(col, u, pick.shift, extent, contested, pick.far, self.opts)
        self.u[k, col], self.level[k, col] = u, pick.shift
        self.conf[k, col] = runs.confidence[pick.run]

    def _split_centre(self, col: int, pick: _Pick, mine: float, others: list[float]) -> float:
        """Centroid of the rows of a shared run nearer this trace's prediction than the others'
        (fractions on the run's own level): two curves crossing pull neither centre off."""
        runs = self.runs[col]
        lo, hi = runs.lo[pick.run], runs.hi[pick.run]
        rows = np.arange(max(lo - 1, 0), min(hi + 2, self.prob.shape[0]))
        f = self.fraction(rows)
        nearest = np.ones(rows.shape, dtype=bool)
        for other in others:
            if abs(other - mine) > 1e-9:
                nearest &= np.abs(f - mine) <= np.abs(f - other)
        weights = self.prob[rows, col].astype(np.float64) * nearest
        if weights.sum() <= 1e-6:
            return runs.centre[pick.run]
        return float((weights * rows).sum() / weights.sum())

    def _births(self, col: int, idle: list[int], claimed: dict[int, _Pick]) -> None:
        """Start idle tracks (never started, or lost for longer than max_gap) on unclaimed, confirmed runs."""
        if not idle:
            return
        runs = self.runs[col]
        taken = {p.run for p in claimed.values()}
        near_active = [float(self.u[k, col]) for k in claimed]
        exclusion = self.opts.gate_px / self.span
        fresh = []
        for r, f in enumerate(runs.f_c):
            if r in taken or any(abs(f - (u - math.floor(u))) <= exclusion for u in near_active):
                continue
            if self._confirmed(col, r):
                fresh.append((f, r))
        fresh.sort(key=lambda item: -runs.confidence[item[1]])  # the surest run starts first
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
        runs = self.runs[col]
        centre, lo, hi = runs.centre[run], runs.lo[run], runs.hi[run]
        found, last = 0, col
        for c in range(col + 1, min(col + 1 + 2 * self.opts.confirm, len(self.runs))):
            runs = self.runs[c]
            reach = self.opts.gate_px + self.opts.gate_per_gap_column * self.span * (c - last - 1)
            pick, nearest = -1, math.inf
            for r, (r_lo, r_hi, r_centre) in enumerate(zip(runs.lo, runs.hi, runs.centre, strict=True)):
                distance = abs(r_centre - centre)
                near = distance <= reach + (r_hi - r_lo) / 2 or (c == last + 1 and r_lo <= hi + 1 and r_hi >= lo - 1)
                if near and distance < nearest:
                    pick, nearest = r, distance
            if pick >= 0:
                centre, lo, hi = runs.centre[pick], runs.lo[pick], runs.hi[pick]
                found, last = found + 1, c
                if found >= self.opts.confirm:
                    return True
        return found >= min(self.opts.confirm, len(self.runs) - 1 - col)



def _combinations(options: list[list[_Pick]]) -> list[tuple[_Pick | None, ...]]:
    combos: list[tuple[_Pick | None, ...]] = [()]
    for opts in options:
        choices: list[_Pick | None] = [None, *sorted(opts, key=lambda p: p.cost)[:4]]
        combos = [(*c, o) for c in combos for o in choices]
    return combos


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
    cost = [level_cost * abs(s) for s in states]
    spans = np.diff(cols).tolist()
    back: list[tuple[int, int, int]] = []
    for i in range(1, len(f)):
        came = [0, 0, 0]
        step = [0.0, 0.0, 0.0]
        for n, s in enumerate(states):
            moved = f[i] + s - f[i - 1]
            j, best = 0, cost[0] + abs(moved - states[0])  # the cheapest previous state, the first on ties
            for m in (1, 2):
                option = cost[m] + abs(moved - states[m])
                if option < best:
                    j, best = m, option
            step[n] = best + level_cost * abs(s) * spans[i - 1]
            came[n] = j
        cost = step
        back.append((came[0], came[1], came[2]))
    j = min(range(3), key=cost.__getitem__)
    chosen = [j]
    for links in reversed(back):
        j = links[j]
        chosen.append(j)
    level[cols] = [states[j] for j in reversed(chosen)]
    return fraction + level, level


def channel_plan(num_classes: int, curves: int) -> list[tuple[int, list[int]]]:
    """Which probability channel each calibrated curve is read from.

    A binary model (background + curve) carries every curve in channel 1; a multiclass model has one
    channel per curve class, in order.
    """
    if num_classes == 2:
        return [(1, list(range(curves)))]
    if curves > num_classes - 1:
        raise CalibrationError("curves", f"lists {curves} curves but the model separates only {num_classes - 1}")
    return [(k + 1, [k]) for k in range(curves)]


def digitise(probabilities: np.ndarray, calibration: Calibration,
             options: TraceOptions = TraceOptions()) -> Digitised:
    """(C, H, W) class probabilities (channel 0 background) -> calibrated curves on a regular depth step."""
    classes, height, width = probabilities.shape
    calibration.check(height, width)
    return calibrate(trace_channels(probabilities, calibration, options), calibration, (height, width))


def trace_channels(probabilities: np.ndarray, calibration: Calibration,
                   options: TraceOptions = TraceOptions()) -> list[ColumnTrace]:
    """One column trace per calibrated curve, in the calibration's order, read from its channel."""
    traces: list[ColumnTrace | None] = [None] * len(calibration.curves)
    for channel, members in channel_plan(probabilities.shape[0], len(calibration.curves)):
        found = trace_curves(probabilities[channel], calibration.track_top, calibration.track_bottom,
                             len(members), options)
        wraps = [calibration.curves[i].wrap for i in members]
        for index, trace in zip(members, _match_wraps(found, wraps), strict=True):
            traces[index] = trace
    return [trace for trace in traces if trace is not None]


def calibrate(traces: list[ColumnTrace], calibration: Calibration, image_size: tuple[int, int]) -> Digitised:
    """Column traces of a (height, width) scan -> values on the calibration's regular depth step."""
    depth = depth_grid(calibration.depth, image_size[1], calibration.step)
    if depth.size == 0:
        raise CalibrationError("step", f"no multiple of {calibration.step:g} lies within the scan's depths")
    cols = calibration.depth.column_of(depth)
    curves = [_resample(scale, trace, cols) for scale, trace in zip(calibration.curves, traces, strict=True)]
    return Digitised(depth, calibration.depth.unit, calibration.step, curves, calibration, image_size)


def _match_wraps(traces: list[ColumnTrace], wraps: list[int]) -> list[ColumnTrace]:
    """Traces in the order that lets most of their wrapped samples be read on the curves' declared
    backup scales; otherwise top to bottom. A wrap is the one mark that tells same-looking curves apart."""
    def readable(order: tuple[int, ...]) -> int:
        return sum(int(np.count_nonzero(traces[t].level[traces[t].level != 0] == wrap))
                   for t, wrap in zip(order, wraps, strict=True))
    best = max(itertools.permutations(range(len(traces))), key=lambda order: (readable(order), order == tuple(
        range(len(traces)))))
    return [traces[t] for t in best]


def depth_grid(scale: DepthScale, width: int, step: float) -> np.ndarray:
    """Multiples of `step` from the first at or below the scan's top to the last above its bottom."""
    top, bottom = float(scale.depth_of(0)), float(scale.depth_of(width - 1))
    tolerance = 1e-9 * max(1.0, abs(top), abs(bottom))
    first = math.ceil((top - tolerance) / step)
    last = math.floor((bottom + tolerance) / step)
    decimals = max(0, 9 - int(math.floor(math.log10(step))))  # no 1234.5000000001 in the outputs
    return np.round(np.arange(first, last + 1, dtype=np.float64) * step, min(decimals, 12))


def _resample(scale: CurveScale, trace: ColumnTrace, cols: np.ndarray) -> DigitisedCurve:
    """Column trace -> values at fractional columns: linear between two detections, else the nearer
    one within half a column, else null."""
    width = trace.u.size
    x = np.clip(cols, 0, width - 1)
    i0 = np.minimum(np.floor(x).astype(np.int64), width - 2) if width > 1 else np.zeros(x.shape, np.int64)
    i1 = np.minimum(i0 + 1, width - 1)
    t = x - i0
    nearest = np.rint(x).astype(np.int64)
    u = trace.u[i0] * (1 - t) + trace.u[i1] * t  # u is continuous across a wrap, so this holds there too
    u = np.where(np.isfinite(u), u, trace.u[nearest])
    conf = np.where(np.isfinite(u), trace.confidence[i0] * (1 - t) + trace.confidence[i1] * t, 0.0)
    conf = np.where(np.isfinite(conf), conf, trace.confidence[nearest]).astype(np.float32)
    level = trace.level[nearest]
    readable = np.isfinite(u) & ((level == 0) | (level == scale.wrap))
    values = np.where(readable, scale.to_value(np.where(readable, u, 0.5)), np.nan)
    return DigitisedCurve(scale.mnemonic, scale.unit, values, np.where(readable, conf, 0).astype(np.float32),
                          (level != 0) & np.isfinite(u), trace)
