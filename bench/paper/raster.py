"""Pen strokes for the evaluation renderer (bench/paper/render.py), and the truth read back from them.

A curve is a polyline through one point per paper column. Where it leaves the track onto a backup
scale the pen runs to the edge it leaves by and comes back from the opposite edge, as a recorder's
pen does. Line styles are cut along the pen's path (dashes, round dots, dash-dot). Each stroke is
drawn with PIL at 4x supersampling (round joins) and area-averaged down, and each curve's ink is kept
apart per scale it is drawn on, so that the truth comes from the ink itself: in every column, the
centroid of the curve's own coverage on the scale holding most of its ink there.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw

SUPERSAMPLE = 4
TILE = 1024  # output columns rasterised at a time: full-scale logs at 4x would not fit in memory at once

Piece = tuple[int, list[tuple[float, float]]]  # (scale side, points (x, y) in output pixels)


def pen_path(x: np.ndarray, fraction: np.ndarray, top: float, bottom: float) -> list[Piece]:
    """The pen's path as pieces on one scale each: side 0 the track's own scale, +1 the backup past
    its bottom edge, -1 past its top edge. `fraction` is the unwrapped position (NaN: pen lifted)."""
    side = np.where(fraction > 1, 1, np.where(fraction < 0, -1, 0))
    rows = top + (fraction - side) * (bottom - top)
    pieces: list[Piece] = []
    current: list[tuple[float, float]] = []
    for i in range(x.size):
        if not math.isfinite(fraction[i]):
            pieces, current = _close(pieces, current, int(side[i - 1]) if i else 0), []
            continue
        if current and side[i] != side[i - 1]:
            boundary = 1.0 if max(side[i], side[i - 1]) == 1 else 0.0
            t = (boundary - fraction[i - 1]) / (fraction[i] - fraction[i - 1])
            cross_x = x[i - 1] + t * (x[i] - x[i - 1])
            leave = bottom if side[i] > side[i - 1] else top
            current.append((cross_x, leave))
            pieces = _close(pieces, current, int(side[i - 1]))
            current = [(cross_x, top if leave == bottom else bottom)]
        current.append((float(x[i]), float(rows[i])))
    return _close(pieces, current, int(side[-1]))


def _close(pieces: list[Piece], points: list[tuple[float, float]], side: int) -> list[Piece]:
    return [*pieces, (side, points)] if points else pieces


def style_cuts(style: str, scale: float, stroke_px: int, rng: np.random.Generator) -> list[tuple[float, str]]:
    """One period of a pen's style as (length in px along the path, "ink" | "dot" | "gap"). A gap is
    at least the pen's width plus 2 px, since round ends eat half a width into it from each side."""
    mm = 11.8 * scale  # pixels per millimetre at 300 dpi times the scale
    least_gap = stroke_px + 2.0
    if style == "dashed":
        return [(max(4.0, rng.uniform(2.5, 4.5) * mm), "ink"), (max(least_gap, rng.uniform(1.0, 1.8) * mm), "gap")]
    if style == "dotted":
        return [(0.0, "dot"), (max(least_gap, rng.uniform(0.8, 1.4) * mm), "gap")]
    if style == "dash-dot":
        gap = max(least_gap, rng.uniform(0.8, 1.3) * mm)
        return [(max(5.0, rng.uniform(3.0, 5.0) * mm), "ink"), (gap, "gap"), (0.0, "dot"), (gap, "gap")]
    return [(math.inf, "ink")]


def styled_marks(pieces: list[Piece], cuts: list[tuple[float, str]], phase: float) -> list[tuple[int, str, list]]:
    """The marks the pen leaves: (side, "line" | "dot", points); the style's pattern runs on along the
    whole path, across wraps."""
    marks: list[tuple[int, str, list]] = []
    period = sum(length for length, _ in cuts)
    travelled = phase
    for side, points in pieces:
        pts = np.array(points, dtype=np.float64)
        seg = np.hypot(*np.diff(pts, axis=0).T) if len(pts) > 1 else np.zeros(0)
        arc = travelled + np.concatenate(([0.0], np.cumsum(seg)))
        if math.isinf(period):
            marks.append((side, "line", points))
        else:
            marks += _cut_piece(side, pts, arc, cuts, period)
        travelled = float(arc[-1])
    return marks


def _cut_piece(side: int, pts: np.ndarray, arc: np.ndarray, cuts: list[tuple[float, str]],
               period: float) -> list[tuple[int, str, list]]:
    marks: list[tuple[int, str, list]] = []
    start = math.floor(arc[0] / period) * period
    while start < arc[-1]:
        offset = start
        for length, kind in cuts:
            lo, hi = offset, offset + length
            offset = hi
            if kind == "gap" or hi < arc[0] or lo > arc[-1]:
                continue
            if kind == "dot":
                marks.append((side, "dot", [_at(pts, arc, lo)]))
                continue
            first, stop = np.searchsorted(arc, lo, side="right"), np.searchsorted(arc, hi, side="left")
            inside = [(float(x), float(y)) for x, y in pts[first:stop]]
            marks.append((side, "line", [_at(pts, arc, max(lo, arc[0])), *inside, _at(pts, arc, min(hi, arc[-1]))]))
        start += period
    return marks


def _at(pts: np.ndarray, arc: np.ndarray, s: float) -> tuple[float, float]:
    return float(np.interp(s, arc, pts[:, 0])), float(np.interp(s, arc, pts[:, 1]))


def rasterise(marks: list[tuple[int, str, list]], stroke_px: int, height: int, width: int) -> dict[int, np.ndarray]:
    """Per scale side, the pen's coverage of every output pixel (0..1), drawn at 4x and area-averaged."""
    layers = {side: np.zeros((height, width), np.float32) for side in (-1, 0, 1)}
    for c0 in range(0, width, TILE):
        c1 = min(width, c0 + TILE)
        margin = 4 * stroke_px + 2
        for side, layer in layers.items():
            mine = [m for m in marks if m[0] == side and _touches(m[2], c0 - margin, c1 + margin)]
            if mine:
                layer[:, c0:c1] = _draw_tile(mine, stroke_px, height, c0, c1)
    return layers


def _touches(points: list[tuple[float, float]], lo: float, hi: float) -> bool:
    xs = [p[0] for p in points]
    return max(xs) >= lo and min(xs) <= hi


def _draw_tile(marks: list[tuple[int, str, list]], stroke_px: int, height: int, c0: int, c1: int) -> np.ndarray:
    s = SUPERSAMPLE
    canvas = Image.new("L", ((c1 - c0) * s, height * s), 0)
    pen = ImageDraw.Draw(canvas)

    def sub(p: tuple[float, float]) -> tuple[float, float]:  # output pixel centres sit mid-block
        return (p[0] - c0) * s + (s - 1) / 2, p[1] * s + (s - 1) / 2

    radius = stroke_px * s / 2
    for _, kind, points in marks:
        if kind == "dot":
            x, y = sub(points[0])
            pen.ellipse([x - radius, y - radius, x + radius, y + radius], fill=255)
        else:
            pen.line([sub(p) for p in points], fill=255, width=stroke_px * s, joint="curve")
            for end in (points[0], points[-1]):  # round caps, as a pen's tip
                x, y = sub(end)
                pen.ellipse([x - radius, y - radius, x + radius, y + radius], fill=255)
    big = np.asarray(canvas, np.float32) / 255.0
    return big.reshape(height, s, c1 - c0, s).mean(axis=(1, 3))


def truth_from_ink(layers: dict[int, np.ndarray], min_ink: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column: whether the curve is inked there (at least `min_ink` pixels' worth of its coverage,
    with one pixel at least a quarter covered: a pen crossed it, not only grazed it), the scale side
    holding most of its ink, and the centroid row of that side's coverage."""
    sides = np.array(sorted(layers))
    totals = np.stack([layers[s].sum(axis=0) for s in sides])
    best = totals.argmax(axis=0)
    rows = np.arange(next(iter(layers.values())).shape[0], dtype=np.float64)[:, None]
    centroid = np.stack([(layers[s] * rows).sum(axis=0) / np.maximum(layers[s].sum(axis=0), 1e-9) for s in sides])
    cols = np.arange(best.size)
    darkest = np.max([layers[s].max(axis=0) for s in sides], axis=0)
    return (totals.sum(axis=0) >= min_ink) & (darkest >= 0.25), sides[best], centroid[best, cols]
