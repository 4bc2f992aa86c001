"""Digitising a scan at the pixel scale its model was trained at.

A network reads strokes, grid spacing and dash periods at the pixel scale of its training logs: the
bundled model, trained on synthetic logs at scale 0.1 (48-64 px tall), reads a full-resolution scan
(480-640 px tall) to about a third of the track off (31 % mean error over 20 held-out logs) and the
same scans brought near its scale to about 3 % (`bench/digitise_eval.py --scale 1.0`). So when a
checkpoint records that it learned from synthetic logs at scale s, a scan whose own scale differs by
more than RESCALE_TOLERANCE is resampled for the network to the nearest edge of the band the model
reads as it is (s x 1.25 for a finer scan, s / 1.25 for a coarser one: the least resampling, which keeps
the most of a reduced stroke's contrast). A scan reduced for the network is traced at its own
resolution: the model's reading marks a band about each curve and the scan's own pixels in it are the
ink (`veernet_core.digitise.refine`), where curves that touch on the reduced grid are still apart. A scan
enlarged for the network is traced on the model's grid (the tracer's gates are in its pixels) and the
traces are mapped back to the scan's columns. Either way values are read on the calibration's depth
step. Outputs (values, overlay, mask) are always on the scan's own pixel grid
and depths.

Scale 1.0 is the design's full resolution: logs 480-640 px tall, about 300 dpi. A scan's scale is
what its user states, or else its height over NOMINAL_HEIGHT.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from veernet_core.data import MIN_SIDE
from veernet_core.digitise.calibration import Calibration, DepthScale, to_grid
from veernet_core.digitise.curves import (
    Digitised,
    assigned_by_tracer,
    calibrate,
    channel_plan,
    digitise,
    joint_max_rows,
    one_channel,
    trace_channels,
)
from veernet_core.digitise.identity import name_traces
from veernet_core.digitise.ink import ScanPixels, page_of
from veernet_core.digitise.pinned import with_pinned
from veernet_core.digitise.predict import DEFAULT_MAX_PIXELS
from veernet_core.digitise.refine import full_resolution_ink, ink_mask, snap_trace
from veernet_core.digitise.tones import filled, traced_by_tone
from veernet_core.digitise.tracer import ColumnTrace, TraceOptions
from veernet_core.digitise.track_numbers import number_pixels, without_numbers

NOMINAL_HEIGHT = 560.0  # px: the middle of the 480-640 px heights of full-resolution (scale 1.0) logs
# Within this factor either way a model reads a scan as it is: the synthetic logs a model trains on
# already span 480-640 px of height at one scale (x 1.33 from the shortest to the tallest).
RESCALE_TOLERANCE = 1.25
MIN_SCAN_SCALE, MAX_SCAN_SCALE = 0.01, 100.0


@dataclass(frozen=True)
class Resampling:
    """How a scan meets its model: the scales, and the size the model ran at (the scan's own when equal)."""

    model_scale: float | None  # training scale of a synthetic-data model; None: unknown (used as it is)
    scan_scale: float
    scan_scale_estimated: bool  # True when taken from the scan's height rather than stated
    scan_size: tuple[int, int]  # (height, width)
    model_size: tuple[int, int]  # (height, width) the network and the tracer ran at

    @property
    def resampled(self) -> bool:
        return self.model_size != self.scan_size

    @property
    def reduced(self) -> bool:
        """Whether the model reads the scan smaller than it is (a full-resolution scan): its curves are
        then read on the scan's own pixels, and its grid taken off first (`pipeline.readable_scan`)."""
        return self.model_size[0] < self.scan_size[0]

    @property
    def read_at(self) -> str:
        """"HxW" px the model read the scan at when resampled (recorded in LAS headers), else ""."""
        return "x".join(map(str, self.model_size)) if self.resampled else ""

    def to_dict(self) -> dict[str, Any]:
        return {"model_scale": self.model_scale, "scan_scale": round(self.scan_scale, 6),
                "scan_scale_estimated": self.scan_scale_estimated, "resampled": self.resampled,
                "scan_size": list(self.scan_size), "model_size": list(self.model_size)}


def check_scan_scale(value: Any) -> float:
    """A stated scan scale, checked: a plain number within [MIN_SCAN_SCALE, MAX_SCAN_SCALE]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            MIN_SCAN_SCALE <= float(value) <= MAX_SCAN_SCALE):
        raise ValueError(f"must be a number from {MIN_SCAN_SCALE} to {MAX_SCAN_SCALE}: the scan's pixel scale "
                         "relative to full-resolution logs (1.0 = 480-640 px tall, about 300 dpi; a 150-dpi scan "
                         f"is 0.5), got {value!r}")
    return float(value)


def resampling_for(scan_size: tuple[int, int], model_scale: float | None, scan_scale: float | None = None,
         max_pixels: int = DEFAULT_MAX_PIXELS) -> Resampling:
    """The size a (height, width) scan runs at for a model trained at `model_scale`; an enlargement
    stops at `max_pixels`, the limit a scan itself is held to."""
    height, width = int(scan_size[0]), int(scan_size[1])
    stated = scan_scale is not None
    scale = float(scan_scale) if scan_scale is not None else height / NOMINAL_HEIGHT
    factor = 1.0 if model_scale is None else model_scale / scale  # what would bring it to the model's scale
    if 1 / RESCALE_TOLERANCE <= factor <= RESCALE_TOLERANCE:
        return Resampling(model_scale, scale, not stated, (height, width), (height, width))
    # As little resampling as reaches the band read as it is: a reduced scan keeps more of its strokes' contrast
    # (seed 777, 60 full-resolution logs: 3.19 % mean error at the band's edge, 4.50 % at the model's own scale).
    factor = factor * RESCALE_TOLERANCE if factor < 1 else factor / RESCALE_TOLERANCE
    factor = min(factor, max(1.0, (max_pixels / (height * width)) ** 0.5))
    size = (max(MIN_SIDE, round(height * factor)), max(MIN_SIDE, round(width * factor)))
    return Resampling(model_scale, scale, not stated, (height, width), size)


def resample_image(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """uint8 (H, W) scan -> uint8 `size`: area averages when reducing (ink kept in proportion to the
    pixel it falls in, as a scanner at that resolution would), bilinear when enlarging."""
    if image.shape == size:
        return image
    import torch  # here, not at the top: the API checks scan scales with this module and never resamples
    import torch.nn.functional as F

    ink = torch.from_numpy(image).to(torch.float32)[None, None]
    if size[0] <= image.shape[0] and size[1] <= image.shape[1]:
        out = F.adaptive_avg_pool2d(ink, size)
    else:
        out = F.interpolate(ink, size=size, mode="bilinear", align_corners=False)
    return np.asarray(out[0, 0].round().clamp(0, 255).to(torch.uint8).numpy())


def scaled_calibration(calibration: Calibration, scan_size: tuple[int, int], size: tuple[int, int]) -> Calibration:
    """The same calibration on a grid of `size`: track rows and depth columns moved with pixel centres."""
    fr, fc = size[0] / scan_size[0], size[1] / scan_size[1]
    d = calibration.depth
    depth = DepthScale(d.unit, to_grid(d.col_a, fc), d.depth_a, to_grid(d.col_b, fc), d.depth_b)
    top = min(max(to_grid(calibration.track_top, fr), 0.0), size[0] - 1.0)
    bottom = min(max(to_grid(calibration.track_bottom, fr), top + 1e-3), size[0] - 1.0)
    return replace(calibration, depth=depth, track_top=top, track_bottom=bottom)


def scan_curves(probabilities: np.ndarray, calibration: Calibration, resampling: Resampling,
                options: TraceOptions | None = None, scan: ScanPixels | None = None) -> Digitised:
    """Probabilities on the model's grid -> curves of the scan, named on the `scan`'s own pixels
    (`identity.name_traces`) and read on the calibration's depth step (plain `digitise` when the grids are
    one). On a scan reduced for the model, a curve held flat along an edge, which the model does not mark, is
    added to its probabilities where the hints tell the track's curves apart (`pinned.with_pinned`), and the
    scan's ink inside the model's bands
    (`refine.full_resolution_ink`) is where the curves are read: a curve alone in its track is traced on
    it, and curves that share a track are traced on the model's grid (the joint tracer), mapped
    to the scan's columns and moved onto it (`refine.snap_trace`). An enlarged scan, or one without its
    pixels, is traced on the model's grid and mapped.

    On a reduced scan the full-resolution track is too tall for the joint tracer, so the mapped traces are
    named afresh by their looks on the scan. Where the joint tracer traced each curve as itself from its
    hints on the model's grid, its names are a second opinion: a curve the two namings read differently,
    or that the tracer's names leave ambiguous, is flagged ambiguous (`identity.checked_against`). Either
    naming alone named curves wrong without a flag that the other caught (bench/README.md, 2026-11-26).
    A curve that is the only one of its declared ink in a track where every curve declares one (`dark`
    beside `light`, or a colour on a colour scan) is then read from its own trace on the scan's ink of that
    tone or colour (`tones.traced_by_tone`), where that trace found it; its name and verdict are the naming's.

    On a reduced scan, depth numbers printed inside the track (`track_numbers.number_pixels`) are taken out of
    the model's probabilities and of the scan's ink before anything is traced.
    """
    options = options or TraceOptions()
    numbers = None  # on a reduced scan: the depth numbers printed in the track, which are no curve's ink
    if scan is not None and resampling.reduced:
        numbers = number_pixels(scan.gray, page_of(scan, calibration.track_top, calibration.track_bottom),
                                calibration.track_top, calibration.track_bottom)
        probabilities = without_numbers(probabilities, numbers)
    probabilities = with_pinned(probabilities, scan, calibration, resampling.reduced, options.threshold)
    grid = on_model_grid(options, resampling)
    if not resampling.resampled:
        return digitise(probabilities, calibration, grid, scan)
    calibration.check(*resampling.scan_size)
    ink = None
    toned: list[ColumnTrace] = []
    alone: set[int] = set()
    if scan is not None and resampling.reduced:
        page = page_of(scan, calibration.track_top, calibration.track_bottom)
        if len(calibration.curves) == 1:
            full = full_resolution_ink(probabilities, scan.gray, page, calibration.track_top, calibration.track_bottom)
            if numbers is not None:  # the scan's own grid: each pixel its own reduced pixel
                full = without_numbers(full, numbers)
            return digitise(full, calibration, options, scan)  # the scan's own grid: not the model's
        ink = ink_mask(probabilities, scan.gray, page, calibration.track_top, calibration.track_bottom)
        if numbers is not None:
            ink &= ~numbers[None]
    small = scaled_calibration(calibration, resampling.scan_size, resampling.model_size)
    # Several curves of one channel are traced with their ink's tone: the scan, on the model's grid.
    small_scan = None if scan is None else ScanPixels(
        resample_image(scan.gray, resampling.model_size),
        None if scan.colour is None else np.stack([resample_image(np.ascontiguousarray(scan.colour[..., c]),
                                                                  resampling.model_size) for c in range(3)], axis=-1),
        scan.one_bit)
    traces = trace_channels(probabilities, small, grid, small_scan)
    width = resampling.scan_size[1]
    mapped = [map_trace(t, width, calibration.track_top, calibration.track_bottom) for t in traces]
    if ink is not None:
        mapped = snapped(mapped, ink, calibration, resampling)
        if ink.shape[0] == 1 and scan is not None:  # a binary model: every curve's ink in one plane
            toned, alone = traced_by_tone(mapped, ink[0], scan, page, calibration, options)
    # `small`, not `calibration`: whether the joint tracer named them is decided on the grid it traced
    by_tracer = assigned_by_tracer(probabilities.shape[0], small, grid)
    shared = one_channel(probabilities.shape[0], calibration)
    if ink is None:  # an enlarged scan, or none: named as the joint tracer named them, where it did
        named = name_traces(mapped, calibration, scan, assigned=by_tracer, one_channel=shared)
    else:
        named = name_traces(mapped, calibration, scan, checked=by_tracer, one_channel=shared)
        if alone:
            named = replace(named, traces=[filled(toned[k], trace, (0, *calibration.curves[k].wrap_levels))
                                           if k in alone else trace
                                           for k, trace in enumerate(named.traces)])
    return calibrate(named, calibration, resampling.scan_size)


def on_model_grid(options: TraceOptions, resampling: Resampling) -> TraceOptions:
    """The tracer's options for probabilities on the grid the model read the scan at. Where that grid is
    at the model's scale (within RESCALE_TOLERANCE, as `resampling_for` brings every scan), its tracks are
    traced jointly up to the height a track can have at that scale (`curves.joint_max_rows`)."""
    if resampling.model_scale is None:
        return options
    grid_scale = resampling.scan_scale * resampling.model_size[0] / resampling.scan_size[0]
    if grid_scale > RESCALE_TOLERANCE * resampling.model_scale * (1 + 1e-6):
        return options  # read finer than the model's scale (as it is): the scan's own tracks
    return replace(options, joint_max_rows=max(options.joint_max_rows, joint_max_rows(resampling.model_scale)))


def snapped(traces: list[ColumnTrace], ink: np.ndarray, calibration: Calibration,
            resampling: Resampling) -> list[ColumnTrace]:
    """Mapped traces (one per calibrated curve) moved onto the scan's ink of their own channel (`ink`:
    `refine.ink_mask`, one plane per curve channel), within a reduced pixel and a half of where the model's
    grid put them."""
    reach = int(np.ceil(1.5 * resampling.scan_size[0] / resampling.model_size[0]))
    channel_of = {curve: channel for channel, members in channel_plan(ink.shape[0] + 1, len(traces))
                  for curve in members}
    return [snap_trace(trace, ink[channel_of[k] - 1], calibration.track_top, calibration.track_bottom, reach)
            for k, trace in enumerate(traces)]


def map_trace(trace: ColumnTrace, width: int, track_top: float, track_bottom: float) -> ColumnTrace:
    """A trace of a narrower grid -> one per column of a `width`-column scan: positions (unwrapped track
    fractions, continuous across wraps) and confidences interpolated between the two nearest columns,
    wrap level and bridging from the nearest; rows from the scan's own track borders."""
    small = trace.u.size
    x = np.clip(to_grid(np.arange(width), small / width), 0, small - 1)
    i0 = np.minimum(np.floor(x).astype(np.int64), max(small - 2, 0))
    i1 = np.minimum(i0 + 1, small - 1)
    t = x - i0
    nearest = np.rint(x).astype(np.int64)
    u = trace.u[i0] * (1 - t) + trace.u[i1] * t
    u = np.where(np.isfinite(u), u, trace.u[nearest])
    conf = np.where(np.isfinite(u), trace.confidence[i0] * (1 - t) + trace.confidence[i1] * t, 0)  # 0, never NaN
    level = np.where(np.isfinite(u), trace.level[nearest], 0).astype(np.int8)
    row = track_top + (u - level) * (track_bottom - track_top)
    return ColumnTrace(u, level, row, conf.astype(np.float32), trace.bridged[nearest] & np.isfinite(u))

