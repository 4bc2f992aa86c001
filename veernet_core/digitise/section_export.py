"""A digitised section and its result files: one JSON, one CSV and one LAS 2.0 holding every curve of every
track on the section's depth grid, a probability mask and an overlay of the whole section.

The mask and the overlay are pictures of the section as it stands on the upright page (depth down, tracks
across: rows `row0..row1`, columns from the first track's crop to the last's), so that they can be laid on
the page the calibration was read from; the curves are drawn turned back from the tracks' crops. Each track's
mask is the model's curve probability brought back to the crop's own pixels; where two crops' margins
overlap, the larger probability shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import lasio
import numpy as np
from PIL import Image

from veernet_core.digitise.calibration import Calibration
from veernet_core.digitise.curves import Digitised, DigitisedCurve
from veernet_core.digitise.export import (
    BORDER_GRAY,
    PALETTE,
    ExportMeta,
    curve_json,
    depth_json,
    draw_trace,
    gray_png,
    las_depth_unit,
    model_parameters,
    overlay_canvas,
    png_bytes,
    result_warnings,
    scale_parameters,
    to_csv,
    unique_mnemonics,
    write_las,
)
from veernet_core.digitise.rescale import Resampling
from veernet_core.digitise.section_calibration import Crop, SectionCalibration


@dataclass(frozen=True)
class TrackRead:
    """One track of the section, digitised on its turned crop."""

    crop: Crop
    calibration: Calibration  # on the turned crop
    curves: Digitised  # on the section's depth grid
    probabilities: np.ndarray  # (classes, H, W) on the grid the model read the crop at
    resampling: Resampling


@dataclass
class SectionDigitised:
    """Every curve of a section on one depth grid (an `export.CurveTable`), with the tracks they came from."""

    depth: np.ndarray
    depth_unit: str
    step: float
    curves: list[DigitisedCurve]
    track_of: list[int]  # the track index of each curve
    tracks: list[TrackRead]
    calibration: SectionCalibration
    page: np.ndarray  # the upright page, gray

    @property
    def columns(self) -> tuple[int, int]:
        """First and last page column of the mask and overlay: the tracks' crops, margins included."""
        return min(t.crop.col0 for t in self.tracks), max(t.crop.col1 for t in self.tracks)


def section_files(section: SectionDigitised, meta: ExportMeta, timer: Any = None) -> dict[str, bytes]:
    """The result files by `export.RESULT_FILES` name."""
    def clock(name: str, stage: Any, *args: Any) -> Any:
        return timer(name, stage, *args) if timer is not None else stage(*args)
    return {
        "result": clock("json", lambda: json.dumps(section_json(section, meta), allow_nan=False).encode()),
        "csv": clock("csv", lambda: to_csv(section).encode()),
        "las": clock("las", lambda: section_las(section, meta).encode()),
        "mask": clock("mask", section_mask_png, section),
        "overlay": clock("overlay", section_overlay_png, section),
    }


def section_json(section: SectionDigitised, meta: ExportMeta | None = None) -> dict[str, Any]:
    """Depth samples and every curve of the section (each with the index of its track); per track its
    extent, its crop of the upright page and at what scale the model read it."""
    c = section.calibration
    curves = [{**curve_json(name, curve), "track": j} for name, curve, j in
              zip(unique_mnemonics(section.curves), section.curves, section.track_of, strict=True)]
    tracks = [{"extent": {"left": t.left, "right": t.right}, "curves": [s.mnemonic for s in t.curves],
               "crop": {"rows": [r.crop.row0, r.crop.row1], "columns": [r.crop.col0, r.crop.col1]},
               "inference": r.resampling.to_dict()} for t, r in zip(c.tracks, section.tracks, strict=True)]
    result: dict[str, Any] = {
        "depth": depth_json(section.depth, section.depth_unit, section.step),
        "curves": curves,
        "section": c.index,
        "tracks": tracks,
        "calibration": c.to_dict(),
        "image": {"height": c.image_size[0], "width": c.image_size[1]},
        "page": {"height": c.page_size[0], "width": c.page_size[1]},
        "picture": {"rows": list(c.section_rows), "columns": list(section.columns)},
        "warnings": result_warnings(section),
    }
    if meta is not None:
        result["model"] = {"sha256": meta.model_sha256, "id": meta.model_id}
    return result


def section_las(section: SectionDigitised, meta: ExportMeta) -> str:
    """LAS 2.0 of every curve of the section, with the page calibration (orientation, rows, depth fit, track
    extents) and each curve's scale and track in ~Parameter."""
    c, d = section.calibration, section.calibration.depth
    unit = las_depth_unit(section.depth_unit)
    names = unique_mnemonics(section.curves)
    items = [
        *model_parameters(meta),
        lasio.HeaderItem("SECTION", value=c.index, descr="Section of the page, from 0 at the top"),
        lasio.HeaderItem("TURN", unit="deg", value=c.turn, descr="Scan turned clockwise to stand upright"),
        lasio.HeaderItem("SKEW", unit="deg", value=c.skew_deg, descr="Then rotated back by this skew"),
        lasio.HeaderItem("ROWTOP", unit="px", value=c.rows[0], descr="Grid top frame line row"),
        lasio.HeaderItem("ROWBOT", unit="px", value=c.rows[1], descr="Grid bottom frame line row"),
        lasio.HeaderItem("DROWA", unit="px", value=d.col_a, descr="Depth fit point A row"),
        lasio.HeaderItem("DDEPA", unit=unit, value=d.depth_a, descr="Depth fit point A depth"),
        lasio.HeaderItem("DROWB", unit="px", value=d.col_b, descr="Depth fit point B row"),
        lasio.HeaderItem("DDEPB", unit=unit, value=d.depth_b, descr="Depth fit point B depth"),
    ]
    for j, track in enumerate(c.tracks):
        items.append(lasio.HeaderItem(f"TRK{j + 1}", unit="px", value=f"{track.left:g} {track.right:g}",
                                      descr=f"Track {j + 1} left and right border columns"))
    scales = [scale for track in c.tracks for scale in track.curves]
    items += scale_parameters(names, scales, section.curves)
    items += [lasio.HeaderItem(f"TRKOF{k + 1}", value=j + 1, descr=f"{name} track")
              for k, (name, j) in enumerate(zip(names, section.track_of, strict=True))]
    return write_las(section, meta, items)


def section_mask_png(section: SectionDigitised) -> bytes:
    """8-bit gray PNG of the curve probability over the section as it stands on the page: white = curve."""
    row0, row1 = section.calibration.section_rows
    first, last = section.columns
    pixels = np.zeros((row1 - row0 + 1, last - first + 1), dtype=np.uint8)
    for track in section.tracks:
        crop = track.crop
        curve = np.clip(np.rint((1.0 - track.probabilities[0]) * 255.0), 0, 255).astype(np.uint8)
        height, width = crop.size
        if curve.shape != (height, width):
            curve = np.asarray(Image.fromarray(curve).resize((width, height), Image.Resampling.BILINEAR))
        window = pixels[:, crop.col0 - first:crop.col1 - first + 1]
        np.maximum(window, curve.T, out=window)
    return gray_png(pixels)


def section_overlay_png(section: SectionDigitised) -> bytes:
    """The section of the upright page, faded, with every traced curve in its own colour (bridged stretches
    thin), each track's borders dotted and each curve named at its first point."""
    row0, row1 = section.calibration.section_rows
    first, last = section.columns
    canvas, pen = overlay_canvas(section.page[row0:row1 + 1, first:last + 1])
    height = row1 - row0 + 1
    for track in section.calibration.tracks:
        for column in (track.left - first, track.right - first):
            for y in range(0, height, 8):
                pen.line([(column, y), (column, min(y + 3, height - 1))], fill=BORDER_GRAY)
    names = unique_mnemonics(section.curves)
    for k, (name, curve, j) in enumerate(zip(names, section.curves, section.track_of, strict=True)):
        shift = section.tracks[j].crop.col0 - first  # a crop row is a page column
        draw_trace(pen, curve.trace, k % len(PALETTE), name, shift, portrait=True)
    return png_bytes(canvas)
