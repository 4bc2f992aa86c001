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

from dataclasses import dataclass

import numpy as np

from veernet_core.digitise.joint_loop import warm_joint_loops
from veernet_core.digitise.runs import RunTable
from veernet_core.digitise.tracer_loop import OPTION_NAMES, follow, wrap_levels
from veernet_core.digitise.track_numbers import warm_number_loops

__all__ = ["ColumnTrace", "TraceOptions", "compile_loops", "trace_curves"]


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
    # A page track's border rows (the outermost of the joint tracer's bins either side) read as paper by its paths
    # (`joint._grid`): the model marks what is left of a page track's border lines there, and a path that wraps
    # reached that ink through the edge (`section.read_section` sets it; strips read worse with it).
    border_bins_paper: bool = False


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
    return _traced(prob, track_top, track_bottom, count, options)[0]


def compile_loops() -> None:
    """Compile the tracers' loops (`tracer_loop` and `joint_loop`, numba) for the maps the service reads
    (float32) and the tests build (float64), and those that find depth numbers in a track (`track_numbers`),
    or load them from numba's cache where it holds them (about 0.3 s; compiling takes 10-30 s). A worker
    calls it before its pool forks, so that no job pays for either; `make` and the images call it once they
    install, so that the cache holds them."""
    for dtype in (np.float32, np.float64):
        prob = np.zeros((8, 12), dtype=dtype)
        prob[2:4, :] = 1.0
        prob[5:7, 4:] = 1.0
        _traced(prob, 0.0, 7.0, 2, TraceOptions())
        warm_joint_loops(prob)
    warm_number_loops()


def _traced(prob: np.ndarray, track_top: float, track_bottom: float, count: int, options: TraceOptions,
            searched: bool = False) -> tuple[list[ColumnTrace], int, int]:
    """`trace_curves`, and the columns where runs were assigned and of these those where the assignment
    was searched (`tracer_loop.follow`; `searched` searches them all)."""
    span = float(track_bottom) - float(track_top)
    runs = RunTable(prob, options.threshold, track_top, span)
    settings = np.array([getattr(options, name) for name in OPTION_NAMES], dtype=np.float64)
    u, level, conf, assigned, searched_columns = follow(
        np.ascontiguousarray(prob), float(track_top), span, count, settings,
        np.asarray(runs.bounds, dtype=np.int64), *runs.arrays, searched)
    traces = []
    for k in range(count):
        u[k], level[k] = _relevel(u[k] - level[k], options.level_cost)
        bridged = _bridge(u[k], level[k], conf[k], options.max_gap)
        traces.append(ColumnTrace(u[k], level[k], track_top + (u[k] - level[k]) * (track_bottom - track_top),
                                  conf[k], bridged))
    traces.sort(key=lambda t: float(np.nanmean(t.u)) if np.isfinite(t.u).any() else 2.0)
    return traces, assigned, searched_columns


def _relevel(fraction: np.ndarray, level_cost: float,
             levels: tuple[int, ...] = (-1, 0, 1)) -> tuple[np.ndarray, np.ndarray]:
    """The wrap level of every detection, chosen for the whole trace at once (Viterbi): the levels
    whose unwrapped positions make the trace move least, a small cost per column off the primary scale
    breaking ties, among `levels` (the primary scale's 0 always). Tracing column by column can take a wrong
    level at a stray kick across an edge and keep it; the whole trace's continuity does not. Returns
    (unwrapped fraction, level)."""
    cols = np.nonzero(np.isfinite(fraction))[0]
    level = np.zeros(fraction.shape, dtype=np.int8)
    if cols.size == 0:
        return fraction.copy(), level
    barred = np.array([lv not in levels and lv != 0 for lv in (-1, 0, 1)])
    level[cols] = wrap_levels(fraction[cols], np.diff(cols), level_cost, barred)
    return fraction + level, level


def relevelled(trace: ColumnTrace, levels: tuple[int, ...], level_cost: float) -> ColumnTrace:
    """``trace`` with its wrap levels chosen again (`_relevel`) among `levels` only (the primary scale's 0
    and a curve's declared backup scales), where it is drawn; bridged columns too."""
    u, level = _relevel(trace.u - trace.level, level_cost, levels)
    return ColumnTrace(u, level, trace.row, trace.confidence, trace.bridged)
