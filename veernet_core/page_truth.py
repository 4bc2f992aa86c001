"""A generated page's truth put to use for digitising one of its sections: the analysis's proposal completed
as a person would complete it (curve names, units, scale ends, log and line style from the page's own
header, which the generator knows), each curve's true track fraction at any depth, and perfect class
probabilities for a track's turned crop (`bench/page_segment_eval.py --source truth`, which measures the
cropping, tracing, naming and merging without the model).

Only what the analysis left empty or cannot read is completed (the curves; depth ticks where it fitted
none): the geometry it found (orientation, rows, depth fit, track extents) stays its own, so what is
measured is what a user who fills in the blanks gets.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from veernet_core.digitise.calibration_scales import CurveScale
from veernet_core.digitise.section_calibration import HINTS, SectionCalibration
from veernet_core.digitise.section_export import SectionDigitised
from veernet_core.page_draw import header_slot
from veernet_core.page_spec import CurveSpec, SectionSpec, TrackSpec
from veernet_core.page_synth import SynthPage


def _triple(value: Any) -> dict[str, Any]:
    return {"value": value, "confidence": 1.0, "evidence": "filled in from the page's truth"}


def curve_fields(curve: CurveSpec, weight: str | None = None) -> dict[str, Any]:
    """A curve as its proposal entry, every field a triple: its header's name, unit, scale ends and line
    style, the ink its legend shows (dark or light), and the weight it reads off the legend where the track's
    pens differ (`synth_truth.legend_weights`; null: no hint)."""
    return {"mnemonic": _triple(curve.mnemonic), "unit": _triple(curve.unit), "left": _triple(float(curve.left)),
            "right": _triple(float(curve.right)), "log": _triple(curve.log), "style": _triple(curve.style),
            "ink": _triple(curve.tone), "weight": _triple(weight)}


def matched_tracks(proposal: dict[str, Any], page: SynthPage, section: int) -> list[int]:
    """For each proposed track of the section, the index of the true track whose borders are nearest."""
    truth = page.spec.sections[section].tracks
    found = proposal["sections"][section]["tracks"]

    def off(extent: dict[str, float], track: TrackSpec) -> float:
        return abs(extent["left"] - track.left) + abs(extent["right"] - track.right)
    return [min(range(len(truth)), key=lambda t: off(p["extent"]["value"], truth[t])) for p in found]


def complete_proposal(proposal: dict[str, Any], page: SynthPage, section: int, hints: str = "legend") -> dict[str, Any]:
    """The proposal with the section's curves as the page prints them (in the header's order; a name printed
    in two tracks made unique; the hints its legend gives: style, ink, weight), depth ticks where the analysis
    fitted none, and `section` set: what a person hands POST /segment after reading the header and the depth
    numbers. `hints`: "legend" as the legend gives them (the person reads them), "read" as the analysis read
    them off each curve's line sample and no more (empty where it read none), "none" without any."""
    if hints not in ("legend", "read", "none"):
        raise ValueError(f"hints: legend, read or none, not {hints!r}")
    done = copy.deepcopy(proposal)
    done["section"] = section
    spec = page.spec.sections[section]
    _complete_depth(done["sections"][section]["depth"], spec)
    seen: dict[str, int] = {}
    for track, t in zip(done["sections"][section]["tracks"], matched_tracks(proposal, page, section), strict=True):
        true = spec.tracks[t].curves
        read = _read_hints(track["curves"], spec, len(true), page.spec.dpi) if hints == "read" else [{}] * len(true)
        track["curves"] = [curve_fields(replace(c, mnemonic=_unique(c.mnemonic, seen)), weight)
                           for c, weight in zip(true, spec.tracks[t].weights(page.spec.dpi), strict=True)]
        if hints != "legend":  # the analysis's own readings ("read"), or none ("none": nothing read)
            for curve, said in zip(track["curves"], read, strict=True):
                curve.update({name: said.get(name, _triple(None)) for name in HINTS})
    return done


def _read_hints(proposed: list[dict[str, Any]], section: SectionSpec, count: int, dpi: int) -> list[dict[str, Any]]:
    """Per true curve of a track (`count`, in its header's order), the hints the analysis read off the line
    sample under its header line (`header_slot`), as proposed."""
    read: list[dict[str, Any]] = [{} for _ in range(count)]
    for curve in proposed:
        k = header_slot(curve["header_row"], section, count, dpi)
        if k is not None:
            read[k] = {name: curve[name] for name in HINTS if name in curve}
    return read



def _complete_depth(depth: dict[str, Any], truth: SectionSpec) -> None:
    """Depth ticks and unit where the analysis left them null: two depth numbers a person reads off the grid."""
    if depth["unit"]["value"] is None:
        depth["unit"] = _triple(truth.scale.unit)
    if depth["ticks"]["value"] is None:
        depth["ticks"] = _triple([[truth.top, truth.depth_top], [truth.bottom, truth.depth_bottom]])


def _unique(mnemonic: str, seen: dict[str, int]) -> str:
    """GR, then GR_2, GR_3: the generator may print one name in two tracks, and one LAS file holds them all."""
    seen[mnemonic] = seen.get(mnemonic, 0) + 1
    return mnemonic if seen[mnemonic] == 1 else f"{mnemonic}_{seen[mnemonic]}"


def true_fractions(page: SynthPage, section: int, track: int, rows: np.ndarray) -> list[np.ndarray]:
    """Each curve of a true track: its fraction across the track at page rows `rows` (upright, unskewed
    page), linear between drawn rows; NaN outside the rows it is drawn on."""
    spec = page.spec.sections[section]
    first_row = math.ceil(spec.top) + 1
    start = sum(len(t.curves) for t in spec.tracks[:track])
    out = []
    for k in range(len(spec.tracks[track].curves)):
        drawn = page.curve_fractions[section][start + k]
        x = np.asarray(rows, dtype=np.float64) - first_row
        inside = (x >= 0) & (x <= drawn.size - 1)
        out.append(np.where(inside, np.interp(x, np.arange(drawn.size), drawn), np.nan))
    return out


def truth_probabilities(page: SynthPage, calibration: SectionCalibration, matched: list[int]) -> list[np.ndarray]:
    """Per track of the calibration, a binary model's perfect probabilities (background, curve) on its
    turned crop: every true curve of the matched true track drawn one pixel wide, rows joined."""
    out = []
    for j in range(len(calibration.tracks)):
        crop = calibration.crop(j)
        height, width = crop.size
        curve = np.zeros((height, width), dtype=np.float32)
        true = page.spec.sections[calibration.index].tracks[matched[j]]
        rows = np.arange(crop.row0, crop.row1 + 1, dtype=np.float64)
        for f in true_fractions(page, calibration.index, matched[j], rows):
            x = true.left + f * (true.right - true.left) - crop.col0  # a crop row per crop column
            stroke_line(curve, x)
        out.append(np.stack([1.0 - curve, curve]))
    return out


def stroke_line(canvas: np.ndarray, x: np.ndarray) -> None:
    """Ink at row x[c] of each column c, joined to halfway to its neighbours (a steep curve stays one line)."""
    height = canvas.shape[0]
    prev = np.concatenate([x[:1], x[:-1]])
    after = np.concatenate([x[1:], x[-1:]])
    lo = np.fmin(x, np.fmin((x + prev) / 2, (x + after) / 2))
    hi = np.fmax(x, np.fmax((x + prev) / 2, (x + after) / 2))
    for c in np.flatnonzero(np.isfinite(x)).tolist():
        top, bottom = max(0, int(np.floor(lo[c] + 0.5))), min(height - 1, int(np.floor(hi[c] + 0.5)))
        canvas[top:bottom + 1, c] = 1.0


@dataclass(frozen=True)
class CurveScore:
    """One digitised curve against its truth, at the output depths where the truth is drawn."""

    track: int
    mnemonic: str
    coverage: float  # share of those depths with a value
    errors: np.ndarray  # |read - true| as a fraction of the track's range, where read


def read_fractions(values: np.ndarray, scale: CurveScale) -> np.ndarray:
    """A digitised curve's values as fractions across its track (NaN where it has none)."""
    read = np.full(values.shape, np.nan)
    found = np.isfinite(values)
    read[found] = [scale.to_fraction(float(v)) for v in values[found]]
    return read


def score_section(page: SynthPage, section: SectionDigitised, matched: list[int]) -> list[CurveScore]:
    """Every curve of a section digitised from a completed proposal (curves in the page's order, as
    `complete_proposal` lists them), position by position against the page's truth."""
    calibration = section.calibration
    rows = calibration.depth.column_of(section.depth)  # the page row of each output depth
    scores = []
    for curve, j in zip(section.curves, section.track_of, strict=True):
        k = [c.mnemonic for c in calibration.tracks[j].curves].index(curve.mnemonic)
        truth = true_fractions(page, calibration.index, matched[j], rows)[k]
        read = read_fractions(curve.values, calibration.tracks[j].curves[k])
        drawn = np.isfinite(truth)
        error = np.abs(read - truth)[drawn]
        coverage = float(np.isfinite(error).mean()) if error.size else 0.0
        scores.append(CurveScore(j, curve.mnemonic, coverage, error[np.isfinite(error)]))
    return scores
