"""What a traced curve looks like on the scan's own pixels: its line style (from where along the trace
there is ink and where there is paper) and its ink (gray level, or colour on a colour scan).

Measured on the scan, never on the reduced image the model may have read: a dotted curve that a
reduction blurs into a line is still dotted here. Each measure gives, per style or ink a calibration may
declare (`calibration_fields.STYLES`, `INKS`), a score in about -1..1 of how well the stretch agrees,
for the naming step (`veernet_core.digitise.identity`) to weigh, and a label for its warnings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from veernet_core.digitise.calibration_fields import INK_COLOURS
from veernet_core.digitise.colours import ink_line, mismatch, paper_tint
from veernet_core.digitise.marks import marks_along

MIN_DARKNESS = 18.0  # gray levels below the paper: less is scanner noise, not ink
PAPER_COLUMNS = 31  # neighbouring columns whose median gray is the paper's
GRID_SHARE = 0.5  # a row or column this much inked is a grid line (a curve crosses a column once)
DARK_RATIO = 0.5  # ink darker than half the way from paper to black is "dark"; lighter is "light"
# Breaks per stroke width of path along the marks of a trace (`marks_style`): a solid line breaks only where
# a faint stroke fades or other ink takes the trace over, a broken style at its gaps where the trace passes
# them. Along the service's own traces of the independent renderer's tuning logs (seed 7777, 12
# full-resolution logs): 0.12 per 100 stroke widths for solid curves, 1.7-5.4 for broken ones. How often a
# broken style breaks depends on its pattern's length against the pen's width, which differs from print to
# print, so the broken styles share one rate and are told apart by their marks (MARK_ODDS).
BREAK_RATE = {"solid": 1 / 800, "dashed": 1 / 40, "dash-dot": 1 / 40, "dotted": 1 / 40}
DOT_PX = 4.0  # a mark at most this long (its ink pixels over the stroke's width) is a dot
LONG_PX = 8.0  # one at least this long is a dash (or a piece of a line)
# Odds, by style, that a mark the trace passes wholly is a dot, between, or long: a dotted curve's dots run
# together where it folds on itself, and a solid line's breaks leave long pieces.
MARK_ODDS = {"solid": (0.15, 0.2, 0.65), "dashed": (0.1, 0.2, 0.7), "dotted": (0.55, 0.2, 0.25),
             "dash-dot": (0.35, 0.15, 0.5)}
# Breaks and path are counted where the trace moves less than a stroke width from one column to the next
# (path per column at most FLAT_STEP stroke widths): a steep stroke may be drawn faint and break where a
# solid pen drew it (the generator's scanner blur; a recorder's pen moving fast).
FLAT_STEP = 1.0
MARKS_MIN_LENGTH = 100.0  # stroke widths of path a trace needs before its marks tell its style
HUE_SCALE = 3.0  # a stroke's colour agrees with an ink fully on its line, not at all a third of the way off it
PEN_QUANTUM = 0.05  # px: the least standard error of a pen's width (`stroke_widths`)
GRAY = "gray"  # the line of the gray inks' mixes (to black), in `_hue_scores`


@dataclass(frozen=True)
class ScanPixels:
    """The scan as the user sent it: gray (H, W) uint8, and (H, W, 3) uint8 where the upload was colour."""

    gray: np.ndarray
    colour: np.ndarray | None = None
    # "threshold" or "dither" where the upload was a 1-bit scan (`bilevel.one_bit_kind`)
    one_bit: str | None = None
    # page_of's answers per track (top, bottom): the tracer, the naming and the reading of a reduced scan
    # each ask for the same track's page; the scan's pixels are never changed once read.
    pages: dict[tuple[float, float], Page] = field(default_factory=dict, compare=False, repr=False)

    @property
    def tones_unread(self) -> bool:
        """Whether dark and light ink cannot be told on the scan, so that `dark` and `light` hints are neither
        the tracer's nor the naming's evidence, nor held against it: a thresholded 1-bit scan, where every
        stroke is black. A dithered one is read as a gray one: there too its strokes read black at full
        resolution, but so do its paper's dots under a gap, so its looks misread styles as well, and the
        warnings its tones raise keep names in doubt that its styles alone would give, wrongly (tuning seed
        7777 of the independent renderer: one curve of 40 on dithered logs named wrong without a flag;
        bench/README.md, 2026-11-27). Reduced for the model, a dither's dots are tones again."""
        return self.one_bit == "threshold"


@dataclass(frozen=True)
class Page:
    """What is not curve in a track: the paper's gray per column, and the grid lines, which cross every
    curve and would read as ink in a dash's gap or darken a light curve."""

    paper: np.ndarray  # float64 per column: the median gray of the track's rows there
    grid_cols: np.ndarray  # bool per column: a vertical line across most of the track
    grid_rows: np.ndarray  # bool per image row: a horizontal line along most of the scan
    tint: np.ndarray | None = None  # (3,) on a colour scan: the paper's colour per gray level (`colours.paper_tint`)

    def paper_rgb(self, cols: np.ndarray) -> np.ndarray:
        """(len(cols), 3) the paper's colour at columns `cols` of a colour scan."""
        assert self.tint is not None, "a gray scan's page has no paper colour"
        return self.paper[cols][:, None] * self.tint[None, :]


def page_of(scan: ScanPixels, top: float, bottom: float) -> Page:
    """The track's page, computed once per scan and track (``ScanPixels.pages``)."""
    page = scan.pages.get((top, bottom))
    if page is None:
        page = scan.pages[(top, bottom)] = _page(scan, top, bottom)
    return page


def paper_gray(rows: np.ndarray) -> np.ndarray:
    """float64 per column: the paper's gray under `rows` (a track's rows of a gray scan). A column's median
    is the paper's gray, except on a vertical grid line, which covers the column: the median over
    PAPER_COLUMNS neighbouring columns (grid lines are a small share of them) holds there too."""
    step = max(1, rows.shape[0] // 64)  # 64 rows tell a column's paper
    columns = np.median(rows[::step].astype(np.float64), axis=0)
    reach = PAPER_COLUMNS // 2
    padded = np.pad(columns, reach, mode="edge")
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, 2 * reach + 1), axis=1)


def _page(scan: ScanPixels, top: float, bottom: float) -> Page:
    rows = scan.gray[max(0, int(math.floor(top))) : int(math.ceil(bottom)) + 1]
    paper = paper_gray(rows)
    step = max(1, rows.shape[0] // 64)
    # Gray levels compared with the float threshold as they are (exactly, as float64) and counted: no
    # float copy of the whole scan.
    ink_below = paper - MIN_DARKNESS
    grid_cols = np.count_nonzero(rows <= ink_below[None, :], axis=0) / rows.shape[0] >= GRID_SHARE
    grid_rows = np.count_nonzero(scan.gray <= ink_below[None, :], axis=1) / scan.gray.shape[1] >= GRID_SHARE
    tint = None
    if scan.colour is not None:  # the same rows as the paper's gray, in colour
        first = max(0, int(math.floor(top)))
        tint = paper_tint(scan.colour[first : first + rows.shape[0] : step], rows[::step].astype(np.float64))
    return Page(paper, grid_cols, grid_rows, tint)


@dataclass(frozen=True)
class Look:
    """A stretch of one trace: ink per measured column and the pixels under it."""

    inked: np.ndarray  # bool per measured column, in column order (gaps included)
    darkness: float  # median (paper - ink) over inked columns, gray levels
    paper: float
    rgb: tuple[float, float, float] | None  # median colour of the ink on a colour scan
    paper_rgb: tuple[float, float, float] | None = None  # the paper's colour under it, on a colour scan

    @property
    def columns(self) -> int:
        return int(self.inked.size)

    @property
    def ink_ratio(self) -> float:
        """How dark the ink is: 0 paper, 1 black."""
        return self.darkness / max(self.paper, 1.0)


def look_at(scan: ScanPixels, page: Page, rows: np.ndarray, cols: np.ndarray, half: int) -> Look | None:
    """The ink along a trace at image `rows` of columns `cols` (ascending), within `half` rows of it; the
    columns where a grid line crosses or runs along it are left out (ink there says nothing). None when
    nothing is left to see."""
    return looks_along(scan, page, rows, cols, half, [(int(cols[0]), int(cols[-1]) + 1)] if cols.size else [(0, 0)])[0]


def rows_about(scan: ScanPixels, page: Page, rows: np.ndarray, cols: np.ndarray,
               reach: int) -> tuple[np.ndarray, np.ndarray]:
    """(window, cols): for a trace at image `rows` of columns `cols`, the image rows within `reach` of it in
    each column (clipped to the scan), and those columns, less the ones a grid line crosses or runs along
    within the window (ink there says nothing of the curve)."""
    height = scan.gray.shape[0]
    window = np.clip(np.rint(rows)[:, None].astype(np.int64) + np.arange(-reach, reach + 1)[None, :], 0, height - 1)
    seen = ~page.grid_cols[cols] & ~page.grid_rows[window].any(axis=1)
    return window[seen], cols[seen]


def looks_along(scan: ScanPixels, page: Page, rows: np.ndarray, cols: np.ndarray, half: int,
                bounds: list[tuple[int, int]], min_columns: int = 1) -> list[Look | None]:
    """`look_at` for each [start, stop) column range of `bounds` (ascending, not overlapping) along one
    trace, with its pixels gathered once for all of them: per range, the look of the trace's columns in it,
    or None where fewer than `min_columns` are left to see. The same values as `look_at` range by range:
    each range's darknesses sorted on their own (one sort of the whole trace, by range), its ink those
    sorted last."""
    window, cols = rows_about(scan, page, rows, cols, half)
    starts = np.searchsorted(cols, [a for a, _ in bounds])
    stops = np.searchsorted(cols, [b for _, b in bounds])
    pixels = scan.gray[window, cols[:, None]]
    paper = page.paper[cols]
    darkness = paper - pixels.min(axis=1).astype(np.float64)
    # Columns of one range share a key, and columns between ranges keys of their own: sorted by key, then
    # by value, each range's values lie sorted where its columns lie.
    key = np.searchsorted(np.sort(np.concatenate([starts, stops])), np.arange(cols.size), side="right")
    ranked, paper_ranked = darkness[np.lexsort((darkness, key))], paper[np.lexsort((paper, key))]
    # Ink where the stroke is at least half as dark as its range's own strokes: a light curve's ink
    # counts as ink, and a gap's paper does not.
    start_list, stop_list = starts.tolist(), stops.tolist()
    threshold = np.full(cols.size, np.inf)
    for i, j in zip(start_list, stop_list, strict=True):
        if j > i:
            threshold[i:j] = max(MIN_DARKNESS, 0.5 * sorted_quantile(ranked[i:j], 0.9))
    inked = darkness >= threshold
    counted = np.concatenate([[0], np.cumsum(inked)]).tolist()
    looks: list[Look | None] = []
    for i, j in zip(start_list, stop_list, strict=True):
        if j - i < max(min_columns, 1):
            looks.append(None)
            continue
        ink_count = counted[j] - counted[i]
        ink_ranked = ranked[j - ink_count : j]  # the range's inked values, sorted: the darkest
        rgb = paper_rgb = None
        if scan.colour is not None and ink_count:
            mine = inked[i:j]
            ink_rows = window[i:j][np.arange(j - i), pixels[i:j].argmin(axis=1)][mine]
            rgb = _triple(np.median(scan.colour[ink_rows, cols[i:j][mine]].astype(np.float64), axis=0))
            paper_rgb = _triple(np.median(page.paper_rgb(cols[i:j][mine]), axis=0)) if page.tint is not None else None
        looks.append(Look(inked[i:j], sorted_median(ink_ranked) if ink_count else 0.0,
                          sorted_median(paper_ranked[i:j]), rgb, paper_rgb))
    return looks


class PenWidth(NamedTuple):
    """A stroke's width in pixels along a stretch of a trace, and the standard error of that figure."""

    px: float
    error: float


def stroke_widths(scan: ScanPixels, page: Page, rows: np.ndarray, cols: np.ndarray, reach: int,
                  bounds: list[tuple[int, int]], min_columns: int = 1) -> list[PenWidth | None]:
    """Per [start, stop) column range of `bounds` (ascending) along one trace at image `rows` of columns
    `cols` (ascending): the width of its pen. A column's width is its ink across the `reach` rows either side
    of the trace over its darkest pixel there; a stroke that moves across rows between columns, or ends in
    a column, reads wider or narrower than its pen, so the pen's width is the mean of the columns' widths
    from the 10th to the 60th percentile, with its standard error (at least PEN_QUANTUM, as a 1-bit scan's
    widths are whole pixels). None where fewer than `min_columns` columns hold ink."""
    out: list[PenWidth | None] = [None] * len(bounds)
    if cols.size == 0:
        return out
    window, at = rows_about(scan, page, rows, cols, reach)
    ink = np.clip(page.paper[at][:, None] - scan.gray[window, at[:, None]], 0.0, None)
    peak = ink.max(axis=1)
    width = ink.sum(axis=1) / np.maximum(peak, 1.0)
    inked = peak >= MIN_DARKNESS
    for k, (a, b) in enumerate(bounds):
        i, j = np.searchsorted(at, a), np.searchsorted(at, b)
        mine = np.sort(width[i:j][inked[i:j]])
        if mine.size >= max(min_columns, 2):
            low = mine[int(0.1 * mine.size) : max(int(0.6 * mine.size), int(0.1 * mine.size) + 2)]
            out[k] = PenWidth(float(low.mean()), float(low.std()) / math.sqrt(low.size) + PEN_QUANTUM)
    return out


# np.median and np.quantile of a few hundred values cost tens of microseconds in argument handling, and
# look_at runs for every trace in every stretch of a track (thousands on a wide scan): on values sorted
# once, the same order statistics and the same arithmetic (tests/core/test_digitise.py holds them equal).

def sorted_median(ranked: np.ndarray) -> float:
    """np.median of 1-D values sorted ascending (NaN, sorted last, where there is any)."""
    n = ranked.size
    if math.isnan(ranked[-1]):
        return math.nan
    if n % 2:
        return float(ranked[n // 2])
    return float((ranked[n // 2 - 1] + ranked[n // 2]) / 2)


def sorted_quantile(ranked: np.ndarray, q: float) -> float:
    """np.quantile (linear) of 1-D values sorted ascending, 0 <= q <= 1; NaN where there is any."""
    n = ranked.size
    if math.isnan(ranked[-1]):
        return math.nan
    position = (n - 1) * q
    below = math.floor(position)
    if position >= n - 1:
        return float(ranked[-1])
    a, b = ranked[below], ranked[below + 1]
    t = position - below
    step = b - a
    return float(b - step * (1 - t) if t >= 0.5 else a + step * t)


def runs(inked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lengths of the inner runs of ink and of paper (those cut by the stretch's ends are left out)."""
    if inked.size < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    edges = np.flatnonzero(np.diff(inked.astype(np.int8))) + 1
    bounds = np.concatenate([[0], edges, [inked.size]])
    lengths, kinds = np.diff(bounds)[1:-1], inked[bounds[1:-2]]
    return lengths[kinds], lengths[~kinds]


def _clip(value: float, low: float, high: float) -> float:
    """np.clip of one float, without NumPy's cost per call (it runs for every look)."""
    return min(max(value, low), high)


def style_scores(look: Look) -> dict[str, float]:
    """Agreement in 0..1 of the stretch with each line style, from its duty cycle and run lengths."""
    duty = np.count_nonzero(look.inked) / look.columns if look.columns else 0.0  # the share inked, as a mean
    on, off = runs(look.inked)
    solid = _clip((duty - 0.75) / 0.17, 0.0, 1.0)  # dashes of 2:1 ink to paper (0.67) are not solid
    broken = 1.0 - solid
    if on.size == 0 or off.size == 0:
        return {"solid": solid, "dashed": broken / 3, "dotted": broken / 3, "dash-dot": broken / 3}
    on, off = np.sort(on), np.sort(off)
    ratio = sorted_median(on) / max(sorted_median(off), 1.0)  # dashes are longer than their gaps, dots not
    long_marks = _clip((ratio - 0.7) / 0.8, 0.0, 1.0)
    typical = sorted_quantile(on, 0.8)
    short_share = int(np.searchsorted(on, 0.45 * typical, side="right")) / on.size
    # Dash, dot, dash, dot: about half the marks short. A dashed line's marks broken by noise are fewer.
    alternating = _clip((min(short_share, 1.0 - short_share) - 0.2) / 0.2, 0.0, 1.0)
    return {"solid": solid, "dashed": broken * long_marks * (1.0 - alternating),
            "dotted": broken * (1.0 - long_marks) * (1.0 - alternating), "dash-dot": broken * alternating}


def _triple(values: np.ndarray) -> tuple[float, float, float]:
    return float(values[0]), float(values[1]), float(values[2])


def ink_scores(look: Look) -> dict[str, float]:
    """Agreement in -1..1 of the stretch's ink with dark, light and each colour name: linear in the
    measure, so that of two curves the darker one scores higher as "dark" however dark both are. On a
    colour scan each ink is held against the line of its mixes with the paper (`colours.mismatch`): a pale
    stroke of an ink is that ink, and a coloured stroke is neither dark nor light however dark it is."""
    dark = _clip((look.ink_ratio - DARK_RATIO) / 0.3, -1.0, 1.0)
    hues = _hue_scores(look)
    if hues is None:  # a gray scan says nothing about colour
        return {"dark": dark, "light": -dark, **{name: 0.0 for name in INK_COLOURS}}
    gray = hues.pop(GRAY)
    return {"dark": min(dark, gray), "light": min(-dark, gray), **hues}


def _hue_scores(look: Look) -> dict[str, float] | None:
    """On a colour scan, agreement in -1..1 of the stretch's ink with each colour's line and the gray
    inks' (GRAY); None on a gray scan."""
    if look.rgb is None or look.paper_rgb is None:
        return None
    rgb, paper = np.array(look.rgb), np.array(look.paper_rgb)
    return {name: _clip(1.0 - HUE_SCALE * float(mismatch(rgb, paper, ink_line(name))), -1.0, 1.0)
            for name in (*INK_COLOURS, GRAY)}


@dataclass(frozen=True)
class MarksReading:
    """A trace's line style read from the marks of ink along it (`marks_style`), and what it was read from."""

    style: str
    breaks: int  # places the trace goes from one piece of ink to another
    length: float  # its path, in stroke widths


def marks_style(scan: ScanPixels, page: Page, rows: np.ndarray, cols: np.ndarray, half: int,
                bridge: int) -> MarksReading | None:
    """The line style whose breaks and marks (`marks.marks_along`) are likeliest along a trace at `rows` of
    columns `cols` (ascending): its breaks a Poisson count over its path at the style's BREAK_RATE, each mark
    it passes wholly a dot, a long mark or between at the style's MARK_ODDS. Unlike the looks' reading column
    by column, it holds where a curve moves several rows a column (a dash's gap then falls between two
    columns that both hold ink). A steep stroke drawn faint would break a solid line, so breaks and path are
    counted only where the trace moves less than FLAT_STEP stroke widths a column. None on such a path
    shorter than MARKS_MIN_LENGTH stroke widths."""
    if cols.size < 2:
        return None
    marks = marks_evidence(scan, page, rows, cols, half, bridge)
    if marks.length < MARKS_MIN_LENGTH:
        return None
    likely = dict(zip(MARK_STYLES, marks.loglik.sum(axis=0).tolist(), strict=True))
    return MarksReading(max(likely, key=likely.__getitem__), marks.breaks, marks.length)


MARK_STYLES = tuple(BREAK_RATE)  # the order of `MarksEvidence.loglik`'s columns


@dataclass(frozen=True)
class MarksEvidence:
    """The marks' log-likelihood of each line style (MARK_STYLES), split over a trace's columns so that the
    whole trace's sum is `marks_style`'s and any range of columns sums to that range's share: the path at
    each column, a break at the column after it, a mark passed wholly spread evenly over its columns.
    (Each break spread half over the mark before it and half over the mark after, so that a short stretch
    inside a dash reads the dash's ends, named the independent renderer's and the generator's tuning logs
    worse: bench/README.md, 2026-11-28.)"""

    loglik: np.ndarray  # (columns, styles)
    breaks: int
    length: float  # the flat path, in stroke widths


def marks_evidence(scan: ScanPixels, page: Page, rows: np.ndarray, cols: np.ndarray, half: int,
                   bridge: int) -> MarksEvidence:
    """`MarksEvidence` along a trace at `rows` of columns `cols` (ascending, at least one)."""
    track = marks_along(scan.gray, page.paper, rows, cols, half, bridge, MIN_DARKNESS)
    flat = track.step <= FLAT_STEP * track.width  # the path from the column before
    where = np.flatnonzero(track.label >= 0)
    label = track.label[where]
    # A break: the next mark, across the trace's own columns (paper between counts, columns it lacks do not:
    # where another curve touches it, or it was not found).
    unbroken = np.diff(cols[where]) == np.diff(where)
    changes = np.flatnonzero((label[1:] != label[:-1]) & flat[where[1:]] & unbroken)
    path = np.where(flat, track.step, 0.0) / track.width
    rates = np.array([BREAK_RATE[style] for style in MARK_STYLES])
    loglik = -path[:, None] * rates[None, :]
    loglik[where[changes + 1]] += np.log(rates)[None, :]
    # The marks passed wholly: each from the column after one break to the column of the next.
    first, last = where[changes[:-1] + 1], where[changes[1:]]
    inner = track.pixels[label[changes[:-1] + 1]] / track.width
    kind = np.where(inner <= DOT_PX, 0, np.where(inner >= LONG_PX, 2, 1))
    spread = np.log(np.array([MARK_ODDS[style] for style in MARK_STYLES])).T[kind] / (last - first + 1)[:, None]
    share = np.zeros((cols.size + 1, len(MARK_STYLES)))
    np.add.at(share, first, spread)
    np.add.at(share, last + 1, -spread)
    loglik += np.cumsum(share, axis=0)[:-1]
    return MarksEvidence(loglik, int(changes.size), float(track.step[flat].sum()) / track.width)


def style_label(look: Look) -> str:
    scores = style_scores(look)
    return max(scores, key=scores.__getitem__)


def ink_label(look: Look) -> str:
    """dark or light, or the colour whose line the ink lies nearest where that is not the gray inks'."""
    hues = _hue_scores(look)
    if hues is not None:
        best = max(hues, key=hues.__getitem__)
        if best != GRAY and hues[best] > 0.3:
            return best
    return "dark" if look.ink_ratio >= DARK_RATIO else "light"
