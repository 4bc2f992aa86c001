"""Synthetic scanned well logs with exact ground truth, generated lazily and deterministically.

A log is a pure function of (seed, index, scale, classes, exclude): the same arguments give
byte-identical arrays in any process, and no global RNG is touched. `classes` only changes the mask's
labels, never the drawing. Pixel (r, c) has its centre at row r, column c. A curve's `row` is the exact
centre of its drawn stroke in that column, and the mask is the stroke's footprint: the pixels whose
centre lies in the stroke's vertical span, so the centroid of a column's mask pixels is within half a
pixel of `row`. The skew is a horizontal shear of the page about the track's centre row; it moves
columns, never rows, so `row` maps to a value through the track rows alone (see `SynthLog.depth_at`).

Nothing on a real log ties a curve's identity to its drawing order or to one line style, so nothing
here does either (`veernet_core.synth_factors` draws every factor per log): any curve in any style
(solid, dashed, dotted, dash-dot, each pen with its own period), ink from black to light gray, strokes
of 1 to 4 px, 1 to 4 curves per track crossing freely, two solid curves told apart by ink alone or by
nothing, backup scales past either edge or both, curves that stop and start again, linear and log
grids, depth numbers inside the track, low-resolution prints, 1-bit scans, JPEG, stains and skew up to
a degree. The truth records per curve its style, ink and wrap sides (what a header says, so a digitiser
can name the curves it traces) and per log its factors (`SynthLog.factors`), so an evaluation can
group by them. A broken style's gaps are bare paper, so they are background in the mask, while its
truth (`values`, `row`) runs on through them; `inked` says where ink is.

Masks: `classes=2` (what VeerNet trains on) marks every curve's ink 1. `classes=3` is the legacy
labelling by order, kept so that configs and checkpoints of the old multiclass model still validate
and run: the first curve of the calibration 1, every later one 2. On these pages nothing tells the
first curve from the others, so a model trained on it learns an arbitrary split; name curves from the
calibration's hints instead.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from veernet_core import synth_curves as shapes
from veernet_core import synth_draw as draw
from veernet_core import synth_factors as factors
from veernet_core import synth_scan as scan
from veernet_core.data import MIN_SIDE
from veernet_core.synth_factors import CurveLook, PageFactors
from veernet_core.synth_truth import (
    CurveTruth,
    DepthCalibration,
    SynthLog,
    TrackScale,
    pair_factors,
    wrap_sides,
)

__all__ = ["CATALOGUE", "HEIGHT_RANGE", "WIDTH_RANGE", "CurveTruth", "DepthCalibration", "SynthLog",
           "TrackScale", "generate", "log_size", "write_samples"]

WIDTH_RANGE = (3200, 12800)
HEIGHT_RANGE = (480, 640)


# Curve types seen on paper logs, with their usual track scales.
CATALOGUE: tuple[tuple[str, TrackScale], ...] = (
    ("Gamma Ray", TrackScale(0.0, 150.0, False, "GR", "API")),
    ("Spontaneous Potential", TrackScale(-80.0, 20.0, False, "SP", "mV")),
    ("Caliper", TrackScale(6.0, 16.0, False, "CALI", "in")),
    ("Deep Resistivity", TrackScale(0.2, 2000.0, True, "ILD", "ohm.m")),
    ("Shallow Resistivity", TrackScale(0.2, 2000.0, True, "LLS", "ohm.m")),
    ("Micro Resistivity", TrackScale(0.2, 200.0, True, "MSFL", "ohm.m")),
    ("Bulk Density", TrackScale(1.95, 2.95, False, "RHOB", "g/cm3")),
    ("Neutron Porosity", TrackScale(0.45, -0.15, False, "NPHI", "v/v")),
    ("Sonic", TrackScale(140.0, 40.0, False, "DT", "us/ft")),
)


def _check_arguments(seed: int, index: int, scale: float) -> None:
    if seed < 0 or index < 0:
        raise ValueError(f"seed and index must be non-negative, got seed={seed}, index={index}")
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")


def _check_classes(classes: int) -> None:
    if classes not in (2, 3):
        raise ValueError(f"classes must be 2 (binary: every curve's ink vs background) or 3 (legacy order "
                         f"classes: the first curve vs the later ones), got {classes}")


def log_size(seed: int, index: int, scale: float = 1.0) -> tuple[int, int]:
    """(height, width) of log `index` without rendering it: widths uniform over 3,200-12,800 px and
    heights over 480-640 px at scale 1.0, each multiplied by scale and rounded; never below 32."""
    _check_arguments(seed, index, scale)
    rng = np.random.default_rng([seed, index, 0])
    width = int(rng.integers(WIDTH_RANGE[0], WIDTH_RANGE[1] + 1))
    height = int(rng.integers(HEIGHT_RANGE[0], HEIGHT_RANGE[1] + 1))
    return max(MIN_SIDE, round(height * scale)), max(MIN_SIDE, round(width * scale))


def generate(seed: int, index: int, scale: float = 1.0, classes: int = 2, exclude: tuple[str, ...] = ()) -> SynthLog:
    """Render log `index` of the synthetic set `seed` with its ground truth; no factor level named in
    `exclude` (see `synth_factors.EXCLUDABLE`) is drawn."""
    _check_classes(classes)
    excluded = factors.check_exclude(exclude)
    height, width = log_size(seed, index, scale)
    rng = np.random.default_rng([seed, index, 1])
    held_rng = np.random.default_rng([seed, index, 2])  # curves held at an edge: the other draws stay as they were
    constant_rng = np.random.default_rng([seed, index, 3])  # curves held at a value inside the track: the same
    page = factors.page_factors(rng, excluded)
    lay = draw.layout(rng, height, width)
    depth = _depth_calibration(rng, width, scale * page.low_res)
    looks = factors.curve_looks(rng, page.curves, excluded)
    picks = rng.choice(len(CATALOGUE), size=len(looks), replace=False).tolist()
    grid_scale = CATALOGUE[picks[0]][1]
    divisions = draw.division_fractions(rng, grid_scale.left, grid_scale.right, grid_scale.log)
    shear = math.tan(math.radians(page.skew_degrees))
    furniture = draw.furniture(rng, lay, (depth.top, depth.bottom), divisions, scale, page.labels_in_track)
    grid_absorbance = np.float32(scan.absorbance(rng.uniform(10, 60)))
    transmit = 1 - draw.shear_rows(furniture, shear, (lay.track_top + lay.track_bottom) / 2) * grid_absorbance
    mask = np.zeros((height, width), np.uint8)
    curves: list[CurveTruth] = []
    for position, (pick, look) in enumerate(zip(picks, looks, strict=True)):
        name, track_scale = CATALOGUE[pick]
        held = factors.held_edge(held_rng, look.wrap, excluded)
        flat = shapes.constant(constant_rng, lay.width, np.concatenate(divisions)) \
            if factors.constant(constant_rng, excluded) else None
        curve, half = _curve(rng, name, track_scale, lay, (scale, page.low_res), look, (held, held_rng), flat)
        lo, hi = (np.where(curve.inked, curve.row + sign * half, np.nan) for sign in (-1, 1))
        coverage, footprint = draw.stroke(lo, hi, height)
        transmit *= 1 - _ink_layer(rng, curve, (coverage, footprint), page.bilevel != "none", scale)
        mask[footprint] = 1 if classes == 2 else min(position + 1, classes - 1)  # a later curve wins overlaps
        curves.append(curve)
    tone = scan.paper(rng, height, width)
    scan.stain(rng, tone, page.stains)
    image = scan.finish(rng, tone, transmit, page.bilevel)
    if page.jpeg_quality:
        image = scan.jpeg(image, page.jpeg_quality)
    track = (lay.track_top, lay.track_bottom)
    facts = _factors(page, curves, "log" if grid_scale.log else "linear")
    return SynthLog(image, mask, curves, depth, track, seed, index, classes, shear, facts)


def _ink_layer(rng: np.random.Generator, curve: CurveTruth, stroke: tuple[np.ndarray, np.ndarray],
               hard_edged: bool, scale: float) -> np.ndarray:
    """The absorbance of one curve's stroke per pixel: its ink, fading a little along the line, on the
    stroke's anti-aliased coverage, or on its footprint for a 1-bit scan (a hard pen, so that the
    threshold keeps the mask's pixels and only those)."""
    coverage, footprint = stroke
    if hard_edged:
        coverage = footprint.astype(np.float32)
    fade = shapes.smooth_series(rng, curve.row.size, rng.uniform(300, 1500) * scale, 0.85, 1.0)
    return coverage * (fade * scan.absorbance(curve.ink)).astype(np.float32)


def _factors(page: PageFactors, curves: list[CurveTruth], grid: str) -> dict[str, Any]:
    """The log's factors as JSON types: a flag per level an evaluation groups by, and its setting."""
    return {"bilevel": page.bilevel != "none", "bilevel_mode": page.bilevel,
            "jpeg": page.jpeg_quality > 0, "jpeg_quality": page.jpeg_quality,
            "low_res": page.low_res < 1.0, "depth_detail": page.low_res,
            "stains": page.stains > 0, "stain_count": page.stains,
            "skew": abs(page.skew_degrees) >= 0.5, "skew_degrees": page.skew_degrees,
            "labels_in_track": page.labels_in_track, "grid": grid, "held": any(c.held for c in curves),
            "constant": any(c.constant for c in curves),
            **pair_factors(curves)}


def _depth_calibration(rng: np.random.Generator, width: int, detail: float) -> DepthCalibration:
    # 12-60 px per metre spans 1:1000 to 1:200 print scales scanned at about 300 dpi; `detail` below the
    # scale is a low-resolution print.
    unit = "m" if rng.random() < 0.6 else "ft"
    px_per_unit = rng.uniform(12, 60) * detail / (1.0 if unit == "m" else 3.2808)
    top = float(round(rng.uniform(50, 3000 if unit == "m" else 10000), -1))
    return DepthCalibration(top, top + (width - 1) / px_per_unit, unit)


def _curve(
    rng: np.random.Generator, name: str, scale: TrackScale, lay: draw.Layout, px: tuple[float, float],
    look: CurveLook, held: tuple[int, np.random.Generator], flat: np.ndarray | None = None,
) -> tuple[CurveTruth, np.ndarray]:
    """One curve's truth and its stroke's half height per column. `px`: the image scale and the print's
    depth detail (below 1 for a low-resolution print); `held`: the edge the curve is held at (0: none) and
    the generator that draws how (`synth_factors.held_edge`); `flat`: the fraction per column of a curve held
    at a value inside the track (`synth_curves.constant`), which replaces the drawn shape, or None."""
    px_scale, detail = px
    fraction = shapes.curve_fraction(rng, lay.width, px_scale * detail, look.wrap)
    if held[0]:
        fraction = shapes.hold(held[1], fraction, held[0])  # drawn even for a flat curve: later draws stay
    if flat is not None:
        fraction, held = flat.copy(), (0, held[1])
    if rng.random() < 0.25:  # logged over part of the interval only
        absent = max(1, round(rng.uniform(0.01, 0.08) * lay.width))
        fraction[slice(None, absent) if rng.random() < 0.5 else slice(-absent, None)] = np.nan
    if look.interrupted:  # the curve stops and starts again (a tool switched off, a splice)
        start = round(rng.uniform(0.15, 0.75) * lay.width)
        fraction[start : start + max(2, round(rng.uniform(0.03, 0.15) * lay.width))] = np.nan
    side = np.where(fraction > 1, 1, np.where(fraction < 0, -1, 0)).astype(np.int8)  # NaN compares False
    row, half = _trace(fraction, side, lay, look.stroke_px)
    inked = shapes.style_ink(rng, look.style, row, px_scale)
    drawn = (row - lay.track_top) / (lay.track_bottom - lay.track_top)
    values = scale.to_value(drawn)
    for s in wrap_sides(look.wrap):
        values = np.where(side == s, scale.backup(s).to_value(drawn), values)
    truth = CurveTruth(name, scale.mnemonic, scale, values, row, side, look.wrap, look.style, look.ink,
                       look.stroke_px, inked, held=held[0], constant=flat is not None)
    return truth, half


def _trace(
    fraction: np.ndarray, side: np.ndarray, lay: draw.Layout, stroke_px: int
) -> tuple[np.ndarray, np.ndarray]:
    """Centre row and half height of the ink span in every column.

    A column's span joins its own point to halfway towards each neighbour, like a polyline, plus half
    the stroke above and below. Across a wrap (the neighbour drawn on another scale) the trace instead
    runs to the track edge it leaves or enters by. The truth is the span's centre, so it is exactly the
    centre of what is drawn.
    """
    shift = side.astype(np.float64)
    own = fraction - shift  # position on the scale the column is drawn on
    reach = [np.clip(own, 0.0, 1.0)]
    for step in (1, -1):
        neighbour = np.roll(fraction, step)
        neighbour_side = np.roll(side, step)
        edge = 0 if step == 1 else -1
        neighbour[edge], neighbour_side[edge] = np.nan, 0
        on_my_scale = neighbour - shift
        toward = np.where(neighbour_side == side, (own + on_my_scale) / 2, on_my_scale)
        reach.append(np.where(np.isfinite(neighbour), np.clip(toward, 0.0, 1.0), own))
    rows = lay.track_top + np.stack(reach) * (lay.track_bottom - lay.track_top)
    lo, hi = rows.min(axis=0) - stroke_px / 2, rows.max(axis=0) + stroke_px / 2
    return (lo + hi) / 2, (hi - lo) / 2


def write_samples(
    out_dir: str | Path, n: int, seed: int = 0, scale: float = 1.0, classes: int = 2,
    exclude: tuple[str, ...] = (),
) -> list[Path]:
    """Write logs 0..n-1 as log-XXXXX.png, log-XXXXX-mask.png (class * 120 gray) and log-XXXXX.json."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for i in range(n):
        log = generate(seed, i, scale, classes, exclude)
        stem = out / f"log-{i:05d}"
        paths = (stem.with_name(f"{stem.name}.png"), stem.with_name(f"{stem.name}-mask.png"))
        Image.fromarray(log.image).save(paths[0])
        Image.fromarray((log.mask * 120).astype(np.uint8)).save(paths[1])
        truth = stem.with_name(f"{stem.name}.json")
        truth.write_text(json.dumps(log.truth_json(), allow_nan=False))
        written += [*paths, truth]
    return written
