"""JSON-like calibration data -> the parts of a `Calibration`, collecting every bad field.

Each part is read on its own (depth, each curve, each anchor, the track rows, the step), so that one bad
field never hides another: the user fixes them all in one round. Field names come from
`calibration_fields.CALIBRATION_FIELDS`; anything else is an error naming the allowed names.
"""

from __future__ import annotations

import math
from typing import Any

from veernet_core.digitise.calibration_fields import INKS, STYLES, WEIGHTS, WRAP_LEVELS
from veernet_core.digitise.calibration_scales import (
    Anchor,
    CalibrationError,
    CurveScale,
    DepthScale,
    track_problems,
    unknown_names,
    wrap_name,
)

Errors = dict[str, str]
Fields = tuple[DepthScale | None, tuple[CurveScale, ...] | None, tuple[float, float] | None, float | None, Errors]


def parse_fields(data: Any, height: int, width: int) -> Fields:
    """(depth, curves, (track_top, track_bottom), step, errors): each part None where it could not be read,
    and every problem found reading them; `Calibration.from_dict` checks the whole against the image."""
    if not isinstance(data, dict):
        raise CalibrationError({"calibration": "must be an object with depth, curves, track_top, track_bottom, step"})
    errors: Errors = unknown_names(data, "", "")
    depth = _depth(_required(data, "depth", dict, errors), width, errors)
    raw_curves = _required(data, "curves", list, errors)
    curves = [parse_curve(c, f"curves[{k}]", errors) for k, c in enumerate(raw_curves or [])]
    top, bottom, step = (parse_number(data[name], name, errors) if name in data else _missing(name, errors)
                         for name in ("track_top", "track_bottom", "step"))
    rows = None
    if top is not None and bottom is not None:  # checked even when other parts failed: one round of fixes
        errors.update(track_problems(top, bottom, height))
        rows = (top, bottom)
    read = None if raw_curves is None or None in curves else tuple(c for c in curves if c is not None)
    return depth, read, rows, step, errors


def _missing(name: str, errors: Errors) -> float | None:
    errors[name] = "is required"
    return None


def _required(data: dict[str, Any], name: str, kind: type, errors: Errors) -> Any:
    if name not in data:
        errors[name] = "is required"
        return None
    if not isinstance(data[name], kind):
        errors[name] = f"must be a JSON {'object' if kind is dict else 'array'}"
        return None
    return data[name]


def parse_number(value: Any, where: str, errors: Errors) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        errors[where] = f"must be a finite number, got {value!r}"
        return None
    return float(value)


def _depth(raw: dict[str, Any] | None, width: int, errors: Errors) -> DepthScale | None:
    if raw is None:
        return None
    errors.update(unknown_names(raw, "depth", "depth"))
    unit = raw.get("unit")
    if not isinstance(unit, str):
        errors["depth.unit"] = "is required: the depth unit, such as m or ft"
    if "ticks" in raw:
        if "top" in raw or "bottom" in raw:
            errors["depth"] = "give either top and bottom or ticks, not both"
        scale = _ticks(raw["ticks"], str(unit), errors)
        problems = scale.problems("depth", "ticks[0]", "ticks[1]") if scale else {}
    else:
        ends = [parse_number(raw[k], f"depth.{k}", errors) if k in raw else _missing(f"depth.{k}", errors)
                for k in ("top", "bottom")]
        scale = None if None in ends else DepthScale.from_ends(ends[0] or 0.0, ends[1] or 0.0, str(unit), width)
        problems = scale.problems("depth") if scale else {}
    errors.update({k: v for k, v in problems.items() if k not in errors})
    return scale if isinstance(unit, str) and not problems else None


def _ticks(ticks: Any, unit: str, errors: Errors) -> DepthScale | None:
    if not (isinstance(ticks, list) and len(ticks) == 2 and all(isinstance(t, list) and len(t) == 2 for t in ticks)):
        errors["depth.ticks"] = "must be two [column, depth] pairs"
        return None
    numbers = [parse_number(x, f"depth.ticks[{k}]", errors) for k, pair in enumerate(ticks) for x in pair]
    if None in numbers:
        return None
    c1, d1, c2, d2 = (float(x or 0.0) for x in numbers)
    return DepthScale(unit, c1, d1, c2, d2)


def parse_curve(raw: Any, where: str, errors: Errors) -> CurveScale | None:
    if not isinstance(raw, dict):
        errors[where] = ("must be an object with mnemonic, left, right and optional unit, log, wrap, style, ink, "
                         "weight, anchors")
        return None
    before = len(errors)
    errors.update(unknown_names(raw, "curves[]", where))
    mnemonic = raw.get("mnemonic")
    if not isinstance(mnemonic, str):
        errors[f"{where}.mnemonic"] = "is required: the curve's name, such as GR" if mnemonic is None else \
            f"must be a string, got {mnemonic!r}"
    unit = raw.get("unit", "")
    if not isinstance(unit, str):
        errors[f"{where}.unit"] = f"must be a string, got {unit!r}"
    ends = [parse_number(raw[k], f"{where}.{k}", errors) if k in raw else _missing(f"{where}.{k}", errors)
            for k in ("left", "right")]
    log = raw.get("log", False)
    if not isinstance(log, bool):
        errors[f"{where}.log"] = f"must be true or false, got {log!r}"
    wrap = wrap_name(raw.get("wrap", "none"))
    if wrap is None:
        errors[f"{where}.wrap"] = (f"must be one of {', '.join(WRAP_LEVELS)} (the sides with a backup scale; older "
                                   f"files: 0, 1 or -1), got {raw.get('wrap')!r}")
    style, ink, weight = (_choice(raw.get(name), f"{where}.{name}", allowed, errors)
                          for name, allowed in (("style", STYLES), ("ink", INKS), ("weight", WEIGHTS)))
    anchors = _anchors(raw.get("anchors", []), f"{where}.anchors", errors)
    if len(errors) > before:
        return None
    return CurveScale(str(mnemonic), str(unit), float(ends[0] or 0.0), float(ends[1] or 0.0), bool(log),
                      str(wrap), style, ink, anchors, weight)


def _choice(value: Any, where: str, allowed: tuple[str, ...], errors: Errors) -> str | None:
    """An optional hint (null or absent: no hint) that must be one of `allowed`."""
    if value is None:
        return None
    if not isinstance(value, str) or value.strip().lower() not in allowed:
        errors[where] = f"must be one of {', '.join(allowed)}, got {value!r}"
        return None
    return value.strip().lower()


def _anchors(raw: Any, where: str, errors: Errors) -> tuple[Anchor, ...]:
    if not isinstance(raw, list):
        errors[where] = "must be a list of {depth, value} points read off the scan"
        return ()
    anchors = []
    for k, point in enumerate(raw):
        if not isinstance(point, dict):
            errors[f"{where}[{k}]"] = "must be an object {depth, value}"
            continue
        errors.update(unknown_names(point, "curves[].anchors[]", f"{where}[{k}]"))
        depth, value = (parse_number(point[name], f"{where}[{k}].{name}", errors) if name in point
                        else _missing(f"{where}[{k}].{name}", errors) for name in ("depth", "value"))
        if depth is not None and value is not None:
            anchors.append(Anchor(depth, value))
    return tuple(anchors)
