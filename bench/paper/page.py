"""The page and the scanner for the evaluation renderer (bench/paper/render.py): grid, depth numbers,
paper, stains, inks laid over one another, blur, noise, 1-bit scans and JPEG."""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from veernet_core.synth_truth import CurveTruth, TrackScale


def compose(rng: np.random.Generator, sheet: Any, curves: list[CurveTruth], coverages: list[np.ndarray],
            skew: tuple[float, float], clean: bool, inks: list[tuple[int, int, int]] | None = None,
            tint_rng: np.random.Generator | None = None, grid: bool = True) -> tuple[np.ndarray, dict[str, Any]]:
    """The scanned page and its factors. Inks are opaque, laid in drawing order: a later pen covers an
    earlier one where they cross. `clean`: white paper and the inks only, nothing else. With `inks` (an
    RGB per curve) the page is a colour print scanned in colour, (H, W, 3): tinted paper, a grid that is
    sometimes coloured, never 1-bit; every choice it makes beyond the gray page's comes from `tint_rng`,
    so `rng` runs as for the gray page and the two share every other factor. `grid` False leaves the grid
    and depth numbers off the page, every other choice as with them (the most a grid remover could give)."""
    shear, degrees = skew
    facts: dict[str, Any] = {"bilevel": False, "bilevel_mode": "none", "jpeg": False, "jpeg_quality": 0,
                             "stains": False, "skew": abs(degrees) >= 0.5 and not clean,
                             "skew_degrees": 0.0 if clean else degrees, "labels_in_track": False, "grid": "none",
                             "colour": inks is not None}
    colour = inks is not None
    hue = _Tints(tint_rng) if colour else None
    paper = np.full((sheet.height, sheet.width), 255.0) if clean else _paper(rng, sheet)
    tone = paper.copy() if hue is None else paper[..., None] * (np.ones(3) if clean else hue.paper_tint())
    if not clean:
        lines, facts["grid"], facts["labels_in_track"] = _furniture(rng, sheet, curves[0].scale, shear)
        level = rng.uniform(40, 130)
        grid_ink = hue.grid_ink(level) if hue else level
        if grid:
            tone = tone * (1 - _channels(lines, colour)) + grid_ink * _channels(lines, colour)
        else:
            facts.update(grid="none", labels_in_track=False)
    for k, (curve, cover) in enumerate(zip(curves, coverages, strict=True)):
        ink = np.array(inks[k], np.float64) if inks is not None else curve.ink
        tone = tone * (1 - _channels(cover, colour)) + ink * _channels(cover, colour)
    if clean:
        return np.clip(np.rint(tone), 0, 255).astype(np.uint8), facts
    stains = int(rng.integers(1, 4)) if rng.random() < 0.2 else 0
    shade = _stains(rng, sheet, stains)
    tone *= shade[..., None] ** np.array([0.8, 1.0, 1.3]) if hue else shade  # a dried stain is brownish
    facts["stains"] = stains > 0
    image = _scan(rng, tone) if hue is None else _scan_colour(rng, hue.rng, tone)
    mode = ("dither" if rng.random() < 0.5 else "threshold") if rng.random() < 0.15 else "none"
    if mode != "none" and not colour:  # a colour scan is never 1-bit
        image = _bilevel(image, paper, mode, max(c.ink for c in curves))
    facts.update(bilevel=mode != "none" and not colour, bilevel_mode=mode if not colour else "none")
    if rng.random() < 0.25:
        facts.update(jpeg=True, jpeg_quality=int(rng.integers(25, 86)))
        image = _jpeg(image, facts["jpeg_quality"])
    return image, facts


def _channels(cover: np.ndarray, colour: bool) -> np.ndarray:
    return cover[..., None] if colour else cover


class _Tints:
    """The colour page's own choices: the paper's tint and the grid's ink."""

    GRID_INKS = ((225, 140, 70), (110, 170, 110), (215, 95, 85))  # orange, green and red printed grids

    def __init__(self, rng: np.random.Generator | None) -> None:
        if rng is None:
            raise ValueError("a colour page needs its own random stream (tint_rng)")
        self.rng = rng

    def paper_tint(self) -> np.ndarray:
        return np.array([1.0, self.rng.uniform(0.96, 1.0), self.rng.uniform(0.85, 0.97)])

    def grid_ink(self, level: float) -> np.ndarray:
        """The grid's ink: gray at the gray page's level, or (a third of prints) a printed colour."""
        if self.rng.random() < 2 / 3:
            return np.full(3, level)
        ink = np.array(self.GRID_INKS[int(self.rng.integers(len(self.GRID_INKS)))], np.float64)
        return np.clip(ink + self.rng.uniform(-15, 15, 3), 0, 255)


def _paper(rng: np.random.Generator, sheet: Any) -> np.ndarray:
    """Yellowed paper: a tone darkening towards one end, and fibres (blurred noise)."""
    h, w = sheet.height, sheet.width
    base = rng.uniform(205, 248) - np.linspace(0, rng.uniform(0, 12), w)[None, :] * (1 if rng.random() < 0.5 else -1)
    grain = Image.fromarray(rng.normal(128, 40, (h, w)).clip(0, 255).astype(np.uint8))
    fibre = np.asarray(grain.filter(ImageFilter.GaussianBlur(rng.uniform(0.8, 2.0))), np.float64) - 128
    return np.clip(base + fibre * rng.uniform(0.05, 0.15), 150, 255)


def _furniture(rng: np.random.Generator, sheet: Any, scale: TrackScale, shear: float) -> tuple[np.ndarray, str, bool]:
    """Opacity of the printed grid: track borders, value divisions, depth lines and numbers."""
    canvas = Image.new("L", (sheet.width, sheet.height), 0)
    pen = ImageDraw.Draw(canvas)
    top, bottom, pivot = sheet.top, sheet.bottom, (sheet.top + sheet.bottom) / 2
    faint, heavy = int(rng.integers(70, 140)), int(rng.integers(150, 230))
    for y, strong in _division_rows(rng, scale, top, bottom):
        pen.line([(0, y), (sheet.width - 1, y)], fill=heavy if strong else faint)
    cols, strong_cols, depths = _depth_lines(rng, sheet)
    for x, strong in zip(cols, strong_cols, strict=True):
        ends = [(x + shear * (top - pivot), top), (x + shear * (bottom - pivot), bottom)]
        pen.line(ends, fill=heavy if strong else faint, width=2 if strong and sheet.height > 200 else 1)
    for y in (top, bottom):
        pen.line([(0, y), (sheet.width - 1, y)], fill=255, width=1 + int(sheet.height > 200))
    labelled = [(x, d) for x, s, d in zip(cols, strong_cols, depths, strict=True) if s]
    _numbers(pen, labelled, sheet.strip, sheet.width)
    in_track = rng.random() < 0.2
    if in_track:
        row = round(top + rng.uniform(0.25, 0.75) * (bottom - top))
        _numbers(pen, labelled, (row - (bottom - top) // 8, row + (bottom - top) // 8), sheet.width)
    return np.asarray(canvas, np.float64) / 255 * rng.uniform(0.6, 0.95), "log" if scale.log else "linear", in_track


def _division_rows(rng: np.random.Generator, scale: TrackScale, top: int, bottom: int) -> list[tuple[float, bool]]:
    if scale.log:
        a, b = math.log10(scale.left), math.log10(scale.right)
        lines = int(rng.integers(1, 10))  # lines per decade, the decade's own line included
        multiples = [1, *sorted(rng.choice(np.arange(2, 10), size=lines - 1, replace=False).tolist())]
        spots = [(math.log10(m) + d, m == 1) for d in range(math.floor(min(a, b)), math.ceil(max(a, b)) + 1)
                 for m in multiples]
        fractions = [((s - a) / (b - a), strong) for s, strong in spots]
    else:
        n = int(rng.integers(4, 11))
        fractions = [(k / n, n == 10 and k == 5) for k in range(1, n)]
    return [(top + f * (bottom - top), strong) for f, strong in fractions if 0.01 < f < 0.99]


def _depth_lines(rng: np.random.Generator, sheet: Any) -> tuple[list[float], list[bool], list[float]]:
    """Constant-depth lines at round depths at least 3 px apart; every 5th or 10th heavier."""
    step = next(s * 10**e for e in range(-1, 5) for s in (1, 2, 5) if s * 10**e * sheet.px_per_unit >= 3)
    every = int(rng.choice([5, 10]))
    first = math.ceil(sheet.depth_top / step)
    count = int((sheet.width - 1) / sheet.px_per_unit / step) + 1
    depths = [(first + k) * step for k in range(count)]
    cols = [(d - sheet.depth_top) * sheet.px_per_unit for d in depths]
    keep = [k for k, c in enumerate(cols) if 0 <= c < sheet.width]
    return ([cols[k] for k in keep], [round(depths[k] / step) % every == 0 for k in keep], [depths[k] for k in keep])


def _numbers(pen: ImageDraw.ImageDraw, labelled: list[tuple[float, float]], band: tuple[int, int], width: int) -> None:
    rows = band[1] - band[0]
    if rows < 5 or not labelled:
        return
    font = ImageFont.load_default(size=max(5, min(22, round(rows * 0.7))))
    last = -math.inf
    for x, depth in labelled:
        text = f"{depth:g}"
        if x - last < font.getlength(text) + 6:
            continue  # the numbers would run into each other: print every other one
        pen.text((x + 2, band[0] + rows / 2), text, fill=255, font=font, anchor="lm")
        last = x


def _stains(rng: np.random.Generator, sheet: Any, count: int) -> np.ndarray:
    """A multiplier darkening the paper under each stain, with the darker rim of a dried drop."""
    factor = np.ones((sheet.height, sheet.width))
    for _ in range(count):
        radius = rng.uniform(0.3, 1.0) * sheet.height
        cx, cy = rng.uniform(0, sheet.width), rng.uniform(0, sheet.height)
        blot = Image.new("L", (sheet.width, sheet.height), 0)
        draw = ImageDraw.Draw(blot)
        box = [cx - radius * rng.uniform(1, 2.5), cy - radius, cx + radius * rng.uniform(1, 2.5), cy + radius]
        draw.ellipse(box, fill=int(rng.integers(20, 60)), outline=int(rng.integers(60, 140)),
                     width=max(1, round(radius * 0.05)))
        soft = np.asarray(blot.filter(ImageFilter.GaussianBlur(max(0.5, radius * 0.03))), np.float64) / 255
        factor *= 1 - 0.35 * soft
    return factor


def _scan(rng: np.random.Generator, tone: np.ndarray) -> np.ndarray:
    image = Image.fromarray(np.clip(np.rint(tone), 0, 255).astype(np.uint8))
    blurred = np.asarray(image.filter(ImageFilter.GaussianBlur(rng.uniform(0.2, 0.7))), np.float64)
    noisy = blurred + rng.normal(0, rng.uniform(1.0, 4.0), tone.shape)
    return np.clip(np.rint(noisy), 0, 255).astype(np.uint8)


def _scan_colour(rng: np.random.Generator, noise_rng: np.random.Generator, tone: np.ndarray) -> np.ndarray:
    """(H, W, 3) through the scanner: one blur and one noise level for all three channels, drawn from
    `rng` as `_scan` draws them, and the red channel's noise too, so `rng` runs on as for a gray page."""
    radius, sigma = rng.uniform(0.2, 0.7), rng.uniform(1.0, 4.0)
    out = np.empty(tone.shape, np.uint8)
    for c in range(3):
        image = Image.fromarray(np.clip(np.rint(tone[..., c]), 0, 255).astype(np.uint8))
        blurred = np.asarray(image.filter(ImageFilter.GaussianBlur(radius)), np.float64)
        noise = (rng if c == 0 else noise_rng).normal(0, sigma, blurred.shape)
        out[..., c] = np.clip(np.rint(blurred + noise), 0, 255).astype(np.uint8)
    return out


def _bilevel(image: np.ndarray, paper: np.ndarray, mode: str, lightest_ink: int) -> np.ndarray:
    """A 1-bit scan: Floyd-Steinberg dither of the page levelled to its paper, or a threshold halfway
    from the paper to the lightest ink."""
    if mode == "dither":
        levelled = np.clip(image / paper * 255, 0, 255).astype(np.uint8)
        return np.asarray(Image.fromarray(levelled).convert("1"), dtype=np.uint8) * 255
    threshold = (paper + lightest_ink) / 2
    return np.where(image < threshold, 0, 255).astype(np.uint8)


def _jpeg(image: np.ndarray, quality: int) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=quality)
    mode = "RGB" if image.ndim == 3 else "L"
    return np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert(mode), dtype=np.uint8).copy()
