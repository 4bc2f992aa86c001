"""Curves from probabilities: a sub-pixel centreline per depth column (`veernet_core.digitise.tracer`),
calibrated to values and depths and resampled onto a regular depth step.

Positions are unwrapped track fractions u (see `veernet_core.digitise.tracer`): 0 at the track's top row, 1 at
its bottom row, 1 + f on a backup scale past the bottom edge, so one linear (or log) map
`CurveScale.to_value(u)` reads primary and backup scales alike.

A binary model puts every curve in one channel; the tracer then follows several traces at once and
keeps them apart through crossings by their lines before the crossing, and a multiclass model gives
each curve class its own channel (`channel_plan`). Either way, which trace is which curve is decided by
`veernet_core.digitise.identity` from the calibration's hints (style, ink, anchors) as the scan bears
them out, never by drawing order; a dashed curve's gaps are bridged like any short gap
(`TraceOptions.max_gap`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace

import numpy as np

from veernet_core.digitise.calibration import Calibration, CalibrationError, CurveScale, DepthScale
from veernet_core.digitise.calibration_fields import INK_SHADES
from veernet_core.digitise.identity import Naming, doubled, name_traces
from veernet_core.digitise.ink import ScanPixels, page_of
from veernet_core.digitise.joint import CurveHint, Tone, trace_joint
from veernet_core.digitise.tracer import ColumnTrace, TraceOptions, trace_curves

DEFAULT_TRACE = TraceOptions()  # frozen, so one shared default is safe


@dataclass
class DigitisedCurve:
    mnemonic: str
    unit: str
    values: np.ndarray  # float64 per output depth, NaN = null
    confidence: np.ndarray  # float32 per output depth, 0 where null
    wrapped: np.ndarray  # bool per output depth: read on a declared backup scale
    trace: ColumnTrace  # the same curve per image column, for overlays and checks
    # bool per output depth: traced past an edge with no backup scale declared there; read as drawn, on
    # the primary scale (a misread wrap or an undeclared backup scale: check these on the overlay)
    wrap_unexpected: np.ndarray
    identity: str = "single"  # how this trace was named: single, anchored, hinted or ambiguous (identity.py)
    warnings: tuple[str, ...] = ()  # what the naming step found against the calibration's hints


@dataclass
class Digitised:
    depth: np.ndarray  # regular: depth[0] + k * step
    depth_unit: str
    step: float
    curves: list[DigitisedCurve]
    calibration: Calibration
    image_size: tuple[int, int] = field(default=(0, 0))  # (height, width) of the scan


def channel_plan(num_classes: int, curves: int) -> list[tuple[int, list[int]]]:
    """Which probability channel each calibrated curve is read from.

    A binary model (background + curve) carries every curve in channel 1; a multiclass model has one
    channel per curve class, in order.
    """
    if num_classes == 2:
        return [(1, list(range(curves)))]
    if curves > num_classes - 1:
        raise CalibrationError({"curves": f"lists {curves} curves but the model separates only {num_classes - 1}"})
    return [(k + 1, [k]) for k in range(curves)]


def digitise(probabilities: np.ndarray, calibration: Calibration, options: TraceOptions = DEFAULT_TRACE,
             scan: ScanPixels | None = None) -> Digitised:
    """(C, H, W) class probabilities (channel 0 background) -> calibrated curves on a regular depth step,
    named by the calibration's hints as the `scan`'s pixels bear them out (without it, by anchors alone)."""
    classes, height, width = probabilities.shape
    calibration.check(height, width)
    traces = trace_channels(probabilities, calibration, options, scan)
    naming = name_traces(traces, calibration, scan,
                         assigned=assigned_by_tracer(probabilities.shape[0], calibration, options),
                         one_channel=one_channel(probabilities.shape[0], calibration))
    return calibrate(naming, calibration, (height, width))


# The joint tracer's costs are per pixel, set on tracks of 40-64 rows (the scale-0.1 model's). On a model's
# grid it reads a track's curves better than the column tracer on every scale measured: with perfect
# probabilities on the grid of a model at 0.2, 0.3, 0.4 and 0.5 (bench/digitise_eval.py --source
# truth-reduced, the independent renderer's full-resolution logs, tuning seed 7777) 10.8, 11.1, 10.2 and
# 9.9 % mean error. Limited to 192 rows, the column tracer took the 0.4 grid's taller tracks: 11.1 %,
# coverage 0.968 against 0.986, 5 curves named wrong without a flag against none. So on a model's grid
# the limit follows the model's scale (`joint_max_rows`), up to the finest scale measured. On far taller
# tracks (probabilities at a full-resolution crop's own scale) the column tracer and the naming step read
# better: bench/page_segment_eval.py --source truth (20 held-out pages), curves sharing a track of two or
# three, mean error 1.5 and 5.0 % of the range against 12.1 and 13.6 % with the joint tracer; there the
# limit stays at JOINT_MAX_TRACK_ROWS.
JOINT_MAX_TRACK_ROWS = DEFAULT_TRACE.joint_max_rows  # 192: a reduced track of the bundled model (scale 0.2)
JOINT_MAX_SCALE = 0.5  # the finest model scale the joint tracer was measured at
TALLEST_TRACK_ROWS = 640  # a track of a full-resolution scan is at most this tall (scans are 480-640 px)
# A page's track is brought to within 1.25x of the model's scale (`section`): headroom above that.
JOINT_HEADROOM = 1.5


def joint_max_rows(model_scale: float | None) -> int:
    """The tallest track traced jointly on the grid of a model trained at `model_scale`: every track a
    scan brought to that scale can have (JOINT_MAX_TRACK_ROWS where the scale is unknown or small)."""
    if model_scale is None:
        return JOINT_MAX_TRACK_ROWS
    reach = JOINT_HEADROOM * TALLEST_TRACK_ROWS * min(model_scale, JOINT_MAX_SCALE)
    return max(JOINT_MAX_TRACK_ROWS, math.ceil(reach - 1e-9))


def joint_scale(calibration: Calibration, options: TraceOptions = DEFAULT_TRACE) -> bool:
    """Whether the track is at the scale the joint tracer is made for (`TraceOptions.joint_max_rows`)."""
    return calibration.track_bottom - calibration.track_top <= options.joint_max_rows


def assigned_by_tracer(num_classes: int, calibration: Calibration, options: TraceOptions = DEFAULT_TRACE) -> bool:
    """Whether `trace_channels` already named the traces: several curves in one channel are traced each
    as its calibrated curve (`joint.trace_joint`); a channel per curve names them by its order."""
    return (num_classes == 2 and len(calibration.curves) > 1 and hints_differ(calibration)
            and joint_scale(calibration, options))


def one_channel(num_classes: int, calibration: Calibration) -> bool:
    """Whether some of the track's curves are traced from one probability channel (`channel_plan`: a binary
    model's), so that where their traces touch, which goes on as which is the tracer's guess. A channel per curve
    keeps its curve through every crossing."""
    return any(len(curves) > 1 for _, curves in channel_plan(num_classes, len(calibration.curves)))


def hints_differ(calibration: Calibration) -> bool:
    """Whether the line styles and inks tell some of the curves apart: otherwise the joint tracer still
    keeps the curves apart (by continuity, shared ink, the tones it finds), but its order names nothing,
    and the naming step names the traces by what else it has (anchors, wrap sides) or marks them
    ambiguous."""
    return len({(c.style, c.ink) for c in calibration.curves}) > 1


def trace_channels(probabilities: np.ndarray, calibration: Calibration,
                   options: TraceOptions = DEFAULT_TRACE, scan: ScanPixels | None = None) -> list[ColumnTrace]:
    """One column trace per calibrated curve, in the calibration's order, read from its channel; several
    curves of one channel are traced together (`joint.trace_joint`), with `scan` (on the probabilities'
    grid) lending them their ink's tone. A track taller than `options.joint_max_rows` is read by the column
    tracer, its traces named afterwards. One curve alone in a binary channel is traced by the joint tracer
    too where it declares a backup scale, on a track of any height: its levels change only through the
    edges, and its path is found for the whole log at once, so that a jump through an edge that the ink
    shows poorly is still read as the wrap it is (on a full-resolution track the column tracer read 55 % and
    more of such curves' wrapped samples on the wrong scale: bench/README.md, 2026-12-05). With none
    declared, the column tracer follows it past any edge, so that an undeclared wrap is read where drawn
    and flagged."""
    traces: list[ColumnTrace | None] = [None] * len(calibration.curves)
    joint = joint_scale(calibration, options)
    for channel, members in channel_plan(probabilities.shape[0], len(calibration.curves)):
        lone_wrapping = (len(members) == 1 and probabilities.shape[0] == 2
                         and bool(calibration.curves[members[0]].wrap_levels))
        if (joint and len(members) > 1) or lone_wrapping:
            hints = [curve_hint(calibration, i, shades=scan is None or not scan.tones_unread) for i in members]
            found = trace_joint(probabilities[channel], calibration.track_top, calibration.track_bottom, hints,
                                tone_of(scan, calibration), options)
            for index, trace in zip(members, found, strict=True):
                traces[index] = trace
            continue
        found = trace_curves(probabilities[channel], calibration.track_top, calibration.track_bottom,
                             len(members), options)
        wraps = [calibration.curves[i].wrap_levels for i in members]
        for index, trace in zip(members, _match_wraps(found, wraps), strict=True):
            traces[index] = trace
    return [trace for trace in traces if trace is not None]


def curve_hint(calibration: Calibration, index: int, shades: bool = True) -> CurveHint:
    """What the tracer may use of curve `index`'s calibration: style, ink (a `dark` or `light` one only where
    the scan `shades` its inks: `ScanPixels.tones_unread`), wrap levels. Anchors are the
    naming step's (`identity`): given to the tracer as costs near their columns, an anchor pulled its
    curve's path onto the anchored ink there and let it run on whichever curve was cheaper elsewhere
    (on held-out seed 7777 with two anchors per curve, 8 curves named wrong without a flag against none
    when the anchors name the traces the tracer found by their looks alone)."""
    curve = calibration.curves[index]
    ink = curve.ink if shades or curve.ink not in INK_SHADES else None
    return CurveHint(curve.style, ink, (0, *curve.wrap_levels))


def tone_of(scan: ScanPixels | None, calibration: Calibration) -> Tone | None:
    """The scan's darkness per pixel, 0 on the paper .. 1 black (paper per column, as the naming step reads
    it), and on a colour scan the colour of the darkest pixel within a row of each pixel."""
    if scan is None:
        return None
    page = page_of(scan, calibration.track_top, calibration.track_bottom)
    paper = page.paper
    gray = scan.gray.astype(np.float32)
    darkness = np.clip((paper[None, :] - gray) / np.maximum(paper[None, :], 1.0), 0.0, 1.0)
    if scan.colour is None:
        return Tone(darkness)
    height = gray.shape[0]
    rows = np.arange(height)
    around = np.stack([np.clip(rows + d, 0, height - 1) for d in (-1, 0, 1)])  # (3, H)
    darkest = around[np.argmin(gray[around], axis=0), rows[:, None]]  # (H, W): row of the darkest neighbour
    columns = np.arange(gray.shape[1])
    paper_rgb = None if page.tint is None else page.paper_rgb(columns).astype(np.float32)
    return Tone(darkness, scan.colour[darkest, columns[None, :]].astype(np.float32), paper_rgb)


def calibrate(naming: Naming, calibration: Calibration, image_size: tuple[int, int]) -> Digitised:
    """Named column traces of a (height, width) scan -> values on the calibration's regular depth step; a curve
    whose trace runs on another's is flagged here (`identity.doubled`), on the traces every path hands over last."""
    naming = doubled(naming, calibration)
    depth = depth_grid(calibration.depth, image_size[1], calibration.step)
    if depth.size == 0:
        raise CalibrationError({"step": f"no multiple of {calibration.step:g} lies within the scan's depths"})
    cols = calibration.depth.column_of(depth)
    curves = [replace(_resample(scale, trace, cols), identity=identity, warnings=warnings)
              for scale, trace, identity, warnings in zip(calibration.curves, naming.traces, naming.identity,
                                                          naming.warnings, strict=True)]
    return Digitised(depth, calibration.depth.unit, calibration.step, curves, calibration, image_size)


def _match_wraps(traces: list[ColumnTrace], wraps: list[tuple[int, ...]]) -> list[ColumnTrace]:
    """Traces in the order that lets most of their wrapped samples be read on the curves' declared
    backup scales; otherwise top to bottom. A wrap is the one mark that tells same-looking curves apart."""
    def readable(order: tuple[int, ...]) -> int:
        return sum(int(np.count_nonzero(np.isin(traces[t].level[traces[t].level != 0], wrap)))
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
    found = np.isfinite(u)
    declared = np.isin(level, scale.wrap_levels)
    unexpected = found & (level != 0) & ~declared
    # A wrap on a side with no declared backup scale is read where it is drawn, on the primary scale, and
    # flagged: never a null stretch for the user to fill in by hand.
    u = np.where(unexpected, u - level, u)
    values = np.where(found, scale.to_value(np.where(found, u, 0.5)), np.nan)
    return DigitisedCurve(scale.mnemonic, scale.unit, values, np.where(found, conf, 0).astype(np.float32),
                          found & declared & (level != 0), trace, unexpected)
