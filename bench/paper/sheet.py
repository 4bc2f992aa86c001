"""Full pages of printed well logs, drawn apart from the training generator, to measure page layout analysis on.

`render_page(seed, index)` draws a portrait page as an archive holds it and returns it with its truth in the
full-page truth format (`veernet_core.page_spec.PageSpec`, in the upright unskewed page's pixels: pixel (r, c)
centred at row r, column c; a line where the centre of its pixels is; depth exactly linear in the row), the
row each curve's name is printed on (`header_rows`) and its scale ends (`ends_rows`: the name's row, or a line
of their own under the sample in legend layout "c"), and the conventions it was drawn with (`style`).

The conventions are those of printed logs, chosen per page: a ruled header block of well data (label: value
lines, a two-column table with cell rules, or a title banner over them) stating the depth scales; one or two
sections (1 or 2 in per 100 ft with a 5 in repeat of part of it, or 1:500 with 1:200), each a strip of track
headers over a grid; track 1 linear, the depth column, then tracks 2 and 3 (log and linear, or both linear)
or one wide logarithmic track; legends with one entry per curve in one of four layouts (`LEGENDS`), units
bracketed or bare in several spellings, scale ends printed as headers print them ("0", "150.0", ".2",
"-0.15", "2000"); LAS mnemonics; Liberation fonts at 6-10 pt; minor, medium and major depth lines in
grays and weights of the page's own; linear grids of 4, 5 or 10 divisions (a heavier centre sometimes), log
grids of 2-4 decades; depth numbers centred in the depth column, over a heavy line crossing it, or between
tick marks; sometimes the legend repeated under the grid. The drawing and the scanner are `paper.sheet_draw`.

A page is a pure function of (seed, index, clean): `clean` draws the same page on white paper with no scanner
(no skew, turn, dirt, blur, noise or 1-bit), for exactness tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from veernet_core.digitise.layout.scales import DepthScale, scale_named
from veernet_core.page_spec import CurveSpec, PageSpec, SectionSpec, TrackSpec

from . import sheet_draw
from .render import pick
from .sheet_draw import Line, Plan, Rule, Sample, Text, cap_height, text_width

PAGE_WIDTH_IN = 8.5
DPI_RANGE = (150, 400)
MAX_SKEW_DEG = 0.8
TALLEST_IN = 36.0  # no page is taller: what the skew clearance at the sides is reckoned for
PIXEL_BUDGET = 30_000_000  # sections are shortened at high resolutions so that a page stays under this
STREAM = 0x51EE7  # this renderer's own word in a page's random stream
FAMILIES = ("LiberationSans", "LiberationSerif", "LiberationMono", "LiberationSansNarrow")
# a: left end, name (unit), right end on one line, the sample under it; b: the sample over that line;
# c: name (unit) over the sample, the ends under its two ends; d: each entry in a ruled cell, inside as a or c
LEGENDS = (("a", 0.22), ("b", 0.26), ("c", 0.26), ("d", 0.26))
STYLES = ("solid", "dashed", "dotted")
# Linear curves: unit spellings and the scales headers print for them (left, right)
LINEAR: dict[str, tuple[tuple[str, ...], tuple[tuple[float, float], ...]]] = {
    "GR": (("GAPI", "API"), ((0, 150), (0, 100), (0, 200), (0, 120))),
    "SGR": (("GAPI", "API"), ((0, 150), (0, 200))),
    "CGR": (("GAPI", "API"), ((0, 150), (0, 100))),
    "SP": (("MV", "mV"), ((-80, 20), (-100, 0), (-160, 40), (-60, 40))),
    "CALI": (("IN", "INCH"), ((6, 16), (4, 14), (8, 18))),
    "BS": (("IN", "INCH"), ((6, 16), (4, 14))),
    "TENS": (("LBF", "LB"), ((10000, 0), (0, 10000))),
    "NPHI": (("V/V", "DEC", "CFCF"), ((0.45, -0.15), (0.6, 0.0), (0.3, -0.1))),
    "CNL": (("PU", "%"), ((45, -15), (30, -10), (60, 0))),
    "RHOB": (("G/C3", "G/CC", "GM/CC"), ((1.95, 2.95), (2.0, 3.0), (1.9, 2.9))),
    "DRHO": (("G/C3", "G/CC"), ((-0.25, 0.25), (-0.75, 0.25))),
    "DT": (("US/F", "US/FT", "USEC/FT"), ((140, 40), (150, 50), (240, 40))),
    "PEF": (("B/E",), ((0, 10), (0, 20))),
}
LOG_FAMILIES = (("ILD", "ILM", "SFLU"), ("LLD", "LLS", "MSFL"), ("LN", "SN", "LL8"), ("ILD", "ILM", "LL8"))
LOG_UNITS = ("OHMM", "OHM-M", "OHM.M", "OHMS")
LOG_LEFTS = (0.2, 0.2, 0.2, 1.0, 2.0, 0.1)
PEN_IN = (0.004, 0.007, 0.010, 0.013)  # pen widths, inches of paper


@dataclass
class PaperPage:
    image: np.ndarray  # uint8 (H, W) as scanned: turned, skewed, dirty; only 0/255 when 1-bit
    spec: PageSpec  # truth, in the upright unskewed page's pixels
    # [section][track][curve]: page row (upright, unskewed) of the centre of the text line carrying the curve's name
    header_rows: tuple[tuple[tuple[float, ...], ...], ...]
    style: dict[str, Any]  # the conventions this page was drawn with
    # the same for the text line carrying the curve's scale ends: its name's line, or the line under its sample
    # where the legend prints the ends there (layout "c")
    ends_rows: tuple[tuple[tuple[float, ...], ...], ...] = ()
    # [section][curve, in track order]: the fraction across its track each curve's pen stands for at rows
    # ceil(top) + 1 .. floor(bottom) - 1 (past 1 on a backup scale; NaN where it is not drawn)
    curve_fractions: list[list[np.ndarray]] = field(default_factory=list)
    wraps: dict[tuple[int, int], bool] = field(default_factory=dict)  # (track, curve): a backup scale past right


@dataclass(frozen=True)
class Legend:
    layout: str
    inner: str  # a cell's own layout, for "d"
    stack: str  # "top" or "bottom": where in the strip the entries sit
    face: str
    name_face: str
    size: int
    units: str  # "paren", "bare" or "bracket"
    numbers: str  # "plain", "decimal" or "dot"
    gap: float  # px between a text line and a sample
    spacing: float  # px between entries (layouts a-c)
    pad: float  # px inside a cell, or between the strip's edge and its entries

    @property
    def line(self) -> float:
        return 1.3 * self.size

    @property
    def cap(self) -> float:
        return cap_height(self.name_face, self.size)


@dataclass
class Design:
    """A page before it is drawn: its truth, the marks to draw, its scanner and conventions, and the random
    stream that draws and scans it."""

    rng: np.random.Generator
    plan: Plan
    scanner: sheet_draw.Scanner
    spec: PageSpec
    header_rows: tuple[tuple[tuple[float, ...], ...], ...]
    style: dict[str, Any]
    ends_rows: tuple[tuple[tuple[float, ...], ...], ...] = ()


def render_page(seed: int, index: int, clean: bool = False) -> PaperPage:
    """One scanned page and its truth (see the module docstring)."""
    page = design(seed, index, clean)
    truth: dict[str, Any] = {}
    tone = sheet_draw.draw(page.rng, page.plan, page.spec, page.scanner.ink, truth)
    image = sheet_draw.scan(page.rng, tone, page.scanner, page.spec.dpi)
    return PaperPage(image, page.spec, page.header_rows, page.style, page.ends_rows, truth["fractions"],
                     truth["wraps"])


def design(seed: int, index: int, clean: bool = False) -> Design:
    """The page `render_page` draws, laid out but not drawn (its truth and conventions at a glance)."""
    if seed < 0 or index < 0:
        raise ValueError(f"seed and index must be non-negative, got seed={seed}, index={index}")
    rng = np.random.default_rng([seed, index, STREAM])
    dpi = int(rng.integers(DPI_RANGE[0], DPI_RANGE[1] + 1))
    width = round(PAGE_WIDTH_IN * dpi)
    scanner = sheet_draw.sample_scanner(rng, dpi, MAX_SKEW_DEG)
    layout = _Layout(rng, dpi, width, scanner)
    spec, header_rows = layout.build(seed, index)
    ends_rows = tuple(layout.section_ends)
    style = {**layout.style, "scan": scanner.mode, "jpeg": bool(scanner.jpeg), "turn": scanner.spec.turn,
             "skew": _band(abs(scanner.spec.skew_deg), (0.05, 0.4), ("none", "small", "large")),
             "fold": scanner.fold is not None, "punch": scanner.punch}
    if clean:  # the same page on white paper, unscanned: the layout keeps its clearance for the skew
        scanner = sheet_draw.clean_scanner()
        spec = replace(spec, scan=scanner.spec)
        style = {**style, "scan": "clean", "jpeg": False, "turn": 0, "skew": "none", "fold": False, "punch": False}
    return Design(rng, layout.plan, scanner, spec, header_rows, style, ends_rows)


def _band(value: float, edges: tuple[float, ...], names: tuple[str, ...]) -> str:
    return names[int(np.searchsorted(edges, value, side="right"))]


def number(value: float, fmt: str) -> str:
    """A scale end as a header prints it; its truth is float() of the text."""
    text = f"{round(value, 6):.6g}"
    if fmt == "decimal" and "." not in text and abs(value) < 1000:
        text += ".0"
    if fmt == "dot" and text.lstrip("-").startswith("0."):
        text = text.replace("0.", ".", 1)
    return text


def scale_text(scale: DepthScale, fmt: int) -> str:
    if scale.unit == "m":
        return (f"1:{scale.ratio}", f"1/{scale.ratio}", f"1 : {scale.ratio}")[fmt]
    inches = round(1200 / scale.ratio)
    return (f'{inches}" = 100\'', f"{inches} IN = 100 FT", f"{inches} IN PER 100 FT")[fmt]


class _Layout:
    """A page's layout: the truth and the marks to draw (`plan`), chosen from `rng` in a fixed order."""

    def __init__(self, rng: np.random.Generator, dpi: int, width: int, scanner: sheet_draw.Scanner) -> None:
        self.rng, self.dpi, self.width, self.scanner = rng, dpi, width, scanner
        self.style: dict[str, Any] = {"dpi": _band(dpi, (230, 320), ("150-229", "230-319", "320-400"))}
        self.border = max(2, round(rng.uniform(0.007, 0.016) * dpi))
        self.edge = self.px(rng.uniform(0.04, 0.12))  # between a legend strip's rules and its entries
        self.depth_size = round(self.px(rng.uniform(7, 10) / 72))
        self.weights = self._grid_weights()
        self.plan = Plan(0, width, self.border)
        # Rows of the text lines carrying the curves' scale ends: per section [track][curve] (`section_ends`), the
        # legend last laid out's (`legend_ends`), and the entry last laid out's (`ends_row`).
        self.section_ends: list[tuple[tuple[float, ...], ...]] = []
        self.legend_ends: tuple[tuple[float, ...], ...] = ()
        self.ends_row = 0.0

    def px(self, inches: float) -> float:
        return inches * self.dpi

    def _grid_weights(self) -> dict[str, tuple[float, float]]:
        """(width px, gray on white paper) of each kind of grid line: this page's own."""
        rng = self.rng
        minor = (max(1.2, self.px(rng.uniform(0.003, 0.005))), float(rng.uniform(40, 110)))
        medium = (max(minor[0] * rng.uniform(1.4, 2.2), minor[0] + 0.5), float(rng.uniform(40, minor[1])))
        major = (max(medium[0] * rng.uniform(1.3, 1.8), medium[0] + 0.5), float(rng.uniform(10, medium[1])))
        value = (minor[0], float(rng.uniform(40, 110)))
        heavy = (max(value[0] * rng.uniform(1.5, 2.2), value[0] + 0.6), float(rng.uniform(30, value[1])))
        return {"minor": minor, "medium": medium, "major": major, "value": value, "value_heavy": heavy}

    def build(self, seed: int, index: int) -> tuple[PageSpec, tuple[tuple[tuple[float, ...], ...], ...]]:
        rng = self.rng
        family = str(rng.choice(FAMILIES))
        bold = bool(rng.random() < 0.35)
        regular, heavy = f"{family}-Regular.ttf", f"{family}-Bold.ttf"
        depth_face = heavy if rng.random() < 0.3 else regular
        unit = "m" if rng.random() < 0.3 else "ft"
        self.depth_word = str(rng.choice(["FT", "FEET", "M", "METRES"][2 * (unit == "m") :][:2]))
        self.style.update(font=family.removeprefix("Liberation"), bold_names=bold,
                          depth_labels=str(pick(rng, (("centred", 0.4), ("above_line", 0.3), ("ticks", 0.3)))))
        borders = self._columns()
        tracks = self._tracks(borders)
        leg = self._fit(self._legend_style(regular, heavy if bold else regular), tracks)
        scales = self._scales(unit)
        fmt = int(rng.integers(0, 3))
        title = str(rng.choice(RESISTIVITY_TITLES if any(t.grid == "log" for t in tracks) else POROSITY_TITLES))
        well, pairs = _well_data(rng, unit, title)
        scales_line = ("SCALES", "  ".join(scale_text(s, fmt) for s in scales))
        strip = self._strip_height(leg, tracks)
        clear_rows = math.tan(math.radians(MAX_SKEW_DEG)) * self.width / 2 + self.px(0.05)
        y = round(max(self.px(rng.uniform(0.25, 0.45)), clear_rows))
        head_size = round(self.px(rng.uniform(7, 10) / 72))
        top = y
        y, header_lines = self._header_block(pairs, scales_line, regular, heavy, head_size, y, borders)
        header = (top, y - 1)
        y += round(self.px(rng.uniform(0.2, 0.45)))
        repeat = bool(rng.random() < 0.15)
        self.style.update(repeat_legend=repeat, legend=leg.layout, cell=leg.inner if leg.layout == "d" else "",
                          stack=leg.stack, units=leg.units, numbers=leg.numbers,
                          text_pt=_band(leg.size / self.dpi * 72, (7.5, 8.75), ("6-7.5", "7.5-8.75", "8.75-10")))
        lengths = self._lengths(len(scales), y, strip, repeat)
        sections: list[SectionSpec] = []
        rows = []
        for k, scale in enumerate(scales):
            if k or rng.random() < 0.4:  # a line of text before the section: its pass and scale
                words = ("MAIN LOG", "REPEAT SECTION", "DETAIL", "MAIN PASS")[int(rng.integers(0, 4))]
                size = round(self.px(rng.uniform(8, 12) / 72))
                y += round(cap_height(heavy, size) + (self.px(rng.uniform(0.05, 0.2)) if k == 0 else 0))
                centred = bool(rng.random() < 0.5)
                x = (borders[0] + borders[-1]) / 2 if centred else borders[0]
                self.plan.texts.append(Text(x, y, f"{words}  {scale_text(scale, fmt)}", heavy, size,
                                            "ms" if centred else "ls"))
                y += round(self.px(rng.uniform(0.1, 0.25)))
            section, names, y = self._section(scale, y, strip, lengths[k], borders, tracks, leg, repeat,
                                              sections[0] if sections else None, depth_face)
            sections.append(section)
            rows.append(names)
            y += round(self.px(rng.uniform(0.35, 0.7)))
        height = y + round(clear_rows)
        self.plan.height = height
        return (PageSpec(seed, index, self.dpi, self.width, height, header, tuple(header_lines), well,
                         leg.name_face, tuple(sections), self.scanner.spec), tuple(rows))

    def _header_block(self, pairs: list[tuple[str, str]], scales: tuple[str, str], regular: str, heavy: str,
                      size: int, y: int, borders: list[float]) -> tuple[int, list[str]]:
        """The ruled box of well data at the top: label: value lines, a table with cell rules, or a title
        banner over label: value lines; the row after its frame, and its text lines."""
        rng, bw = self.rng, self.border
        kind = str(pick(rng, (("fields", 0.35), ("table", 0.35), ("banner", 0.3))))
        self.style["header"] = kind
        rule = max(1, round(self.px(rng.uniform(0.005, 0.012))))
        c0, c1 = round(borders[0] - (bw - 1) / 2), round(borders[-1] - (bw - 1) / 2) + bw - 1
        pad, half = self.px(0.08), (c1 - c0) / 2
        label_face = heavy if rng.random() < 0.5 else regular
        colon = ":" if kind != "table" and rng.random() < 0.7 else ""
        texts, rules, lines = self.plan.texts, self.plan.rules, []
        top, y = y, y + rule
        title, body = pairs[0][1], pairs[1:]
        if kind == "banner":
            big = round(size * rng.uniform(1.5, 2.0))
            base = y + pad + cap_height(heavy, big)
            texts.append(Text((c0 + c1) / 2, base, title, heavy, big, "ms"))
            base += 1.7 * size
            texts.append(Text((c0 + c1) / 2, base, body[0][1], regular, size, "ms"))
            lines += [title, body[0][1]]
            y = round(base + pad)
            rules.append(Rule(y, c0, y + rule - 1, c1))
            y, body = y + rule, body[1:]
        else:
            body = [*body[:2], ("LOG", title), *body[2:]]
        body.append(scales)
        label_col = max(text_width(label + colon, label_face, size) for label, _ in body) + pad
        rows: list[list[tuple[str, str]]] = []
        pending: tuple[str, str] | None = None
        for pair in body:
            if label_col + text_width(pair[1], regular, size) + 2 * pad > half or pair == scales:
                rows.append([pair])
            elif pending is not None:
                rows.append([pending, pair])
                pending = None
            else:
                pending = pair
        rows += [[pending]] if pending else []
        rows.append(rows.pop(rows.index([scales])))
        line = round(size * rng.uniform(1.5, 1.9))
        cap = cap_height(regular, size)
        for i, row in enumerate(rows):
            base = y + line / 2 + cap / 2
            for k, (label, value) in enumerate(row):
                x = c0 + k * half + pad
                texts += [Text(x, base, label + colon, label_face, size),
                          Text(x + label_col, base, value, regular, size)]
                if kind == "table":
                    cut = round(x + label_col - pad / 2)
                    rules.append(Rule(y, cut, y + line - 1, cut + rule - 1))
                    if k:
                        rules.append(Rule(y, round(c0 + half), y + line - 1, round(c0 + half) + rule - 1))
            lines.append("  ".join(f"{label}{colon} {value}" for label, value in row))
            y += line
            if kind == "table" and i < len(rows) - 1:
                rules.append(Rule(y, c0, y + rule - 1, c1))
                y += rule
        rules += [Rule(top, c0, top + rule - 1, c1), Rule(y, c0, y + rule - 1, c1),
                  Rule(top, c0, y + rule - 1, c0 + rule - 1), Rule(top, c1 - rule + 1, y + rule - 1, c1)]
        return y + rule, lines

    # ---------------------------------------------------------------- across the page

    def _columns(self) -> list[float]:
        """Border centres, left to right (track 1, the depth column, then one wide track or two), clear of the
        page's sides by what the skew moves a column at the ends of the tallest page."""
        rng, bw = self.rng, self.border
        clear = math.tan(math.radians(abs(self.scanner.spec.skew_deg))) * self.px(TALLEST_IN) / 2 + bw + 4
        left = max(self.px(rng.uniform(0.3, 0.6)), clear, self.px(0.55) if self.scanner.punch else 0)
        right = max(self.px(rng.uniform(0.3, 0.55)), clear)
        kind = pick(rng, (("merged_log", 0.3), ("log_linear", 0.45), ("linear_linear", 0.25)))
        self.style["tracks"] = kind
        first, depth = rng.uniform(0.27, 0.35), rng.uniform(0.085, 0.12)
        rest = 1 - first - depth
        split = rng.uniform(0.42, 0.58)
        shares = [first, depth] + ([rest] if kind == "merged_log" else [rest * split, rest * (1 - split)])
        edges = left + (self.width - left - right) * np.cumsum([0.0, *shares])
        return [float(round(e - (bw - 1) / 2) + (bw - 1) / 2) for e in edges]

    def _tracks(self, borders: list[float]) -> list[TrackSpec]:
        rng = self.rng
        kind = self.style["tracks"]
        first = [str(pick(rng, (("GR", 0.75), ("SGR", 0.1), ("SP", 0.15))))]
        extras = [n for n in ("SP", "CALI", "BS", "TENS", "CGR") if n != first[0] and (n != "CGR" or first[0] == "SGR")]
        first += [str(n) for n in rng.choice(extras, int(pick(rng, ((0, 0.3), (1, 0.45), (2, 0.25)))), replace=False)]
        pool = [n for n in ("NPHI" if rng.random() < 0.6 else "CNL", "RHOB", "DRHO", "PEF", "DT", "CALI")
                if n not in first]
        rng.shuffle(pool)
        specs: list[tuple[str, int, list[str]]] = [("linear", self._divisions(), first)]
        family = LOG_FAMILIES[int(rng.integers(len(LOG_FAMILIES)))]
        if kind == "merged_log":
            count = int(rng.integers(1, 5))
            names = list(family[:count]) + (["RXO"] if count == 4 else [])
            specs.append(("log", int(rng.integers(3, 5)), names[:count]))
        else:
            if kind == "log_linear":
                specs.append(("log", int(rng.integers(2, 5)), list(family[: int(rng.integers(1, 4))])))
            else:
                take = int(rng.integers(1, 4))
                specs.append(("linear", self._divisions(), pool[:take]))
                pool = pool[take:]
            specs.append(("linear", self._divisions(), pool[: int(rng.integers(1, min(3, len(pool)) + 1))]))
        log_unit, log_left = str(rng.choice(LOG_UNITS)), float(rng.choice(LOG_LEFTS))
        decades = max([d for g, d, _ in specs if g == "log"], default=0)
        while log_left * 10**decades > 2000:  # headers end a resistivity scale at 2000 at most
            log_left /= 10
        unit_of = {n: str(rng.choice(units)) for n, (units, _) in LINEAR.items()}
        conventional = bool(rng.random() < 0.5)
        self.style["pen_order"] = "conventional" if conventional else "random"
        centre = bool(rng.random() < 0.3)
        self.style["centre_line"] = centre
        tracks = []
        for j, (grid, divisions, names) in enumerate(specs):
            curves = []
            for k, name in enumerate(names):
                style = STYLES[min(k, 2)] if conventional else str(rng.choice(STYLES, p=[0.5, 0.3, 0.2]))
                stroke = float(rng.choice(PEN_IN, p=[0.35, 0.35, 0.2, 0.1]))
                gray = int(rng.integers(60, 151)) if rng.random() < 0.25 else None
                if grid == "log":
                    ends, unit = (log_left, log_left * 10**divisions), log_unit
                else:
                    options = LINEAR[name][1]
                    ends, unit = options[int(rng.integers(len(options)))], unit_of[name]
                curves.append(CurveSpec(name, unit, float(number(ends[0], "plain")), float(number(ends[1], "plain")),
                                        grid == "log", style, stroke, gray))
            tracks.append(TrackSpec(borders[j + (j > 0)], borders[j + 1 + (j > 0)], grid, divisions, tuple(curves)))
        return tracks

    def _divisions(self) -> int:
        return int(pick(self.rng, ((10, 0.6), (5, 0.25), (4, 0.15))))

    def _scales(self, unit: str) -> list[DepthScale]:
        rng = self.rng
        two = rng.random() < 0.55
        self.style.update(unit=unit, sections=2 if two else 1)
        if unit == "ft":
            if two:
                return [scale_named(pick(rng, (("1 in per 100 ft", 0.75), ("2 in per 100 ft", 0.25)))),
                        scale_named("5 in per 100 ft")]
            return [scale_named(pick(rng, (("1 in per 100 ft", 0.5), ("2 in per 100 ft", 0.2),
                                            ("5 in per 100 ft", 0.3))))]
        if two:
            return [scale_named("1:500"), scale_named("1:200")]
        return [scale_named(pick(rng, (("1:500", 0.6), ("1:200", 0.4))))]

    def _lengths(self, count: int, fixed: int, strip: float, repeat: bool) -> list[float]:
        """Paper inches of each section's grid: 8-16 in for the first, 4-8 in for a repeat, shortened where the
        page would pass the pixel budget."""
        rng = self.rng
        lengths = [rng.uniform(8, 16), rng.uniform(4, 8)][:count]
        other = fixed + count * ((2 if repeat else 1) * strip + self.px(1.3))
        room = (min(PIXEL_BUDGET / self.width, self.px(TALLEST_IN)) - other) / self.dpi
        shrink = min(1.0, room / sum(lengths))
        return [length * shrink for length in lengths]

    # ---------------------------------------------------------------- legends

    def _legend_style(self, regular: str, name_face: str) -> Legend:
        rng = self.rng
        layout = str(pick(rng, LEGENDS))
        return Legend(layout, "a" if rng.random() < 0.5 else "c", "top" if rng.random() < 0.5 else "bottom",
                      regular, name_face, round(self.px(rng.uniform(6, 10) / 72)),
                      str(pick(rng, (("paren", 0.5), ("bare", 0.25), ("bracket", 0.25)))),
                      str(pick(rng, (("plain", 0.55), ("decimal", 0.25), ("dot", 0.2)))),
                      self.px(rng.uniform(0.025, 0.06)), self.px(rng.uniform(0.04, 0.14)),
                      self.px(rng.uniform(0.03, 0.07)))

    def _fit(self, leg: Legend, tracks: list[TrackSpec]) -> Legend:
        """The legend's text size, made smaller (not under 6 pt) until every entry fits its track."""
        smallest = round(self.px(6 / 72))
        while leg.size > smallest and not all(self._fits(leg, t, c) for t in tracks for c in t.curves):
            leg = Legend(**{**leg.__dict__, "size": leg.size - 1})
        return leg

    def _fits(self, leg: Legend, track: TrackSpec, curve: CurveSpec) -> bool:
        room = track.right - track.left - self.border - 2 * self.px(0.05)
        ends = [text_width(number(v, leg.numbers), leg.face, leg.size) for v in (curve.left, curve.right)]
        name = text_width(_name_text(curve, leg.units), leg.name_face, leg.size)
        if (leg.inner if leg.layout == "d" else leg.layout) == "c":
            return max(name, sum(ends) + self.px(0.1)) <= room
        return sum(ends) + name + self.px(0.16) <= room

    def _entry_height(self, leg: Legend, curve: CurveSpec) -> float:
        stroke = curve.stroke_px(self.dpi)
        kind = leg.inner if leg.layout == "d" else leg.layout
        body = 2 * leg.line + leg.gap + stroke if kind == "c" else leg.line + leg.gap + stroke
        return body + (2 * leg.pad if leg.layout == "d" else 0)

    def _stack_height(self, leg: Legend, track: TrackSpec) -> float:
        n = len(track.curves)
        between = n * self._cell_rule() if leg.layout == "d" else (n - 1) * leg.spacing
        return sum(self._entry_height(leg, c) for c in track.curves) + between

    def _cell_rule(self) -> int:
        return max(1, round(self.px(0.004)))

    def _strip_height(self, leg: Legend, tracks: list[TrackSpec]) -> float:
        """Rows from the strip's top rule to the grid's top frame line."""
        content = max(max(self._stack_height(leg, t) for t in tracks), 2.8 * leg.line)
        return self.border + content + 2 * self.edge

    def _legend(self, leg: Legend, first: float, last: float, tracks: list[TrackSpec], depth: tuple[float, float],
                unit: str) -> tuple[tuple[float, ...], ...]:
        """The track headers between rows `first` and `last` (inside the strip's rules); per track, the rows
        its curves' names are printed on."""
        rule, cells = self._cell_rule(), leg.layout == "d"
        rows, ends_rows = [], []
        for j, track in enumerate(tracks):
            total = self._stack_height(leg, track)
            inset = 0 if cells else self.edge
            y = first + inset if leg.stack == "top" else last - total - inset
            c0, c1 = round(track.left), round(track.right)
            names, ends = [], []
            for k, curve in enumerate(track.curves):
                if cells and leg.stack == "bottom":
                    self.plan.rules.append(Rule(round(y), c0, round(y) + rule - 1, c1))
                    y += rule
                names.append(self._entry(leg, y, track, curve, j, k))
                ends.append(self.ends_row)
                y += self._entry_height(leg, curve)
                if cells and leg.stack == "top":
                    self.plan.rules.append(Rule(round(y), c0, round(y) + rule - 1, c1))
                    y += rule
                elif not cells:
                    y += leg.spacing
            rows.append(tuple(names))
            ends_rows.append(tuple(ends))
        words = ("DEPTH", self.depth_word)
        room = depth[1] - depth[0] - self.border - self.px(0.06)
        size = leg.size
        while size > 6 and max(text_width(w, leg.face, size) for w in words) > room:
            size -= 1
        mid = (first + last) / 2
        for i, word in enumerate(words):
            self.plan.texts.append(Text((depth[0] + depth[1]) / 2, mid + (i - 0.5) * 1.3 * size
                                        + cap_height(leg.face, size) / 2, word, leg.face, size, "ms"))
        self.legend_ends = tuple(ends_rows)
        return tuple(rows)

    def _entry(self, leg: Legend, y: float, track: TrackSpec, curve: CurveSpec, j: int, k: int) -> float:
        """One curve's legend entry from row `y` down; the row of its name line's centre."""
        stroke = curve.stroke_px(self.dpi)
        kind = leg.inner if leg.layout == "d" else leg.layout
        y += leg.pad if leg.layout == "d" else 0
        margin = self.border / 2 + self.px(0.05)
        x0, x1, mid = track.left + margin, track.right - margin, (track.left + track.right) / 2
        if kind == "a":
            name_row, sample = y + leg.line / 2, y + leg.line + leg.gap + stroke / 2
        elif kind == "b":
            sample, name_row = y + stroke / 2, y + stroke + leg.gap + leg.line / 2
        else:
            name_row, sample = y + leg.line / 2, y + leg.line + leg.gap / 2 + stroke / 2
        base = name_row + leg.cap / 2
        ends_base = base if kind != "c" else sample + stroke / 2 + leg.gap / 2 + leg.line / 2 + leg.cap / 2
        self.plan.texts += [Text(mid, base, _name_text(curve, leg.units), leg.name_face, leg.size, "ms"),
                            Text(x0, ends_base, number(curve.left, leg.numbers), leg.face, leg.size, "ls"),
                            Text(x1, ends_base, number(curve.right, leg.numbers), leg.face, leg.size, "rs")]
        self.plan.samples.append(Sample(sample, x0, x1, j, k))
        self.ends_row = ends_base - leg.cap / 2
        return name_row

    # ---------------------------------------------------------------- sections

    def _section(self, scale: DepthScale, y: int, strip: float, length_in: float, borders: list[float],
                 tracks: list[TrackSpec], leg: Legend, repeat: bool, first: SectionSpec | None,
                 depth_face: str) -> tuple[SectionSpec, tuple[tuple[float, ...], ...], int]:
        bw = self.border
        header_top, t0 = y, y + round(strip)
        rows_per_unit = scale.rows_per_unit(self.dpi)
        b0 = t0 + round(self.px(length_in))
        depth_top = self._depth_top(scale, first, (b0 - t0) / rows_per_unit)
        section = SectionSpec(scale.name, header_top, t0 + (bw - 1) / 2, b0 + (bw - 1) / 2, depth_top, rows_per_unit,
                              (borders[1], borders[2]), tuple(tracks))
        names = self._legend(leg, header_top + bw, t0, tracks, section.depth_column, scale.unit)
        self.section_ends.append(self.legend_ends)
        end = b0 + bw - 1
        if repeat:  # the legend again under the grid, closed by a rule
            below = end + 1 + round(strip) - bw
            self._legend(leg, end + 1, below, tracks, section.depth_column, scale.unit)
            end = below + bw - 1
        left, right = round(borders[0] - (bw - 1) / 2), round(borders[-1] - (bw - 1) / 2) + bw - 1
        for row in [header_top, t0, b0] + ([end - bw + 1] if repeat else []):
            self.plan.rules.append(Rule(row, left, row + bw - 1, right))
        for centre in borders:
            c0 = round(centre - (bw - 1) / 2)
            self.plan.rules.append(Rule(header_top, c0, end, c0 + bw - 1))
        self._grid(section, scale, depth_face)
        return section, names, end + 1

    def _depth_top(self, scale: DepthScale, first: SectionSpec | None, span: float) -> float:
        """The depth at the grid's top frame line: for the first section a round depth, on a minor line, or
        anywhere; a repeat section starts inside the first's interval."""
        rng = self.rng
        if first is None:
            reach = (1500, 9000) if scale.unit == "ft" else (400, 3000)
            base = scale.major * round(rng.uniform(*reach) / scale.major)
            where = str(pick(rng, (("major", 0.4), ("minor", 0.3), ("free", 0.3))))
            self.style["top_depth"] = where
        else:
            base = first.depth_top + rng.uniform(0, max(0.0, first.depth_bottom - first.depth_top - span))
            base = scale.minor * math.floor(base / scale.minor)
            where = "free" if rng.random() < 0.3 else "minor"
        if where == "minor" and first is None:
            base += scale.minor * int(rng.integers(1, scale.major_every))
        if where == "free":
            base += round(float(rng.uniform(0.1, 0.9)) * scale.minor, 2)
        return float(base)

    def _grid(self, section: SectionSpec, scale: DepthScale, face: str) -> None:
        """Depth lines across the tracks, value lines down them, and the depth column's numbers."""
        g, bw, lines = self.weights, self.border, self.plan.lines
        top, bottom = round(section.top), round(section.bottom)
        d0, d1 = section.depth_column
        labels = self.style["depth_labels"]
        tick = self.px(self.rng.uniform(0.04, 0.08))
        for n in range(math.ceil(section.depth_top / scale.minor), math.floor(section.depth_bottom / scale.minor) + 1):
            row = float(section.row_of(n * scale.minor))
            kind = "major" if n % scale.major_every == 0 else "medium" if n % scale.medium_every == 0 else "minor"
            width, ink = g[kind]
            if min(row - section.top, section.bottom - row) < bw + width:
                continue
            for track in section.tracks:
                lines.append(Line(True, row, round(track.left), round(track.right), width, ink))
            if labels == "above_line" and kind == "major":
                lines.append(Line(True, row, round(d0), round(d1), width, ink))
            if labels == "ticks":
                reach = tick * (1.0 if kind == "minor" else 1.8)
                lines += [Line(True, row, round(d0), round(d0 + bw / 2 + reach), width, ink),
                          Line(True, row, round(d1 - bw / 2 - reach), round(d1), width, ink)]
        for track in section.tracks:
            for f in track.division_fractions():
                heavy = (track.grid == "log" and abs(f * track.divisions - round(f * track.divisions)) < 1e-9) or (
                    self.style["centre_line"] and track.grid == "linear" and abs(f - 0.5) < 1e-9)
                width, ink = g["value_heavy" if heavy else "value"]
                lines.append(Line(False, track.left + f * (track.right - track.left), top, bottom, width, ink))
        size = self.depth_size
        room = d1 - d0 - bw - (2 * tick * 1.8 if labels == "ticks" else self.px(0.04))
        digits = f"{section.depth_bottom:.0f}"
        while size > 6 and text_width(digits, face, size) > room:
            size -= 1
        cap = cap_height(face, size)
        n0, n1 = math.ceil(section.depth_top / scale.label_every), math.floor(section.depth_bottom / scale.label_every)
        for n in range(n0, n1 + 1):
            row = float(section.row_of(n * scale.label_every))
            if min(row - section.top, section.bottom - row) < 1.5 * cap + bw:
                continue
            base = row - g["major"][0] / 2 - self.px(0.02) if labels == "above_line" else row + cap / 2
            self.plan.texts.append(Text((d0 + d1) / 2, base, f"{n * scale.label_every:.0f}", face, size, "ms"))


def _name_text(curve: CurveSpec, units: str) -> str:
    unit = {"paren": f"({curve.unit})", "bare": curve.unit, "bracket": f"[{curve.unit}]"}[units]
    return f"{curve.mnemonic} {unit}"


COMPANIES = ("ACME PETROLEUM CORP", "SUNRAY OIL CO.", "NORTHERN PLAINS ENERGY", "GULF COAST EXPLORATION",
             "PRAIRIE RESOURCES INC", "HIGHLAND OIL & GAS", "BLUE RIVER OPERATING", "MERIDIAN EXPLORATION LTD",
             "CASCADE PETROLEUM", "REDSTONE ENERGY CO")
LEASES = ("SMITH", "JOHNSON", "STATE", "FEDERAL", "BURNETT", "HOLLOWAY", "KING RANCH", "MILLER", "WAGNER",
          "THOMPSON UNIT", "OSAGE", "CARTER")
FIELD_NAMES = ("WILDCAT", "EAST TEXAS", "SPRABERRY", "RED OAK", "BELL CREEK", "PEMBINA", "CEDAR HILLS",
               "SALT FLAT", "NORTH BURBANK", "ELK BASIN")
PLACES = (("KERN", "CALIFORNIA"), ("REEVES", "TEXAS"), ("GARFIELD", "OKLAHOMA"), ("WELD", "COLORADO"),
          ("MCKENZIE", "NORTH DAKOTA"), ("LEA", "NEW MEXICO"), ("CADDO", "LOUISIANA"), ("SUBLETTE", "WYOMING"))
RESISTIVITY_TITLES = ("DUAL INDUCTION - SFL", "DUAL LATEROLOG", "INDUCTION ELECTRICAL LOG", "ELECTRICAL LOG",
                      "DUAL INDUCTION FOCUSED LOG")
POROSITY_TITLES = ("COMPENSATED NEUTRON - FORMATION DENSITY", "BOREHOLE COMPENSATED SONIC",
                   "SPECTRAL DENSITY DUAL SPACED NEUTRON", "GAMMA RAY - NEUTRON")
MUDS = ("FRESH GEL", "SALT SAT.", "LIGNOSULFONATE", "WATER BASE", "AIR", "OIL BASE")
MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
ENGINEERS = ("J. SMITH", "R. GARCIA", "T. NGUYEN", "M. OKAFOR", "D. HALL", "K. LARSEN", "P. BROWN")


def _well_data(rng: np.random.Generator, unit: str, title: str) -> tuple[str, list[tuple[str, str]]]:
    """The well's name and the header's (label, value) pairs, in the order headers print them."""
    n = int(rng.integers(1, 40))
    well = f"{rng.choice(LEASES)} " + (f"{n}-{int(rng.integers(1, 36))}", f"#{n}", f"NO. {n}")[int(rng.integers(0, 3))]
    county, state = PLACES[int(rng.integers(len(PLACES)))]
    e = "FT" if unit == "ft" else "M"
    kb = round(float(rng.uniform(300, 5000 if unit == "ft" else 1500)), 1)
    deep = int(rng.uniform(4000, 12000) if unit == "ft" else rng.uniform(1200, 3600))
    year, month, day = int(rng.integers(55, 100)), int(rng.integers(12)), int(rng.integers(1, 29))
    date = (f"{day:02d}-{MONTHS[month]}-{year}", f"{month + 1}/{day}/{year}")[int(rng.integers(0, 2))]
    required = [("COMPANY", str(rng.choice(COMPANIES))), ("WELL", well), ("FIELD", str(rng.choice(FIELD_NAMES)))]
    section, township, range_ = (int(rng.integers(1, k)) for k in (37, 30, 40))
    api = "-".join(f"{int(rng.integers(1, k)):0{w}d}" for k, w in ((50, 2), (999, 3), (99999, 5)))
    ground = kb - float(rng.uniform(8, 30))
    optional = [("COUNTY", county), ("STATE", state), ("LOCATION", f"SEC {section} T{township}N R{range_}W"),
                ("API NO", api), ("ELEV KB", f"{kb} {e}"), ("DF", f"{kb - 1:.1f} {e}"), ("GL", f"{ground:.1f} {e}"),
                ("DATE", date), ("RUN NO", ("ONE", "TWO", "1", "2")[int(rng.integers(0, 4))]),
                ("DEPTH DRILLER", f"{deep}"), ("DEPTH LOGGER", f"{deep - int(rng.integers(0, 12))}"),
                ("BIT SIZE", ('8 3/4"', "8.75 IN", '7 7/8"', '12 1/4"')[int(rng.integers(0, 4))]),
                ("TYPE FLUID IN HOLE", str(rng.choice(MUDS))),
                ("RM @ MEAS TEMP", f"{rng.uniform(0.3, 3):.2f} @ {int(rng.uniform(60, 85))} F"),
                ("MAX REC TEMP", f"{int(rng.uniform(110, 260))} F"), ("RECORDED BY", str(rng.choice(ENGINEERS))),
                ("WITNESSED BY", str(rng.choice(ENGINEERS)))]
    keep = np.sort(rng.choice(len(optional), int(rng.integers(5, len(optional) + 1)), replace=False))
    return well, [("TITLE", title), *required, *(optional[i] for i in keep)]
