"""What a person reads off a scanned log to turn positions into numbers: the depth scale (two ends or two
ticks), each curve's track scale (left and right values, linear or logarithmic, and the side its backup
scale wraps to), the track's rows and the output depth step; checked field by field, so that a bad
calibration is an error naming the field (POST /segment answers it with a 422).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


class CalibrationError(ValueError):
    """A calibration field makes no sense; ``field`` names it (dotted, as in the request)."""

    def __init__(self, field_name: str, message: str) -> None:
        self.field = field_name
        super().__init__(f"{field_name}: {message}")


@dataclass(frozen=True)
class CurveScale:
    """How one curve's value maps across the track: `left` at the track's top row, `right` at its bottom.

    `wrap` says where the curve's backup scale is: +1 one track width past `right` (the trace leaves
    the bottom edge and re-enters at the top), -1 one track width past `left`, 0 unknown (a wrap is
    then flagged and its values left null).
    """

    mnemonic: str
    unit: str
    left: float
    right: float
    log: bool = False
    wrap: int = 0

    def check(self, where: str) -> None:
        if not self.mnemonic.strip():
            raise CalibrationError(f"{where}.mnemonic", "must be a non-empty curve name such as GR")
        for name in ("left", "right"):
            value = getattr(self, name)
            if not math.isfinite(value):
                raise CalibrationError(f"{where}.{name}", f"must be a finite number, got {value!r}")
            if self.log and value <= 0:
                raise CalibrationError(f"{where}.{name}", f"must be positive on a logarithmic scale, got {value!r}")
        if self.left == self.right:
            raise CalibrationError(f"{where}.right", f"must differ from left ({self.left!r})")
        if self.wrap not in (-1, 0, 1):
            raise CalibrationError(f"{where}.wrap", f"must be -1, 0 or 1, got {self.wrap!r}")

    def _ends(self) -> tuple[float, float]:
        return (math.log10(self.left), math.log10(self.right)) if self.log else (self.left, self.right)

    def to_value(self, u: np.ndarray) -> np.ndarray:
        a, b = self._ends()
        x = a + np.asarray(u, dtype=np.float64) * (b - a)
        return np.power(10.0, x) if self.log else x


@dataclass(frozen=True)
class DepthScale:
    """Depth along the width: two (column, depth) points, from the scan's ends or from two ticks."""

    unit: str
    col_a: float
    depth_a: float
    col_b: float
    depth_b: float

    @classmethod
    def from_ends(cls, top: float, bottom: float, unit: str, width: int) -> DepthScale:
        """`top` at the first column, `bottom` at the last."""
        return cls(unit, 0.0, top, float(width - 1), bottom)

    def check(self, where: str, first: str = "top", second: str = "bottom") -> None:
        if not self.unit.strip():
            raise CalibrationError(f"{where}.unit", "must name the depth unit, such as m or ft")
        for name, value in ((first, self.depth_a), (second, self.depth_b)):
            if not math.isfinite(value):
                raise CalibrationError(f"{where}.{name}", f"must be a finite number, got {value!r}")
        if self.col_b <= self.col_a:
            raise CalibrationError(f"{where}.{second}", "must be at a later column than " + first)
        if self.depth_b <= self.depth_a:
            raise CalibrationError(f"{where}.{second}", f"({self.depth_b:g}) must be deeper than {first} "
                                   f"({self.depth_a:g}); depth runs left to right (flip a scan that runs "
                                   "the other way)")

    def depth_of(self, col: np.ndarray | float) -> np.ndarray:
        per_col = (self.depth_b - self.depth_a) / (self.col_b - self.col_a)
        return self.depth_a + (np.asarray(col, dtype=np.float64) - self.col_a) * per_col

    def column_of(self, depth: np.ndarray | float) -> np.ndarray:
        per_depth = (self.col_b - self.col_a) / (self.depth_b - self.depth_a)
        return self.col_a + (np.asarray(depth, dtype=np.float64) - self.depth_a) * per_depth


@dataclass(frozen=True)
class Calibration:
    depth: DepthScale
    curves: tuple[CurveScale, ...]
    track_top: float  # image row of the track's top border: fraction 0 of every scale
    track_bottom: float  # image row of its bottom border: fraction 1
    step: float  # output depth step, in depth.unit

    def check(self, height: int, width: int) -> None:
        self.depth.check("depth")
        if not self.curves:
            raise CalibrationError("curves", "must list at least one curve scale")
        for k, curve in enumerate(self.curves):
            curve.check(f"curves[{k}]")
        if not 0 <= self.track_top < height:
            raise CalibrationError("track_top", f"must be a row inside the image (0..{height - 1}), "
                                   f"got {self.track_top!r}")
        if not self.track_top < self.track_bottom < height:
            raise CalibrationError("track_bottom", f"must be below track_top ({self.track_top!r}) and inside the "
                                   f"image (< {height}), got {self.track_bottom!r}")
        span = abs(float(self.depth.depth_of(width - 1) - self.depth.depth_of(0)))
        if not (math.isfinite(self.step) and 0 < self.step <= span):
            raise CalibrationError("step", f"must be positive and at most the scan's depth span ({span:g}), "
                                   f"got {self.step!r}")

    @classmethod
    def from_dict(cls, data: dict[str, Any], height: int, width: int) -> Calibration:
        """Build and check a calibration from JSON-like data (see `to_dict`) for an image of this size.

        depth: {"top", "bottom", "unit"} for the scan's first and last columns, or
        {"ticks": [[col, depth], [col, depth]], "unit"}; curves: [{"mnemonic", "unit", "left", "right",
        "log", "wrap"}]; track_top / track_bottom default to the image's first and last rows.
        """
        depth = _depth_from_dict(_field(data, "depth", dict), width)
        raw_curves = _field(data, "curves", list)
        curves = tuple(_curve_from_dict(c, f"curves[{k}]") for k, c in enumerate(raw_curves))
        top = _number(data.get("track_top", 0), "track_top")
        bottom = _number(data.get("track_bottom", height - 1), "track_bottom")
        default_step = abs(float(depth.depth_of(1) - depth.depth_of(0)))  # one column
        calibration = cls(depth, curves, top, bottom, _number(data.get("step", default_step), "step"))
        calibration.check(height, width)
        return calibration

    def to_dict(self) -> dict[str, Any]:
        d = self.depth
        depth = {"ticks": [[d.col_a, d.depth_a], [d.col_b, d.depth_b]], "unit": d.unit}
        return {"depth": depth, "curves": [asdict(c) for c in self.curves],
                "track_top": self.track_top, "track_bottom": self.track_bottom, "step": self.step}


def _field(data: Any, name: str, kind: type) -> Any:
    if not isinstance(data, dict) or name not in data:
        raise CalibrationError(name, "is required")
    if not isinstance(data[name], kind):
        raise CalibrationError(name, f"must be a JSON {'object' if kind is dict else 'array'}")
    return data[name]


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CalibrationError(where, f"must be a finite number, got {value!r}")
    return float(value)


def _depth_from_dict(raw: dict[str, Any], width: int) -> DepthScale:
    unit = raw.get("unit")
    if not isinstance(unit, str):
        raise CalibrationError("depth.unit", "is required: the depth unit, such as m or ft")
    if "ticks" in raw:
        ticks = raw["ticks"]
        pairs = isinstance(ticks, list) and len(ticks) == 2
        if not (pairs and all(isinstance(t, list) and len(t) == 2 for t in ticks)):
            raise CalibrationError("depth.ticks", "must be two [column, depth] pairs")
        (c1, d1), (c2, d2) = ((_number(c, f"depth.ticks[{k}]"), _number(d, f"depth.ticks[{k}]"))
                              for k, (c, d) in enumerate(ticks))
        scale = DepthScale(unit, c1, d1, c2, d2)
        scale.check("depth", "ticks[0]", "ticks[1]")
        return scale
    scale = DepthScale.from_ends(_number(raw.get("top"), "depth.top"), _number(raw.get("bottom"), "depth.bottom"),
                                 unit, width)
    scale.check("depth")
    return scale


def _curve_from_dict(raw: Any, where: str) -> CurveScale:
    if not isinstance(raw, dict):
        raise CalibrationError(where, "must be an object with mnemonic, unit, left, right, log, wrap")
    log, wrap = raw.get("log", False), raw.get("wrap", 0)
    if not isinstance(log, bool):
        raise CalibrationError(f"{where}.log", f"must be true or false, got {log!r}")
    if isinstance(wrap, bool) or not isinstance(wrap, int):
        raise CalibrationError(f"{where}.wrap", f"must be -1, 0 or 1, got {wrap!r}")
    names = [raw.get(k, "") for k in ("mnemonic", "unit")]
    if not all(isinstance(n, str) for n in names):
        raise CalibrationError(f"{where}.mnemonic", "mnemonic and unit must be strings")
    return CurveScale(names[0], names[1], _number(raw.get("left"), f"{where}.left"),
                      _number(raw.get("right"), f"{where}.right"), log, wrap)
