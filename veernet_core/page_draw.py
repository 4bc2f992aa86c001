"""Drawing for `veernet_core.page_synth`: a page's furniture, text and curves, then its scan.

Lines are drawn as whole-pixel rectangles whose centre is the spec's position (the spec places them
so), text with a TrueType font at the page's resolution, curves as polylines. Everything draws from
the caller's `numpy.random.Generator`. Line weights are in inches of paper, so a page looks alike at
150 and 400 dpi: track borders are at least twice as heavy as any value-grid line, as on printed logs.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from veernet_core import synth_factors
from veernet_core.page_spec import PageSpec, SectionSpec, TrackSpec
from veernet_core.synth_curves import constant, curve_fraction

FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
FONTS = ("DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf", "DejaVuSansCondensed.ttf",
         "DejaVuSans-Bold.ttf", "pillow")
HEADER_SLOT_IN = 0.42  # track-header height per curve: its name and scale ends over a sample of its line
Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


def border_px(dpi: int) -> int:
    return max(2, round(0.016 * dpi))


def _weights(dpi: int) -> dict[str, int]:
    """Stroke widths in pixels: horizontal grid (minor, medium, major), value-grid lines. Each curve has its own
    pen (`CurveSpec.stroke_in`)."""
    return {"minor": max(1, round(0.003 * dpi)), "medium": max(1, round(0.005 * dpi)),
            "major": max(2, round(0.008 * dpi)), "division": max(1, round(0.003 * dpi)),
            "division_major": max(1, round(0.005 * dpi))}


def pick_font(rng: np.random.Generator) -> str:
    """A printed face: one of the DejaVu fonts this machine has, or Pillow's built-in one."""
    available = [name for name in FONTS if name == "pillow" or (FONT_DIR / name).exists()]
    return str(available[int(rng.integers(0, len(available)))])


@lru_cache(maxsize=64)
def font(name: str, size: int) -> Font:
    if name == "pillow" or not (FONT_DIR / name).exists():
        return ImageFont.load_default(size=size)
    return ImageFont.truetype(str(FONT_DIR / name), size)


def render(rng: np.random.Generator, spec: PageSpec) -> tuple[np.ndarray, list[list[np.ndarray]], list[list[bool]]]:
    """The upright page (uint8, paper 255), each section's curves as track fractions per body row, and whether
    each was held at a value (`_curves`)."""
    canvas = Image.new("L", (spec.width, spec.height), 255)
    pen = ImageDraw.Draw(canvas)
    ink = int(rng.integers(0, 50))
    _header_block(pen, spec, ink)
    fractions, held = [], []
    steady = np.random.default_rng([spec.seed, spec.index, CONSTANT_STREAM])  # the other draws stay as they were
    for section in spec.sections:
        _track_headers(pen, spec, section, ink)
        _grid(pen, spec, section, int(rng.integers(ink, 90)))
        _depth_numbers(pen, spec, section, ink)
        drawn, constant_curves = _curves(rng, pen, spec, section, ink, steady)
        fractions.append(drawn)
        held.append(constant_curves)
        _borders(pen, spec, section, ink)
    return np.asarray(canvas, dtype=np.uint8).copy(), fractions, held


def _hline(pen: ImageDraw.ImageDraw, row: float, x0: float, x1: float, width: int, ink: int) -> None:
    """A horizontal line whose drawn rows are centred on `row` (to the nearest half pixel)."""
    first = round(row - (width - 1) / 2)
    pen.rectangle([round(x0), first, round(x1), first + width - 1], fill=ink)


def _vline(pen: ImageDraw.ImageDraw, col: float, y0: float, y1: float, width: int, ink: int) -> None:
    first = round(col - (width - 1) / 2)
    pen.rectangle([first, round(y0), first + width - 1, round(y1)], fill=ink)


def _header_block(pen: ImageDraw.ImageDraw, spec: PageSpec, ink: int) -> None:
    top, bottom = spec.header
    dpi, weight = spec.dpi, border_px(spec.dpi)
    left, right = 0.25 * dpi, spec.width - 0.25 * dpi
    for row in (top, bottom):
        _hline(pen, row, left, right, weight, ink)
    for col in (left, right):
        _vline(pen, col, top, bottom, weight, ink)
    face = font(spec.font, round(0.13 * dpi))
    for k, line in enumerate(spec.header_lines):
        pen.text((left + 0.2 * dpi, top + (0.25 + 0.21 * k) * dpi), line, fill=ink, font=face, anchor="lm")


def header_line_row(section: SectionSpec, k: int, dpi: int) -> float:
    """The page row of the middle of curve k's line of text (its name and scale ends) in its section's track
    headers; its line sample is drawn 0.14 in below."""
    return section.header_top + (0.12 + k * HEADER_SLOT_IN) * dpi


HEADER_SLOT_TOLERANCE_IN = 0.15  # of paper: a line of a track header read this near a curve's is that curve's


def header_slot(row: float, section: SectionSpec, count: int, dpi: int) -> int | None:
    """Which of a track's `count` true curves a line of its header read on page `row` is: the one whose line
    of text is nearest, within HEADER_SLOT_TOLERANCE_IN; None where none is."""
    if count == 0:
        return None
    off = [abs(row - header_line_row(section, k, dpi)) for k in range(count)]
    k = int(np.argmin(off))
    return k if off[k] <= HEADER_SLOT_TOLERANCE_IN * dpi else None


def _track_headers(pen: ImageDraw.ImageDraw, spec: PageSpec, section: SectionSpec, ink: int) -> None:
    """Per track and curve: the left scale end, the name and unit, the right end, and a sample of the line."""
    dpi = spec.dpi
    _hline(pen, section.header_top, section.tracks[0].left, section.tracks[-1].right, border_px(dpi), ink)
    face = font(spec.font, round(0.1 * dpi))
    pad = 0.06 * dpi
    for track in section.tracks:
        for k, curve in enumerate(track.curves):
            y = header_line_row(section, k, dpi)
            pen.text((track.left + pad, y), _number(curve.left), fill=ink, font=face, anchor="lm")
            pen.text(((track.left + track.right) / 2, y), f"{curve.mnemonic} ({curve.unit})", fill=ink, font=face,
                     anchor="mm")
            pen.text((track.right - pad, y), _number(curve.right), fill=ink, font=face, anchor="rm")
            _styled_hline(pen, y + 0.14 * dpi, track.left + pad, track.right - pad, curve.style, dpi,
                          curve.stroke_px(dpi), curve.pen_gray(ink))  # the curve's own pen
    face = font(spec.font, round(0.09 * dpi))
    middle = sum(section.depth_column) / 2
    label = "FEET" if section.scale.unit == "ft" else "METRES"
    pen.text((middle, section.top - 0.12 * dpi), label, fill=ink, font=face, anchor="mm")


def _number(value: float) -> str:
    return f"{value:g}"


def _dash(style: str, dpi: int) -> tuple[int, int]:
    """(ink, gap) pixels of a line style's period; solid is all ink."""
    if style == "dashed":
        return max(3, round(0.1 * dpi)), max(2, round(0.05 * dpi))
    if style == "dotted":
        return max(1, round(0.02 * dpi)), max(2, round(0.04 * dpi))
    return 1, 0


def _styled_hline(pen: ImageDraw.ImageDraw, row: float, x0: float, x1: float, style: str, dpi: int,
                  width: int, ink: int) -> None:
    on, off = _dash(style, dpi)
    x = x0
    while x < x1:
        _hline(pen, row, x, min(x + on - 1 if off else x1, x1), width, ink)
        x += on + off if off else x1 - x0 + 1


def _grid(pen: ImageDraw.ImageDraw, spec: PageSpec, section: SectionSpec, ink: int) -> None:
    """Depth lines across every track (not the depth column) and each track's value grid."""
    scale, weights = section.scale, _weights(spec.dpi)
    count = round((section.depth_bottom - section.depth_top) / scale.minor)
    for k in range(count + 1):
        depth = section.depth_top + k * scale.minor
        kind = "major" if _multiple(depth, scale.major) else "medium" if _multiple(depth, scale.medium) else "minor"
        row = float(section.row_of(depth))
        for track in section.tracks:
            _hline(pen, row, track.left, track.right, weights[kind], ink)
    for track in section.tracks:
        for f, heavy in _divisions(track):
            width = weights["division_major" if heavy else "division"]
            _vline(pen, track.left + f * (track.right - track.left), section.top, section.bottom, width, ink)
    for row in (section.top, section.bottom):
        _hline(pen, row, section.tracks[0].left, section.tracks[-1].right, border_px(spec.dpi), ink)


def _multiple(value: float, step: float) -> bool:
    return abs(value / step - round(value / step)) < 1e-6


def _divisions(track: TrackSpec) -> list[tuple[float, bool]]:
    """Value-grid lines as (fraction across the track, heavier): the middle line of a linear grid of 10,
    each decade's start on a logarithmic one."""
    fractions = track.division_fractions()
    if track.grid == "linear":
        return [(f, track.divisions == 10 and abs(f - 0.5) < 1e-9) for f in fractions]
    return [(f, abs(f * track.divisions - round(f * track.divisions)) < 1e-9) for f in fractions]


def _depth_numbers(pen: ImageDraw.ImageDraw, spec: PageSpec, section: SectionSpec, ink: int) -> None:
    """Depth numbers centred on their lines in the depth column, where a whole number fits inside the grid."""
    scale, dpi = section.scale, spec.dpi
    face = font(spec.font, round(0.11 * dpi))
    middle = sum(section.depth_column) / 2
    first = math.ceil(section.depth_top / scale.label_every - 1e-9)
    last = math.floor(section.depth_bottom / scale.label_every + 1e-9)
    for k in range(first, last + 1):
        depth = k * scale.label_every
        row = float(section.row_of(depth))
        if section.top + 0.08 * dpi < row < section.bottom - 0.08 * dpi:
            pen.text((middle, row), _number(depth), fill=ink, font=face, anchor="mm")


CONSTANT_STREAM = 0xB17  # the curves held at a value inside their track (a bit size): a stream of their own


def _curves(rng: np.random.Generator, pen: ImageDraw.ImageDraw, spec: PageSpec, section: SectionSpec,
            ink: int, steady: np.random.Generator) -> tuple[list[np.ndarray], list[bool]]:
    """Each track's curves over the body, in their styles; returns their fractions per body row and whether each
    is held at a value. One curve in `synth_factors.CONSTANT_SHARE` is held at one to three values along the
    track, as a bit size is (`synth_curves.constant`, on the track's value grid half the time), drawn from
    `steady`, so that every other draw is as it was."""
    top, bottom = math.ceil(section.top) + 1, math.floor(section.bottom) - 1
    rows = np.arange(top, bottom + 1, dtype=np.float64)
    fractions, held = [], []
    for track in section.tracks:
        for curve in track.curves:
            width, fill = curve.stroke_px(spec.dpi), curve.pen_gray(ink)
            f = curve_fraction(rng, rows.size, spec.dpi / 300, "none")
            held.append(synth_factors.constant(steady, frozenset()))
            if held[-1]:
                f = constant(steady, rows.size, np.array(track.division_fractions()))
            x = track.left + f * (track.right - track.left)
            on, off = _dash(curve.style, spec.dpi)
            inked = (np.arange(rows.size) % (on + off)) < on if off else np.ones(rows.size, dtype=bool)
            for start, stop in _runs(inked):
                points = list(zip(x[start:stop].tolist(), rows[start:stop].tolist(), strict=True))
                pen.line(points if len(points) > 1 else points * 2, fill=fill, width=width)
            fractions.append(f)
    return fractions, held


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def _borders(pen: ImageDraw.ImageDraw, spec: PageSpec, section: SectionSpec, ink: int) -> None:
    """Track borders, drawn last, from the top of the track headers to the grid's bottom frame line."""
    columns = sorted({t.left for t in section.tracks} | {t.right for t in section.tracks})
    for col in columns:
        _vline(pen, col, section.header_top, section.bottom, border_px(spec.dpi), ink)


def scan(rng: np.random.Generator, upright: np.ndarray, spec: PageSpec) -> np.ndarray:
    """Scan the page: blur, paper and ink tone, dirt, skew, sensor noise, 1-bit threshold, turn."""
    s = spec.scan
    image = Image.fromarray(upright).filter(ImageFilter.GaussianBlur(s.blur))
    paper, ink = float(rng.uniform(215, 250)), float(rng.uniform(0, 40))
    toned = np.asarray(image, dtype=np.float32) * np.float32((paper - ink) / 255) + np.float32(ink)
    dirt = Image.new("L", image.size, 255)
    _dirt(rng, ImageDraw.Draw(dirt), spec)
    image = Image.fromarray(np.minimum(np.clip(toned, 0, 255).astype(np.uint8), np.asarray(dirt)))
    image = image.rotate(s.skew_deg, Image.Resampling.BILINEAR, fillcolor=round(paper))
    pixels = np.asarray(image, dtype=np.float32)
    pixels += rng.standard_normal(pixels.shape, dtype=np.float32) * np.float32(s.noise)
    out = np.clip(np.rint(pixels), 0, 255).astype(np.uint8)
    if s.bitonal:
        out = np.where(out < ink + s.threshold * (paper - ink), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(np.rot90(out, s.turn // 90))


def _dirt(rng: np.random.Generator, pen: ImageDraw.ImageDraw, spec: PageSpec) -> None:
    """Dark specks a pixel or two across, and a few pale smudges, on a layer that darkens the page."""
    area = spec.width * spec.height / spec.dpi**2
    specks = int(rng.poisson(spec.scan.dirt * area))
    xs, ys = rng.uniform(0, spec.width, specks), rng.uniform(0, spec.height, specks)
    radii = rng.uniform(0.4, 0.006 * spec.dpi + 0.5, specks)
    for x, y, r in zip(xs.tolist(), ys.tolist(), radii.tolist(), strict=True):
        pen.ellipse([x - r, y - r, x + r, y + r], fill=int(rng.integers(0, 90)))
    for _ in range(int(rng.poisson(spec.scan.dirt * area / 40))):
        x, y = rng.uniform(0, spec.width), rng.uniform(0, spec.height)
        r = rng.uniform(0.05, 0.3) * spec.dpi
        pen.ellipse([x - r, y - r * 0.6, x + r, y + r * 0.6], fill=int(rng.integers(175, 215)))

