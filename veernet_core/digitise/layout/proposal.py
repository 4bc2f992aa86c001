"""The proposed calibration of a page, as JSON: every field a `{"value", "confidence", "evidence"}` triple,
a value of null where nothing could be read (never a guess), and `messages` saying what to supply.

Positions are pixels of the upright page: the scan turned `orientation.turn` degrees clockwise, then
rotated by `-orientation.skew_deg` degrees (counter-clockwise positive) about its centre, same size. Rows
run down the page (depth), columns across it (values). Completed by a person (the null values filled in,
any wrong one corrected), a section of it is the calibration POST /segment takes for a whole section.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from veernet_core.digitise.layout.analyse import Analysis, SectionFinding, analyse_image
from veernet_core.digitise.layout.headers import CurveHeader, Reading
from veernet_core.digitise.layout.page import load_scan
from veernet_core.digitise.layout.tracks import Interval, ValueGrid
from veernet_core.digitise.predict import DEFAULT_MAX_PIXELS

FORMAT = "veernet.page-calibration/1"


def proposed(value: Any, confidence: float, evidence: str) -> dict[str, Any]:
    return {"value": value, "confidence": round(float(np.clip(confidence, 0, 1)), 3) if value is not None else 0.0,
            "evidence": evidence}


def to_proposal(analysis: Analysis) -> dict[str, Any]:
    upright = analysis.upright
    height, width = upright.page.gray.shape
    messages: list[str] = []
    if analysis.ocr_problem:
        messages.append(f"{analysis.ocr_problem}: depth numbers and curve names were not read")
    if analysis.dpi is None:
        messages.append("the file states no resolution: depth scales were named assuming an 8.5 in wide page; "
                        "check each section's scale")
    if not analysis.sections:
        messages.append("no log grid found (no run of evenly spaced depth lines): supply each section's rows, "
                        "track columns and two depth ticks by hand, or check that the scan is a log")
    sections = [_section(k, finding, analysis, messages) for k, finding in enumerate(analysis.sections)]
    return {"format": FORMAT,
            "image": {"height": analysis.image_size[0], "width": analysis.image_size[1], "dpi": analysis.dpi},
            "page": {"height": height, "width": width},
            "orientation": _orientation(analysis),
            "header": _header(analysis),
            "sections": sections,
            "messages": messages}


def _orientation(analysis: Analysis) -> dict[str, Any]:
    upright = analysis.upright
    above, below = upright.ink_above, upright.ink_below
    share = abs(above - below) / max(above + below, 1)
    evidence = (f"portrait with {above} ink pixels above the first grid and {below} below the last: the header "
                "block is at the top" if analysis.sections else "portrait by shape only: no grid was found")
    turn = proposed(upright.turn, 0.5 + 0.5 * share if analysis.sections else 0.3, evidence)
    skew = upright.skew
    if skew is None:
        return {"turn": turn, "skew_deg": proposed(0.0, 0.2, "too few long vertical lines to measure a skew")}
    confidence = min(1.0, skew.bands / 6) * float(np.clip(1 - skew.residual_px / 3, 0.1, 1))
    return {"turn": turn, "skew_deg": proposed(round(skew.degrees, 4), confidence,
                                               f"track borders drift {skew.slope * 1000:.2f} px per 1000 rows in "
                                               f"{skew.bands} bands of rows, {skew.residual_px:.2f} px RMS off a "
                                               "straight line")}


def _header(analysis: Analysis) -> dict[str, Any]:
    if analysis.header is None:
        return proposed(None, 0, "no ink above the first track headers")
    top, bottom = analysis.header
    return proposed({"top": top, "bottom": bottom}, 0.8, "the ink above the first section's track headers")


def _section(k: int, finding: SectionFinding, analysis: Analysis, messages: list[str]) -> dict[str, Any]:
    rows, name = finding.rows, f"section {k + 1}"
    grid_confidence = _grid_confidence(finding)
    body = proposed({"top": round(rows.top, 1), "bottom": round(rows.bottom, 1)}, grid_confidence,
                    f"{len(rows.lines)} depth lines {rows.spacing:.2f} px apart, from frame line to frame line")
    strip = proposed({"top": finding.strip_top, "bottom": round(rows.top, 1)}, 0.8 if finding.strip_top < rows.top
                     else 0.0, "rows above the grid where its track borders carry on")
    return {"rows": body, "header_rows": strip, "scale": _scale(finding),
            "depth": _depth(finding, name, messages), "grid": _grid(finding),
            "depth_column": _depth_column(finding, name, messages),
            "tracks": [_track(finding, j, name, messages) for j in range(len(finding.tracks))]}


def _grid_confidence(finding: SectionFinding) -> float:
    grid = finding.grid
    if grid is None:
        return 0.3
    return min(1.0, grid.lines / 20) * float(np.clip(1 - 3 * grid.lattice.residual_px / grid.lattice.spacing, 0, 1))


def _grid(finding: SectionFinding) -> dict[str, Any] | None:
    grid, pattern = finding.grid, finding.pattern
    if grid is None:
        return None
    return {"rows_per_line": round(grid.lattice.spacing, 4), "first_line_row": round(grid.lattice.origin, 2),
            "lines": grid.lines, "residual_px": round(grid.lattice.residual_px, 3),
            "medium_every": pattern.medium_every if pattern else None,
            "major_every": pattern.major_every if pattern else None,
            "first_major": pattern.phase if pattern else None,
            "pattern_score": round(pattern.score, 3) if pattern else None}


def _scale(finding: SectionFinding) -> dict[str, Any]:
    guess, pattern = finding.scale, finding.pattern
    if guess is None:
        return proposed(None, 0, "no depth grid to measure")
    pattern_fit = max(0.0, pattern.score) if pattern else 0.3
    confidence = pattern_fit ** 0.5 * math.exp(-math.log(guess.off) / 0.05) * (1.0 if guess.dpi_source == "file"
                                                                                else 0.5)
    evidence = (f"{finding.grid.lattice.spacing if finding.grid else 0:.2f} px per grid line at the resolution "
                f"from the {guess.dpi_source}: {guess.off:.3f}x off {guess.scale.name}'s; heavier lines every "
                f"{pattern.medium_every} and {pattern.major_every}" if pattern else "")
    if guess.rival is not None:  # the depth numbers did not decide between two scales the grid fits alike
        confidence *= 0.5
        evidence += f"; {guess.rival} fits the grid as well"
    return proposed(guess.scale.name, confidence, evidence)


def _depth(finding: SectionFinding, name: str, messages: list[str]) -> dict[str, Any]:
    grid, fit, guess = finding.grid, finding.fit, finding.scale
    unit = proposed(guess.scale.unit if guess else None, _scale(finding)["confidence"], "from the depth scale")
    labels = [{"row": round(lb.row, 1), "text": lb.text, "value": lb.value, "confidence": round(lb.confidence, 3),
               "inlier": (fit.labels[i].inlier if fit else False)} for i, lb in enumerate(finding.labels)]
    if grid is None or fit is None:
        read = sum(lb.value is not None for lb in finding.labels)
        messages.append(f"{name}: the depth numbers could not be fitted ({read} read of {len(finding.labels)} "
                        "found in the depth column): supply two depth ticks, depth.ticks = [[row, depth], "
                        "[row, depth]]")
        empty = proposed(None, 0, "no agreeing depth numbers")
        return {"unit": unit, "ticks": empty, "rows_per_unit": empty, "range": None, "residual": None,
                "labels": labels}
    last = int(grid.lattice.index.max())
    ticks = [[round(grid.row(k), 2), round(fit.first + fit.per_line * k, 6)] for k in (0, last)]
    read = sum(lb.value is not None for lb in finding.labels)
    confidence = (fit.votes / max(read, 1)) * min(1.0, fit.votes / 3) * _grid_confidence(finding)
    evidence = (f"{fit.votes} of {read} depth numbers agree on {fit.per_line:g} per grid line "
                f"({grid.lines} lines {grid.lattice.spacing:.3f} px apart); residual {fit.residual:.3f}")
    return {"unit": unit, "ticks": proposed(ticks, confidence, evidence),
            "rows_per_unit": proposed(round(grid.lattice.spacing / fit.per_line, 5), confidence, evidence),
            "range": [ticks[0][1], ticks[1][1]], "residual": round(fit.residual, 4), "labels": labels}


def _depth_column(finding: SectionFinding, name: str, messages: list[str]) -> dict[str, Any]:
    column = finding.depth_column
    if column is None:
        messages.append(f"{name}: no depth column (a space between track borders that the depth lines do not "
                        "cross) was found: supply depth ticks")
        return proposed(None, 0, "every space between borders is crossed by the depth lines")
    return proposed(_extent(column), 1 - column.depth_lines,
                    f"between borders, crossed by {column.depth_lines:.0%} of the depth lines")


def _extent(interval: Interval) -> dict[str, float]:
    return {"left": round(interval.left.centre, 2), "right": round(interval.right.centre, 2)}


def _track(finding: SectionFinding, j: int, name: str, messages: list[str]) -> dict[str, Any]:
    track, grid = finding.tracks[j], finding.value_grids[j]
    inked = min(track.left.coverage, track.right.coverage)
    extent = proposed(_extent(track), inked * min(1.0, track.depth_lines / 0.9), f"border lines inked along "
                      f"{inked:.0%} of the grid; crossed by {track.depth_lines:.0%} of its depth lines")
    curves = finding.curves[j] if j < len(finding.curves) else []
    unread = sum(curve.mnemonic.value is None for curve in curves)
    if unread:
        messages.append(f"{name} track {j + 1}: {unread} of its {len(curves)} curves' names could not be read (each "
                        "is proposed from its line sample, with the style, ink and weight read off it where they "
                        "could be, and from its line of text where its unit and scale ends could be read): supply "
                        "each one's mnemonic, and its unit, scale ends and style where they are empty, or remove it")
    if not curves:
        messages.append(f"{name} track {j + 1}: no curve name could be read in its header: supply each curve's "
                        "mnemonic, unit and scale ends")
    return {"extent": extent, "grid": _value_grid(grid), "curves": [_curve(c, grid) for c in curves]}


def _value_grid(grid: ValueGrid | None) -> dict[str, Any]:
    if grid is None:
        return proposed(None, 0, "no value-grid lines inside the track")
    return proposed({"scale": grid.scale, "divisions": grid.divisions}, grid.score * min(1.0, 0.5 + grid.margin),
                    f"{grid.lines} lines match a {grid.scale} grid of {grid.divisions} "
                    f"{'decades' if grid.scale == 'log' else 'divisions'} (F1 {grid.score:.2f}, "
                    f"{grid.margin:.2f} over the best {'linear' if grid.scale == 'log' else 'logarithmic'} one)")


def _curve(curve: CurveHeader, grid: ValueGrid | None) -> dict[str, Any]:
    def read(reading: Reading, what: str) -> dict[str, Any]:
        return proposed(reading.value, reading.confidence, f"{what} read in the track's header" if reading.value
                        is not None else f"no legible {what}")
    log = None if grid is None else grid.scale == "log"
    return {"mnemonic": read(curve.mnemonic, "name"), "unit": read(curve.unit, "unit"),
            "left": read(curve.left, "left scale end"), "right": read(curve.right, "right scale end"),
            "log": proposed(log, grid.score if grid else 0, "the track's value grid"),
            "style": read(curve.style, "line style sample"),
            "ink": proposed(curve.ink.value, curve.ink.confidence, "the line sample's darkness against the page's "
                            "black ink" if curve.ink.value is not None else "no ink read off the line sample (a "
                            "1-bit scan prints every ink black): a hint, so empty is no hint"),
            "weight": proposed(curve.weight.value, curve.weight.confidence, "the line sample's width against the "
                               "track's other samples" if curve.weight.value is not None else "no line weight: the "
                               "track's samples are less than twice as wide as each other, or one is missing"),
            "header_row": round(curve.row, 1)}


def propose_calibration(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS, tesseract: str | None = None,
                        dpi: float | None = None) -> dict[str, Any]:
    """A scan file's bytes to its proposed calibration; `dpi`, if given, overrides the file's own. Raises
    predict.ImageRejected for a file that is no usable single-page image (too large: predict.ImageTooLarge)."""
    scan = load_scan(data, max_pixels)
    return to_proposal(analyse_image(scan.image, dpi or scan.dpi, tesseract))
