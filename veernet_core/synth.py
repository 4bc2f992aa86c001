"""Synthetic scanned well logs with exact ground truth, generated lazily and deterministically.

A log is a pure function of (seed, index, scale, classes): the same arguments give byte-identical
arrays in any process, and no global RNG is touched. `classes` only changes the mask's labels, never
the drawing. Pixel (r, c) has its centre at row r, column c. A curve's `row` is the exact centre of
its drawn stroke in that column, and the mask is the stroke's footprint: the pixels whose centre
lies in the stroke's vertical span, so the centroid of a column's mask pixels is within half a pixel
of `row`. The skew is a horizontal shear of the page about the track's centre row; it moves columns,
never rows, so `row` maps to a value through the track rows alone (see `SynthLog.depth_at`).

Each curve class has its own line style, as on paper logs, where the header says which style is
which curve: the first curve (mask class 1) is always solid, the second (class 2) always dashed with
a fixed period (`synth_draw.dash_period`). Its gaps are bare paper, so they are background in the
mask, while its truth (`values`, `row`) runs on through them; `inked` says where ink is.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from veernet_core import synth_draw as draw
from veernet_core.data import MIN_SIDE

WIDTH_RANGE = (3200, 12800)
HEIGHT_RANGE = (480, 640)
MAX_SKEW_DEGREES = 0.5


@dataclass(frozen=True)
class TrackScale:
    """How a curve's value maps across the track: `left` at the track's top row, `right` at its bottom."""

    left: float
    right: float
    log: bool  # log10 interpolation between left and right
    mnemonic: str
    unit: str

    def _ends(self) -> tuple[float, float]:
        return (math.log10(self.left), math.log10(self.right)) if self.log else (self.left, self.right)

    def to_fraction(self, value: np.ndarray) -> np.ndarray:
        """Value -> position across the track (0 top, 1 bottom); values off the scale fall outside 0..1."""
        v = np.asarray(value, dtype=np.float64)
        if self.log:
            positive = v > 0
            v = np.where(positive, np.log10(np.where(positive, v, 1.0)), np.nan)
        a, b = self._ends()
        return (v - a) / (b - a)

    def to_value(self, fraction: np.ndarray) -> np.ndarray:
        a, b = self._ends()
        x = a + np.asarray(fraction, dtype=np.float64) * (b - a)
        return np.power(10.0, x) if self.log else x

    def backup(self, direction: int) -> TrackScale:
        """The scale one track width further on: past `right` for direction +1, past `left` for -1."""
        a, b = self._ends()
        far = b + (b - a) if direction > 0 else a - (b - a)
        far_value = 10.0**far if self.log else far
        left, right = (self.right, far_value) if direction > 0 else (far_value, self.left)
        return TrackScale(left, right, self.log, self.mnemonic, self.unit)


@dataclass(frozen=True)
class DepthCalibration:
    """Depth at column 0 (`top`) and at the last column (`bottom`); depth runs along the width."""

    top: float
    bottom: float
    unit: str

    def depth_of_column(self, col: np.ndarray, width: int) -> np.ndarray:
        if width < 2:
            raise ValueError(f"depth calibration needs an image at least 2 columns wide, got {width}")
        return self.top + np.asarray(col, dtype=np.float64) * (self.bottom - self.top) / (width - 1)


@dataclass
class CurveTruth:
    name: str
    mnemonic: str
    scale: TrackScale
    values: np.ndarray  # float64 per column, NaN where the curve is absent (dashed gaps keep their values)
    row: np.ndarray  # float64 centre row of the drawn stroke per column, NaN where absent
    wrapped: np.ndarray  # bool per column: drawn on backup_scale there
    backup_scale: TrackScale | None  # None when the curve never wraps
    dashed: bool
    stroke_px: int
    inked: np.ndarray = field(default_factory=lambda: np.ones(0, dtype=bool))  # bool per column: ink drawn

    def __post_init__(self) -> None:
        if self.inked.size == 0:
            self.inked = np.isfinite(self.values)


@dataclass
class SynthLog:
    image: np.ndarray  # uint8 (H, W), dark ink on light paper
    mask: np.ndarray  # uint8 (H, W): class of the curve whose stroke covers the pixel, 0 background
    curves: list[CurveTruth]
    depth: DepthCalibration
    track: tuple[int, int]  # rows of the top and bottom track borders: fraction 0 and 1 of every scale
    seed: int
    index: int
    classes: int = 3
    shear: float = 0.0  # page skew: paper column = image column - shear * (row - track centre row)

    def curve_class(self, position: int) -> int:
        """Mask class of curves[position]: 1 for every curve in the binary kind, 1 + position otherwise."""
        return 1 if self.classes == 2 else position + 1

    def depth_at(self, col: np.ndarray, row: np.ndarray) -> np.ndarray:
        """Depth of image points, undoing the skew (exact on the track's centre row for any `row`)."""
        pivot = (self.track[0] + self.track[1]) / 2
        paper_col = np.asarray(col, dtype=np.float64) - self.shear * (np.asarray(row, np.float64) - pivot)
        return self.depth.depth_of_column(paper_col, self.image.shape[1])

    def calibration(self) -> dict[str, Any]:
        """What a person would read off this log, in the form POST /segment and
        `veernet_core.digitise.calibration.Calibration.from_dict` take: depth ends, track borders, curve scales
        (with the side of the backup scale where the curve wraps), one output sample per column."""
        width = self.image.shape[1]
        curves = []
        for curve in self.curves:
            wrap = 0
            if curve.backup_scale is not None:
                wrap = 1 if curve.backup_scale.left == curve.scale.right else -1
            s = curve.scale
            curves.append({"mnemonic": s.mnemonic, "unit": s.unit, "left": s.left, "right": s.right,
                           "log": s.log, "wrap": wrap})
        step = (self.depth.bottom - self.depth.top) / (width - 1)
        return {"depth": {"top": self.depth.top, "bottom": self.depth.bottom, "unit": self.depth.unit},
                "curves": curves, "track_top": float(self.track[0]), "track_bottom": float(self.track[1]),
                "step": step}

    def truth_json(self) -> dict[str, Any]:
        """Ground truth as plain JSON types; NaN becomes None."""
        height, width = self.image.shape
        return {
            "seed": self.seed,
            "index": self.index,
            "height": height,
            "width": width,
            "classes": self.classes,
            "track": list(self.track),
            "shear": self.shear,
            "depth": asdict(self.depth),
            "curves": [_curve_json(c, self.curve_class(k)) for k, c in enumerate(self.curves)],
        }


def _curve_json(curve: CurveTruth, mask_class: int) -> dict[str, Any]:
    return {
        "name": curve.name,
        "mnemonic": curve.mnemonic,
        "class": mask_class,
        "scale": asdict(curve.scale),
        "backup_scale": None if curve.backup_scale is None else asdict(curve.backup_scale),
        "dashed": curve.dashed,
        "stroke_px": curve.stroke_px,
        "values": _json_floats(curve.values),
        "row": _json_floats(curve.row),
        "wrapped": curve.wrapped.tolist(),
        "inked": curve.inked.tolist(),
    }


def _json_floats(a: np.ndarray) -> list[float | None]:
    return [x if math.isfinite(x) else None for x in a.astype(np.float64).tolist()]


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
        raise ValueError(f"classes must be 2 (binary: curve vs background) or 3 (two curves), got {classes}")


def log_size(seed: int, index: int, scale: float = 1.0) -> tuple[int, int]:
    """(height, width) of log `index` without rendering it: widths uniform over 3,200-12,800 px and
    heights over 480-640 px at scale 1.0, each multiplied by scale and rounded; never below 32."""
    _check_arguments(seed, index, scale)
    rng = np.random.default_rng([seed, index, 0])
    width = int(rng.integers(WIDTH_RANGE[0], WIDTH_RANGE[1] + 1))
    height = int(rng.integers(HEIGHT_RANGE[0], HEIGHT_RANGE[1] + 1))
    return max(MIN_SIDE, round(height * scale)), max(MIN_SIDE, round(width * scale))


def generate(seed: int, index: int, scale: float = 1.0, classes: int = 3) -> SynthLog:
    """Render log `index` of the synthetic set `seed` with its ground truth."""
    _check_classes(classes)
    height, width = log_size(seed, index, scale)
    rng = np.random.default_rng([seed, index, 1])
    lay = draw.layout(rng, height, width, scale)
    depth = _depth_calibration(rng, width, scale)
    picks = rng.choice(len(CATALOGUE), size=2 if rng.random() < 0.7 else 1, replace=False)
    grid_scale = CATALOGUE[int(picks[0])][1]
    divisions = draw.division_fractions(rng, grid_scale.left, grid_scale.right, grid_scale.log)
    shear = float(rng.uniform(-1.0, 1.0) * math.tan(math.radians(MAX_SKEW_DEGREES)))
    page = draw.furniture(rng, lay, (depth.top, depth.bottom), divisions, scale)
    darkness = draw.shear_rows(page, shear, (lay.track_top + lay.track_bottom) / 2)
    curve_ink = np.zeros((height, width), np.float32)
    mask = np.zeros((height, width), np.uint8)
    curves: list[CurveTruth] = []
    for position, pick in enumerate(picks.tolist()):
        name, track_scale = CATALOGUE[pick]
        curve, half = _curve(rng, name, track_scale, lay, scale, dashed=position == 1)
        lo, hi = (np.where(curve.inked, curve.row + sign * half, np.nan) for sign in (-1, 1))
        coverage, footprint = draw.stroke(lo, hi, height)
        fade = draw.smooth_series(rng, width, rng.uniform(300, 1500) * scale, 0.5, 1.0)
        np.maximum(curve_ink, coverage * (fade * rng.uniform(0.75, 1.0)).astype(np.float32), out=curve_ink)
        mask[footprint] = 1 if classes == 2 else position + 1  # a later curve wins where strokes overlap
        curves.append(curve)
    darkness = 1 - (1 - darkness) * (1 - curve_ink)
    image = draw.finish(rng, draw.paper(rng, height, width), darkness)
    track = (lay.track_top, lay.track_bottom)
    return SynthLog(image, mask, curves, depth, track, seed, index, classes, shear)


def _depth_calibration(rng: np.random.Generator, width: int, scale: float) -> DepthCalibration:
    # 12-60 px per metre spans 1:1000 to 1:200 print scales scanned at about 300 dpi.
    unit = "m" if rng.random() < 0.6 else "ft"
    px_per_unit = rng.uniform(12, 60) * scale / (1.0 if unit == "m" else 3.2808)
    top = float(round(rng.uniform(50, 3000 if unit == "m" else 10000), -1))
    return DepthCalibration(top, top + (width - 1) / px_per_unit, unit)


def _curve(
    rng: np.random.Generator, name: str, scale: TrackScale, lay: draw.Layout, px_scale: float, dashed: bool
) -> tuple[CurveTruth, np.ndarray]:
    """One curve's truth and its stroke's half height per column; `dashed`: drawn in the second
    curve's style (see `synth_draw.dash_pattern`), else solid."""
    stroke_px = max(1, round(int(rng.choice([1, 2, 3], p=[0.5, 0.3, 0.2])) * px_scale))
    wrap_dir = int(rng.choice([-1, 1])) if rng.random() < 0.3 else 0
    fraction = draw.curve_fraction(rng, lay.width, px_scale, wrap_dir)
    if rng.random() < 0.25:  # logged over part of the interval only
        absent = max(1, round(rng.uniform(0.01, 0.08) * lay.width))
        fraction[slice(None, absent) if rng.random() < 0.5 else slice(-absent, None)] = np.nan
    inked = np.isfinite(fraction)
    if dashed:
        inked &= draw.dash_pattern(rng, lay.width, px_scale)
    wrapped = np.zeros(lay.width, dtype=bool)
    if wrap_dir:
        wrapped = fraction > 1 if wrap_dir > 0 else fraction < 0  # NaN compares False
    row, half = _trace(fraction, wrapped, wrap_dir, lay, stroke_px)
    backup = scale.backup(wrap_dir) if wrapped.any() else None
    drawn = (row - lay.track_top) / (lay.track_bottom - lay.track_top)
    values = scale.to_value(drawn)
    if backup is not None:
        values = np.where(wrapped, backup.to_value(drawn), values)
    truth = CurveTruth(name, scale.mnemonic, scale, values, row, wrapped, backup, dashed, stroke_px, inked)
    return truth, half


def _trace(
    fraction: np.ndarray, wrapped: np.ndarray, wrap_dir: int, lay: draw.Layout, stroke_px: int
) -> tuple[np.ndarray, np.ndarray]:
    """Centre row and half height of the ink span in every column.

    A column's span joins its own point to halfway towards each neighbour, like a polyline, plus half
    the stroke above and below. Across a wrap the trace instead runs to the track edge it leaves or
    enters by. The truth is the span's centre, so it is exactly the centre of what is drawn.
    """
    shift = np.where(wrapped, float(wrap_dir), 0.0)
    own = fraction - shift  # position on the scale the column is drawn on
    reach = [np.clip(own, 0.0, 1.0)]
    for step in (1, -1):
        neighbour = np.roll(fraction, step)
        neighbour_wrapped = np.roll(wrapped, step)
        edge = 0 if step == 1 else -1
        neighbour[edge], neighbour_wrapped[edge] = np.nan, False
        on_my_scale = neighbour - shift
        toward = np.where(neighbour_wrapped == wrapped, (own + on_my_scale) / 2, on_my_scale)
        reach.append(np.where(np.isfinite(neighbour), np.clip(toward, 0.0, 1.0), own))
    rows = lay.track_top + np.stack(reach) * (lay.track_bottom - lay.track_top)
    lo, hi = rows.min(axis=0) - stroke_px / 2, rows.max(axis=0) + stroke_px / 2
    return (lo + hi) / 2, (hi - lo) / 2


class SynthDataset(Dataset[dict[str, Any]]):
    """`size` synthetic logs, each rendered on demand from (seed, index)."""

    def __init__(self, size: int, scale: float = 1.0, classes: int = 3, seed: int = 0) -> None:
        if size < 0:
            raise ValueError(f"dataset size must be non-negative, got {size}")
        _check_arguments(seed, 0, scale)
        _check_classes(classes)
        self.size, self.scale, self.classes, self.seed = size, scale, classes, seed
        self._sizes: list[tuple[int, int]] | None = None

    def __len__(self) -> int:
        return self.size

    def sizes(self) -> list[tuple[int, int]]:
        """(height, width) of every item, without rendering any."""
        if self._sizes is None:
            self._sizes = [log_size(self.seed, i, self.scale) for i in range(self.size)]
        return list(self._sizes)

    def __getitem__(self, i: int) -> dict[str, Any]:
        if not 0 <= i < self.size:
            raise IndexError(f"index {i} out of range for a synthetic dataset of {self.size}")
        log = generate(self.seed, i, self.scale, self.classes)
        image = torch.from_numpy(log.image).to(torch.float32).div_(255.0).unsqueeze(0)
        return {"image": image, "mask": torch.from_numpy(log.mask.astype(np.int64)), "index": i}


def write_samples(
    out_dir: str | Path, n: int, seed: int = 0, scale: float = 1.0, classes: int = 3
) -> list[Path]:
    """Write logs 0..n-1 as log-XXXXX.png, log-XXXXX-mask.png (class * 120 gray) and log-XXXXX.json."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for i in range(n):
        log = generate(seed, i, scale, classes)
        stem = out / f"log-{i:05d}"
        paths = (stem.with_name(f"{stem.name}.png"), stem.with_name(f"{stem.name}-mask.png"))
        Image.fromarray(log.image).save(paths[0])
        Image.fromarray((log.mask * 120).astype(np.uint8)).save(paths[1])
        truth = stem.with_name(f"{stem.name}.json")
        truth.write_text(json.dumps(log.truth_json(), allow_nan=False))
        written += [*paths, truth]
    return written
