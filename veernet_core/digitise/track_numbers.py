"""Depth numbers printed inside a track: found on the scan and taken out of the ink the tracer reads.

Many logs print the depth at every heavy depth line inside a track as well as in the depth column. The
bundled model, which saw the generator's lettering, marks another printer's digits as curve ink, and the
tracer then takes a row of numbers for a curve: on the independent renderer's tuning logs (seed 7777) a
trace ran along the numbers over hundreds of columns while its curve went untraced.

Numbers are told from curves by their shape and their repetition, not by a font:
- Ink here is what is darker than the paper by DARK_SHARE of the way to the track's darkest ink (its
  DARK_PERCENTILE percentile): numbers are printed with the grid's pen, and a fine ruling or a light curve
  fainter than that would tie them to everything around them.
- Upright strokes at most LINE_PX wide and longer than a share of the track's height (depth lines, slanted
  on a skewed scan, and steep stretches of curves) are taken out, then put back wherever ink lies within
  REJOIN_PX on both sides of them (left and right, or above and below), so that a curve crossing a line
  stays one piece, not a row of glyph-sized pieces between the lines. The numbers are looked for once with
  each share in RUN_SHARES: the smaller for faint lines broken into short strokes, the larger for tall
  digits. Specks (upright runs of at most SPECK_PX rows with no ink beside them, in their row or a row
  either way: the noise of a faint ruling) are taken out too; a digit drawn with a one-pixel pen steps
  diagonally round its curves, and those steps are no specks.
- A glyph is a connected piece of ink (8-connected) at least MIN_GLYPH_PX tall and at most MAX_GLYPH_SHARE
  of the track's height, narrower than GLYPH_ASPECT of its height (a dot of a dotted pen is round, a dash
  along a flat curve is wide).
- A number is GLYPHS_PER_NUMBER or more glyphs side by side, of one height (HEIGHT_SLACK), tops and bottoms
  level (LEVEL_SLACK of the height), each within GAP_SHARE of its height of the next; all but one of them
  wider than THIN_GLYPH of their height (a "1", or a piece of a line, is a thin upright bar), one at least
  WIDE_GLYPH of it.
- A number stands on clear paper: its box, widened by MARGIN_SHARE of its height, holds little ink but its
  own (STRAY_SHARE of it), leaving out columns inked across the box (ACROSS_SHARE of its rows: a depth line
  beside or through it).
- Numbers count only where NUMBERS_IN_BAND or more of them stand at one level along the log (their middles
  within BAND_SLACK of their height, of one height): depth numbers repeat at every heavy line, at one place
  in the track.

A curve crossing a digit joins it into a larger piece, which is left as it is: only the glyphs' own pieces
are taken out, so a curve drawn over a number keeps its ink there. Counted on the scans the service reads
(`pipeline.readable_scan`, full-resolution logs brought to the model's scale of 0.2; bench/README.md,
2026-12-05, thirty-fifth session): numbers are found on 22 of the 46 logs of the independent renderer's tuning
seeds 7777, 8888 and 1111 that print them (20 before diagonal steps were kept; of the 24 missed, 7 are 1-bit
scans), on none of the generator's 7777 and 424242 logs that print none, and on one of the independent
renderer's logs that prints none (seed 8888's 52). An earlier count, taken another way, read 29 of 46 and
none on a log that prints none (bench/README.md, 2026-12-05, thirty-third session).
"""

from __future__ import annotations

import numpy as np

from veernet_core.digitise.ink import MIN_DARKNESS, Page
from veernet_core.digitise.pieces import labelled
from veernet_core.digitise.tracer_loop import _compiled

DARK_PERCENTILE = 0.5
DARK_SHARE = 0.35
RUN_SHARES = (0.08, 0.04)
REJOIN_PX = 3
LINE_PX = 4
SPECK_PX = 3
MIN_GLYPH_PX = 8
MAX_GLYPH_SHARE = 0.12
GLYPH_ASPECT = 0.85
THIN_GLYPH = 0.25
WIDE_GLYPH = 0.4
GLYPHS_PER_NUMBER = 3
HEIGHT_SLACK = 0.15
LEVEL_SLACK = 0.15
GAP_SHARE = 0.8
MARGIN_SHARE = 0.3
STRAY_SHARE = 0.1
ACROSS_SHARE = 0.9
NUMBERS_IN_BAND = 3
BAND_SLACK = 0.5


def warm_number_loops() -> None:
    """Compile (or load from numba's cache) the compiled loops `number_pixels` runs (`tracer.compile_loops`)."""
    ink = np.zeros((12, 12), dtype=bool)
    ink[2:10, 3:5] = True
    labelled(_Strokes(ink).upright(8, 4))


def number_pixels(gray: np.ndarray, page: Page, top: float, bottom: float) -> np.ndarray:
    """bool (H, W) on the scan's grid: the ink of the depth numbers printed inside the track (see the module)."""
    height, width = gray.shape
    found = np.zeros((height, width), dtype=bool)
    first, last = max(0, int(np.floor(top))), min(height, int(np.ceil(bottom)) + 1)
    span = float(bottom) - float(top)
    if last - first < 2 * MIN_GLYPH_PX or width < 2:
        return found
    band = gray[first:last]
    dark = float(np.percentile(band, DARK_PERCENTILE))
    ink = band <= (page.paper - np.maximum(MIN_DARKNESS, DARK_SHARE * (page.paper - dark)))[None, :]
    strokes = _Strokes(ink)
    for run in RUN_SHARES:
        found[first:last] |= _numbers_found(_glyph_ink(strokes, run * span), span)
    return found


def _numbers_found(ink: np.ndarray, span: float) -> np.ndarray:
    """`number_pixels` on the track's rows, from the ink the glyphs are looked for in."""
    label, boxes = labelled(ink)
    if boxes.shape[0] == 0:
        return np.zeros(ink.shape, dtype=bool)
    upper, lower, left, right, pixels = (boxes[:, i] for i in range(5))
    tall, wide = lower - upper + 1, right - left + 1
    glyph = np.flatnonzero((tall >= MIN_GLYPH_PX) & (tall <= MAX_GLYPH_SHARE * span) & (wide <= GLYPH_ASPECT * tall))
    numbers = [chain for chain in _numbers(glyph, left, right, upper, lower)
               if np.count_nonzero(wide[chain] > THIN_GLYPH * tall[chain]) >= GLYPHS_PER_NUMBER - 1
               and np.any(wide[chain] >= WIDE_GLYPH * tall[chain])
               and _alone(ink, chain, left, right, upper, lower, pixels)]
    kept = _in_bands(numbers, upper, lower)
    mine = np.zeros(boxes.shape[0] + 1, dtype=bool)  # label 0 is paper
    if kept:
        mine[np.concatenate([numbers[i] for i in kept]) + 1] = True
    return mine[label]


class _Strokes:
    """The track's dark ink and what `_glyph_ink` reads of it whatever stroke length it takes out: each pixel's
    upright and lying run lengths, and the specks (upright runs of at most SPECK_PX rows with no ink beside
    them, in their row or diagonally: the noise of a faint ruling, which would join the glyphs it passes)."""

    def __init__(self, ink: np.ndarray) -> None:
        self.ink = ink
        self.tall = _run_lengths(ink)
        self.wide = _run_lengths(np.ascontiguousarray(ink.T)).T
        self.specks = ink & (self.tall <= SPECK_PX) & ~_beside(ink | _beside(ink, 0), 1)

    def upright(self, length: int, line_px: int) -> np.ndarray:
        """The pixels in upright runs of at least `length` rows whose row runs are at most `line_px` long."""
        return (self.tall >= length) & (self.wide <= line_px)


def _glyph_ink(strokes: _Strokes, longest: float) -> np.ndarray:
    """The track's dark ink without upright strokes `longest` rows long or more and without specks, the
    strokes put back where what is left lies within REJOIN_PX of them on both sides, left and right or above
    and below (see the module)."""
    taken = strokes.upright(max(MIN_GLYPH_PX, int(np.ceil(longest))), LINE_PX)
    kept = strokes.ink & ~taken & ~strokes.specks
    across = _on_both_sides(kept | _beside(kept, 0), REJOIN_PX, 1)  # left and right, a row of drift either way
    along = _on_both_sides(kept | _beside(kept, 1), REJOIN_PX, 0)  # above and below, a column either way
    return kept | (taken & (across | along))


def _beside(ink: np.ndarray, axis: int) -> np.ndarray:
    """Where `ink` lies one pixel away along `axis` (0: the row above or below; 1: the column either side)."""
    out = np.zeros_like(ink)
    moved, source = np.swapaxes(out, 0, axis), np.swapaxes(ink, 0, axis)
    moved[1:] |= source[:-1]
    moved[:-1] |= source[1:]
    return out


def _on_both_sides(near: np.ndarray, reach: int, axis: int) -> np.ndarray:
    """Where `near` lies within `reach` pixels on both sides along `axis`."""
    before, after = np.zeros_like(near), np.zeros_like(near)
    b, a, n = (np.swapaxes(x, 0, axis) for x in (before, after, near))
    for k in range(1, reach + 1):
        b[k:] |= n[:-k]
        a[:-k] |= n[k:]
    return before & after


@_compiled
def _run_lengths(ink: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Per pixel of a (H, W) bool image, the length of the upright run of ink it lies in (0 on paper)."""
    height, width = ink.shape
    out = np.zeros((height, width), dtype=np.int32)
    for c in range(width):
        r = 0
        while r < height:
            if not ink[r, c]:
                r += 1
                continue
            start = r
            while r < height and ink[r, c]:
                r += 1
            out[start:r, c] = r - start
    return out


def _numbers(glyph: np.ndarray, left: np.ndarray, right: np.ndarray, upper: np.ndarray,
             lower: np.ndarray) -> list[np.ndarray]:
    """Glyphs (piece labels) chained into numbers: each joined to the nearest glyph to its right that is of
    its height, level with it and within GAP_SHARE of its height; chains of GLYPHS_PER_NUMBER or more."""
    order = glyph[np.argsort(left[glyph], kind="stable")]
    tall = (lower - upper + 1).astype(np.float64)
    next_of: dict[int, int] = {}
    has_prev: set[int] = set()
    for i, g in enumerate(order.tolist()):
        h = tall[g]
        for other in order[i + 1 :].tolist():
            gap = left[other] - right[g] - 1
            if gap > GAP_SHARE * h:
                break
            ho = tall[other]
            if (other not in has_prev and gap >= -0.2 * h and abs(ho - h) <= HEIGHT_SLACK * max(h, ho)
                    and abs(upper[other] - upper[g]) <= LEVEL_SLACK * h
                    and abs(lower[other] - lower[g]) <= LEVEL_SLACK * h):
                next_of[g] = other
                has_prev.add(other)
                break
    chains = []
    for g in order.tolist():
        if g in has_prev:
            continue
        chain = [g]
        while chain[-1] in next_of:
            chain.append(next_of[chain[-1]])
        if len(chain) >= GLYPHS_PER_NUMBER:
            chains.append(np.array(chain, dtype=np.int64))
    return chains


def _alone(ink: np.ndarray, chain: np.ndarray, left: np.ndarray, right: np.ndarray, upper: np.ndarray,
           lower: np.ndarray, pixels: np.ndarray) -> bool:
    """Whether a number's box, widened by MARGIN_SHARE of its height all round, holds little ink but its
    glyphs' (STRAY_SHARE of theirs), leaving out columns inked across the box."""
    h = int(lower[chain].max() - upper[chain].min() + 1)
    m = max(2, int(round(MARGIN_SHARE * h)))
    box = ink[max(0, upper[chain].min() - m) : lower[chain].max() + m + 1,
              max(0, left[chain].min() - m) : right[chain].max() + m + 1]
    across_cols = np.count_nonzero(box, axis=0) >= ACROSS_SHARE * box.shape[0]
    stray = float(np.count_nonzero(box[:, ~across_cols]))
    own = float(pixels[chain].sum())
    return stray - own <= STRAY_SHARE * own


def _in_bands(numbers: list[np.ndarray], upper: np.ndarray, lower: np.ndarray) -> list[int]:
    """The numbers (indices into `numbers`) that stand with NUMBERS_IN_BAND - 1 or more others at one level."""
    if len(numbers) < NUMBERS_IN_BAND:
        return []
    top = np.array([upper[c].min() for c in numbers], dtype=np.float64)
    bottom = np.array([lower[c].max() for c in numbers], dtype=np.float64)
    tall = bottom - top + 1
    middle = (top + bottom) / 2
    near = ((np.abs(middle[:, None] - middle[None, :]) <= BAND_SLACK * tall[:, None])
            & (np.abs(tall[:, None] - tall[None, :]) <= HEIGHT_SLACK * np.maximum(tall[:, None], tall[None, :])))
    return np.flatnonzero(near.sum(axis=1) >= NUMBERS_IN_BAND).tolist()


def without_numbers(probabilities: np.ndarray, numbers: np.ndarray) -> np.ndarray:
    """(C, h, w) class probabilities on a grid reduced from the scan's (H, W) with no curve where a reduced
    pixel holds a number's ink (`numbers`, from `number_pixels`); anything else as it is."""
    if not numbers.any():
        return probabilities
    _, h, w = probabilities.shape
    rows, cols = np.nonzero(numbers)
    r = np.minimum(((rows + 0.5) * (h / numbers.shape[0])).astype(np.int64), h - 1)
    c = np.minimum(((cols + 0.5) * (w / numbers.shape[1])).astype(np.int64), w - 1)
    out = probabilities.copy()
    out[1:, r, c] = 0.0
    out[0, r, c] = 1.0
    return out
