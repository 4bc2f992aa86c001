"""Drawing and scanning for the full-page paper renderer (bench/paper/sheet.py), written apart from the
training generator's drawing.

`sheet.py` lays a page out as a list of marks (`Plan`): crisp black rules, text, antialiased grid lines of
any weight and gray (a line of width w centred on a fractional row is its band of paper interpolated onto the
pixel centres, so the darkness-weighted centre of its pixels is the row exactly), and the legends' line
samples. `draw` lays them on white paper, darkest ink winning where two cross, with every curve traced down
its track from the well's tool readings (`paper.values`) in its pen's style, width and ink (`paper.raster`'s
cuts), a linear curve past its track's edge sometimes wrapping onto a backup scale. `scan` then does what an
archive's scanner did: a paper tone with a slow mottle, smudges and dirt specks, sometimes a fold and
punch-hole shadows at the side, the skew about the page centre (Pillow's rotate, canvas kept), optics blur,
sensor noise, 1-bit by a threshold or Floyd-Steinberg dither, or gray and sometimes JPEG, and the turn.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from veernet_core.page_spec import CurveSpec, PageSpec, ScanSpec

from .raster import pen_path, style_cuts, styled_marks
from .values import bed_column, keep_in_reach, tool_reading

FONT_DIR = "/usr/share/fonts/truetype/liberation"
# Per curve name: the tool of paper.values it reads, and a factor and power on that tool's value; or a tool of
# this module's own ("BS", "TENS", "DRHO", "PEF").
TOOLS: dict[str, tuple[str, float, float]] = {
    "GR": ("GR", 1.0, 1.0), "SGR": ("GR", 1.1, 1.0), "CGR": ("GR", 0.8, 1.0), "SP": ("SP", 1.0, 1.0),
    "CALI": ("CALI", 1.0, 1.0), "NPHI": ("NPHI", 1.0, 1.0), "CNL": ("NPHI", 100.0, 1.0),
    "RHOB": ("RHOB", 1.0, 1.0), "DT": ("DT", 1.0, 1.0), "ILD": ("RT", 1.0, 1.0), "LLD": ("RT", 1.1, 1.0),
    "LN": ("RT", 0.9, 1.0), "ILM": ("RT", 1.3, 0.8), "LLS": ("RT", 1.2, 0.85), "SN": ("RT", 1.4, 0.7),
    "SFLU": ("MSFL", 1.0, 1.0), "MSFL": ("MSFL", 1.0, 1.0), "RXO": ("MSFL", 1.2, 0.9), "LL8": ("MSFL", 1.5, 0.8),
}
PEF_BY_ROCK = {"shale": (2.7, 3.6), "sand": (1.7, 2.3), "lime": (4.6, 5.3), "coal": (0.2, 0.6)}


@cache
def font(face: str, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(f"{FONT_DIR}/{face}", size)


def cap_height(face: str, size: int) -> float:
    """Pixels from the baseline to the top of a capital."""
    return float(-font(face, size).getbbox("H", anchor="ls")[1])


def text_width(text: str, face: str, size: int) -> float:
    return float(font(face, size).getlength(text))


@dataclass(frozen=True)
class Rule:
    """A crisp black rectangle: rows r0..r1 and columns c0..c1, both inclusive."""

    r0: int
    c0: int
    r1: int
    c1: int


@dataclass(frozen=True)
class Text:
    x: float
    y: float  # the baseline for anchors "ls", "ms", "rs"
    text: str
    face: str
    size: int
    anchor: str = "ls"


@dataclass(frozen=True)
class Line:
    """A grid line `width` px wide centred on `at` (a row if horizontal, else a column), from `start` to
    `stop` (inclusive) along it, in a gray `ink` on white paper."""

    horizontal: bool
    at: float
    start: int
    stop: int
    width: float
    ink: float


@dataclass(frozen=True)
class Sample:
    """A curve's line sample in a legend: track `track`'s curve `curve`, along `row` from c0 to c1."""

    row: float
    c0: float
    c1: float
    track: int
    curve: int


@dataclass
class Plan:
    height: int
    width: int
    border_px: int  # the frame lines' and track borders' width
    rules: list[Rule] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)


@dataclass(frozen=True)
class Scanner:
    spec: ScanSpec
    mode: str  # "gray", "threshold" or "dither"
    paper: float  # the paper's gray
    ink: float  # the page's black ink, on white paper
    jpeg: int  # quality, 0 for none
    fold: float | None  # where a fold crosses the page, as a share of its height
    punch: bool  # shadows of punched holes at the left side
    clean: bool = False  # white paper and the inks only: no scanner at all


def sample_scanner(rng: np.random.Generator, dpi: int, max_skew: float) -> Scanner:
    mode = str(rng.choice(["gray", "threshold", "dither"], p=[0.42, 0.48, 0.10]))
    skew = float(rng.uniform(-max_skew, max_skew)) if rng.random() < 0.85 else 0.0
    turn = int(rng.choice([0, 0, 0, 0, 0, 90, 180, 270]))
    spec = ScanSpec(mode != "gray", skew, turn, float(rng.uniform(0.3, 0.9) * dpi / 300), float(rng.uniform(2, 9)),
                    float(rng.uniform(0.62, 0.8)), float(rng.uniform(0.2, 3.0)))
    jpeg = int(rng.integers(50, 91)) if mode == "gray" and rng.random() < 0.35 else 0
    fold = float(rng.uniform(0.3, 0.7)) if rng.random() < 0.2 else None
    return Scanner(spec, mode, float(rng.uniform(205, 250)), float(rng.uniform(5, 45)), jpeg, fold,
                   bool(rng.random() < 0.15))


def clean_scanner() -> Scanner:
    return Scanner(ScanSpec(False, 0.0, 0, 0.0, 0.0, 0.0, 0.0), "gray", 255.0, 0.0, 0, None, False, True)


# ---------------------------------------------------------------- drawing


def draw(rng: np.random.Generator, plan: Plan, spec: PageSpec, ink: float,
         truth: dict[str, Any] | None = None) -> np.ndarray:
    """The upright printed page, float32, 255 white paper; darkest ink wins where marks cross. With `truth` (a
    dict to fill), its curves as drawn: "fractions", per section and curve (in track order), the fraction across
    its track the pen stands for at each row from ceil(top) + 1 to floor(bottom) - 1 (past 1 on the backup scale
    past the right edge where the curve has one; NaN on rows the pen does not reach), and "wraps", per (track,
    curve), whether it has that backup scale."""
    tone = np.full((plan.height, plan.width), 255.0, np.float32)
    for line in plan.lines:
        _line(tone, line)
    tracks = spec.sections[0].tracks
    scale = spec.dpi / 300
    cuts = {(j, k): style_cuts(c.style, scale, c.stroke_px(spec.dpi), rng)
            for j, track in enumerate(tracks) for k, c in enumerate(track.curves)}
    for s in plan.samples:
        curve = tracks[s.track].curves[s.curve]
        marks = styled_marks([(0, [(s.c0, s.row), (s.c1, s.row)])], cuts[(s.track, s.curve)], 0.0)
        _pen(tone, marks, curve, spec.dpi, curve.pen_gray(round(ink)))
    readings = _readings(rng, spec)
    # a linear curve past its track's right edge comes back from the left on a backup scale, as recorders do
    wraps = {(j, k): not c.log and rng.random() < 0.4
             for j, track in enumerate(tracks) for k, c in enumerate(track.curves)}
    inner = plan.border_px / 2 + 1
    fractions: list[list[np.ndarray]] = []
    for section in spec.sections:
        step = max(1.0, spec.dpi / 200)
        rows = np.arange(math.ceil(section.top + inner), math.floor(section.bottom - inner), step)
        depth = section.depth_at(rows)
        every = np.arange(math.ceil(section.top) + 1, math.floor(section.bottom), dtype=np.float64)
        fractions.append([])
        for j, track in enumerate(section.tracks):
            lo, hi = track.left + inner, track.right - inner
            for k, curve in enumerate(track.curves):
                depths, values = readings[curve.mnemonic]
                backup = (1,) if wraps[(j, k)] else ()
                fraction = keep_in_reach(_fraction(curve, np.interp(depth, depths, values)), backup)
                at_rows = np.interp(every, rows, fraction)  # on the pen's path: straight between drawn rows
                # the pen runs between lo and hi, inside the borders: its place as a fraction between the borders
                side = (at_rows > 1).astype(np.float64)
                across = (lo - track.left + (at_rows - side) * (hi - lo)) / (track.right - track.left) + side
                fractions[-1].append(np.where((every >= rows[0]) & (every <= rows[-1]), across, np.nan))
                pieces = [(side, [(c, r) for r, c in points]) for side, points in pen_path(rows, fraction, lo, hi)]
                marks = styled_marks(pieces, cuts[(j, k)], float(rng.uniform(0, 50)))
                _pen(tone, marks, curve, spec.dpi, curve.pen_gray(round(ink)))
    black = Image.new("L", (plan.width, plan.height), 0)
    pen = ImageDraw.Draw(black)
    for r in plan.rules:
        pen.rectangle([r.c0, r.r0, r.c1, r.r1], fill=255)
    for t in plan.texts:
        pen.text((t.x, t.y), t.text, fill=255, font=font(t.face, t.size), anchor=t.anchor)
    cover = np.asarray(black, np.float32) * ((255.0 - ink) / 255.0)
    np.minimum(tone, 255.0 - cover, out=tone)
    if truth is not None:
        truth.update(fractions=fractions, wraps=wraps)
    return tone


def _line(tone: np.ndarray, line: Line) -> None:
    """A line's cover of each pixel: its band of paper, linearly interpolated onto the pixel centres (a box of
    its width convolved with a one-pixel tent), so that the cover's centroid is the line's centre exactly."""
    lo, hi = line.at - line.width / 2, line.at + line.width / 2
    first, last = math.floor(lo), math.ceil(hi)
    px = np.arange(first, last + 1, dtype=np.float64)
    cover = _tent_integral(px - lo) - _tent_integral(px - hi)
    shade = (255.0 - (255.0 - line.ink) * cover).astype(np.float32)
    if line.horizontal:
        view = tone[first : last + 1, line.start : line.stop + 1]
        np.minimum(view, shade[:, None], out=view)
    else:
        view = tone[line.start : line.stop + 1, first : last + 1]
        np.minimum(view, shade[None, :], out=view)


def _tent_integral(u: np.ndarray) -> np.ndarray:
    """The integral of the one-pixel tent (1 - |x| on -1..1) up to u."""
    u = np.clip(u, -1.0, 1.0)
    return np.where(u <= 0, (u + 1) ** 2 / 2, 1 - (1 - u) ** 2 / 2)


def _pen(tone: np.ndarray, marks: list, curve: CurveSpec, dpi: int, gray: int) -> None:
    """A pen's marks ((col, row) points) drawn at the page's resolution into the box they span."""
    if not marks:
        return
    stroke = curve.stroke_px(dpi)
    points = np.array([p for _, _, pts in marks for p in pts], dtype=np.float64)
    c0, r0 = (np.floor(points.min(axis=0)) - stroke - 2).astype(int)
    c1, r1 = (np.ceil(points.max(axis=0)) + stroke + 2).astype(int)
    c0, r0 = max(c0, 0), max(r0, 0)
    c1, r1 = min(c1, tone.shape[1] - 1), min(r1, tone.shape[0] - 1)
    layer = Image.new("L", (c1 - c0 + 1, r1 - r0 + 1), 0)
    pen = ImageDraw.Draw(layer)
    radius = stroke / 2
    for _, kind, pts in marks:
        shifted = [(x - c0, y - r0) for x, y in pts]
        if kind == "dot" or len(shifted) == 1:
            x, y = shifted[0]
            pen.ellipse([x - radius, y - radius, x + radius, y + radius], fill=255)
        else:
            pen.line(shifted, fill=255, width=stroke, joint="curve" if stroke > 2 else None)
    view = tone[r0 : r1 + 1, c0 : c1 + 1]
    np.minimum(view, 255.0 - np.asarray(layer, np.float32) * ((255.0 - gray) / 255.0), out=view)


def _fraction(curve: CurveSpec, value: np.ndarray) -> np.ndarray:
    if curve.log:
        low, high = math.log10(curve.left), math.log10(curve.right)
        return (np.log10(np.maximum(value, 1e-6)) - low) / (high - low)
    return (value - curve.left) / (curve.right - curve.left)


def _readings(rng: np.random.Generator, spec: PageSpec) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per curve name: depths (the page's unit) and the tool's values there, sampled as logging tools record
    (a value every half foot, or 10 or 15 cm) over every section's interval: one well, so a repeat section shows
    the same rock in more detail, the pen running straight from sample to sample."""
    metres = 0.3048 if spec.sections[0].scale.unit == "ft" else 1.0
    step = 0.5 if metres < 1 else float(rng.choice([0.1, 0.1524]))  # a sample per half foot, or 10 or 15 cm
    lo = min(s.depth_top for s in spec.sections) - 2 * step
    hi = max(s.depth_bottom for s in spec.sections) + 2 * step
    depths = np.arange(lo, hi, step)
    beds = bed_column(rng, depths * metres)
    per_metre = 1.0 / (step * metres)
    tools: dict[str, np.ndarray] = {}
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    names = sorted({c.mnemonic for s in spec.sections for t in s.tracks for c in t.curves})
    for name in names:
        if name in TOOLS:
            tool, factor, power = TOOLS[name]
            if tool not in tools:
                tools[tool] = tool_reading(rng, tool, beds, per_metre)
            value = factor * np.sign(tools[tool]) * np.abs(tools[tool]) ** power
            # what varies inside a bed: slow trends and a finer ripple
            drift = 0.1 * _wander(rng, depths.size, round(4.0 * per_metre)) + 0.05 * _wander(
                rng, depths.size, round(0.6 * per_metre))
            if tool in ("RT", "MSFL"):
                value = value * 10**drift
            else:
                value = value + float(np.ptp(np.percentile(value, [5, 95]))) * drift
        else:
            value = _own_tool(rng, name, beds, depths.size)
        out[name] = (depths, value)
    return out


def _own_tool(rng: np.random.Generator, name: str, beds: tuple[np.ndarray, list[str], np.ndarray],
              size: int) -> np.ndarray:
    bed, lith, quality = beds
    if name == "BS":  # the bit size: a constant line
        return np.full(size, float(rng.choice([7.875, 8.5, 8.75, 12.25])))
    if name == "PEF":
        low, high = (np.array([PEF_BY_ROCK[n][k] for n in lith]) for k in (0, 1))
        return (low + quality * (high - low))[bed] + rng.normal(0, 0.12, size)
    walk = _wander(rng, size, 25)
    if name == "TENS":  # cable tension: a slow drift with stick and pull
        return 5500 + 600 * walk + rng.normal(0, 60, size)
    # DRHO: the density correction, near zero, off in coals and rough hole
    coal = np.array([n == "coal" for n in lith])[bed]
    return 0.015 + 0.01 * walk + 0.12 * coal + rng.normal(0, 0.008, size)


def _wander(rng: np.random.Generator, size: int, window: int) -> np.ndarray:
    """A smooth random walk of unit spread."""
    walk = np.cumsum(rng.normal(0, 1, size + 2 * window))
    walk = np.convolve(walk, np.ones(max(1, window)) / max(1, window), mode="same")[window : window + size]
    walk -= walk.mean()
    return walk / max(float(walk.std()), 1e-9)


# ---------------------------------------------------------------- scanning


def scan(rng: np.random.Generator, tone: np.ndarray, scanner: Scanner, dpi: int) -> np.ndarray:
    """The printed page as the archive's scanner stored it (see the module docstring)."""
    if scanner.clean:
        return np.clip(np.rint(tone), 0, 255).astype(np.uint8)
    s = scanner.spec
    height, width = tone.shape
    mottle = rng.normal(0, 1, (height // 96 + 2, width // 96 + 2)).astype(np.float32)
    mottle_full = np.asarray(Image.fromarray(mottle, "F").resize((width, height), Image.Resampling.BILINEAR))
    tone *= (scanner.paper + float(rng.uniform(1.5, 5)) * mottle_full) / 255.0
    if scanner.fold is not None:
        _fold(tone, round(scanner.fold * height), dpi, float(rng.uniform(0.8, 0.93)))
    count = rng.poisson(s.dirt * width * height / dpi**2)
    for _ in range(int(count * 0.1)):  # faint smudges: the paper darkened, the ink showing through
        _smudge(rng, tone, dpi)
    image = Image.fromarray(np.clip(np.rint(tone), 0, 255).astype(np.uint8))
    del tone, mottle_full
    pen = ImageDraw.Draw(image)
    if scanner.punch:
        shadow = int(rng.uniform(40, 120))
        x, radius = rng.uniform(0.2, 0.27) * dpi, rng.uniform(0.11, 0.14) * dpi
        for y in (height / 2 + k * 4.25 * dpi for k in (-1, 0, 1)):
            if radius < y < height - radius:
                pen.ellipse([x - radius, y - radius, x + radius, y + radius], fill=shadow)
    for _ in range(count):  # specks of dirt on the page or the glass
        x, y = rng.uniform(0, width), rng.uniform(0, height)
        r = rng.uniform(0.4, 2.2) * dpi / 300
        pen.ellipse([x - r, y - r * rng.uniform(0.5, 1.5), x + r, y + r], fill=int(rng.uniform(10, 90)))
    if s.skew_deg:
        image = image.rotate(s.skew_deg, Image.Resampling.BILINEAR, fillcolor=round(scanner.paper))
    if s.blur > 0:
        image = image.filter(ImageFilter.GaussianBlur(s.blur))
    out = np.asarray(image, np.float32) + rng.standard_normal((height, width), dtype=np.float32) * s.noise
    ink = scanner.ink * scanner.paper / 255
    if scanner.mode == "threshold":
        result = np.where(out < ink + s.threshold * (scanner.paper - ink), 0, 255).astype(np.uint8)
    elif scanner.mode == "dither":  # the scanner's white point set on the paper, then Floyd-Steinberg
        stretched = np.clip((out - ink) / (scanner.paper - ink) * 255 + 24, 0, 255).astype(np.uint8)
        bits = Image.fromarray(stretched).convert("1", dither=Image.Dither.FLOYDSTEINBERG)
        result = np.asarray(bits, np.uint8) * np.uint8(255)
    else:
        result = np.clip(np.rint(out), 0, 255).astype(np.uint8)
        if scanner.jpeg:
            buffer = io.BytesIO()
            Image.fromarray(result).save(buffer, format="JPEG", quality=scanner.jpeg)
            result = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("L"), np.uint8)
    return np.ascontiguousarray(np.rot90(result, s.turn // 90))


def _fold(tone: np.ndarray, row: int, dpi: int, depth: float) -> None:
    """A crease across the page: a soft dark valley with a lighter lip above it."""
    half = max(3, round(0.04 * dpi))
    offsets = np.arange(-half, half + 1, dtype=np.float32)
    profile = 1 - (1 - depth) * np.exp(-0.5 * (offsets / (half / 3)) ** 2) + 0.04 * np.exp(
        -0.5 * ((offsets + half / 2) / (half / 4)) ** 2)
    lo, hi = max(0, row - half), min(tone.shape[0], row + half + 1)
    tone[lo:hi] = np.minimum(tone[lo:hi] * profile[lo - row + half : hi - row + half, None], 255)


def _smudge(rng: np.random.Generator, tone: np.ndarray, dpi: int) -> None:
    height, width = tone.shape
    ry, rx = rng.uniform(0.03, 0.15, 2) * dpi
    y, x = rng.uniform(0, height), rng.uniform(0, width)
    r0, r1 = max(0, int(y - 2 * ry)), min(height, int(y + 2 * ry) + 1)
    c0, c1 = max(0, int(x - 2 * rx)), min(width, int(x + 2 * rx) + 1)
    if r0 >= r1 or c0 >= c1:
        return
    rows, cols = np.ogrid[r0:r1, c0:c1]
    blot = np.exp(-0.5 * (((rows - y) / ry) ** 2 + ((cols - x) / rx) ** 2)).astype(np.float32)
    tone[r0:r1, c0:c1] *= 1 - float(rng.uniform(0.04, 0.12)) * blot
