"""Digitised curves out: JSON, CSV, LAS 2.0, a probability mask PNG and an overlay PNG to check by eye.

Every writer takes a `Digitised` (regular depth samples, NaN = no curve) and returns plain data, text
or PNG bytes; nothing touches the file system, so the service can stream them and tests can read them.
`RESULT_FILES` names the files and their media types, for the service and the command line alike.
"""

from __future__ import annotations

import io
import math
import struct
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import lasio
import numpy as np
from PIL import Image, ImageDraw

from veernet_core.digitise.calibration import CurveScale
from veernet_core.digitise.curves import Digitised, DigitisedCurve
from veernet_core.digitise.tracer import ColumnTrace

LAS_NULL = -999.25  # the LAS convention for "no value"
# LAS 2.0 checkers accept only these depth units for the index; common spellings map onto them.
LAS_DEPTH_UNITS = {"m": "M", "meter": "M", "metre": "M", "meters": "M", "metres": "M",
                   "ft": "FT", "f": "FT", "feet": "FT", "foot": "FT"}
# Distinct, colour-blind-safe hues (Okabe-Ito) for traced curves on the overlay.
PALETTE = ((230, 159, 0), (0, 114, 178), (204, 121, 167), (0, 158, 115), (213, 94, 0), (86, 180, 233))
# zlib's fastest level: about 3x faster than Pillow's default (6) on full-scale scans, for 7-17 % more
# bytes; mask and overlay are pictures to look at, and encoding them was a tenth of a digitisation.
PNG_COMPRESS_LEVEL = 1
# The overlay's scan, faded to keep the colours readable: gray g becomes 0.6 g + 102 (float32, truncated).
_FADE = (np.arange(256, dtype=np.float32) * np.float32(0.6) + np.float32(102.0)).astype(np.uint8)
BORDER_GRAY = 120  # palette index of the dotted track borders: the gray (120, 120, 120)
# The overlay's palette: grays, with the curve colours at indices 0-5, darker than any faded gray.
_OVERLAY_PALETTE = np.repeat(np.arange(256, dtype=np.uint8)[:, None], 3, axis=1)
_OVERLAY_PALETTE[: len(PALETTE)] = PALETTE
assert int(_FADE.min()) >= len(PALETTE), "the curve colours' palette indices must not be faded grays"


@dataclass(frozen=True)
class ResultFile:
    """One file of a digitisation's results: its name (in a job's storage and an output directory) and media type."""

    file_name: str
    media_type: str


# A digitisation's files by name: the service stores and serves them, `python -m veernet_core digitise` writes them.
RESULT_FILES: dict[str, ResultFile] = {
    "result": ResultFile("result.json", "application/json"),
    "csv": ResultFile("result.csv", "text/csv"),
    "las": ResultFile("result.las", "text/plain"),
    "mask": ResultFile("mask.png", "image/png"),
    "overlay": ResultFile("overlay.png", "image/png"),
}


class CurveTable(Protocol):
    """Curves on one regular depth grid: a track's `Digitised`, or a whole section's curves."""

    depth: np.ndarray
    depth_unit: str
    curves: list[DigitisedCurve]


@dataclass(frozen=True)
class ExportMeta:
    """What the result came from: recorded in every output that has a header."""

    model_sha256: str
    model_id: str = ""  # e.g. "bundled/veernet-small", "checkpoint/42", "job/7/best" (LAS turns ':' into '/')
    scan: str = ""  # the uploaded file's name
    well: str = ""  # well name, when the caller knows it
    created: str = ""  # ISO 8601 time; now (UTC) when empty
    read_at: str = ""  # "HxW" px the model read the scan at, when resampled to the model's scale


def unique_mnemonics(curves: list[DigitisedCurve]) -> list[str]:
    """Curve mnemonics made unique (GR, GR:2, ...) as LAS and CSV columns need."""
    seen: dict[str, int] = {}
    names = []
    for curve in curves:
        base = curve.mnemonic.strip().upper().replace(" ", "_") or "CURVE"
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}:{seen[base]}")
    return names


def _json_float(x: float, digits: int = 6) -> float | None:
    return round(float(x), digits) if math.isfinite(x) else None


def to_json(d: Digitised, meta: ExportMeta | None = None, inference: dict[str, Any] | None = None) -> dict[str, object]:
    """Depth samples and, per curve, a value, a confidence and a wrap flag per sample; null where no curve.
    `inference` (veernet_core.digitise.rescale.Resampling.to_dict) says at what scale the model read the scan."""
    result: dict[str, object] = {
        "depth": depth_json(d.depth, d.depth_unit, d.step),
        "curves": [curve_json(name, curve) for name, curve in zip(unique_mnemonics(d.curves), d.curves, strict=True)],
        "calibration": d.calibration.to_dict(),
        "image": {"height": d.image_size[0], "width": d.image_size[1]},
        "warnings": result_warnings(d),
    }
    if meta is not None:
        result["model"] = {"sha256": meta.model_sha256, "id": meta.model_id}
    if inference is not None:
        result["inference"] = inference
    return result


def depth_json(depth: np.ndarray, unit: str, step: float) -> dict[str, Any]:
    return {"unit": unit, "step": step, "start": _first(depth), "stop": _last(depth),
            "values": [float(x) for x in depth.tolist()]}


def curve_json(name: str, curve: DigitisedCurve) -> dict[str, Any]:
    """One curve of a JSON result: per depth sample its value, confidence and wrap flags; null where none."""
    found = np.isfinite(curve.values)
    return {
        "mnemonic": name,
        "unit": curve.unit,
        "values": [_json_float(v) for v in curve.values.tolist()],
        "confidence": [round(float(c), 4) if f else None
                       for c, f in zip(curve.confidence.tolist(), found.tolist(), strict=True)],
        "wrapped": curve.wrapped.tolist(),
        "wrap_unexpected": curve.wrap_unexpected.tolist(),
        "found_fraction": round(float(found.mean()), 4) if found.size else 0.0,
        "identity": curve.identity,
        "warnings": list(curve.warnings),
    }


def result_warnings(d: CurveTable) -> list[str]:
    """What the user should check, one line each: curves named by drawing order alone, hints the scan
    contradicts, samples wrapped where no backup scale was declared."""
    names = unique_mnemonics(d.curves)
    lines = []
    ambiguous = [name for name, curve in zip(names, d.curves, strict=True) if curve.identity == "ambiguous"]
    if ambiguous:
        lines.append(f"{', '.join(ambiguous)}: neither the calibration nor the scan tells these curves apart for "
                     "certain, so their names may be swapped; check the overlay, or add style, ink or anchors hints")
    for name, curve in zip(names, d.curves, strict=True):
        lines += [f"{name}: {warning}" for warning in curve.warnings]
        unexpected = int(np.count_nonzero(curve.wrap_unexpected))
        if unexpected:
            lines.append(f"{name}: {unexpected} samples traced past a track edge with no backup scale declared "
                         "there, read on the primary scale (flagged wrap_unexpected); declare the curve's wrap "
                         "if the log has that backup scale")
    return lines


def _first(depth: np.ndarray) -> float | None:
    return float(depth[0]) if depth.size else None


def _last(depth: np.ndarray) -> float | None:
    return float(depth[-1]) if depth.size else None


def to_csv(d: CurveTable) -> str:
    """One row per depth sample: depth, then per curve its value, confidence and wrap flags; empty = null."""
    names = unique_mnemonics(d.curves)
    header = [f"DEPT [{d.depth_unit}]"]
    for name, curve in zip(names, d.curves, strict=True):
        header += [f"{name} [{curve.unit}]", f"{name} confidence", f"{name} wrapped", f"{name} wrap unexpected"]
    columns = [[_number(depth) for depth in d.depth.tolist()]]  # built column by column: one pass per column
    for curve in d.curves:
        found = np.isfinite(curve.values).tolist()
        columns += [[_number(value) if seen else "" for value, seen in zip(curve.values.tolist(), found, strict=True)],
                    [f"{confidence:.4f}" if seen else ""
                     for confidence, seen in zip(curve.confidence.tolist(), found, strict=True)],
                    ["1" if flag else "0" for flag in curve.wrapped.tolist()],
                    ["1" if flag else "0" for flag in curve.wrap_unexpected.tolist()]]
    lines = [",".join(_csv_field(h) for h in header), *(",".join(row) for row in zip(*columns, strict=True))]
    return "\n".join(lines) + "\n"


def _number(x: float) -> str:
    return format(x, ".10g")


def _csv_field(text: str) -> str:
    return '"' + text.replace('"', '""') + '"' if any(ch in text for ch in ',"\n') else text


def to_las(d: Digitised, meta: ExportMeta) -> str:
    """LAS 2.0, unwrapped, on the regular depth step, NULL -999.25; the model and the calibration in
    the ~Parameter section. Written with lasio."""
    unit = las_depth_unit(d.depth_unit)
    return write_las(d, meta, _parameters(d, meta, unit))


def las_depth_unit(unit: str) -> str:
    return LAS_DEPTH_UNITS.get(unit.strip().lower(), unit.strip().upper())


def write_las(d: CurveTable, meta: ExportMeta, parameters: list[lasio.HeaderItem]) -> str:
    """LAS 2.0 of curves on one regular depth grid, `parameters` in its ~Parameter section and the result's
    warnings in ~Other."""
    if d.depth.size < 2:
        raise ValueError("a LAS file needs at least two depth samples; use a smaller output depth step")
    unit = las_depth_unit(d.depth_unit)
    las = lasio.LASFile()
    las.version["VERS"] = lasio.HeaderItem("VERS", value=2.0, descr="CWLS LOG ASCII STANDARD - VERSION 2.0")
    las.version["WRAP"] = lasio.HeaderItem("WRAP", value="NO", descr="ONE LINE PER DEPTH STEP")
    created = datetime.fromisoformat(meta.created) if meta.created else datetime.now(UTC)
    for mnemonic, value, descr in (
        ("NULL", LAS_NULL, "NULL VALUE"),
        ("COMP", "", "COMPANY"),
        ("WELL", las_text(meta.well or meta.scan or "UNKNOWN"), "WELL"),
        ("FLD", "", "FIELD"),
        ("LOC", "", "LOCATION"),
        ("CTRY", "", "COUNTRY"),
        ("SRVC", "VeerNet digitisation", "SERVICE COMPANY"),
        ("DATE", created.astimezone(UTC).strftime("%Y-%m-%d %H.%M.%S UTC"), "DATE DIGITISED"),
        ("UWI", "", "UNIQUE WELL ID"),
    ):
        las.well[mnemonic] = lasio.HeaderItem(mnemonic, value=value, descr=descr)
    # lasio writes the header and one row; the rows are written here, as lasio writes them (`las_rows`):
    # lasio's own loop over every value took 40 ms of a 3,200-row result (bench/README.md, 2026-11-28).
    columns = [np.asarray(d.depth, dtype=np.float64)]
    las.append_curve("DEPT", d.depth[:1], unit=unit, descr="DEPTH")
    for name, curve in zip(unique_mnemonics(d.curves), d.curves, strict=True):
        columns.append(np.where(np.isfinite(curve.values), curve.values, np.nan))
        las.append_curve(name, columns[-1][:1], unit=curve.unit, descr=f"{curve.mnemonic} digitised from scan")
    for item in parameters:
        las.params[item.mnemonic] = item
    warnings = result_warnings(d)
    if warnings:  # free text for whoever opens the file: the ~Other section
        las.other = "\n".join("WARNING: " + las_text(line) for line in warnings)
    buffer = io.StringIO()
    step = float(d.depth[1] - d.depth[0])
    las.write(buffer, version=2.0, wrap=False, STRT=float(d.depth[0]), STOP=float(d.depth[-1]),
              STEP=round(step, 10), fmt=LAS_FORMAT)
    lines = [line for line in buffer.getvalue().splitlines() if line.strip()]  # LAS sections hold no blank lines
    return "\n".join(lines[:-1] + las_rows(columns, str(las.well["NULL"].value))) + "\n"


LAS_FORMAT = "%.6g"
LAS_FIELD = 10  # what lasio pads a LAS_FORMAT value to: the least width over 9 that holds "%.6g" % pi


def las_rows(columns: list[np.ndarray], null: str) -> list[str]:
    """The ~ASCII rows of equal-length `columns`, each value as lasio's writer puts it (LAS_FORMAT, NaN as
    `null`, right-justified to LAS_FIELD after one space)."""
    cells = [[null if math.isnan(x) else LAS_FORMAT % x for x in column.tolist()] for column in columns]
    return ["".join(" " + cell.rjust(LAS_FIELD) for cell in row) for row in zip(*cells, strict=True)]


def model_parameters(meta: ExportMeta) -> list[lasio.HeaderItem]:
    """The model and scan a result came from, for a LAS ~Parameter section."""
    return [
        lasio.HeaderItem("MODEL", value=meta.model_sha256, descr="VeerNet checkpoint sha256"),
        lasio.HeaderItem("MODELID", value=las_text(meta.model_id or "unknown"), descr="VeerNet model id"),
        lasio.HeaderItem("SCAN", value=las_text(meta.scan or "unknown"), descr="Scanned image"),
        *([lasio.HeaderItem("READAT", unit="px", value=meta.read_at, descr="Scan resampled to the model's scale")]
          if meta.read_at else []),
    ]


def scale_parameters(names: list[str], scales: list[CurveScale],
                     curves: list[DigitisedCurve]) -> list[lasio.HeaderItem]:
    """Per curve its scale (SCLk) and how it was named (IDNk), for a LAS ~Parameter section."""
    items = []
    for k, (name, scale, curve) in enumerate(zip(names, scales, curves, strict=True)):
        kind = "LOG" if scale.log else "LIN"
        wrap = {"right": "PAST RIGHT", "left": "PAST LEFT", "both": "BOTH SIDES"}.get(scale.wrap, "NONE")
        items.append(lasio.HeaderItem(
            f"SCL{k + 1}", unit=scale.unit, value=f"{scale.left:g} {scale.right:g} {kind}",
            descr=f"{name} scale left right type; backup {wrap}"))
        items.append(lasio.HeaderItem(f"IDN{k + 1}", value=curve.identity.upper(),
                                      descr=f"{name} identity: single anchored hinted or ambiguous"))
    return items


def _parameters(d: Digitised, meta: ExportMeta, depth_unit: str) -> list[lasio.HeaderItem]:
    """Model identity and the calibration that produced the values."""
    c = d.calibration
    items = [
        *model_parameters(meta),
        lasio.HeaderItem("DCOLA", unit="px", value=c.depth.col_a, descr="Depth calibration point A column"),
        lasio.HeaderItem("DDEPA", unit=depth_unit, value=c.depth.depth_a, descr="Depth calibration point A depth"),
        lasio.HeaderItem("DCOLB", unit="px", value=c.depth.col_b, descr="Depth calibration point B column"),
        lasio.HeaderItem("DDEPB", unit=depth_unit, value=c.depth.depth_b, descr="Depth calibration point B depth"),
        lasio.HeaderItem("TRKTOP", unit="px", value=c.track_top, descr="Track top row (scale left)"),
        lasio.HeaderItem("TRKBOT", unit="px", value=c.track_bottom, descr="Track bottom row (scale right)"),
    ]
    return items + scale_parameters(unique_mnemonics(d.curves), list(c.curves), d.curves)


def las_text(text: str) -> str:
    """A header value safe in LAS: the colon delimits the description, so it becomes '/'."""
    return " ".join(text.replace(":", "/").split())


def mask_png(probabilities: np.ndarray, size: tuple[int, int] | None = None) -> bytes:
    """8-bit grayscale PNG of the curve probability (1 - background) per pixel: white = curve. With `size`
    (height, width), probabilities of a model run on a resampled scan are drawn on the scan's own grid."""
    if probabilities.ndim != 3 or probabilities.shape[0] < 2:
        raise ValueError(f"probabilities must be (classes >= 2, H, W), got {probabilities.shape}")
    curve = 1.0 - probabilities[0]
    curve *= 255.0
    pixels = np.clip(np.rint(curve, out=curve), 0, 255, out=curve).astype(np.uint8)
    if size is not None and pixels.shape != tuple(size):
        pixels = np.asarray(Image.fromarray(pixels).resize((size[1], size[0]), Image.Resampling.BILINEAR))
    return gray_png(pixels)


def gray_png(pixels: np.ndarray) -> bytes:
    """An 8-bit grayscale PNG with every row unfiltered. Pillow tries all five PNG filters on every row
    of a grayscale image, which cost 2-3x the compression itself on a mask; a probability mask,
    mostly flat, compresses as well without them. zlib runs without the GIL, beside the tracing."""
    height, width = pixels.shape
    rows = np.zeros((height, width + 1), dtype=np.uint8)  # each row starts with its filter type: 0, none
    rows[:, 1:] = pixels
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit gray, deflate, no interlace
    data = zlib.compress(rows.tobytes(), PNG_COMPRESS_LEVEL)
    return b"\x89PNG\r\n\x1a\n" + b"".join(_png_chunk(kind, body) for kind, body in
                                          ((b"IHDR", header), (b"IDAT", data), (b"IEND", b"")))


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def overlay_png(image: np.ndarray, d: Digitised) -> bytes:
    """The scan, faded, with each traced curve drawn in its own colour; bridged stretches thin,
    the track borders dotted, each curve named at its first point."""
    canvas, pen = overlay_canvas(image)
    _track_borders(pen, d, image.shape[1])
    for k, (name, curve) in enumerate(zip(unique_mnemonics(d.curves), d.curves, strict=True)):
        draw_trace(pen, curve.trace, k % len(PALETTE), name)
    return png_bytes(canvas)


def overlay_canvas(image: np.ndarray) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    """The scan faded on a palette image, and a pen to draw on it in PALETTE's colours (indices 0-5)."""
    if image.ndim != 2:
        raise ValueError(f"image must be grayscale (H, W), got shape {image.shape}")
    # Drawn on palette indices (one byte a pixel: a third of an RGB PNG to encode), the same picture:
    # index i is the gray (i, i, i) and the curve colours take indices below the faded scan's grays.
    height, width = image.shape
    canvas = Image.frombytes("P", (width, height), _FADE[np.asarray(image, dtype=np.uint8)].tobytes())
    canvas.putpalette(_OVERLAY_PALETTE.tobytes(), rawmode="RGB")
    return canvas, ImageDraw.Draw(canvas)


def _track_borders(pen: ImageDraw.ImageDraw, d: Digitised, width: int) -> None:
    for row in (d.calibration.track_top, d.calibration.track_bottom):
        for x in range(0, width, 8):
            pen.line([(x, row), (min(x + 3, width - 1), row)], fill=BORDER_GRAY)


def draw_trace(pen: ImageDraw.ImageDraw, trace: ColumnTrace, colour: int, name: str, shift: float = 0.0,
               portrait: bool = False) -> None:
    """A trace (a row per column) in palette colour `colour`, its rows moved by `shift`; `portrait` draws it
    turned back (the transpose: its columns down the picture, its rows across), as on an upright page."""
    rows = trace.row + shift
    found = np.isfinite(rows)
    # Join neighbouring columns on the same level; a wrap jumps across the track and is not joined.
    joined = found[:-1] & found[1:] & (trace.level[:-1] == trace.level[1:])
    thin = trace.bridged[:-1] | trace.bridged[1:]
    # One polyline per stretch of joined segments of one width: Pillow draws a polyline segment by
    # segment, so the pixels are those of one call per segment, without a Python call per column.
    for first, last in _stretches(joined, thin):
        points = list(zip(range(first, last + 2), rows[first : last + 2].tolist(), strict=True))
        pen.line([(y, x) for x, y in points] if portrait else points, fill=colour, width=1 if thin[first] else 2)
    lone = found & ~np.concatenate([[False], joined]) & ~np.concatenate([joined, [False]])
    for col in np.nonzero(lone)[0].tolist():
        pen.point((float(rows[col]), col) if portrait else (col, float(rows[col])), fill=colour)
    if found.any():
        first = int(np.argmax(found))
        at = (float(rows[first]) + 4, first + 2) if portrait else (first + 2, max(0.0, float(rows[first]) - 10))
        pen.text(at, name, fill=colour)


def _stretches(joined: np.ndarray, thin: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) segment of every maximal stretch of joined segments with the same `thin` flag."""
    kind = np.where(joined, thin.astype(np.int8), np.int8(-1))
    change = np.flatnonzero(np.diff(kind)) + 1
    starts = np.concatenate([[0], change])
    stops = np.concatenate([change, [kind.size]]) - 1
    keep = kind[starts] >= 0
    return list(zip(starts[keep].tolist(), stops[keep].tolist(), strict=True))


def png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buffer.getvalue()
