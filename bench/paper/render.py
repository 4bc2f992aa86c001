"""The evaluation renderer: paper logs drawn by code that shares nothing with the training generator.

`render(seed, index, scale)` returns a `veernet_core.synth_truth.SynthLog` (the truth format, the only
thing taken from veernet_core), so bench/digitise_eval.py scores it like a synthetic log. It is
written from the conventions of printed logs: a depth scale of 1:200, 1:500, 1:1000 (metres) or
1:240, 1:600 (feet) at 300 dpi, or a low-resolution print near one pixel per foot; track scales from
real headers; curves from a rock column (`paper.values`); pens drawn as polylines at 4x supersampling
(`paper.raster`) with opaque inks laid one over another; a grid of 4 to 10 linear divisions or 1 to 9
lines per decade, depth lines with every 5th or 10th heavier, depth numbers in a strip and sometimes in
the track; yellowed fibrous paper, stains, skew (a shear of everything drawn), blur, sensor noise,
1-bit scans by Floyd-Steinberg dither or a threshold, and JPEG. A log is a pure function of
(seed, index, scale, clean, colour); `clean` leaves out paper, grid and scanner, for exactness tests.

`colour=True` draws the same log as a colour print scanned in colour: every pen takes its own colour
(black, red, blue, green, orange, purple or brown, mixed here with a spread per pen and named as a legend
names them), the paper is tinted, the grid is sometimes printed in colour, and the scan is never 1-bit.
The log's gray `image` is the colour scan's luma as the service reads an upload (Pillow's "L"), `colour`
its RGB, and each curve's `colour` the name a legend gives it ("" for black, whose hint is "dark").
Everything else (values, pens' styles and strokes, page, scanner factors) is the gray log's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from veernet_core.synth_truth import CurveTruth, DepthCalibration, SynthLog, TrackScale, pair_factors

from .page import compose
from .raster import pen_path, rasterise, style_cuts, styled_marks, truth_from_ink
from .values import HEADER_SCALES, HeaderScale, bed_column, keep_in_reach, to_fraction, tool_reading

PEN_STYLES = (("solid", 0.45), ("dashed", 0.25), ("dotted", 0.15), ("dash-dot", 0.15))
PRINT_SCALES = ((200, "m"), (500, "m"), (1000, "m"), (240, "ft"), (600, "ft"))  # 1:N
WRAP_CHOICES = (("none", 0.55), ("right", 0.2), ("left", 0.15), ("both", 0.1))
SIDES = {"none": (), "right": (1,), "left": (-1,), "both": (1, -1)}
# Colour prints: this renderer's own mix of each pen colour (RGB on white paper) and how often a pen has it.
PEN_COLOURS = {"black": ((15, 15, 15), 0.25), "red": ((200, 35, 40), 0.2), "blue": ((35, 65, 185), 0.2),
               "green": ((35, 135, 55), 0.15), "orange": ((235, 125, 25), 0.07),
               "purple": ((120, 45, 150), 0.07), "brown": ((120, 70, 35), 0.06)}
COLOUR_SPREAD = 20  # each channel of a pen's colour varies by up to this much


@dataclass(frozen=True)
class Sheet:
    height: int
    width: int
    top: int  # the track's top border row: fraction 0 of every scale
    bottom: int
    strip: tuple[int, int]  # rows of the depth-number strip
    px_per_unit: float
    unit: str
    depth_top: float
    low_res: bool


def pick(rng: np.random.Generator, table: tuple[tuple[Any, float], ...]) -> Any:
    """One item of a table of (item, weight) pairs, drawn with the weights' odds."""
    weights = np.array([w for _, w in table])
    return table[int(rng.choice(len(table), p=weights / weights.sum()))][0]


def _sheet(rng: np.random.Generator, scale: float) -> Sheet:
    height = max(32, round(rng.uniform(460, 660) * scale))
    width = max(64, round(rng.uniform(3000, 12000) * scale))
    strip = max(4, round(height * rng.uniform(0.09, 0.14)))
    margin = max(5, round(height * rng.uniform(0.03, 0.07)))
    below = rng.random() < 0.5
    top = margin if below else strip + 1
    bottom = height - 1 - (strip + 1 if below else margin)
    low_res = rng.random() < 0.15
    if low_res:  # a small print scanned coarsely: about a pixel per foot
        unit, px_per_unit = "ft", float(rng.uniform(0.7, 1.5))
    else:
        ratio, unit = PRINT_SCALES[int(rng.integers(len(PRINT_SCALES)))]
        paper_mm = (1000.0 if unit == "m" else 304.8) / ratio
        px_per_unit = paper_mm / 25.4 * 300 * scale
    depth_top = float(round(rng.uniform(100, 3500 if unit == "m" else 11000), -1))
    band = (bottom + 2, height) if below else (0, top - 1)
    return Sheet(height, width, top, bottom, band, px_per_unit, unit, depth_top, low_res)


def _fit_header(rng: np.random.Generator, header: HeaderScale, values: np.ndarray,
                sides: tuple[int, ...]) -> HeaderScale:
    """A header whose backup side is declared has one because the curve goes past that edge: narrow the
    scale, if needed, until it does (to round numbers, as printed)."""
    ends = [math.log10(header.left), math.log10(header.right)] if header.log else [header.left, header.right]
    v = np.log10(values) if header.log else values
    for side in sides:
        f = (v - ends[0]) / (ends[1] - ends[0])
        q = np.quantile(f, 0.998 if side > 0 else 0.002)
        reach = rng.uniform(1.05, 1.35) if side > 0 else -rng.uniform(0.05, 0.35)
        if (side > 0 and q < 1.05) or (side < 0 and q > -0.05):
            anchor = 0 if side > 0 else 1  # keep the opposite end, move this one
            target = float(np.quantile(v, 0.998 if (side > 0) == (ends[1] > ends[0]) else 0.002))
            span = (target - ends[anchor]) / (reach - anchor)
            ends[1 - anchor] = _round(ends[anchor] + span * (1 - 2 * anchor), header.log)
    left, right = (10 ** e for e in ends) if header.log else ends
    return HeaderScale(header.mnemonic, header.name, header.unit, float(left), float(right), header.log)


def _round(x: float, log: bool) -> float:
    if log:
        return round(x * 2) / 2  # half decades
    magnitude = 10 ** math.floor(math.log10(abs(x))) if x else 1.0
    return round(x / magnitude * 2) / 2 * magnitude


@dataclass(frozen=True)
class Pen:
    style: str
    ink: int  # gray level of the ink
    stroke_px: int
    wrap: str


def _pen(rng: np.random.Generator) -> Pen:
    style = pick(rng, PEN_STYLES)
    ink = int(rng.integers(0, 61)) if rng.random() < 0.7 else int(rng.integers(110, 171))
    stroke = int(rng.choice([1, 2, 3, 4], p=[0.35, 0.35, 0.2, 0.1]))
    return Pen(style, ink, stroke, pick(rng, WRAP_CHOICES))


def _curve_fraction(rng: np.random.Generator, sheet: Sheet, tool: str, pen: Pen,
                    beds: tuple) -> tuple[HeaderScale, np.ndarray]:
    per_metre = sheet.px_per_unit * (3.2808 if sheet.unit == "ft" else 1.0)
    values = tool_reading(rng, tool, beds, per_metre)
    header = HEADER_SCALES[tool][int(rng.integers(len(HEADER_SCALES[tool])))]
    header = _fit_header(rng, header, values, SIDES[pen.wrap])
    fraction = keep_in_reach(to_fraction(header, values), SIDES[pen.wrap])
    if rng.random() < 0.2:  # logged over part of the interval
        cut = max(2, round(rng.uniform(0.02, 0.1) * fraction.size))
        fraction[:cut] = np.nan
    if rng.random() < 0.1:  # a gap in the record: the curve stops and starts again
        start = round(rng.uniform(0.2, 0.7) * fraction.size)
        fraction[start : start + max(3, round(rng.uniform(0.03, 0.12) * fraction.size))] = np.nan
    return header, fraction


def _shear(pieces: list, shear: float, pivot: float) -> list:
    return [(side, [(x + shear * (y - pivot), y) for x, y in points]) for side, points in pieces]


def _ink_curve(rng: np.random.Generator, sheet: Sheet, fraction: np.ndarray, pen: Pen, shear: float,
               scale: float) -> dict[int, np.ndarray]:
    x = np.arange(sheet.width, dtype=np.float64)
    pieces = _shear(pen_path(x, fraction, sheet.top, sheet.bottom), shear, (sheet.top + sheet.bottom) / 2)
    cuts = style_cuts(pen.style, scale, pen.stroke_px, rng)
    period = sum(length for length, _ in cuts)
    marks = styled_marks(pieces, cuts, float(rng.uniform(0, period)) if math.isfinite(period) else 0.0)
    return rasterise(marks, pen.stroke_px, sheet.height, sheet.width)


def _truth(name: str, header: HeaderScale, fraction: np.ndarray, layers: dict[int, np.ndarray],
           sheet: Sheet, pen: Pen) -> CurveTruth:
    """The truth read from the ink where there is ink; from the pen's path in a style's gaps."""
    inked, ink_side, ink_row = truth_from_ink(layers)
    path_side = np.where(fraction > 1, 1, np.where(fraction < 0, -1, 0))
    path_row = sheet.top + (fraction - path_side) * (sheet.bottom - sheet.top)
    side = np.where(inked, ink_side, path_side).astype(np.int8)
    row = np.where(inked, ink_row, path_row)
    scale = TrackScale(header.left, header.right, header.log, header.mnemonic, header.unit)
    values = scale.to_value((row - sheet.top) / (sheet.bottom - sheet.top) + side)
    return CurveTruth(name, header.mnemonic, scale, values, row, side, pen.wrap, pen.style, pen.ink,
                      pen.stroke_px, inked)


def _pen_colours(rng: np.random.Generator, count: int) -> list[tuple[str, tuple[int, int, int]]]:
    """A distinct colour per pen (name, RGB): one print gives each curve of a track its own colour."""
    names = list(PEN_COLOURS)
    weights = np.array([PEN_COLOURS[n][1] for n in names])
    picked = rng.choice(names, size=count, replace=False, p=weights / weights.sum())
    spread = rng.integers(-COLOUR_SPREAD, COLOUR_SPREAD + 1, size=(count, 3))
    return [(str(name), tuple(int(v) for v in np.clip(np.array(PEN_COLOURS[name][0]) + d, 0, 255)))  # type: ignore[misc]
            for name, d in zip(picked, spread, strict=True)]


def _luma(rgb: tuple[int, int, int]) -> int:
    """The gray an RGB ink reads as (ITU-R 601, as Pillow converts colour to "L")."""
    return round((299 * rgb[0] + 587 * rgb[1] + 114 * rgb[2]) / 1000)


def render(seed: int, index: int, scale: float = 0.1, clean: bool = False, colour: bool = False,
           grid: bool = True) -> SynthLog:
    """Paper log `index` of set `seed` at `scale` (1.0: 460-660 px tall at 300 dpi), with its truth;
    `colour`: the same log printed in colour inks and scanned in colour (see the module's docstring);
    `grid` False: the same log printed without its grid and depth numbers."""
    if seed < 0 or index < 0 or not scale > 0:
        raise ValueError(f"seed and index must be non-negative and scale positive, got {seed}, {index}, {scale}")
    rng = np.random.default_rng([seed, index, 0x50A9E5])
    sheet = _sheet(rng, scale)
    depth_unit = sheet.depth_top + np.arange(sheet.width) / sheet.px_per_unit
    beds = bed_column(rng, depth_unit / (3.2808 if sheet.unit == "ft" else 1.0))
    skew = float(rng.uniform(-1.0, 1.0)) if rng.random() < 0.6 else 0.0
    shear = 0.0 if clean else math.tan(math.radians(skew))
    count = int(rng.choice([1, 2, 3, 4], p=[0.3, 0.35, 0.2, 0.15]))
    tools = rng.choice(sorted(HEADER_SCALES), size=count, replace=False).tolist()
    # Colour choices come from a stream of their own, so a colour log is its gray twin in other inks.
    tint_rng = np.random.default_rng([seed, index, 0xC0107])
    pens = _pen_colours(tint_rng, count) if colour else None
    curves, coverages = [], []
    for k, tool in enumerate(tools):
        pen = _pen(rng)
        if pens is not None:
            pen = Pen(pen.style, _luma(pens[k][1]), pen.stroke_px, pen.wrap)
        header, fraction = _curve_fraction(rng, sheet, tool, pen, beds)
        layers = _ink_curve(rng, sheet, fraction, pen, shear, scale)
        curves.append(_truth(header.name, header, fraction, layers, sheet, pen))
        coverages.append(np.clip(sum(layers.values()), 0.0, 1.0))
    if pens is not None:
        for curve, (name, _) in zip(curves, pens, strict=True):
            curve.colour = "" if name == "black" else name
    inks = [rgb for _, rgb in pens] if pens is not None else None
    image, facts = compose(rng, sheet, curves, coverages, (shear, skew), clean, inks, tint_rng, grid)
    rgb = None
    if image.ndim == 3:
        rgb, image = image, np.array(Image.fromarray(image).convert("L"), dtype=np.uint8)
    mask = (np.max(coverages, axis=0) >= 0.25).astype(np.uint8)  # pixels the pen crossed, not only grazed
    depth = DepthCalibration(sheet.depth_top, float(depth_unit[-1]), sheet.unit)
    facts.update(low_res=sheet.low_res, px_per_unit=sheet.px_per_unit, **pair_factors(curves))
    return SynthLog(image, mask, curves, depth, (sheet.top, sheet.bottom), seed, index, 2, shear, facts, rgb)
