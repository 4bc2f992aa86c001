"""Curves named in a track's header box: per line of text, the left scale end, the curve's name and unit,
the right scale end, read by Tesseract, and the legend the line sample drawn under it gives: its style, its
ink (dark or light) and, against the track's other samples, its weight (thin or thick).

Only what is read is proposed: a name is kept where two readings agree on it, a scale end where they agree
on it or where the track's value grid tells which of their two numbers it is; an end that is not a number, or
whose pair cannot be the track's (a logarithmic track's ends not whole decades apart, a linear track's over an
uncommon span), is left empty, and each field has Tesseract's own confidence. A line whose name is unread is a
curve with its scale ends where they are read, and a line sample under no read line is a curve whose fields
are left for the person (`with_unread`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import numpy as np

from veernet_core.digitise.ink import Look, runs, style_scores
from veernet_core.digitise.layout.labels import RULE_STRETCHES, TextBox, spread
from veernet_core.digitise.layout.ocr import Word
from veernet_core.digitise.layout.ocr import joined as ocr_joined
from veernet_core.synth_truth import legend_weights

NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)$")
NAME = re.compile(r"^[A-Z][A-Z0-9_]{1,11}$")  # LAS mnemonics: two characters or more
UNIT = re.compile(r"^[A-Z0-9/.%-]{1,10}$")
# Units printed on log headers (LAS and vendor spellings). A reading outside the list is left empty for the
# person to fill in, never replaced by the nearest entry: "APT" is not a unit, and guessing API would be a
# guess.
KNOWN_UNITS = frozenset((
    "API", "GAPI", "MV", "V", "OHMM", "OHM-M", "OHM.M", "OHMS", "MMHO", "MMHOS", "MS/M", "IN", "MM", "CM", "FT",
    "M", "G/C3", "G/CC", "G/CM3", "K/M3", "KG/M3", "V/V", "PU", "%", "DEC", "FRAC", "US/F", "US/FT", "USEC/FT",
    "US/M", "B/E", "BARN/E", "CU", "DEGF", "DEGC", "DEG", "LB/F", "PSI", "KPA", "MPA", "PPM", "CPS", "CPM", "MR/H",
    "UR/H", "PERCENT", "INCH", "INCHES", "LB", "LBF", "KLB", "CFCF", "GM/CC",
))
END_ZONE = 0.35  # a scale end is printed in the outer 0.35 of its header box's width, either side
MIN_CONFIDENCE = 0.6  # a scale end's: a digit misread is a plausible number, which only its pair checks
# A scale end is proposed where both readings read the same number, one of them at MIN_CONFIDENCE or more and
# the other at END_CONFIDENCE or more: Tesseract is often unsure of a lone "0".
END_CONFIDENCE = 0.3
# An unread end is read again from its word's box with this share of the text's height of paper around it, and
# Tesseract told it is digits (END_DIGITS): a lone "0" it reads as ")" or "Q" in a line of words, it reads as 0.
REREAD_MARGIN = 0.3
END_DIGITS = "0123456789.-"
# The characters a unit is printed in (KNOWN_UNITS's), with its parentheses: a unit Tesseract read as no known one
# is read again told these only (`reread_unit`).
UNIT_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/.%-()"
# Below this text height a minus is a pixel or two thick, and all three readings may miss it (a 150 dpi NPHI's
# "-0.15" read 0.15): a scale end read again there is kept only where it is 0, whose sign does not matter.
SIGN_TEXT_PX = 12.0
# Where all three readings read one number, one of them at END_CONFIDENCE is enough on text this tall or taller:
# Tesseract doubts some fonts' clear digits (an SP's "20" at 0.27, 0.44 and 0.49 on 33 px text), but on small
# text it confuses digits alike three times (a CALI's "16" read "46" on 14 px text; tuning seed 777).
UNANIMOUS_TEXT_PX = 16.0
DECIMAL_COMMA = re.compile(r"^[-+]?\d+,\d{1,2}$")
# A lone zero as Tesseract reads it where a scale end is printed (GR's and PEF's left end): a letter O, a Q, or
# the glyph read as two letters.
ZERO = frozenset(("O", "o", "Q", "OO", "Oo", "oO", "oo"))
# A name's and a unit's: only words Tesseract gives no confidence at all. Both must also be read the same by a
# second, differently prepared reading (`agreed`), which is what keeps misreadings out. Tesseract's confidence
# in them tells little more: on 827 curves of generated pages (seeds 20261124 and 777), names both readings
# agreed on below 0.6 were 44 right and 2 wrong, the wrong ones at 0.34-0.51.
NAME_CONFIDENCE = 0.05
# Brackets Tesseract reads for a unit's parentheses, and punctuation it hangs on a name's end ("SFLU,").
BRACKETS = str.maketrans("{[]}", "(())")
TRAILING = ".,;:_"
# What Tesseract hangs on a scale end that no number is printed with: a quote before it ("‘150"), a point,
# comma, colon, degree sign or the start of the line sample after it ("1.95.", "10°", "20000-").
NUMBER_LEADING = "'\"`\u2018\u2019\u201c\u201d"
NUMBER_TRAILING = TRAILING + "-\u00b0"
DASHES = "-\u2010\u2011\u2012\u2013\u2014\u2212"  # a minus as Tesseract may read it
NAME_LEADING = NUMBER_LEADING + DASHES + "_~"


@dataclass(frozen=True)
class Reading:
    value: str | float | None
    confidence: float


@dataclass(frozen=True)
class CurveHeader:
    mnemonic: Reading
    unit: Reading
    left: Reading
    right: Reading
    style: Reading
    row: float  # middle of its line of text, in page rows
    height: float  # of its words, in pixels
    ink: Reading = Reading(None, 0.0)  # "dark" or "light", from its line sample's darkness against the page's black
    weight: Reading = Reading(None, 0.0)  # "thin" or "thick", from its line sample's width against the track's others
    # The line's outermost words in its left and right end zones, whatever Tesseract read them as (a lone "0"
    # read as ")"), in the header crop's pixels: where an end is unread, they are read again as numbers
    # (`reread_words`, `with_reread`).
    end_words: tuple[Word | None, Word | None] = (None, None)
    # Where the unit is unread: the word it is printed in ("(APT)", or the name with it, "GR(MY)"), in the header
    # crop's pixels, to read again as a unit (`reread_unit`).
    unit_word: Word | None = None


@dataclass(frozen=True)
class LineSample:
    """A line sample in a track header, as drawn with its curve's own pen: per inked column across it, the
    median over its columns of its peak darkness (0 paper .. 1 black), its darkness summed across it, and its
    rows of ink."""

    row: int  # page row of its middle
    peak: float
    summed: float
    rows: float

    @property
    def core(self) -> float:
        """Its ink's darkness: the greater of its peak and its summed darkness per row of ink. A wide stroke
        shows its ink's darkness at its peak; the scan's blur spreads a one-pixel stroke's ink over its
        neighbours, lowering its peak but keeping its sum on its one row of ink."""
        return max(self.peak, self.summed / max(self.rows, 1.0))

    @property
    def width(self) -> float:
        """Its stroke's width in rows: its summed darkness over its core's."""
        return self.summed / self.core if self.core > 0 else self.rows


def text_height(crop: np.ndarray, ink_below: int) -> float:
    """Median height of the runs of inked rows that hold a fifth as much ink as the fullest (lines of text,
    not specks of dirt): the height of a line of capitals."""
    counts = (crop < ink_below).sum(axis=1)
    edges = np.flatnonzero(np.diff(np.concatenate(([0], (counts > 0).astype(np.int8), [0]))))
    runs = [(a, b) for a, b in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True)]
    ink = np.array([counts[a:b].sum() for a, b in runs])
    heights = np.array([b - a for (a, b), total in zip(runs, ink, strict=True) if total >= 0.2 * ink.max()]) \
        if runs else np.array([])
    heights = heights[heights >= 4]
    return float(np.median(heights)) if heights.size else max(8.0, crop.shape[0] / 4)


def curves_in(words: list[Word], box: TextBox, ink: np.ndarray | None = None) -> list[CurveHeader]:
    """One curve per line of text that holds a name or a scale end. Lone marks (dirt read as punctuation) are
    left out, and words Tesseract doubts: below END_CONFIDENCE for a scale end, NAME_CONFIDENCE for a name or
    unit. A field not read is left empty, never guessed. With the box's `ink` (in the words' pixels), a scale
    end read without its sign is negative where a minus is printed before it (`_minus`)."""
    lines: dict[int, list[Word]] = {}
    dashes: dict[int, list[Word]] = {}
    every: dict[int, list[Word]] = {}
    for word in words:
        every.setdefault(word.line, []).append(word)
        if word.confidence >= NAME_CONFIDENCE and any(ch.isalnum() for ch in word.text):
            lines.setdefault(word.line, []).append(word)
        elif word.text.strip(DASHES) == "":
            dashes.setdefault(word.line, []).append(word)
    curves = []
    for key, line in sorted(lines.items(), key=lambda item: min(w.top for w in item[1])):
        curve = _curve(sorted(line, key=lambda w: w.left), box, ink, dashes.get(key, []))
        if curve is not None:
            curves.append(replace(curve, end_words=_end_words(every[key], box)))
    return curves


def _end_words(line: list[Word], box: TextBox) -> tuple[Word | None, Word | None]:
    """The line's outermost words in its end zones (the outer 0.35 of the box either side), dirt and doubted
    words included: where a scale end is printed, whatever Tesseract made of it."""
    width = box.right - box.left + 1
    left = min((w for w in line if _centre(w) < END_ZONE * width), key=lambda w: w.left, default=None)
    right = max((w for w in line if _centre(w) > (1 - END_ZONE) * width), key=lambda w: w.left + w.width,
                default=None)
    return left, right


def _curve(line: list[Word], box: TextBox, ink: np.ndarray | None, dashes: list[Word]) -> CurveHeader | None:
    """A line's curve: its name, unit and scale ends. A line whose name is unread but that has a scale end is a
    curve too (its name left for the person): `agreed` keeps it where both readings read the same end. `dashes`:
    the line's words that are a dash alone, one of which may be a scale end's minus read apart from it."""
    width = box.right - box.left + 1
    ends = [w for w in line if w.confidence >= END_CONFIDENCE]
    # Unsure words that are no number at the line's ends are dirt or a mark misread, not the scale ends.
    while ends and ends[0].confidence < MIN_CONFIDENCE and not NUMBER.match(_number_text(ends[0].text)):
        ends = ends[1:]
    while ends and ends[-1].confidence < MIN_CONFIDENCE and not NUMBER.match(_number_text(ends[-1].text)):
        ends = ends[:-1]
    left = right = None
    if ends and NUMBER.match(_number_text(ends[0].text)) and _centre(ends[0]) < END_ZONE * width:
        left = ends[0]
    if ends and ends[-1] is not left and NUMBER.match(_number_text(ends[-1].text)) \
            and _centre(ends[-1]) > (1 - END_ZONE) * width:
        right = ends[-1]
    names = [replace(w, text=_name_text(w.text, w.confidence)) for w in line if w is not left and w is not right]
    # The surest word that can be a name: a misread scale end beside it ("O02." for "0.2") can look like one. A
    # known unit is never the name: printed bare after it ("GR API"), it is the unit.
    mnemonic = max((w for w in names if NAME.match(w.text.split("(")[0]) and not _bare_unit(w.text)),
                   key=lambda w: w.confidence, default=None)
    row = box.top + float(np.mean([w.top + w.height / 2 for w in line]))
    height = float(np.median([w.height for w in line]))
    if mnemonic is None and left is None and right is None:
        return None
    # "GR(API)": Tesseract may keep the unit on the name; a line whose name is unread may still show its unit.
    name, _, glued = mnemonic.text.partition("(") if mnemonic else ("", "", "")
    unit = next((w for w in names if w is not mnemonic and w.text.startswith("(")), None)
    joined = ""  # a bare unit read as part of the name's word
    if unit is None and not glued and mnemonic is not None:
        unit = next((w for w in names if w.left > mnemonic.left and _bare_unit(w.text)), None)
        if unit is None:
            name, joined = _unit_joined(name)
    unit_text = (glued or (unit.text.lstrip("(") if unit else joined)).rstrip(")").upper()
    source, unit_reading = unit or mnemonic, Reading(None, 0.0)
    if source is not None and UNIT.match(unit_text) and unit_text in KNOWN_UNITS:
        unit_reading = Reading(unit_text, source.confidence)
    unit_word = unit or (mnemonic if glued else None)
    return CurveHeader(Reading(name, mnemonic.confidence) if mnemonic else Reading(None, 0.0), unit_reading,
                       _number(left, ink, dashes), _number(right, ink, dashes), Reading(None, 0.0), row, height,
                       unit_word=None if unit_reading.value is not None else unit_word)


# A bare unit Tesseract joined to the name where the space between them is narrow ("CALIIN" for "CALI IN", "TENSLB"):
# split where the word ends in a known unit of two characters or more after a name of two or more. No LAS name
# the analysis has met ends so (GR, SP, CALI, NPHI, RHOB, DT, PEF, ILD, ILM, SFLU, LLD, LLS, MSFL, TENS, ...).
JOINED_UNITS = tuple(sorted((unit for unit in KNOWN_UNITS if len(unit) >= 2 and unit.isalpha()), key=len, reverse=True))


def _unit_joined(word: str) -> tuple[str, str]:
    """(name, unit) of a name word with a known unit joined to its end; (word, "") where it has none."""
    for unit in JOINED_UNITS:
        if word.endswith(unit) and NAME.match(word[:-len(unit)]):
            return word[:-len(unit)], unit
    return word, ""


def _bare_unit(text: str) -> bool:
    """Whether a word is a known unit printed without parentheses (in either case: "mV")."""
    return not text.startswith("(") and text.upper() in KNOWN_UNITS


def _name_text(text: str, confidence: float) -> str:
    """A word as the name (and the unit glued to it) it may be: brackets read as parentheses, and without the
    marks Tesseract hangs on it: punctuation after the name or the unit ("SP.(MV)", "RHOB-", "(OHMM)."), and
    where Tesseract is sure of the word (MIN_CONFIDENCE), a quote, an underscore or a dash before it. An unsure
    word with a mark before it is often misread whole: on generated pages (seed 777) "‘DEF" for "PEF" and
    '"CALE' for "CALI", at 0.34-0.51, read alike by both readings."""
    if confidence >= MIN_CONFIDENCE:
        text = text.lstrip(NAME_LEADING)
    name, bracket, unit = text.translate(BRACKETS).partition("(")
    return (name.rstrip(TRAILING + DASHES) + bracket + unit).rstrip(TRAILING)


def _number_text(text: str) -> str:
    """A line's first or last word as the number it may be: without the marks Tesseract hangs on one, a lone
    zero read as a letter (ZERO), and a decimal comma read as the point ("0,2"; a comma before three digits is a
    thousands separator, left)."""
    stripped = text.lstrip(NUMBER_LEADING).rstrip(NUMBER_TRAILING) or text
    if stripped in ZERO:
        return "0"
    return stripped.replace(",", ".") if DECIMAL_COMMA.match(stripped) else stripped


def _centre(word: Word) -> float:
    return word.left + word.width / 2


# A zero before another digit with no point between ("03", "-01") is a decimal read without its point ("0.3",
# "-0.1"): no header prints such a number. Left unread, it is read again as a number (`reread_end`); the
# independent page renderer's pages (seed 1) had NPHI's "0.3" and "-0.1" proposed as 3 and -1.
LOST_POINT = re.compile(r"^[-+]?0\d")


def _number(word: Word | None, ink: np.ndarray | None, dashes: list[Word]) -> Reading:
    """A scale end's value: negative where Tesseract read its minus, read it as a word of its own just before it,
    or dropped it and the scan shows one (`_minus`)."""
    if word is None:
        return Reading(None, 0.0)
    text = _number_text(word.text)
    if LOST_POINT.match(text):
        return Reading(None, 0.0)
    try:
        value = float(text)
    except ValueError:
        return Reading(None, 0.0)
    if text.startswith(("-", "+")):
        return Reading(value, word.confidence)
    digit = word.width / max(len(word.text), 1)
    middle = word.top + word.height / 2
    apart = any(0 <= word.left - (dash.left + dash.width) <= MINUS_GAP * digit
                and dash.top <= middle <= dash.top + max(dash.height, word.height) for dash in dashes)
    negative = apart or (ink is not None and _minus(ink, word))
    return Reading(-value if negative else value, word.confidence)


# A minus sign as fonts print it: a bar under MINUS_THICK of the digits' height thick and at least MINUS_LONG times
# as long as thick (a speck of dirt is about as long as thick), no longer than a digit, its middle MINUS_MIDDLE of
# the way down the digits, and within MINUS_GAP digits' widths of the number. Tesseract drops a small one: on 100
# generated pages (seeds 20261124 and 777), 9 of the 16 scale ends both readings agreed on wrongly were negative
# ends read without their minus; this check leaves 9 wrong, and turns no positive end negative.
MINUS_THICK = 0.25
MINUS_LONG = 1.5
MINUS_MIDDLE = (0.3, 0.8)
MINUS_GAP = 1.2


def _minus(ink: np.ndarray, word: Word) -> bool:
    """Whether a minus sign is printed just before a number Tesseract read without one (`ink`: the crop's ink,
    in the word's pixels). Tesseract's box for the number may hold the minus it dropped, so the first mark of
    ink from MINUS_GAP digits before the box on is the one looked at."""
    digit = word.width / max(len(word.text), 1)
    top, bottom = round(word.top), round(word.top + word.height)
    left, right = max(0, round(word.left - MINUS_GAP * digit)), min(ink.shape[1], round(word.left + 1.5 * digit))
    if bottom - top < 4 or right - left < 2 or top < 0 or bottom > ink.shape[0]:
        return False
    window = ink[top:bottom, left:right]
    columns = np.flatnonzero(window.any(axis=0))
    if columns.size == 0:
        return False
    # The first mark: its run of inked columns (a minus may stand a column from the digit).
    mark = np.split(columns, np.flatnonzero(np.diff(columns) > 1) + 1)[0]
    rows = np.flatnonzero(window[:, mark[0]:mark[-1] + 1].any(axis=1))
    thick, long = rows[-1] - rows[0] + 1, mark.size
    middle = (rows[0] + rows[-1] + 1) / 2 / (bottom - top)
    return bool(thick <= max(2.0, MINUS_THICK * (bottom - top)) and long >= MINUS_LONG * thick
                and long <= 1.2 * digit and MINUS_MIDDLE[0] <= middle <= MINUS_MIDDLE[1])


# The spans a linear track's scale is printed over, as a leading figure times a power of ten: 0-150 API, -80-20 mV,
# 6-16 in, 0.45 to -0.15 v/v, 1.95-2.95 g/cm3, 140-40 us/ft. A pair of ends read over any other span has a digit
# misread ("-88" for "-80", "158" for "150", "-9.15" for "-0.15"), or is a scale printed over an uncommon span;
# either way it is the person's to read off the scan.
LINEAR_SPANS = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)


def check_ends(curve: CurveHeader, log_grid: bool | None, decades: int | None) -> CurveHeader:
    """Leave both ends empty where they cannot be the track's (`ends_fit`). One of them is misread ("40000" for
    "10000"), and which one the person reads best off the scan."""
    left, right = curve.left.value, curve.right.value
    if not isinstance(left, float) or not isinstance(right, float) or ends_fit(left, right, log_grid, decades):
        return curve
    return replace(curve, left=Reading(None, 0.0), right=Reading(None, 0.0))


def ends_fit(left: float, right: float, log_grid: bool | None, decades: int | None) -> bool:
    """Whether two scale ends can be a track's: unequal; on a logarithmic grid positive and as many decades
    apart as the grid has; on a linear grid over one of LINEAR_SPANS."""
    if left == right:
        return False
    if log_grid:
        return left > 0 and right > 0 and (decades is None or abs(abs(math.log10(right / left)) - decades) < 1e-3)
    return log_grid is None or _common_span(abs(right - left))


def _common_span(span: float) -> bool:
    leading = span / 10 ** math.floor(math.log10(span))
    return any(math.isclose(leading, common, rel_tol=1e-6) or math.isclose(leading, common * 10, rel_tol=1e-6)
               for common in LINEAR_SPANS)


def line_style(page_ink: np.ndarray, box: TextBox, curve: CurveHeader, next_row: float,
               gray: np.ndarray | None = None, paper: int = 255, above: bool = False) -> tuple[Reading, int | None]:
    """The style of the sample line under a curve's text (within four text heights, above the next curve's):
    solid, dashed or dotted from the share of the sample's length that is inked, dash-dot where its marks
    alternate long and short, and the page row the sample is on. Empty when no sample line is found, and the
    style alone where a broken sample's marks do not repeat (`_regular`). With the page's `gray` (and its
    `paper` level), a column where the stroke falls across two rows, too light on each to be ink, is inked
    (`_stroke_columns`). `above`: the legend draws each sample over its curve's text (`samples_above`), and
    `next_row` is the row of the curve's above it (or the box's top)."""
    # Half a line of text clear of the next curve's text; a box's edge has none.
    clear = 0.0 if (next_row <= box.top if above else next_row >= box.bottom) else 0.6 * curve.height
    if above:
        y0 = max(math.ceil(max(next_row + clear, curve.row - 4 * curve.height)), box.top)
        y1 = math.floor(curve.row - 0.6 * curve.height)
    else:
        below, limit = curve.row + 0.6 * curve.height, min(next_row - clear, curve.row + 4 * curve.height)
        y0, y1 = math.ceil(below), min(math.floor(limit), box.bottom)
    if y1 - y0 < 2:
        return Reading(None, 0.0), None
    ink = page_ink[y0:y1, box.left:box.right + 1]
    stretches = np.where(cell_rules(ink), 0, spread(ink))
    row = int(np.argmax(stretches))
    if stretches[row] < RULE_STRETCHES:
        return Reading(None, 0.0), None
    # The middle of the sample's rows across the box, as `line_samples` finds it: a wide pen's stroke spans
    # several rows, whose first is as full as its middle.
    band = next(b for b in _full_rows(stretches) if b[0] <= row <= b[-1])
    row = int(band[len(band) // 2])
    dark = None if gray is None else _darkness(
        gray[y0 + max(0, row - SPLIT_REACH):y0 + row + SPLIT_REACH + 1, box.left:box.right + 1], paper)
    columns = _stroke_columns(ink[max(0, row - 1):row + 2], dark)
    # The sample's ink along its length, first to last inked column. Gaps under a fifth of the words' height
    # (about 0.02 in) are the scan breaking a line, not its style (a dash's or a dot's gap is twice that or
    # more): they count as ink.
    inked = np.zeros(columns[-1] - columns[0] + 1, dtype=bool)
    inked[columns - columns[0]] = True
    gaps = np.diff(columns) - 1
    bridged = (gaps > 0) & (gaps <= max(2.0, 0.2 * curve.height))
    for start, gap in zip(columns[:-1][bridged] - columns[0] + 1, gaps[bridged], strict=True):
        inked[start:start + gap] = True
    share = float(np.count_nonzero(inked) / inked.size)
    style = "solid" if share >= 0.9 else "dashed" if share >= 0.5 else "dotted"
    confidence = round(min(1.0, abs(share - (0.9 if share >= 0.9 else 0.5)) * 4 + 0.5), 2)
    if style != "solid":
        # Dash, dot, dash, dot: read as the traces' marks are (`ink.style_scores`). A long dash and a dot ink
        # about as much of the length as a dash alone.
        scores = style_scores(Look(inked, 1.0, 1.0, None))
        if max(scores, key=lambda name: scores[name]) == "dash-dot":
            style, confidence = "dash-dot", round(min(1.0, 0.5 + scores["dash-dot"] / 2), 2)
        if not _regular(*runs(inked)):
            return Reading(None, 0.0), y0 + row
    return Reading(style, confidence), y0 + row


# A thin light pen on a skewed scan steps from row to row along its length; where it steps, its ink falls
# across two rows at about half its darkness each, and both may lie above the ink threshold: a solid line reads
# broken at a regular step, as dashed. Its darkness summed across the rows (SPLIT_REACH either side of the
# sample's row, each pixel under FAINT counted as paper) stays the stroke's. A column whose sum is SPLIT_SHARE of
# the stroke's (the median over its inked columns) or more is inked. On 100 generated pages (bench/analyse_eval.py
# seeds 20261124 and 777) every one of the four solid samples read dashed was such a pen: one-pixel, gray 98-121,
# at 343-393 dpi.
SPLIT_REACH = 2
SPLIT_SHARE = 0.6


def _stroke_columns(ink: np.ndarray, dark: np.ndarray | None) -> np.ndarray:
    """The columns of a line sample's ink (its rows' `ink`), and those where its darkness summed across the
    sample (`dark`, 0 paper .. 1) is the stroke's."""
    inked = ink.any(axis=0)
    if dark is None or not inked.any():
        return np.flatnonzero(inked)
    summed = _summed(dark)
    return np.flatnonzero(inked | (summed >= SPLIT_SHARE * float(np.median(summed[inked]))))


def _full_rows(stretches: np.ndarray) -> list[np.ndarray]:
    """The runs of a header box's rows with ink across it (in RULE_STRETCHES of its stretches or more, `spread`),
    each as its row indices: a line sample's, or a box edge's."""
    rows = np.flatnonzero(stretches >= RULE_STRETCHES)
    return np.split(rows, np.flatnonzero(np.diff(rows) > 1) + 1) if rows.size else []


def _darkness(cut: np.ndarray, paper: int) -> np.ndarray:
    """Gray pixels as darkness against the paper's gray: 0 paper .. 1 black."""
    return np.clip((paper - cut.astype(np.float32)) / max(paper, 1), 0.0, 1.0)


def _summed(dark: np.ndarray) -> np.ndarray:
    """Per column, a stroke's darkness summed across it, each pixel under FAINT counted as paper: about its
    width in rows of black, however the scan blurred it."""
    return np.where(dark > FAINT, dark, 0.0).sum(axis=0)


# A pen's dashes and dots repeat: of a broken sample's marks (one length, or two for dash-dot) and of its gaps
# (one length), at least REGULAR_SHARE lie within MARKS_NEAR of their kind's median (2 px at least). A thin light
# pen that the scan's threshold breaks at random does not: on 40 generated pages (seed 20261124) its samples had
# 13 styles proposed wrong (solid or dashed read dashed, dotted or dash-dot), every one of them broken
# irregularly, while 104 of 105 broken samples read right were regular.
MARKS_NEAR = 0.3
REGULAR_SHARE = 0.85


def _regular(marks: np.ndarray, gaps: np.ndarray) -> bool:
    """Whether a broken line sample's marks and gaps repeat as a pen's pattern does."""
    def near(lengths: np.ndarray, kinds: int) -> float:
        if lengths.size < 3:
            return 1.0
        lengths = lengths.astype(np.float64)
        low, high = float(lengths.min()), float(lengths.max())
        middle = lengths < math.sqrt(max(low, 1.0) * high) if kinds == 2 and high >= 3 * max(low, 1.0) else None
        typical = np.full(lengths.size, np.median(lengths)) if middle is None else np.where(
            middle, np.median(lengths[middle]), np.median(lengths[~middle]))
        return float(np.mean(np.abs(lengths - typical) <= MARKS_NEAR * np.maximum(typical, 2.0)))
    return near(marks, 2) >= REGULAR_SHARE and near(gaps, 1) >= REGULAR_SHARE


def with_unread(curves: list[CurveHeader], rows: list[int | None], samples: list[LineSample], height: float,
                offset: float) -> tuple[list[CurveHeader], list[int | None]]:
    """The curves read in a header box, and one more for every line sample under no read curve's text (its
    name unread: a legend draws one sample per curve), top to bottom, with the page rows of their samples.
    Such a curve has no name, unit, scale ends or style for the person to supply; its text's row is put
    `offset` rows above its sample (where the read curves' texts sit above theirs; below it, where `offset` is
    negative: a legend that draws its samples over their text), so that its style, ink and weight are read off
    the sample as any curve's are (`line_style`, `legend`)."""
    taken = {row for row in rows if row is not None}
    found = list(zip(curves, rows, strict=True))
    for sample in samples:
        if any(abs(sample.row - row) <= 2 for row in taken):
            continue
        unread = CurveHeader(Reading(None, 0.0), Reading(None, 0.0), Reading(None, 0.0), Reading(None, 0.0),
                             Reading(None, 0.0), sample.row - offset, height)
        found.append((unread, sample.row))
    found.sort(key=lambda pair: pair[0].row)
    return [curve for curve, _ in found], [row for _, row in found]


def samples_above(curves: list[CurveHeader], samples: list[LineSample], top: float, bottom: float) -> bool:
    """Whether a header box's legend draws each curve's line sample over its text, not under it: more of the
    curves (`curves`, top to bottom, in a box of page rows `top`..`bottom`) have a sample between their text and
    the text above them than between their text and the text below. Under, on a tie: a legend of one sample per
    curve has its samples one way, and the other way finds one fewer."""
    rows = [curve.row for curve in curves]
    def found(lo: float, hi: float) -> bool:
        return any(lo < sample.row < hi for sample in samples)
    over = sum(found(rows[k - 1] if k else top, rows[k] - 0.6 * c.height) for k, c in enumerate(curves))
    under = sum(found(rows[k] + 0.6 * c.height, rows[k + 1] if k + 1 < len(rows) else bottom)
                for k, c in enumerate(curves))
    return over > under


# A legend that rules each curve's entry into a cell of its own draws its rules from border to border, where a
# curve's line sample stops short of them (the independent page renderer's legend layout "d": its rules were read
# as solid samples, the cells' curves given a solid style and extra curves proposed on them). A row of a header
# box inked over this share of its width and at both its edges is such a rule, not a sample.
RULE_SHARE = 0.97
RULE_EDGE = 2  # columns at either edge of the box


def cell_rules(ink: np.ndarray) -> np.ndarray:
    """Per row of a header box's ink (bool, the box's columns): whether it is a rule drawn across the box."""
    if ink.shape[1] <= 2 * RULE_EDGE or ink.shape[0] == 0:
        return np.zeros(ink.shape[0], dtype=bool)
    near = ink.copy()  # with the rows either side: a rule a scan left slightly tilted steps from row to row
    near[1:] |= ink[:-1]
    near[:-1] |= ink[1:]
    return (near.mean(axis=1) >= RULE_SHARE) & near[:, :RULE_EDGE].any(axis=1) & near[:, -RULE_EDGE:].any(axis=1)


SAMPLE_REACH = 8  # rows either side of a line sample's row that its stroke may cover (a 4 px pen at 400 dpi, blurred)
FAINT = 0.08  # darkness under which a pixel across a line sample is paper, not its stroke's blurred edge


def line_samples(page_ink: np.ndarray, gray: np.ndarray, paper: int, box: TextBox) -> list[LineSample]:
    """Every line sample in a track's header box, read or not: the runs of rows with ink across the box
    (away from its top and bottom rows, which a skewed border may reach), each measured across. A run taller
    than a pen's stroke can be (2 SAMPLE_REACH) is a smudge of dirt across a line of text, not a sample: on a
    1-bit scan (seed 999's page 33 of bench/analyse_eval.py) one was proposed as a curve."""
    ink = page_ink[box.top:box.bottom + 1, box.left:box.right + 1]
    rules = cell_rules(ink)
    middles = [int(band[len(band) // 2]) for band in _full_rows(spread(ink))
               if band[0] > 1 and band[-1] < ink.shape[0] - 2 and len(band) <= 2 * SAMPLE_REACH
               and not rules[band].any()]
    samples = []
    for k, middle in enumerate(middles):
        lo = max(middle - SAMPLE_REACH, (middles[k - 1] + middle) // 2 + 1 if k else 0)
        hi = min(middle + SAMPLE_REACH + 1, (middle + middles[k + 1]) // 2 if k + 1 < len(middles) else ink.shape[0])
        columns = np.flatnonzero(ink[max(0, middle - 1):middle + 2].any(axis=0))
        dark = _darkness(gray[box.top + lo:box.top + hi, box.left:box.right + 1][:, columns], paper)
        samples.append(LineSample(box.top + middle, float(np.median(dark.max(axis=0))), float(np.median(_summed(dark))),
                                  float(np.median(ink[lo:hi][:, columns].sum(axis=0)))))
    return samples


# A line sample whose ink (`LineSample.core`) is darker than this share of the page's black is drawn in the page's
# dark ink. One lighter is in a light (gray or faded) pen where its darkness summed across it (`LineSample.summed`)
# comes to LIGHT_WIDE rows of black or more, or to under LIGHT_THIN rows, and is left unread between the two. A scan
# blurs a stroke but keeps its ink: a dark pen at least a pixel wide sums to about a row of black or more, wherever
# the stroke falls across the rows. A one-pixel dark stroke that the scan spreads over two rows at half the black
# each looks as a two-pixel light one does, and is left unread; a light stroke summing to under a row of black, or
# to more than a one-pixel dark one does, is light. Over the gray pages of four generated sets (60 pages each of
# bench/analyse_eval.py's seeds 20261124, 777, 999 and 555; 451 dark samples, 228 light): dark samples under 0.8 of
# the black (one-pixel pens spread over two rows) summed to 0.92-0.96 rows; one-pixel light pens to 0.78 at most,
# two-pixel ones to 0.94 and more. With LIGHT_WIDE at 1.5 and no LIGHT_THIN, 66 of the 228 light samples were read
# light; now 203 are, and no dark one. Five light pens read 0.82-0.89 of the black, and are read dark either way.
LIGHT_BELOW = 0.8
LIGHT_WIDE = 1.1
LIGHT_THIN = 0.84
# A sample is read light only where its ink is also under LIGHT_CORE of the black; between LIGHT_CORE and LIGHT_BELOW
# it is left unread. A scan's blur takes a thin dark pen's peak down there: on the independent page renderer's gray
# pages (bench/paper/sheet.py, tuning seeds 1 and 2: 282 line samples) dark pens read 0.51-0.98 of the black (a
# tenth under 0.71) and its gray pens 0.47-1.06, so that 27 dark pens were proposed light. Under 0.65 only: 8.
LIGHT_CORE = 0.65
WEIGHT_CONFIDENCE = 0.8  # a width within half a row decides: a thin pen's stroke may read half a row off


def page_black(gray: np.ndarray, ink: np.ndarray, paper: int) -> float:
    """The darkness (0 paper .. 1) of the page's black ink: its printing's, text, borders and grid alike, which
    are most of a log's ink (the 90th percentile over its ink pixels, every fourth row and column)."""
    inked = gray[::4, ::4][ink[::4, ::4]]
    if inked.size == 0:
        return 1.0
    return float(np.percentile(_darkness(inked, paper), 90))


def legend(curves: list[CurveHeader], rows: list[int | None], samples: list[LineSample], black: float,
           tones: bool) -> list[CurveHeader]:
    """The curves of one track header with the ink and weight their line samples (on page `rows`; None:
    none found) show. `ink`: dark or light by the sample's darkness against the page's `black` (`_ink`), left
    empty where the scan's `tones` cannot be read (a 1-bit scan prints every ink black). `weight`: thick for the
    widest of the header's `samples` (every line sample in its box, read or not) and thin for the narrowest
    where the widest is twice the narrowest or more, as a person reads a legend (`synth_truth.legend_weights`),
    widths counted in whole rows; left empty where they are closer than that, and on 1-bit scans, whose
    threshold widens a dark pen's stroke and thins a light one's."""
    said = legend_weights([max(1, round(sample.width)) for sample in samples]) if tones and len(samples) > 1 else []
    named = []
    for curve, row in zip(curves, rows, strict=True):
        k = next((k for k, sample in enumerate(samples) if row is not None and abs(sample.row - row) <= 2), None)
        if k is None:
            named.append(curve)
            continue
        ink = _ink(samples[k], black) if tones else Reading(None, 0.0)
        weight = said[k] if said else None
        named.append(replace(curve, ink=ink, weight=Reading(weight, WEIGHT_CONFIDENCE if weight else 0.0)))
    return named


def weights_agreed(printed: list[tuple[TextBox, list[CurveHeader]]]) -> list[list[CurveHeader]]:
    """Each printed track header's curves (its box, the curves `legend` read in it), their weights kept only where
    every other printing of the same track's header (a box over the same columns: the legend again over another
    section) reads the same weight for each curve named in both; otherwise every printing's weights are left
    unread. The weight of a one- or two-pixel pen is read off the rows its stroke happens to fall across: a page
    of the independent renderer (tuning seed 1, page 39) read a track's three equal pens as thin, thin, thick
    over one section and thick, thin, thin over the other. On that seed's 40 pages, weights proposed wrong went
    from 7.6 to 5.8 % of the curves, on the held-out seed 4 from 1.7 to 0.6 % (bench/README.md, 2026-12-07)."""
    doubted: set[int] = set()
    for i, (box, curves) in enumerate(printed):
        said = {c.mnemonic.value: c.weight.value for c in curves if c.mnemonic.value is not None}
        for j in range(i + 1, len(printed)):
            other, others = printed[j]
            overlap = min(box.right, other.right) - max(box.left, other.left)
            if overlap < 0.5 * min(box.right - box.left, other.right - other.left):
                continue
            if any(c.mnemonic.value in said and said[c.mnemonic.value] != c.weight.value for c in others):
                doubted.update((i, j))
    return [[replace(c, weight=Reading(None, 0.0)) for c in curves] if k in doubted else curves
            for k, (_, curves) in enumerate(printed)]


def _ink(sample: LineSample, black: float) -> Reading:
    if black <= 0:
        return Reading(None, 0.0)
    share = sample.core / black
    if share >= LIGHT_BELOW:
        return Reading("dark", _sure(share - LIGHT_BELOW))
    summed = sample.summed / black
    if share < LIGHT_CORE and (summed >= LIGHT_WIDE or summed < LIGHT_THIN):
        return Reading("light", _sure(min(LIGHT_CORE - share, max(summed - LIGHT_WIDE, LIGHT_THIN - summed))))
    return Reading(None, 0.0)


def _sure(margin: float) -> float:
    return round(min(1.0, 0.5 + 2.5 * margin), 2)


def agreed(first: list[CurveHeader], second: list[CurveHeader], log_grid: bool | None = None,
           decades: int | None = None) -> list[CurveHeader]:
    """The curves of a first reading, each field kept only where a second reading of the same line (within
    half a text height) says the same: Tesseract's confidence alone lets too many misreadings through. A unit
    is also kept where one reading has it and the other none: a unit is proposed only from the list of known
    units (KNOWN_UNITS), which keeps misreadings out as well, and the two readings agree on the name. On
    generated pages (bench/analyse_eval.py, seeds 20261124 and 777) this read units for 83.1 and 82.0 % of the
    curves, against 73.7 and 74.0 % where both readings had to agree, with none wrong either way. Scale ends
    are the track's (`_agreed_ends`, with the track's value grid: `log_grid`, `decades`)."""
    def same(a: Reading, b: Reading) -> Reading:
        return a if a.value is not None and a.value == b.value else Reading(None, 0.0)
    kept = []
    for curve in first:
        twin = min(second, key=lambda c: abs(c.row - curve.row), default=None)
        if twin is None or abs(twin.row - curve.row) > curve.height / 2:
            continue
        mnemonic = same(curve.mnemonic, twin.mnemonic)
        left, right = _agreed_ends(curve, twin, log_grid, decades)
        end_words = _end_words_of(curve, twin)
        if mnemonic.value is None:
            # A line whose name the readings do not agree on is a curve with its name left for the person
            # where they agree on a scale end; its unit where both read the same known one.
            if left.value is not None or right.value is not None:
                unit = same(curve.unit, twin.unit)
                kept.append(replace(curve, mnemonic=mnemonic, unit=unit, left=left, right=right,
                                    end_words=end_words, unit_word=_unit_word_of(unit, curve, twin)))
            continue
        unit = curve.unit if twin.unit.value is None else twin.unit if curve.unit.value is None else \
            same(curve.unit, twin.unit)
        kept.append(replace(curve, mnemonic=mnemonic, unit=unit, left=left, right=right, end_words=end_words,
                            unit_word=_unit_word_of(unit, curve, twin)))
    return kept


# Some legends print a curve's name and unit over its line sample and its scale ends under the sample's two ends:
# one entry on two lines of text, read as a line with a name and no ends and, within this many text heights under
# it, a line with ends and no name (the independent page renderer's legend layout "c", bench/paper/sheet.py).
JOIN_HEIGHTS = 3.0


def joined_entries(curves: list[CurveHeader]) -> list[CurveHeader]:
    """A header box's curves (top to bottom, as `agreed` keeps them) with each line that has a name or a unit
    and no scale end joined to the line under it that has scale ends and no name, within JOIN_HEIGHTS of its
    text's height: the two lines of one legend entry, at the name's row."""
    joined: list[CurveHeader] = []
    for curve in curves:
        above = joined[-1] if joined else None
        if above is not None and _named_only(above) and _ends_only(curve) \
                and curve.row - above.row <= JOIN_HEIGHTS * max(above.height, curve.height):
            joined[-1] = replace(above, left=curve.left, right=curve.right, end_words=curve.end_words)
        else:
            joined.append(curve)
    return joined


def _named_only(curve: CurveHeader) -> bool:
    """A line with a name or unit and nothing in its end zones that can be a number (a dash of the sample
    under it, read as text, may be there)."""
    return (curve.mnemonic.value is not None or curve.unit.value is not None) and curve.left.value is None \
        and curve.right.value is None and not any(
            word is not None and NUMBER.match(_number_text(word.text)) for word in curve.end_words)


def _ends_only(curve: CurveHeader) -> bool:
    return curve.mnemonic.value is None and curve.unit.value is None and (
        curve.left.value is not None or curve.right.value is not None)


def _unit_word_of(unit: Reading, first: CurveHeader, second: CurveHeader) -> Word | None:
    """The word to read a line's unit again from, where neither reading read it as a known unit and neither
    read it as another known one: the first reading's, else the second's."""
    if unit.value is not None or first.unit.value is not None or second.unit.value is not None:
        return None
    return first.unit_word or second.unit_word


def _end_words_of(first: CurveHeader, second: CurveHeader) -> tuple[Word | None, Word | None]:
    """A line's words to read its ends again from (`_end_word`), but for an end its two readings read as two
    numbers: a third reading would only break the tie (a CALI's 6 read 8 by two readings of three)."""
    left = None if _two_numbers(first.left, second.left) else _end_word(first.end_words[0], second.end_words[0])
    right = None if _two_numbers(first.right, second.right) else _end_word(first.end_words[1], second.end_words[1])
    return left, right


def _two_numbers(a: Reading, b: Reading) -> bool:
    return a.value is not None and b.value is not None and a.value != b.value


def _end_word(first: Word | None, second: Word | None) -> Word | None:
    """Of the two readings' words in an end zone, the one read as a number, else the first reading's."""
    numbers = [w for w in (first, second) if w is not None and NUMBER.match(_number_text(w.text))]
    return numbers[0] if numbers else first or second


def reread_words(curve: CurveHeader) -> list[tuple[int, Word]]:
    """The ends to read again as numbers: (0 left or 1 right, the word in its zone) where the end is unread."""
    ends = (curve.left, curve.right)
    return [(side, word) for side, word in enumerate(curve.end_words) if word is not None and ends[side].value is None]


def reread_crop(crop: np.ndarray, word: Word, text_height: float) -> tuple[np.ndarray, tuple[int, int]]:
    """A word's box in its header crop, with REREAD_MARGIN of the text's height of the crop around it, and the
    box's (top, left) offset in the crop."""
    margin = max(2, round(REREAD_MARGIN * text_height))
    top, left = max(0, round(word.top) - margin), max(0, round(word.left) - margin)
    bottom = min(crop.shape[0], round(word.top + word.height) + margin)
    right = min(crop.shape[1], round(word.left + word.width) + margin)
    return crop[top:bottom, left:right], (top, left)


def reread_end(word: Word, first: list[Word], second: list[Word], offset: tuple[int, int],
               ink: np.ndarray | None, text_height: float) -> Reading:
    """A scale end read again as a number (Tesseract told the digits only) from the box of `word`, what the line's
    readings read there. Of the three readings (`word`, and the new `first` and `second`; negative as `_number`
    reads them, `ink` being the header crop's, which `offset` places the new boxes in), two or three read one
    number, one of them at MIN_CONFIDENCE or more and another at END_CONFIDENCE or more, and none reads another
    (a low-resolution "-80" read "30" by both new ones; a PEF's "0" read "9" by both); where all three read it
    on text UNANIMOUS_TEXT_PX tall or taller, one at END_CONFIDENCE. On text under SIGN_TEXT_PX tall, only 0."""
    votes = [_number(word, ink, []) if NUMBER.match(_number_text(word.text)) else Reading(None, 0.0)]
    for words in (first, second):
        if not words:
            votes.append(Reading(None, 0.0))
            continue
        top, left = min(w.top for w in words), min(w.left for w in words)
        joined = Word(*ocr_joined(words), offset[1] + left, offset[0] + top,
                      max(w.left + w.width for w in words) - left, max(w.top + w.height for w in words) - top, 0)
        votes.append(_number(joined, ink, []) if NUMBER.match(joined.text) else Reading(None, 0.0))
    numbers = [(v.value, v.confidence) for v in votes if isinstance(v.value, float)]
    agreeing = sorted((confidence for _, confidence in numbers), reverse=True)
    if len(numbers) < 2 or len({value for value, _ in numbers}) > 1:
        return Reading(None, 0.0)
    # All three read it, on text tall enough that digits are not confused: Tesseract's doubt says less.
    unanimous = len(numbers) == len(votes) and text_height >= UNANIMOUS_TEXT_PX
    if agreeing[0] < (END_CONFIDENCE if unanimous else MIN_CONFIDENCE) \
            or (not unanimous and agreeing[1] < END_CONFIDENCE):
        return Reading(None, 0.0)
    value = numbers[0][0]
    return Reading(None, 0.0) if text_height < SIGN_TEXT_PX and value != 0 else Reading(value, agreeing[1])


def unit_text(words: list[Word]) -> str | None:
    """The unit a reading of a unit's box gives: what its words, joined left to right, hold between a
    parenthesis (or a bracket read for one) and the next, without the marks Tesseract hangs on it; None where
    no parenthesis opens."""
    text = ocr_joined(words)[0].translate(BRACKETS)
    if "(" not in text:
        return None
    return text.partition("(")[2].partition(")")[0].strip(TRAILING)


def reread_unit(first: list[Word], second: list[Word]) -> Reading:
    """A unit read again from its word's box (Tesseract told the characters of units only: UNIT_CHARS), by two
    readings (sharp and soft): kept where both read the same known unit (KNOWN_UNITS). Letters alone, Tesseract
    reads a unit's glyphs as other letters it knows ("(APT)" for API, "(MY)" for MV)."""
    texts = [unit_text(words) for words in (first, second)]
    if texts[0] is None or texts[0] != texts[1] or texts[0] not in KNOWN_UNITS:
        return Reading(None, 0.0)
    return Reading(texts[0], min(ocr_joined(first)[1], ocr_joined(second)[1]))


def with_reread(curve: CurveHeader, ends: dict[int, Reading], log_grid: bool | None,
                decades: int | None) -> CurveHeader:
    """The curve with its unread ends read again (`ends`, by side), kept only where the line's two ends then
    fit the track's value grid (`ends_fit`): a second chance at a misread end is taken where its pair checks
    it, never for a lone end nor on a track whose grid is unread."""
    left = curve.left if curve.left.value is not None else ends.get(0, Reading(None, 0.0))
    right = curve.right if curve.right.value is not None else ends.get(1, Reading(None, 0.0))
    if log_grid is None or not isinstance(left.value, float) or not isinstance(right.value, float) \
            or not ends_fit(left.value, right.value, log_grid, decades):
        return curve
    return replace(curve, left=left, right=right)


def _agreed_ends(first: CurveHeader, second: CurveHeader, log_grid: bool | None,
                 decades: int | None) -> tuple[Reading, Reading]:
    """A line's scale ends from its two readings: an end both read alike, one of them at MIN_CONFIDENCE or more.
    Where they read an end differently, the one of the two that the other end fits (`ends_fit`) where only one
    does, read at MIN_CONFIDENCE or more ("1400" or "140" before "40" on a linear grid); where both do, the end
    is left empty, and where neither does or the one that does is unsure, the other end too (one of the line's
    numbers is misread). Ends that cannot be the track's are left empty (`check_ends`)."""
    empty = Reading(None, 0.0)

    def choices(a: Reading, b: Reading) -> tuple[list[Reading], bool]:
        """The end's candidates, and whether the readings differ on it."""
        if a.value is None or b.value is None:
            return [empty], False
        if a.value == b.value:
            return [a if max(a.confidence, b.confidence) >= MIN_CONFIDENCE else empty], False
        return [a, b], True
    lefts, left_differs = choices(first.left, second.left)
    rights, right_differs = choices(first.right, second.right)
    if left_differs or right_differs:
        fitting = [(left, right) for left in lefts for right in rights
                   if isinstance(left.value, float) and isinstance(right.value, float)
                   and ends_fit(left.value, right.value, log_grid, decades)]
        if len(fitting) > 1:
            return (empty if left_differs else lefts[0]), (empty if right_differs else rights[0])
        sure = fitting and all(end.confidence >= MIN_CONFIDENCE for end, differs in zip(
            fitting[0], (left_differs, right_differs), strict=True) if differs)
        return fitting[0] if sure else (empty, empty)
    checked = check_ends(replace(first, left=lefts[0], right=rights[0]), log_grid, decades)
    return checked.left, checked.right
