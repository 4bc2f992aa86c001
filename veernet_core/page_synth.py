"""Full-page synthetic raster logs with exact truth, for page layout analysis.

A page is what an archive holds: portrait, a header block at the top, then one or more log sections
(a 1 in and a 5 in section of the same well, say), each a strip of track headers (curve names, scale
ends, line-style samples) above a grid of tracks with the depth column between the first and the
second; depth numbers in printed fonts, heavy and light grid lines, linear and logarithmic value
grids. One to three curves a track, each in a line style (solid, dashed or dotted), pen width (1-4 px at
300 dpi) and ink (the page's black, or a gray pen) of its own, drawn so in its header's sample as a legend
shows it: nothing ties a curve's look to its place. It is scanned at 150-400 dpi, gray or 1-bit, skewed,
dirtied, sometimes stored turned.

A page is a pure function of (seed, index, options): the same arguments give the same pixels and the
same truth in any process. The truth (`PageSpec`) is in the upright, unskewed page's pixels: pixel
(r, c) has its centre at row r, column c; a line's position is the centre of its drawn pixels, and a
section's depth is exactly linear in the row (`SectionSpec.depth_at`). The scan turns the page by
`turn` degrees counter-clockwise after skewing it by `skew_deg` about its centre, so an analyser that
turns it back and undoes the skew about the centre lands on the truth's pixels.

The drawing lives in `veernet_core.page_draw`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from veernet_core import page_draw
from veernet_core.digitise.layout.scales import DepthScale, scale_named
from veernet_core.page_spec import CurveSpec, PageSpec, ScanSpec, SectionSpec, TrackSpec

PAGE_WIDTH_IN = 8.5
DPI_RANGE = (150, 400)
MAX_SKEW_DEG = 0.8


PAGE_STREAM = 0x9A6E  # a page's own random stream: its layout first (`sample_spec`), then its drawing


@dataclass
class SynthPage:
    image: np.ndarray  # uint8 as scanned (turned, skewed, dirty; 0/255 when bitonal)
    spec: PageSpec
    # [section][curve in track order]: fraction across its track for rows ceil(top) + 1 .. floor(bottom) - 1
    curve_fractions: list[list[np.ndarray]] = field(default_factory=list)
    # [section][curve in track order]: held at one value or a few in steps (a bit size: `page_draw._curves`); empty
    # where the page's renderer does not say (bench/paper's pages)
    constant: list[list[bool]] = field(default_factory=list)


@dataclass(frozen=True)
class PageOptions:
    """What may vary between pages; fixing a field (e.g. `dpi`) pins it on every page."""

    dpi: int | None = None
    bitonal: bool | None = None
    turn: int | None = None
    skew_deg: float | None = None
    sections: int | None = None  # 1 or 2
    unit: str | None = None  # "ft" or "m"
    first_section_in: tuple[float, float] = (8.0, 16.0)  # paper length of the first section's grid
    second_section_in: tuple[float, float] = (4.0, 8.0)
    width_px: int | None = None  # pins the page width (its dpi follows from an 8.5 in page)
    dirt: bool = True


def generate_page(seed: int, index: int, options: PageOptions = PageOptions()) -> SynthPage:
    """One scanned page and its truth."""
    if seed < 0 or index < 0:
        raise ValueError(f"seed and index must be non-negative, got seed={seed}, index={index}")
    rng = np.random.default_rng([seed, index, PAGE_STREAM])
    spec = sample_spec(rng, seed, index, options)
    upright, fractions, constant = page_draw.render(rng, spec)
    return SynthPage(page_draw.scan(rng, upright, spec), spec, fractions, constant)


def sample_spec(rng: np.random.Generator, seed: int, index: int, options: PageOptions) -> PageSpec:
    dpi = options.dpi or (round(options.width_px / PAGE_WIDTH_IN) if options.width_px
                          else int(rng.integers(DPI_RANGE[0], DPI_RANGE[1] + 1)))
    width = options.width_px or round(PAGE_WIDTH_IN * dpi)
    unit = options.unit or ("ft" if rng.random() < 0.75 else "m")
    count = options.sections or (2 if rng.random() < 0.5 else 1)
    header_lines, well = _header_text(rng, unit)
    header_top = round(0.3 * dpi)
    header_bottom = header_top + round((len(header_lines) * 0.21 + 0.25) * dpi)
    lengths = [rng.uniform(*(options.first_section_in if k == 0 else options.second_section_in)) for k in range(count)]
    scan = _scan(rng, options, dpi)
    # The scanner sees past the sheet's edges, so a skewed page is never cut off: the tracks keep clear of
    # the edges by what the skew moves a column at the page's ends (its height bounded from above).
    tallest_in = (header_bottom / dpi + sum(lengths) + count * (3 * page_draw.HEADER_SLOT_IN + 1.0))
    clear = math.tan(math.radians(abs(scan.skew_deg))) * tallest_in * dpi / 2 + page_draw.border_px(dpi) + 4
    columns = _columns(rng, dpi, width, clear)
    sections: list[SectionSpec] = []
    row = header_bottom + round(rng.uniform(0.3, 0.6) * dpi)
    for k, scale in enumerate(_section_scales(rng, unit, count)):
        section = _section(rng, dpi, row, scale, lengths[k], columns, sections[0] if sections else None)
        sections.append(section)
        row = math.ceil(section.bottom) + round(rng.uniform(0.4, 0.8) * dpi)
    height = row - round(0.2 * dpi)
    # Each curve's pen and line style from a stream of its own, so that the page's layout, curves and scan
    # draw what they drew before pens were varied.
    tracks = _pens(np.random.default_rng([seed, index, 0x9E45]), sections[0].tracks)
    sections = [replace(section, tracks=tracks) for section in sections]
    return PageSpec(seed, index, dpi, width, height, (header_top, header_bottom), tuple(header_lines), well,
                    page_draw.pick_font(rng), tuple(sections), scan)


def _section_scales(rng: np.random.Generator, unit: str, count: int) -> list[DepthScale]:
    if unit == "ft":
        first = scale_named("1 in per 100 ft" if rng.random() < 0.8 else "2 in per 100 ft")
        return [first, scale_named("5 in per 100 ft")][:count]
    return [scale_named("1:500"), scale_named("1:200")][:count]


def _scan(rng: np.random.Generator, options: PageOptions, dpi: int) -> ScanSpec:
    bitonal = bool(rng.random() < 0.6) if options.bitonal is None else options.bitonal
    turn = options.turn if options.turn is not None else int(rng.choice([0, 0, 0, 0, 90, 180, 270]))
    skew = options.skew_deg if options.skew_deg is not None else float(rng.uniform(-MAX_SKEW_DEG, MAX_SKEW_DEG))
    return ScanSpec(bitonal, skew, turn, float(rng.uniform(0.2, 0.6) * dpi / 300), float(rng.uniform(2, 10)),
                    float(rng.uniform(0.6, 0.85)), float(rng.uniform(0.5, 4.0)) if options.dirt else 0.0)


@dataclass(frozen=True)
class _Columns:
    """Border centres of the tracks, left to right; the depth column is between the first and second."""

    borders: tuple[float, ...]
    depth_index: int  # the depth column lies between borders[depth_index] and borders[depth_index + 1]
    merged: bool  # the tracks right of the depth column form one wide logarithmic track


def _columns(rng: np.random.Generator, dpi: int, width: int, clear: float) -> _Columns:
    """Track 1, the depth column, then one wide track or two (the API layout), in whole-pixel borders, at
    least `clear` pixels from the page's sides."""
    weight = page_draw.border_px(dpi)
    margin = max(rng.uniform(0.2, 0.35) * dpi, clear)
    usable = width - 2 * margin
    depth_share = rng.uniform(0.08, 0.11)
    merged = bool(rng.random() < 0.3)
    rest = (1 - depth_share) / 3
    shares = [rest, depth_share] + ([2 * rest] if merged else [rest, rest])
    edges = margin + usable * np.cumsum([0.0, *shares])
    first_pixels = np.round(edges - (weight - 1) / 2)
    return _Columns(tuple(float(x + (weight - 1) / 2) for x in first_pixels), 1, merged)


CURVES_LINEAR: tuple[CurveSpec, ...] = (
    CurveSpec("GR", "API", 0, 150, False, "solid"), CurveSpec("GR", "API", 0, 200, False, "solid"),
    CurveSpec("SP", "MV", -80, 20, False, "solid"), CurveSpec("CALI", "IN", 6, 16, False, "solid"),
    CurveSpec("NPHI", "V/V", 0.45, -0.15, False, "solid"), CurveSpec("RHOB", "G/C3", 1.95, 2.95, False, "solid"),
    CurveSpec("DT", "US/F", 140, 40, False, "solid"), CurveSpec("PEF", "B/E", 0, 10, False, "solid"),
)
CURVES_LOG: tuple[tuple[str, str], ...] = (("ILD", "OHMM"), ("ILM", "OHMM"), ("SFLU", "OHMM"), ("LLD", "OHMM"),
                                          ("LLS", "OHMM"), ("MSFL", "OHMM"))
LOG_LEFTS = (0.2, 1.0, 2.0)
STYLES = ("solid", "dashed", "dotted")


def _tracks(rng: np.random.Generator, columns: _Columns) -> tuple[TrackSpec, ...]:
    b = columns.borders
    spans = [(b[0], b[1])] + ([(b[2], b[3])] if columns.merged else [(b[2], b[3]), (b[3], b[4])])
    grids = [("linear", int(rng.choice([10, 10, 5])))]
    if columns.merged:
        grids.append(("log", 4))
    else:
        grids.append(("log", int(rng.integers(2, 5))) if rng.random() < 0.6 else ("linear", 10))
        grids.append(("linear", int(rng.choice([10, 10, 4]))))
    return tuple(TrackSpec(left, right, grid, divisions, _track_curves(rng, grid, divisions))
                 for (left, right), (grid, divisions) in zip(spans, grids, strict=True))


def _track_curves(rng: np.random.Generator, grid: str, divisions: int) -> tuple[CurveSpec, ...]:
    count = int(rng.integers(1, 4))
    if grid == "log":
        left = float(rng.choice(LOG_LEFTS))
        names = rng.choice(len(CURVES_LOG), count, replace=False)
        picked = [CurveSpec(CURVES_LOG[i][0], CURVES_LOG[i][1], left, left * 10**divisions, True, "solid")
                  for i in names]
    else:
        chosen: list[CurveSpec] = []
        seen: set[str] = set()
        for i in rng.permutation(len(CURVES_LINEAR)):
            if CURVES_LINEAR[i].mnemonic not in seen and len(chosen) < count:
                chosen.append(CURVES_LINEAR[i])
                seen.add(CURVES_LINEAR[i].mnemonic)
        picked = chosen
    return tuple(picked)  # their looks are drawn afterwards, from a stream of their own (`_pens`)


PEN_PX_AT_300 = (1, 2, 3, 4)  # pen widths, in pixels at 300 dpi
LIGHT_SHARE = 0.3  # share of curves drawn with a gray pen
LIGHT_GRAYS = (90, 140)  # a gray pen's range on white paper: light, yet kept by a 1-bit scan's threshold
STYLE_WEIGHTS = (0.5, 0.3, 0.2)  # solid, dashed, dotted: any curve in any style, two alike in a track too


def _pens(rng: np.random.Generator, tracks: tuple[TrackSpec, ...]) -> tuple[TrackSpec, ...]:
    """Every curve with a line style, pen width and ink of its own: nothing on the page ties a curve's look
    to its place in the header."""
    def pen(curve: CurveSpec) -> CurveSpec:
        style = str(rng.choice(STYLES, p=STYLE_WEIGHTS))
        stroke_in = int(rng.choice(PEN_PX_AT_300)) / 300
        gray = int(rng.integers(LIGHT_GRAYS[0], LIGHT_GRAYS[1] + 1)) if rng.random() < LIGHT_SHARE else None
        return replace(curve, style=style, stroke_in=stroke_in, gray=gray)
    return tuple(replace(track, curves=tuple(pen(curve) for curve in track.curves)) for track in tracks)


def _section(rng: np.random.Generator, dpi: int, row: int, scale: DepthScale, length_in: float, columns: _Columns,
             first: SectionSpec | None) -> SectionSpec:
    """A section whose track-header strip starts at `row`; the second one repeats an interval of the first."""
    tracks = first.tracks if first is not None else _tracks(rng, columns)
    slots = max(len(t.curves) for t in tracks)
    top = float(row + round((slots * page_draw.HEADER_SLOT_IN + 0.12) * dpi))
    rows_per_unit = scale.rows_per_unit(dpi)
    span = scale.minor * max(4, round(length_in * dpi / rows_per_unit / scale.minor))
    if first is None:
        depth_top = scale.major * float(rng.integers(5, 80))
    else:
        lo, hi = first.depth_top, max(first.depth_top, first.depth_bottom - span)
        depth_top = scale.major * math.floor(rng.uniform(lo, hi) / scale.major)
    bottom = top + span * rows_per_unit
    b = columns.borders
    return SectionSpec(scale.name, row, top, bottom, depth_top, rows_per_unit, (b[1], b[2]), tracks)


HEADER_WORDS = ("PETRO", "NORTH", "STAR", "BASIN", "RIVER", "EAGLE", "ROCK", "MESA", "PRAIRIE", "GULF", "DELTA")


def _header_text(rng: np.random.Generator, unit: str) -> tuple[list[str], str]:
    """The header block's lines and the well's name on them."""
    def word() -> str:
        return str(rng.choice(HEADER_WORDS))
    well = f"{word()} {word()} {int(rng.integers(1, 40))}-{int(rng.integers(1, 36))}"
    scales = "1 IN = 100 FT, 5 IN = 100 FT" if unit == "ft" else "1:500, 1:200"
    lines = [f"COMPANY  {word()} {word()} OIL CO", f"WELL  {well}", f"FIELD  {word()} {word()}",
             f"COUNTY  {word()}    STATE  {word()}", f"LOG  INDUCTION ELECTRICAL LOG    SCALES  {scales}",
             f"DATE  {int(rng.integers(1, 29)):02d}-{int(rng.integers(1, 13)):02d}-19{int(rng.integers(55, 99))}"]
    return lines, well

