"""Rendered logs whose curves differ only in what a legend would say: line style, ink, colour.

Drawn with the synthetic generator's own pieces (`veernet_core.synth_curves`' log-like curves, `synth_draw`'s
grid, borders and depth labels, `synth_scan`'s paper and scanner blur), with each curve's style and ink chosen by
the test, and the generator's kind of truth: the footprint of the ink as a mask (what a perfect binary segmenter
would give) and each curve's drawn row per column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from veernet_core import synth_curves as shapes
from veernet_core import synth_draw as draw
from veernet_core import synth_scan as scan
from veernet_core.digitise.ink import ScanPixels

SCALE = 0.25  # 120-160 px tall logs: strokes two pixels wide, dash and dot periods a few pixels long
HEIGHT, WIDTH = 140, 1600
DEPTH_TOP, DEPTH_BOTTOM = 1000.0, 1160.0
# Ink runs per period, in columns at SCALE: (ink, paper, ink, paper, ...)
PATTERNS = {"solid": (1, 0), "dashed": (8, 4), "dotted": (2, 4), "dash-dot": (8, 3, 2, 3)}
INK_RGB = {"dark": (25, 25, 25), "light": (165, 165, 165), "red": (205, 35, 35), "blue": (35, 60, 200),
           # faded pens: about 40 % of the way from white paper to the pen's red and blue
           "faded red": (235, 160, 160), "faded blue": (160, 175, 235)}


@dataclass(frozen=True)
class Drawn:
    style: str
    ink: str


@dataclass
class RenderedLog:
    scan: ScanPixels
    probabilities: np.ndarray  # (2, H, W): the ink footprint as a binary model's probabilities
    rows: list[np.ndarray]  # per drawn curve: its centre row per column
    track: tuple[int, int]

    def calibration(self, curves: list[dict[str, Any]]) -> dict[str, Any]:
        step = 0.1  # about one column: (1160 - 1000) m over 1600 columns
        return {"depth": {"top": DEPTH_TOP, "bottom": DEPTH_BOTTOM, "unit": "m"}, "curves": curves,
                "track_top": float(self.track[0]), "track_bottom": float(self.track[1]), "step": step}

    def depth_of(self, col: int) -> float:
        return DEPTH_TOP + col * (DEPTH_BOTTOM - DEPTH_TOP) / (WIDTH - 1)

    def crossings(self, a: int, b: int) -> int:
        side = np.sign(self.rows[a] - self.rows[b])
        side = side[side != 0]
        return int(np.count_nonzero(np.diff(side)))


def _pattern(style: str, width: int, phase: int) -> np.ndarray:
    period = PATTERNS[style]
    marks = np.concatenate([np.full(n, k % 2 == 0) for k, n in enumerate(period)])
    return marks[(np.arange(width) + phase) % marks.size]


def render(seed: int, curves: list[Drawn], colour: bool = False) -> RenderedLog:
    """A track of the given curves, each a log-like trace across the whole track (so they cross)."""
    rng = np.random.default_rng([seed, 16])
    lay = draw.layout(rng, HEIGHT, WIDTH)
    divisions = draw.division_fractions(rng, 0.0, 150.0, False)
    page = draw.furniture(rng, lay, (DEPTH_TOP, DEPTH_BOTTOM), divisions, SCALE, False)
    paper = scan.paper(rng, HEIGHT, WIDTH)
    channels = np.repeat(((1.0 - page) * paper)[..., None], 3, axis=2)  # grid and labels in black ink
    mask = np.zeros((HEIGHT, WIDTH), bool)
    rows = []
    for k, curve in enumerate(curves):
        # Each curve wanders around its own level, a little apart from the others', as the curves of one
        # track do on a print: they cross where they swing, not in every column.
        level = 0.2 + 0.6 * k / max(1, len(curves) - 1) if len(curves) > 1 else 0.5
        fraction = np.clip(level + 1.4 * (shapes.curve_fraction(rng, WIDTH, SCALE, "none") - 0.5), 0.02, 0.98)
        row = lay.track_top + fraction * (lay.track_bottom - lay.track_top)
        inked = _pattern(curve.style, WIDTH, int(rng.integers(0, 16)))
        coverage, footprint = draw.stroke(np.where(inked, row - 1.0, np.nan), np.where(inked, row + 1.0, np.nan),
                                          HEIGHT)
        ink = np.asarray(INK_RGB[curve.ink], np.float32)
        channels = channels * (1 - coverage[..., None]) + coverage[..., None] * np.minimum(channels, ink)
        mask |= footprint
        rows.append(row)
    blurred = np.stack([scan.blur(channels[..., k].astype(np.float32), 0.1) for k in range(3)], axis=2)
    blurred += rng.standard_normal(blurred.shape[:2], dtype=np.float32)[..., None] * np.float32(2.5)
    rgb = np.clip(np.rint(blurred), 0, 255).astype(np.uint8)
    gray = np.rint(rgb.astype(np.float32) @ np.float32([0.299, 0.587, 0.114])).astype(np.uint8)
    probabilities = np.stack([~mask, mask]).astype(np.float32)
    return RenderedLog(ScanPixels(gray, rgb if colour else None), probabilities, rows,
                       (lay.track_top, lay.track_bottom))


def share_on_own_curve(trace_rows: np.ndarray, own: np.ndarray, others: list[np.ndarray]) -> float:
    """Share of the columns where the trace is nearer its own curve than any other, among those where the
    curves are more than 3 rows apart (where a swap would show)."""
    apart = np.ones(own.shape, bool)
    nearer = np.isfinite(trace_rows)
    for other in others:
        apart &= np.abs(own - other) > 3
        nearer &= np.abs(trace_rows - own) < np.abs(trace_rows - other)
    return float(nearer[apart].mean())
