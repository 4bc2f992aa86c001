"""Scoring a proposed page calibration against the full-page generator's truth (for analyse_eval.py).

A proposed section is matched to the true section it overlaps most (at least half of it); a true track to
the proposed track of that section nearest it; a proposed curve to the true curve whose header line it was
read on: `page_draw.header_slot` for the generator's pages, or a renderer's own (`slot`), from the rows it
printed each curve's name on.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from veernet_core.page_draw import header_slot
from veernet_core.page_spec import PageSpec, SectionSpec, TrackSpec

TRACK_TOLERANCE_PX = 2.0
DEPTH_TOLERANCE_IN = 0.02  # of paper: 2 ft at 1 in per 100 ft
# Which true curve of a track a header line read on a page row is: (row, section index, track index) -> the
# curve's index in the track, or None where the row is on no curve's line
Slot = Callable[[float, int, int], int | None]
CURVE_FIELDS = ("mnemonic", "unit", "left", "right", "style")
LEGEND_HINTS = ("ink", "weight")  # read off a curve's line sample; empty is no hint, not a field to fill in


@dataclass
class PageScore:
    turn_ok: bool = False
    tracks: int = 0
    tracks_found: int = 0
    track_errors: list[float] = field(default_factory=list)
    grids_linlog_ok: int = 0
    grids_divisions_ok: int = 0
    sections: int = 0
    scales_ok: int = 0
    fitted: int = 0
    depth_errors: dict[str, list[np.ndarray]] = field(default_factory=dict)  # by scale, in its unit, per row
    curve_fields: int = 0
    curve_fields_read: int = 0
    curve_fields_wrong: int = 0
    # per curve field: [proposed, proposed wrong]
    by_field: dict[str, list[int]] = field(default_factory=lambda: {name: [0, 0] for name in CURVE_FIELDS})
    curves: int = 0  # true curves of the tracks found
    curves_found: int = 0  # of them, those a proposed curve was read for (its header line, named or not)
    curves_extra: int = 0  # proposed curves on no true curve's header line
    # per legend hint: [true curves, proposed, proposed wrong]
    hints: dict[str, list[int]] = field(default_factory=lambda: {name: [0, 0, 0] for name in LEGEND_HINTS})
    geometry_ok: bool = True

    @property
    def curves_ok(self) -> bool:
        return self.curve_fields_wrong == 0 and self.curves_extra == 0 and all(
            wrong == 0 for _, _, wrong in self.hints.values())

    @property
    def no_correction(self) -> bool:
        return self.geometry_ok and self.curves_ok

    @property
    def complete(self) -> bool:
        return self.no_correction and self.curve_fields_read == self.curve_fields


def generator_slot(spec: PageSpec) -> Slot:
    """The generator's pages: the curve whose header line `page_draw` draws nearest the row."""
    def slot(row: float, section: int, track: int) -> int | None:
        truth = spec.sections[section]
        return header_slot(row, truth, len(truth.tracks[track].curves), spec.dpi)
    return slot


def score_page(spec: PageSpec, proposal: dict[str, Any], slot: Slot | None = None) -> PageScore:
    """A proposal against the page's truth; `slot` tells which curve a header line read is (default: the
    generator's header geometry)."""
    slot = slot or generator_slot(spec)
    score = PageScore(turn_ok=proposal["orientation"]["turn"]["value"] == spec.scan.turn)
    score.geometry_ok = score.turn_ok and len(proposal["sections"]) == len(spec.sections)
    for index, truth in enumerate(spec.sections):
        found = _matching_section(truth, proposal["sections"])
        score.sections += 1
        score.tracks += len(truth.tracks)
        if found is None:
            score.geometry_ok = False
            for track in truth.tracks:
                _missing_curves(score, track)
            continue
        _score_section(score, spec, truth, found, _in_section(slot, index))
    return score


def _in_section(slot: Slot, section: int) -> Callable[[float, int], int | None]:
    return lambda row, track: slot(row, section, track)


def _in_track(slot: Callable[[float, int], int | None], track: int) -> Callable[[float], int | None]:
    return lambda row: slot(row, track)


def _matching_section(truth: SectionSpec, sections: list[dict[str, Any]]) -> dict[str, Any] | None:
    def overlap(section: dict[str, Any]) -> float:
        rows = section["rows"]["value"]
        return min(rows["bottom"], truth.bottom) - max(rows["top"], truth.top)
    best = max(sections, key=overlap, default=None)
    return best if best is not None and overlap(best) >= 0.5 * (truth.bottom - truth.top) else None


def _score_section(score: PageScore, spec: PageSpec, truth: SectionSpec, found: dict[str, Any],
                   slot: Callable[[float, int], int | None]) -> None:
    scale_ok = found["scale"]["value"] == truth.scale_name
    score.scales_ok += scale_ok
    depth_ok = _score_depth(score, truth, found)
    tracks_ok = len(found["tracks"]) == len(truth.tracks)
    for t, true_track in enumerate(truth.tracks):
        tracks_ok &= _score_track(score, spec, true_track, found["tracks"], _in_track(slot, t))
    score.geometry_ok &= scale_ok and depth_ok and tracks_ok


def _score_depth(score: PageScore, truth: SectionSpec, found: dict[str, Any]) -> bool:
    ticks = found["depth"]["ticks"]["value"]
    if ticks is None:
        return False
    score.fitted += 1
    (row_a, depth_a), (row_b, depth_b) = ticks
    rows = np.arange(math.ceil(truth.top), math.floor(truth.bottom) + 1, dtype=np.float64)
    fitted = depth_a + (rows - row_a) * (depth_b - depth_a) / (row_b - row_a)
    errors = fitted - truth.depth_at(rows)
    score.depth_errors.setdefault(truth.scale_name, []).append(errors)
    return float(np.abs(errors).max()) <= DEPTH_TOLERANCE_IN / truth.scale.inches_per_unit


def _score_track(score: PageScore, spec: PageSpec, truth: TrackSpec, tracks: list[dict[str, Any]],
                 slot: Callable[[float], int | None]) -> bool:
    def error(track: dict[str, Any]) -> float:
        extent = track["extent"]["value"]
        return max(abs(extent["left"] - truth.left), abs(extent["right"] - truth.right))
    nearest = min(tracks, key=error, default=None)
    if nearest is None:
        _missing_curves(score, truth)
        return False
    score.track_errors.append(error(nearest))
    found = error(nearest) <= TRACK_TOLERANCE_PX
    score.tracks_found += found
    grid = nearest["grid"]["value"] or {}
    score.grids_linlog_ok += grid.get("scale") == truth.grid
    divisions_ok = grid.get("scale") == truth.grid and grid.get("divisions") == truth.divisions
    score.grids_divisions_ok += divisions_ok
    _score_curves(score, spec, truth, nearest["curves"], slot)
    return found and divisions_ok


def _missing_curves(score: PageScore, truth: TrackSpec) -> None:
    score.curve_fields += len(truth.curves) * len(CURVE_FIELDS)
    score.curves += len(truth.curves)
    for name in LEGEND_HINTS:
        score.hints[name][0] += len(truth.curves)


def _score_curves(score: PageScore, spec: PageSpec, truth: TrackSpec, curves: list[dict[str, Any]],
                  slot: Callable[[float], int | None]) -> None:
    """Each proposed curve against the true curve of the header line it was read on; a curve read where
    there is none, or a second one on a line, is extra (for the person to remove) and has every filled field
    wrong."""
    score.curve_fields += len(truth.curves) * len(CURVE_FIELDS)
    legend: dict[str, list[str | None]] = {"ink": [c.tone for c in truth.curves],
                                           "weight": truth.weights(spec.dpi)}
    for name in LEGEND_HINTS:
        score.hints[name][0] += len(truth.curves)
    score.curves += len(truth.curves)
    found = set()
    for curve in curves:
        k_read = slot(curve["header_row"])
        matched, k = k_read is not None and k_read not in found, k_read or 0
        if matched:
            found.add(k)
        score.curves_extra += not matched
        for name in CURVE_FIELDS:
            value = curve[name]["value"]
            if value is None:
                continue
            right = matched and _same(value, getattr(truth.curves[k], name), folded=name == "unit")
            score.curve_fields_read += matched
            score.curve_fields_wrong += not right
            score.by_field[name][0] += matched
            score.by_field[name][1] += not right
        for name in LEGEND_HINTS:  # a hint the legend does not give (weights alike) is wrong where proposed
            value = curve[name]["value"]
            if value is not None:
                score.hints[name][1] += matched
                score.hints[name][2] += not (matched and value == legend[name][k])
    score.curves_found += len(found)


def _same(value: Any, truth: Any, folded: bool = False) -> bool:
    """A field read against its truth: numbers to a part in a million; with `folded`, text in either case (a
    unit printed "mV" read "MV" is the same unit)."""
    if folded and isinstance(value, str) and isinstance(truth, str):
        return value.upper() == truth.upper()
    if isinstance(truth, int | float) and not isinstance(truth, bool):
        return isinstance(value, int | float) and math.isclose(float(value), float(truth), rel_tol=1e-6, abs_tol=1e-9)
    return bool(value == truth)


def summarise(scores: list[PageScore]) -> dict[str, Any]:
    def share(part: float, whole: float) -> float | None:
        return round(part / whole, 4) if whole else None
    tracks = sum(s.tracks for s in scores)
    sections = sum(s.sections for s in scores)
    fields = sum(s.curve_fields for s in scores)
    by_scale: dict[str, list[np.ndarray]] = {}
    for s in scores:
        for name, errors in s.depth_errors.items():
            by_scale.setdefault(name, []).extend(errors)
    depth = {name: {"rms": round(float(np.sqrt(np.mean(np.concatenate(e) ** 2))), 4),
                    "max": round(float(np.abs(np.concatenate(e)).max()), 4), "sections": len(e)}
             for name, e in sorted(by_scale.items())}
    one_inch = depth.get("1 in per 100 ft", {})
    return {"track_recall": share(sum(s.tracks_found for s in scores), tracks),
            "track_err_px": round(max((e for s in scores for e in s.track_errors), default=math.nan), 3),
            "depth_rms_ft": one_inch.get("rms"), "depth_max_ft": one_inch.get("max"),
            "depth_fitted": share(sum(s.fitted for s in scores), sections),
            "depth_scale_acc": share(sum(s.scales_ok for s in scores), sections),
            "linlog_acc": share(sum(s.grids_linlog_ok for s in scores), tracks),
            "divisions_acc": share(sum(s.grids_divisions_ok for s in scores), tracks),
            "turn_acc": share(sum(s.turn_ok for s in scores), len(scores)),
            "pages_no_correction": share(sum(s.no_correction for s in scores), len(scores)),
            "pages_geometry_ok": share(sum(s.geometry_ok for s in scores), len(scores)),
            "pages_complete": share(sum(s.complete for s in scores), len(scores)),
            "curve_fields_read": share(sum(s.curve_fields_read for s in scores), fields),
            "curve_fields_wrong": share(sum(s.curve_fields_wrong for s in scores), fields),
            "curves_found": share(sum(s.curves_found for s in scores), sum(s.curves for s in scores)),
            "curve_fields_by_name": {name: {what: share(sum(s.by_field[name][i] for s in scores),
                                                        fields // len(CURVE_FIELDS))
                                            for i, what in ((0, "read"), (1, "wrong"))} for name in CURVE_FIELDS},
            "curves_extra": sum(s.curves_extra for s in scores),
            **{f"{name}_{what}": share(sum(s.hints[name][i] for s in scores), sum(s.hints[name][0] for s in scores))
               for name in LEGEND_HINTS for i, what in ((1, "read"), (2, "wrong"))},
            "sections": sections, "tracks": tracks, "depth_by_scale": depth}
