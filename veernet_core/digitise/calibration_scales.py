"""The pieces of a calibration: a curve's scale and hints, the depth scale, and the error that names every
bad field; `veernet_core.digitise.calibration` puts them together and `calibration_parse` reads them from
JSON-like data."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from veernet_core.digitise.calibration_fields import INKS, LEGACY_WRAP, STYLES, WRAP_LEVELS, allowed_names


class CalibrationError(ValueError):
    """Calibration fields make no sense; ``errors`` maps each dotted field name (as in the request) to
    what to fix, and ``field`` is the first of them."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = dict(errors)
        self.field = next(iter(self.errors), "")
        super().__init__("; ".join(f"{name}: {message}" for name, message in self.errors.items()))


@dataclass(frozen=True)
class Anchor:
    """A point of a curve read off the scan by a person: its value at a depth, on its primary scale."""

    depth: float
    value: float


@dataclass(frozen=True)
class CurveScale:
    """How one curve's value maps across the track: `left` at the track's top row, `right` at its bottom;
    `wrap` names the sides with a backup scale (`calibration_fields.WRAP_LEVELS`); `style`, `ink`, `anchors`
    and `weight` are what the log says about this curve, used to tell it from the track's other curves."""

    mnemonic: str
    unit: str
    left: float
    right: float
    log: bool = False
    wrap: str = "none"
    style: str | None = None
    ink: str | None = None
    anchors: tuple[Anchor, ...] = ()
    weight: str | None = None  # thin or thick, against the track's other curves (`calibration_fields.WEIGHTS`)

    @property
    def wrap_levels(self) -> tuple[int, ...]:
        """Wrap levels (+1 past right, -1 past left) read on a declared backup scale."""
        return WRAP_LEVELS.get(self.wrap, ())

    def problems(self, where: str) -> dict[str, str]:
        errors: dict[str, str] = {}
        if not self.mnemonic.strip():
            errors[f"{where}.mnemonic"] = "must be a non-empty curve name such as GR"
        for name in ("left", "right"):
            value = getattr(self, name)
            if not math.isfinite(value):
                errors[f"{where}.{name}"] = f"must be a finite number, got {value!r}"
            elif self.log and value <= 0:
                errors[f"{where}.{name}"] = f"must be positive on a logarithmic scale, got {value!r}"
        if self.left == self.right:
            errors[f"{where}.right"] = f"must differ from left ({self.left!r})"
        if self.wrap not in WRAP_LEVELS:
            errors[f"{where}.wrap"] = f"must be one of {', '.join(WRAP_LEVELS)}, got {self.wrap!r}"
        for name, value, allowed in (("style", self.style, STYLES), ("ink", self.ink, INKS)):
            if value is not None and value not in allowed:
                errors[f"{where}.{name}"] = f"must be one of {', '.join(allowed)}, got {value!r}"
        for k, anchor in enumerate(self.anchors):
            if self.log and anchor.value <= 0:
                errors[f"{where}.anchors[{k}].value"] = f"must be positive on a logarithmic scale, got {anchor.value!r}"
        return errors

    def _ends(self) -> tuple[float, float]:
        return (math.log10(self.left), math.log10(self.right)) if self.log else (self.left, self.right)

    def to_value(self, u: np.ndarray) -> np.ndarray:
        a, b = self._ends()
        x = a + np.asarray(u, dtype=np.float64) * (b - a)
        return np.power(10.0, x) if self.log else x

    def to_fraction(self, value: float) -> float:
        """The track fraction (0 at the top border, 1 at the bottom) where the primary scale reads `value`."""
        a, b = self._ends()
        return ((math.log10(value) if self.log else value) - a) / (b - a)

    def to_dict(self) -> dict[str, Any]:
        return {"mnemonic": self.mnemonic, "unit": self.unit, "left": self.left, "right": self.right,
                "log": self.log, "wrap": self.wrap, "style": self.style, "ink": self.ink,
                "weight": self.weight, "anchors": [{"depth": a.depth, "value": a.value} for a in self.anchors]}


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

    def problems(self, where: str, first: str = "top", second: str = "bottom") -> dict[str, str]:
        errors: dict[str, str] = {}
        if not self.unit.strip():
            errors[f"{where}.unit"] = "must name the depth unit, such as m or ft"
        for name, value in ((first, self.depth_a), (second, self.depth_b)):
            if not math.isfinite(value):
                errors[f"{where}.{name}"] = f"must be a finite number, got {value!r}"
        if self.col_b <= self.col_a:
            errors[f"{where}.{second}"] = "must be at a later column than " + first
        elif self.depth_b <= self.depth_a:
            errors[f"{where}.{second}"] = (f"({self.depth_b:g}) must be deeper than {first} ({self.depth_a:g}); depth "
                                           "runs left to right (flip a scan that runs the other way)")
        return errors

    def depth_of(self, col: np.ndarray | float) -> np.ndarray:
        per_col = (self.depth_b - self.depth_a) / (self.col_b - self.col_a)
        return self.depth_a + (np.asarray(col, dtype=np.float64) - self.col_a) * per_col

    def column_of(self, depth: np.ndarray | float) -> np.ndarray:
        per_depth = (self.col_b - self.col_a) / (self.depth_b - self.depth_a)
        return self.col_a + (np.asarray(depth, dtype=np.float64) - self.depth_a) * per_depth


def track_problems(top: float, bottom: float, height: int) -> dict[str, str]:
    if not 0 <= top < height:
        return {"track_top": f"must be a row inside the image (0..{height - 1}), got {top!r}"}
    if not top < bottom < height:
        return {"track_bottom": f"must be below track_top ({top!r}) and inside the image (< {height}), got {bottom!r}"}
    return {}


def anchor_depth_problems(curve: CurveScale, depth: DepthScale, width: int, where: str) -> dict[str, str]:
    shallow, deep = sorted((float(depth.depth_of(0)), float(depth.depth_of(width - 1))))
    return {f"{where}.anchors[{k}].depth": f"must lie within the scan's depths ({shallow:g} to {deep:g}), "
            f"got {a.depth!r}" for k, a in enumerate(curve.anchors) if not shallow <= a.depth <= deep}


def unknown_names(raw: dict[str, Any], parent: str, where: str) -> dict[str, str]:
    """An error per field of `raw` that `parent` (as in calibration_fields) does not have."""
    allowed = allowed_names(parent)
    return {f"{where}.{name}" if where else str(name): f"unknown field; allowed: {', '.join(allowed)}"
            for name in raw if name not in allowed}


def wrap_name(value: Any) -> str | None:
    """A `wrap` value as its name: a name as it is, the older integers -1 / 0 / 1 mapped; None if neither."""
    if isinstance(value, str) and value in WRAP_LEVELS:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value in LEGACY_WRAP:
        return LEGACY_WRAP[value]
    return None
