"""Drawing helpers for `veernet_core.synth`: layout, strokes, grid, depth labels, skew.

Every function draws from the caller's `numpy.random.Generator`; nothing touches a global RNG, so a
log is a pure function of its seed. Layers are float32 "darkness" arrays in [0, 1] (0 = bare paper)
that `synth_scan.finish` composes into a uint8 scan. Pixel (r, c) has its centre at row r, column c.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


@dataclass(frozen=True)
class Layout:
    """Where the track and the depth-label strip sit on the page."""

    height: int
    width: int
    track_top: int  # row of the top track border: a curve at fraction 0 is drawn here
    track_bottom: int  # row of the bottom track border: fraction 1
    strip: tuple[int, int]  # rows [start, stop) of the depth-label strip
    strip_below: bool


def layout(rng: np.random.Generator, height: int, width: int) -> Layout:
    # The margins leave room for half of the thickest stroke (4 px) beyond a track border.
    edge = 4
    label_rows = max(edge, round(height * rng.uniform(0.07, 0.12)))
    other_rows = max(edge, round(height * rng.uniform(0.015, 0.05)))
    below = bool(rng.random() < 0.5)
    top = other_rows if below else label_rows
    bottom = height - 1 - (label_rows if below else other_rows)
    strip = (bottom + 1, height) if below else (0, top)
    return Layout(height, width, top, bottom, strip, below)


def stroke(lo: np.ndarray, hi: np.ndarray, height: int) -> tuple[np.ndarray, np.ndarray]:
    """Rasterise one vertical ink span [lo, hi] per column (NaN: no ink there).

    Returns the area coverage of every pixel (anti-aliased ink) and the footprint: the pixels whose
    centre lies in the span. A span at least one pixel long always covers the pixel nearest its centre.
    """
    rows = np.arange(height, dtype=np.float32)[:, None]
    lo32 = np.where(np.isfinite(lo), lo, -8.0).astype(np.float32)[None, :]
    hi32 = np.where(np.isfinite(hi), hi, -8.0).astype(np.float32)[None, :]
    coverage = np.minimum(hi32, rows + 0.5)
    coverage -= np.maximum(lo32, rows - 0.5)
    np.clip(coverage, 0.0, 1.0, out=coverage)
    return coverage, (rows >= lo32) & (rows <= hi32)


def division_fractions(
    rng: np.random.Generator, left: float, right: float, log: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Fractions across the track of the minor and major division lines for a track scale: a linear
    grid of 4 to 10 divisions (a heavier middle line on 10), or a log grid of 1 to 9 lines per decade
    (the decade lines heavier)."""
    if log:
        a, b = math.log10(left), math.log10(right)
        decades = np.arange(math.floor(min(a, b)), math.ceil(max(a, b)) + 1, dtype=np.float64)
        per_decade = int(rng.integers(1, 10))  # counting the decade line itself
        multiples = np.array(sorted(LOG_GRID_ORDER[: per_decade - 1]), dtype=np.float64)
        minor = (decades[:, None] + np.log10(multiples)[None, :]).ravel()
        minor_f, major_f = (minor - a) / (b - a), (decades - a) / (b - a)
    else:
        n = int(rng.integers(4, 11))
        minor_f = np.arange(1, n) / n
        major_f = np.array([0.5]) if n == 10 else np.empty(0)
    inside = [f[(f > 0.005) & (f < 0.995)] for f in (minor_f, major_f)]
    return inside[0], inside[1]


# Which lines a log grid keeps first as it thins out: the 5, then the 2, then the rest.
LOG_GRID_ORDER = (5, 2, 3, 4, 6, 7, 8, 9)


def furniture(
    rng: np.random.Generator,
    lay: Layout,
    depth_span: tuple[float, float],
    divisions: tuple[np.ndarray, np.ndarray],
    scale: float,
    labels_in_track: bool,
) -> np.ndarray:
    """Grid, track borders, depth ticks and labels (in the strip, and inside the track when
    `labels_in_track`), unskewed, as a darkness layer."""
    layer = np.zeros((lay.height, lay.width), np.float32)
    minor_dark, major_dark = rng.uniform(0.12, 0.3), rng.uniform(0.3, 0.55)
    cols, is_major, depths = _depth_lines(rng, lay.width, depth_span, scale)
    t, b = lay.track_top, lay.track_bottom
    layer[t : b + 1, cols[~is_major]] = minor_dark
    for j in range(max(1, round(rng.uniform(1, 2.5) * scale))):
        layer[t : b + 1, np.minimum(cols[is_major] + j, lay.width - 1)] = major_dark
    for fractions, dark in zip(divisions, (minor_dark, major_dark), strict=True):
        rows = np.rint(t + fractions * (b - t)).astype(np.int64)
        layer[rows, :] = np.maximum(layer[rows, :], dark)
    border = max(1, round(rng.uniform(1, 2.5) * scale))
    layer[t : t + border, :] = layer[b - border + 1 : b + 1, :] = rng.uniform(0.6, 0.9)
    _depth_labels(rng, layer, lay, cols[is_major], depths[is_major])
    if labels_in_track:
        _labels_in_track(rng, layer, lay, cols[is_major], depths[is_major])
    return layer


def _depth_lines(
    rng: np.random.Generator, width: int, depth_span: tuple[float, float], scale: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Columns of the constant-depth grid lines at round depths, which of them are major, their depths."""
    top, bottom = depth_span
    px_per_unit = (width - 1) / (bottom - top)
    target = max(4.0, rng.uniform(10, 30) * scale) / px_per_unit
    decade = 10.0 ** math.floor(math.log10(target))
    step = next(m * decade for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * decade >= target)
    major_every = int(rng.choice([5, 10]))
    k = np.arange(math.ceil(top / step), math.floor(bottom / step) + 1)
    cols = np.rint((k * step - top) * px_per_unit).astype(np.int64)
    keep = (cols >= 0) & (cols < width)
    return cols[keep], (k % major_every == 0)[keep], (k * step)[keep]


@lru_cache(maxsize=16)
def _font(size: int) -> Font:
    return ImageFont.load_default(size=size)


def _depth_labels(
    rng: np.random.Generator, layer: np.ndarray, lay: Layout, cols: np.ndarray, depths: np.ndarray
) -> None:
    """Ticks at the major depth lines and depth numbers beside them, in the label strip."""
    start, stop = lay.strip
    rows = stop - start
    ink = rng.uniform(0.55, 0.9)
    if rows < 3 or cols.size == 0:
        return
    canvas = Image.new("L", (lay.width, rows), 0)
    pen = ImageDraw.Draw(canvas)
    tick = max(1, round(rows * 0.3))
    tick_rows = (0, tick - 1) if lay.strip_below else (rows - tick, rows - 1)
    for col in cols.tolist():
        pen.line([(col, tick_rows[0]), (col, tick_rows[1])], fill=255)
    font = _font(max(6, min(24, round(rows * 0.5))))
    spacing = float(np.median(np.diff(cols))) if cols.size > 1 else float(lay.width)
    every = max(1, math.ceil((font.getlength("00000.0") + 4) / max(spacing, 1.0)))
    text_y = (tick + rows) / 2 if lay.strip_below else (rows - tick) / 2
    for col, depth in zip(cols[::every].tolist(), depths[::every].tolist(), strict=True):
        pen.text((col + 2, text_y), format(round(depth, 3), "g"), fill=255, font=font, anchor="lm")
    band = layer[start:stop]
    np.maximum(band, np.asarray(canvas, np.float32) * np.float32(ink / 255), out=band)


def _labels_in_track(
    rng: np.random.Generator, layer: np.ndarray, lay: Layout, cols: np.ndarray, depths: np.ndarray
) -> None:
    """Depth numbers printed across the track itself at the major depth lines, as some logs repeat them."""
    rows = lay.track_bottom - lay.track_top
    size = max(6, round(rows * rng.uniform(0.15, 0.3)))
    if cols.size == 0 or size >= rows:
        return
    font = _font(size)
    every = max(1, math.ceil(2 * font.getlength("00000") / max(float(np.median(np.diff(cols))), 1.0))
                if cols.size > 1 else 1)
    canvas = Image.new("L", (lay.width, rows), 0)
    pen = ImageDraw.Draw(canvas)
    centre = rng.uniform(0.2, 0.8) * rows
    for col, depth in zip(cols[::every].tolist(), depths[::every].tolist(), strict=True):
        pen.text((col + 2, centre), format(round(depth, 3), "g"), fill=255, font=font, anchor="lm")
    band = layer[lay.track_top : lay.track_bottom]
    np.maximum(band, np.asarray(canvas, np.float32) * np.float32(rng.uniform(0.5, 0.9) / 255), out=band)


def shear_rows(layer: np.ndarray, shear: float, pivot: float) -> np.ndarray:
    """Skew the page: row y moves shear * (y - pivot) columns to the right, with linear interpolation."""
    cols = np.arange(layer.shape[1], dtype=np.float64)
    out = np.empty_like(layer)
    for y in range(layer.shape[0]):
        out[y] = np.interp(cols - shear * (y - pivot), cols, layer[y])
    return out
