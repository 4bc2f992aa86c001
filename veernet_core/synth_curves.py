"""Curve shapes and line styles for `veernet_core.synth`.

Every function draws from the caller's `numpy.random.Generator`; nothing touches a global RNG.
"""

from __future__ import annotations

import math

import numpy as np

from veernet_core.synth_truth import wrap_sides


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


def curve_fraction(rng: np.random.Generator, width: int, detail: float, wrap: str) -> np.ndarray:
    """A log-like trace as a fraction across the track per column: blocky beds on a slow trend and a
    random walk, jitter and sharp thin-bed kicks. `detail` is the print's pixels per unit of depth
    relative to a full-scale normal print (small: everything happens in fewer columns). On each side
    `wrap` names, it runs past the track edge (above 1 past `right`, below 0 past `left`) by up to one
    track width, where the caller draws it on that side's backup scale."""
    trend = smooth_series(rng, width, rng.uniform(400, 2000) * detail, 0.2, 0.8)
    mean_bed = max(1.0, rng.uniform(15, 120) * detail)
    thickness = 1.0 + rng.exponential(mean_bed, int(2 * width / mean_bed) + 8)
    bed_of = np.searchsorted(np.cumsum(thickness), np.arange(width), side="right")
    beds = np.minimum(bed_of, thickness.size - 1)
    levels = rng.normal(0.0, rng.uniform(0.04, 0.15), thickness.size)
    # A random walk, high-passed so it meanders around the trend instead of drifting off the track.
    walk = np.cumsum(rng.normal(0.0, rng.uniform(0.002, 0.008) / math.sqrt(max(detail, 0.05)), width))
    walk -= box_smooth(walk, max(3, round(rng.uniform(200, 800) * detail)))
    f = box_smooth(trend + levels[beds] + walk, max(1, round(rng.uniform(1, 6) * detail)))
    f = f + box_smooth(rng.normal(0.0, rng.uniform(0.002, 0.01), width), 3)
    _add_kicks(rng, f, detail)
    sides = wrap_sides(wrap)
    for k in range(int(rng.integers(len(sides), 4)) if sides else 0):
        _add_excursion(rng, f, sides[k % len(sides)])  # every named side at least once
    return _fold(f, sides)


def _add_kicks(rng: np.random.Generator, f: np.ndarray, detail: float) -> None:
    """Thin beds: spikes one to a few pixels wide, added in place without smoothing."""
    count = int(rng.poisson(f.size / max(rng.uniform(80, 400) * detail, 6.0)))
    starts = rng.integers(0, f.size, count)
    widths = rng.integers(1, max(2, round(6 * detail)) + 1, count)
    amplitudes = rng.uniform(0.08, 0.45, count) * rng.choice([-1.0, 1.0], count)
    for start, kick_width, amplitude in zip(starts, widths, amplitudes, strict=True):
        f[start : start + kick_width] += amplitude


def _add_excursion(rng: np.random.Generator, f: np.ndarray, side: int, half: int = 0) -> None:
    """Push one stretch past the edge on `side`, so the trace wraps onto that side's backup scale (or is
    held at it); `half`: its half width in columns (0: drawn)."""
    centre = int(rng.integers(0, f.size))
    half = half or max(2, round(rng.uniform(0.005, 0.04) * f.size))
    target = 0.5 + side * rng.uniform(0.58, 1.2)
    t = np.arange(-half, half + 1) / half
    window = np.clip(1.6 * (0.5 + 0.5 * np.cos(np.pi * t)), 0.0, 1.0)  # flat-topped bump
    cols = np.arange(centre - half, centre + half + 1)
    inside = (cols >= 0) & (cols < f.size)
    f[cols[inside]] += (target - f[centre]) * window[inside]


def hold(rng: np.random.Generator, f: np.ndarray, side: int) -> np.ndarray:
    """Run the trace off `side` (a side with no backup scale) one to three times and hold it there, as a
    plotter clips a pen: flat along the edge, on the track's border line or up to 2 % of the track inside."""
    f = f.copy()
    for _ in range(int(rng.integers(1, 4))):
        _add_excursion(rng, f, side, max(3, round(rng.uniform(0.01, 0.05) * f.size)))
    inset = 0.0 if rng.random() < 0.4 else float(rng.uniform(0.005, 0.02))
    return np.minimum(f, 1.0 - inset) if side > 0 else np.maximum(f, inset)


def constant(rng: np.random.Generator, width: int, lines: np.ndarray) -> np.ndarray:
    """A curve that holds one value along the track, as a bit size or a tool parked at a reading: one to
    three levels, each stepping to the next at a casing point. A level lies on one of the track's grid
    `lines` (fractions across it) half the time, as a bit size often does, else anywhere 4-96 % across."""
    levels = int(rng.integers(1, 4))
    cuts = np.sort(rng.uniform(0.1, 0.9, levels - 1)) * width
    values = np.where(rng.random(levels) < 0.5, rng.choice(lines, levels), rng.uniform(0.04, 0.96, levels)) \
        if lines.size else rng.uniform(0.04, 0.96, levels)
    return values[np.searchsorted(cuts, np.arange(width), side="right")].astype(np.float64)


def _fold(f: np.ndarray, sides: tuple[int, ...]) -> np.ndarray:
    """Reflect the trace back inside its allowed band: the track, plus one track width on each wrap side."""
    lo = -0.96 if -1 in sides else 0.02
    hi = 1.96 if 1 in sides else 0.98
    f = np.where(f < lo, 2 * lo - f, f)
    f = np.where(f > hi, 2 * hi - f, f)
    return np.clip(f, lo, hi)


def style_pattern(rng: np.random.Generator, style: str, scale: float) -> list[tuple[float, bool]]:
    """One period of a line style as (length along the line in px, inked) pieces. Pens differ between
    logs, so each curve gets its own lengths; every piece is at least a pixel, so styles stay visible on
    small scans."""
    def px(low: float, high: float, floor: float) -> float:
        return max(floor, float(rng.uniform(low, high)) * scale)

    if style == "dashed":
        return [(px(14, 40, 3.0), True), (px(6, 18, 2.0), False)]
    if style == "dotted":
        return [(px(1.5, 4, 1.0), True), (px(4, 10, 1.5), False)]
    if style == "dash-dot":
        gap = px(4, 10, 1.5)
        return [(px(14, 34, 3.0), True), (gap, False), (px(1.5, 4, 1.0), True), (gap, False)]
    return [(1.0, True)]


def style_ink(rng: np.random.Generator, style: str, row: np.ndarray, scale: float) -> np.ndarray:
    """Per column, whether a curve drawn along `row` in `style` has ink there: the style's pattern laid
    along the line's length (so a steep stretch uses up more of it per column), from a random phase."""
    pattern = style_pattern(rng, style, scale)
    lengths = np.array([length for length, _ in pattern])
    period = float(lengths.sum())
    phase = float(rng.uniform(0, period))
    if style == "solid":
        return np.isfinite(row)
    rise = np.nan_to_num(np.abs(np.diff(row)), nan=0.0)
    arc = np.concatenate(([0.0], np.cumsum(np.sqrt(1.0 + rise**2)))) + phase
    piece = np.searchsorted(np.cumsum(lengths), arc % period, side="right")
    inked = np.array([on for _, on in pattern])[np.minimum(piece, len(pattern) - 1)]
    return inked & np.isfinite(row)
