"""What a person reads off a scanned log to turn positions into numbers: the depth scale (two ends or two
ticks), each curve's track scale (left and right values, linear or logarithmic, the sides its backup
scales wrap to) and what tells the curves apart (line style, ink, points read off the scan), the track's
rows and the output depth step. Every field is checked and every bad one reported at once, so that a
bad calibration is one error naming each field to fix (POST /segment answers it with a 422). The fields,
their defaults and the hints' allowed values are listed in `veernet_core.digitise.calibration_fields`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from veernet_core.digitise.calibration_parse import parse_fields
from veernet_core.digitise.calibration_scales import (
    Anchor,
    CalibrationError,
    CurveScale,
    DepthScale,
    anchor_depth_problems,
    track_problems,
)

__all__ = ["Anchor", "Calibration", "CalibrationError", "CurveScale", "DepthScale", "to_grid"]

MAX_CURVES = 4  # curves one track may carry: the naming step tries every assignment of traces to curves


def to_grid(position: Any, factor: float) -> Any:
    """A row or column of the scan (a float or an array of them) on a grid `factor` times as fine; pixel
    centres at integers on both."""
    return (position + 0.5) * factor - 0.5


@dataclass(frozen=True)
class Calibration:
    depth: DepthScale
    curves: tuple[CurveScale, ...]
    track_top: float  # image row of the track's top border: fraction 0 of every scale
    track_bottom: float  # image row of its bottom border: fraction 1
    step: float  # output depth step, in depth.unit

    def check(self, height: int, width: int) -> None:
        errors = self.problems(height, width)
        if errors:
            raise CalibrationError(errors)

    def problems(self, height: int, width: int) -> dict[str, str]:
        """Every bad field for an image of this size, by dotted name; empty when the calibration holds."""
        errors = self.depth.problems("depth")
        if not 1 <= len(self.curves) <= MAX_CURVES:
            errors["curves"] = f"must list 1 to {MAX_CURVES} curves (one track), got {len(self.curves)}"
        for k, curve in enumerate(self.curves):
            errors.update(curve.problems(f"curves[{k}]"))
            errors.update(anchor_depth_problems(curve, self.depth, width, f"curves[{k}]"))
        errors.update(track_problems(self.track_top, self.track_bottom, height))
        if "depth.top" not in errors and "depth.bottom" not in errors:
            span = abs(float(self.depth.depth_of(width - 1) - self.depth.depth_of(0)))
            if not (math.isfinite(self.step) and 0 < self.step <= span):
                errors["step"] = f"must be positive and at most the scan's depth span ({span:g}), got {self.step!r}"
        return errors

    @classmethod
    def from_dict(cls, data: Any, height: int, width: int) -> Calibration:
        """Build and check a calibration from JSON-like data (fields: `calibration_fields.CALIBRATION_FIELDS`)
        for an image of this size; raises one CalibrationError naming every bad field."""
        depth, curves, rows, step, errors = parse_fields(data, height, width)
        if depth is not None and curves is not None and rows is not None and step is not None:
            calibration = cls(depth, curves, rows[0], rows[1], step)
            errors.update({k: v for k, v in calibration.problems(height, width).items() if k not in errors})
            if not errors:
                return calibration
        raise CalibrationError(errors)

    def to_dict(self) -> dict[str, Any]:
        d = self.depth
        depth = {"ticks": [[d.col_a, d.depth_a], [d.col_b, d.depth_b]], "unit": d.unit}
        return {"depth": depth, "curves": [c.to_dict() for c in self.curves],
                "track_top": self.track_top, "track_bottom": self.track_bottom, "step": self.step}
