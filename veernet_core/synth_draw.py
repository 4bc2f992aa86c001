"""Drawing helpers for `veernet_core.synth`: layout, grid, depth labels, curve shapes, strokes, scan defects.

Every function draws from the caller's `numpy.random.Generator`; nothing touches a global RNG, so a
log is a pure function of its seed. Layers are float32 "darkness" arrays in [0, 1] (0 = bare paper)
that `finish` composes into a uint8 scan. Pixel (r, c) has its centre at row r, column c.
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


def layout(rng: np.random.Generator, height: int, width: int, scale: float) -> Layout:
    # The margins leave room for half of the thickest stroke beyond a track border.
    edge = 2 + round(2 * scale)
    label_rows = max(edge, round(height * rng.uniform(0.07, 0.12)))
    other_rows = max(edge, round(height * rng.uniform(0.015, 0.05)))
    below = bool(rng.random() < 0.5)
    top = other_rows if below else label_rows
    bottom = height - 1 - (label_rows if below else other_rows)
    strip = (bottom + 1, height) if below else (0, top)
    return Layout(height, width, top, bottom, strip, below)


def smooth_series(rng: np.random.Generator, n: int, knot_px: float, lo: float, hi: float) -> np.ndarray:
    """A slowly varying series in [lo, hi]: random knots every `knot_px` columns, linearly joined."""
    knots = max(2, math.ceil(n / max(knot_px, 1.0)) + 1)
    return np.interp(np.arange(n), np.linspace(0, n - 1, knots), rng.uniform(lo, hi, knots))


def box_smooth(x: np.ndarray, k: int) -> np.ndarray:
    """Moving average over k samples with edge replication; the output has the input's length."""
    if k <= 1:
        return x
    padded = np.pad(x, (k // 2, k - 1 - k // 2), mode="edge")
    total = np.cumsum(np.concatenate(([0.0], padded)))
    return (total[k:] - total[:-k]) / k


def curve_fraction(rng: np.random.Generator, width: int, scale: float, wrap_dir: int) -> np.ndarray:
    """A log-like trace as a fraction across the track per column: blocky beds on a slow trend and a
    random walk, jitter and sharp thin-bed kicks. With wrap_dir = +1 (-1) it may run past 1 (below 0) by up
    to one track width, where the caller draws it on the backup scale."""
    trend = smooth_series(rng, width, rng.uniform(400, 2000) * scale, 0.2, 0.8)
    mean_bed = max(1.0, rng.uniform(15, 120) * scale)
    thickness = 1.0 + rng.exponential(mean_bed, int(2 * width / mean_bed) + 8)
    bed_of = np.searchsorted(np.cumsum(thickness), np.arange(width), side="right")
    beds = np.minimum(bed_of, thickness.size - 1)
    levels = rng.normal(0.0, rng.uniform(0.04, 0.15), thickness.size)
    # A random walk, high-passed so it meanders around the trend instead of drifting off the track.
    walk = np.cumsum(rng.normal(0.0, rng.uniform(0.002, 0.008) / math.sqrt(scale), width))
    walk -= box_smooth(walk, max(3, round(rng.uniform(200, 800) * scale)))
    f = box_smooth(trend + levels[beds] + walk, max(1, round(rng.uniform(1, 6) * scale)))
    f = f + box_smooth(rng.normal(0.0, rng.uniform(0.002, 0.01), width), 3)
    _add_kicks(rng, f, scale)
    if wrap_dir:
        _add_excursions(rng, f, wrap_dir)
    return _fold(f, wrap_dir)


def _add_kicks(rng: np.random.Generator, f: np.ndarray, scale: float) -> None:
    """Thin beds: spikes one to a few pixels wide, added in place without smoothing."""
    count = int(rng.poisson(f.size / max(rng.uniform(80, 400) * scale, 2.0)))
    starts = rng.integers(0, f.size, count)
    widths = rng.integers(1, max(2, round(6 * scale)) + 1, count)
    amplitudes = rng.uniform(0.08, 0.45, count) * rng.choice([-1.0, 1.0], count)
    for start, kick_width, amplitude in zip(starts, widths, amplitudes, strict=True):
        f[start : start + kick_width] += amplitude


def _add_excursions(rng: np.random.Generator, f: np.ndarray, wrap_dir: int) -> None:
    """Push one to three stretches past the wrap edge, so the trace wraps onto its backup scale."""
    for _ in range(int(rng.integers(1, 4))):
        centre = int(rng.integers(0, f.size))
        half = max(2, round(rng.uniform(0.005, 0.04) * f.size))
        target = 0.5 + wrap_dir * rng.uniform(0.58, 1.2)
        t = np.arange(-half, half + 1) / half
        window = np.clip(1.6 * (0.5 + 0.5 * np.cos(np.pi * t)), 0.0, 1.0)  # flat-topped bump
        cols = np.arange(centre - half, centre + half + 1)
        inside = (cols >= 0) & (cols < f.size)
        f[cols[inside]] += (target - f[centre]) * window[inside]


def _fold(f: np.ndarray, wrap_dir: int) -> np.ndarray:
    """Reflect the trace back inside its allowed band: the track, plus one track width on the wrap side."""
    lo = -0.96 if wrap_dir < 0 else 0.02
    hi = 1.96 if wrap_dir > 0 else 0.98
    f = np.where(f < lo, 2 * lo - f, f)
    f = np.where(f > hi, 2 * hi - f, f)
    return np.clip(f, lo, hi)


# The second curve's line style: short dashes and short gaps at a fixed period (at full scale
# about 2.5 mm of ink and 1.3 mm of paper at 300 dpi), so a network can tell it from the solid first
# curve within a few columns, and a tracer bridges every gap.
DASH_ON_PX = 30
DASH_OFF_PX = 15


def dash_period(scale: float) -> tuple[int, int]:
    """(ink, gap) columns of one dash period at this scale: at least two of ink and one of paper."""
    return max(2, round(DASH_ON_PX * scale)), max(1, round(DASH_OFF_PX * scale))


def dash_pattern(rng: np.random.Generator, width: int, scale: float) -> np.ndarray:
    """True where a dashed curve has ink: `dash_period(scale)` repeated from a random phase."""
    on, off = dash_period(scale)
    phase = int(rng.integers(0, on + off))
    return (np.arange(width) + phase) % (on + off) < on


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
    """Fractions across the track of the minor and major division lines for a track scale."""
    if log:
        a, b = math.log10(left), math.log10(right)
        decades = np.arange(math.floor(min(a, b)), math.ceil(max(a, b)) + 1, dtype=np.float64)
        minor = (decades[:, None] + np.log10(np.arange(2, 10))[None, :]).ravel()
        minor_f, major_f = (minor - a) / (b - a), (decades - a) / (b - a)
    else:
        n = int(rng.choice([4, 5, 10]))
        minor_f = np.arange(1, n) / n
        major_f = np.array([0.5]) if n == 10 else np.empty(0)
    inside = [f[(f > 0.005) & (f < 0.995)] for f in (minor_f, major_f)]
    return inside[0], inside[1]


def furniture(
    rng: np.random.Generator,
    lay: Layout,
    depth_span: tuple[float, float],
    divisions: tuple[np.ndarray, np.ndarray],
    scale: float,
) -> np.ndarray:
    """Grid, track borders, depth ticks and labels, unskewed, as a darkness layer."""
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


def shear_rows(layer: np.ndarray, shear: float, pivot: float) -> np.ndarray:
    """Skew the page: row y moves shear * (y - pivot) columns to the right, with linear interpolation."""
    cols = np.arange(layer.shape[1], dtype=np.float64)
    out = np.empty_like(layer)
    for y in range(layer.shape[0]):
        out[y] = np.interp(cols - shear * (y - pivot), cols, layer[y])
    return out


def paper(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """Off-white paper whose tone drifts slowly across the sheet."""
    coarse = rng.normal(0.0, rng.uniform(2, 8), (4, max(2, width // 800))).astype(np.float32)
    drift = Image.fromarray(coarse).resize((width, height), Image.Resampling.BILINEAR)
    return np.float32(rng.uniform(200, 242)) + np.asarray(drift, np.float32)


def blur(image: np.ndarray, a: float) -> np.ndarray:
    """Separable 3-tap blur [a, 1 - 2a, a] along both axes, edges replicated."""
    for axis in (0, 1):
        padded = np.pad(image, [(1, 1) if ax == axis else (0, 0) for ax in (0, 1)], mode="edge")
        lead = padded[:-2] if axis == 0 else padded[:, :-2]
        trail = padded[2:] if axis == 0 else padded[:, 2:]
        image = np.float32(1 - 2 * a) * image + np.float32(a) * (lead + trail)
    return image


def finish(rng: np.random.Generator, paper_tone: np.ndarray, darkness: np.ndarray) -> np.ndarray:
    """Ink the page, then scan it: dust specks, blur and sensor noise; returns uint8."""
    height, width = darkness.shape
    specks = int(rng.poisson(height * width / 50000))
    ys, xs = rng.integers(0, height, specks), rng.integers(0, width, specks)
    darkness[ys, xs] = np.maximum(darkness[ys, xs], rng.uniform(0.2, 0.7, specks).astype(np.float32))
    ink_level = np.float32(rng.uniform(10, 60))
    image = paper_tone - darkness * (paper_tone - ink_level)
    image = blur(image, rng.uniform(0.04, 0.2))
    image += rng.standard_normal((height, width), dtype=np.float32) * np.float32(rng.uniform(1.5, 6))
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)
