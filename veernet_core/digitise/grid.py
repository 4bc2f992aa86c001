"""The printed grid taken off a full-resolution scan before the model and the tracer read it: depth lines
across the track and value lines along it, each of their pixels replaced from the nearest pixels beside
the lines.

A grid line crosses every curve, and on a dense grid (depth lines every few pixels, a log grid crowding
near each decade) the model reading the reduced scan sees a gray texture in which a light or dotted curve
disappears, and the tracer at full resolution follows the lines. `pipeline.readable_scan` takes the grid
off scans that are reduced for the model (full-resolution ones) only: on logs drawn at the model's own
scale, where a dense grid is a texture rather than lines, taking it off read worse (bench/README.md,
2026-11-27, with the figures at both scales and with no grid printed at all).

How: ink is what is darker than the paper by more than scanner noise (`ink.MIN_DARKNESS`). The track is
cut into blocks of BLOCK rows; each block's ink per column (its profile) is lined up with the block
before's, within a pixel to the side (a skewed scan moves a line a pixel every few blocks, and a scanner
shifts bands of rows by a pixel), so a depth line falls in one column of the lined-up profiles. A depth
line is a column of them whose ink covers DEPTH_SHARE of the track's rows (other than the rows inked
across the scan, value lines); a curve's spike or swing covers a column for a few blocks only. Value lines
are found the same way along the scan's width (blocks of columns, VALUE_SHARE), once the depth lines are
gone (a dense depth grid inks a third of every row). Lining blocks up one to the next within a pixel is
what keeps a dense grid (a line every 3 px) from being lined up a whole line off.

A pixel on a line takes the darker of the nearest pixels beside the line on either side where that one is
ink (a curve crossing the line goes on through it), else the lighter one (paper); the same pixel in colour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from veernet_core.digitise.ink import MIN_DARKNESS, paper_gray

DEPTH_SHARE = 0.8  # of the track's rows (value lines' left out) a depth line's lined-up column inks
VALUE_SHARE = 0.5  # of the scan's width a value line's lined-up row inks
ACROSS_SHARE = 0.5  # of the track's width a row inks to be left out of the depth lines' counts
BLOCK = 16  # pixels along a line per block: a degree of skew moves a line 0.28 px over a block
STEP = 1  # pixels to the side a block may be lined up off the block before it


@dataclass(frozen=True)
class Lines:
    """Lines running along axis 0 of the image they were found on: per block ([start, stop) along it),
    how far to the side its pixels lie from the lined-up profile (`offsets`), and the lines' columns in
    that profile (`columns`)."""

    bounds: list[tuple[int, int]]
    offsets: np.ndarray
    columns: np.ndarray


def without_grid(gray: np.ndarray, colour: np.ndarray | None, top: float,
                 bottom: float) -> tuple[np.ndarray, np.ndarray | None]:
    """(gray (H, W) uint8, colour (H, W, 3) uint8 or None) of a track between image rows `top` and
    `bottom` (depth along the width) -> the same with the grid's pixels replaced. The inputs are left as
    they are (returned as they are where no line is found)."""
    first, last = max(0, int(math.floor(top))), min(gray.shape[0], int(math.ceil(bottom)) + 1)
    if last - first < 8 or gray.shape[1] < 8:
        return gray, colour
    below = paper_gray(gray[first:last]) - MIN_DARKNESS  # per column: a pixel at or under this is ink
    ink = gray <= below[None, :]
    across = ink[first:last].mean(axis=1) >= ACROSS_SHARE
    depth = find_lines(ink[first:last], DEPTH_SHARE, across)
    out, out_colour = gray, colour
    if depth is not None:
        out, out_colour = gray.copy(), None if colour is None else colour.copy()
        _fill(out, out_colour, depth, first, 0, below, across=False)
        ink = out <= below[None, :]
    lo, hi = max(0, first - 2), min(gray.shape[0], last + 2)  # about the track, its borders included
    value = find_lines(ink[lo:hi].T, VALUE_SHARE)
    if value is not None:
        if depth is None:
            out, out_colour = gray.copy(), None if colour is None else colour.copy()
        # Ink along a value line: darker than its column's median (over the scan's rows) by MIN_DARKNESS.
        column_ink = np.median(out, axis=0) - MIN_DARKNESS
        _fill(out.T, None if out_colour is None else out_colour.transpose(1, 0, 2), value, 0, lo, column_ink,
              across=True)
    return out, out_colour


def shifted(profile: np.ndarray, by: int) -> np.ndarray:
    """`profile` moved `by` places: out[c] = profile[c + by], zero past the ends."""
    out = np.zeros_like(profile)
    n = profile.size
    if by >= 0:
        out[: max(0, n - by)] = profile[by:]
    else:
        out[-by:] = profile[: n + by]
    return out


def find_lines(ink: np.ndarray, share: float, skip: np.ndarray | None = None) -> Lines | None:
    """The lines running along axis 0 of `ink` (L, N) whose lined-up column inks `share` of the pixels
    along L not in `skip`; None where there are none (or too few blocks to tell)."""
    length = ink.shape[0]
    counted = np.ones(length, dtype=bool) if skip is None else ~skip
    size = max(4, min(BLOCK, length // 4))
    blocks = length // size
    total = int(counted.sum())
    if blocks < 2 or total < 8:
        return None
    bounds = [(b * size, (b + 1) * size if b < blocks - 1 else length) for b in range(blocks)]
    profiles = np.stack([(ink[a:z] & counted[a:z, None]).sum(axis=0) for a, z in bounds]).astype(np.float64)
    offsets = np.zeros(blocks, dtype=np.int64)
    middle = blocks // 2
    for b in [*range(middle + 1, blocks), *range(middle - 1, -1, -1)]:  # out from the middle block
        ref = b - 1 if b > middle else b + 1
        lined = shifted(profiles[ref], int(offsets[ref]))
        fits = [float(np.dot(shifted(profiles[b], int(offsets[ref]) + d), lined)) for d in range(-STEP, STEP + 1)]
        best = max(range(len(fits)), key=lambda k: (fits[k], -abs(k - STEP)))  # ties stay put
        offsets[b] = offsets[ref] + best - STEP
    lined_up = np.sum([shifted(profiles[b], int(offsets[b])) for b in range(blocks)], axis=0)
    columns = np.flatnonzero(lined_up >= share * total)
    return Lines(bounds, offsets, columns) if columns.size else None


def _fill(gray: np.ndarray, colour: np.ndarray | None, lines: Lines, offset: int, line_offset: int,
          below: np.ndarray, across: bool) -> None:
    """In place: the pixels of `lines` (found on the image from row `offset` and column `line_offset`)
    replaced, blocks of one offset at a time, from the nearest columns off the lines either side. `below`
    is the gray at or under which a pixel is ink, per column of the scan: of `gray`'s columns, or of its
    rows where `gray` is the scan turned (`across`: value lines)."""
    width = gray.shape[1]
    index = np.arange(width)
    offsets = lines.offsets.tolist()
    starts = [k for k in range(len(offsets)) if k == 0 or offsets[k] != offsets[k - 1]]
    for k, stop in zip(starts, [*starts[1:], len(offsets)], strict=True):
        targets = lines.columns + offsets[k] + line_offset
        targets = targets[(targets >= 0) & (targets < width)]
        rows = np.arange(offset + lines.bounds[k][0], min(offset + lines.bounds[stop - 1][1], gray.shape[0]))
        if targets.size == 0 or rows.size == 0 or targets.size == width:
            continue
        free = np.ones(width, dtype=bool)
        free[targets] = False
        left = np.maximum.accumulate(np.where(free, index, -1))[targets]
        right = np.minimum.accumulate(np.where(free, index, width)[::-1])[::-1][targets]
        left, right = np.where(left < 0, right, left), np.where(right >= width, left, right)
        one, two = gray[rows[:, None], left[None, :]], gray[rows[:, None], right[None, :]]
        limit = below[rows][:, None] if across else below[targets][None, :]
        first_darker = one <= two
        darker = np.where(first_darker, left[None, :], right[None, :])
        lighter = np.where(first_darker, right[None, :], left[None, :])
        source = np.where(np.minimum(one, two) <= limit, darker, lighter)
        gray[rows[:, None], targets[None, :]] = gray[rows[:, None], source]
        if colour is not None:
            colour[rows[:, None], targets[None, :]] = colour[rows[:, None], source]
