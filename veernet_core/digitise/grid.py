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
cut into blocks of BLOCK rows; each block's ink per column (its profile) is lined up, out from the middle
block, with the sum of the blocks lined up so far, within a pixel to the side of its neighbour's offset (a
skewed scan moves a line a pixel every few blocks, and a scanner shifts bands of rows by a pixel), so a
depth line falls in one column of the lined-up profiles. Lined up with the one block before, a busy curve's
strokes outweighed the lines every few blocks and the offsets walked off them: no depth line was found on
34 of 60 held-out generator logs, nor on most page tracks (bench/README.md, 2026-11-29). A depth line is a column of
the lined-up profiles whose ink covers DEPTH_SHARE of the track's rows (other than the rows inked across
the scan, value lines), or two columns that hold it between them in different blocks (`find_lines`); a
curve's spike or swing covers a column for a few blocks only. The
track's two border lines are then taken off whole about the calibrated edges, blurred edges included
(`_borders_off`). Value lines are found the same way as depth lines along the scan's width (blocks of
columns, VALUE_SHARE), once the depth lines are gone (a dense depth grid inks a third of every row).
Lining blocks up one to the next within a pixel is what keeps a dense grid (a line every 3 px) from being
lined up a whole line off.

A pixel on a line takes the darker of the nearest pixels beside the line on either side where that one is
ink (a curve crossing the line goes on through it), else the lighter one (paper); the same pixel in colour.
A depth line's ragged or blurred edge is taken with it (`_fill`), and on a thresholded 1-bit scan a value
line's ragged edge and a border's ragged rows too. Where a curve runs down a line, or
beside it over a block in a 1-bit scan, nothing in the pixels tells its ink from the line's, and it goes
with the line; the tracer bridges the gap between the stroke's ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from veernet_core.digitise.bilevel import one_bit_kind
from veernet_core.digitise.ink import MIN_DARKNESS, paper_gray

DEPTH_SHARE = 0.8  # of the track's rows (value lines' left out) a depth line's lined-up column inks
VALUE_SHARE = 0.5  # of the scan's width a value line's lined-up row inks
ACROSS_SHARE = 0.5  # of the track's width a row inks to be left out of the depth lines' counts
BLOCK = 16  # pixels along a line per block: a degree of skew moves a line 0.28 px over a block
SPLIT_SHARE = 0.2  # of the pixels along a line that each of two lined-up columns holding it between them hold
STEP = 1  # pixels to the side a block may be lined up off the block before it


@dataclass(frozen=True)
class Lines:
    """Lines running along axis 0 of the image they were found on: per block ([start, stop) along it),
    how far to the side its pixels lie from the lined-up profile (`offsets`), and the lines' columns in
    that profile (`columns`)."""

    bounds: list[tuple[int, int]]
    offsets: np.ndarray
    columns: np.ndarray


def without_grid(gray: np.ndarray, colour: np.ndarray | None, top: float, bottom: float,
                 page_kind: str | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(gray (H, W) uint8, colour (H, W, 3) uint8 or None) of a track between image rows `top` and
    `bottom` (depth along the width) -> the same with the grid's pixels replaced. The inputs are left as
    they are (returned as they are where no line is found). `page_kind`: the 1-bit kind of the page the scan is
    a track's crop of (`bilevel.one_bit_kind`, `section.read_section`), else read off the track's rows."""
    first, last = max(0, int(math.floor(top))), min(gray.shape[0], int(math.ceil(bottom)) + 1)
    if last - first < 8 or gray.shape[1] < 8:
        return gray, colour
    paper = paper_gray(gray[first:last])
    below = paper - MIN_DARKNESS  # per column: a pixel at or under this is ink
    ink = gray <= below[None, :]
    across = ink[first:last].mean(axis=1) >= ACROSS_SHARE
    # How much darker than the paper each pixel is, to line the blocks up by, at most the median of the
    # track's ink (mostly its grid's): uncapped, a dark curve outweighed a faint grid's lines, and on held-out
    # generator logs the blocks walked off them (bench/README.md, 2026-11-29).
    darkness = np.clip(paper.astype(np.float32)[None, :] - gray[first:last], 0.0, None)
    inked = darkness[ink[first:last]]
    if inked.size:
        np.minimum(darkness, float(np.median(inked)), out=darkness)
    depth = find_lines(ink[first:last], DEPTH_SHARE, across, darkness)
    # On a thresholded 1-bit scan a line is ragged: its edge is inked beside it over stretches only.
    ragged = (page_kind or one_bit_kind(gray[first:last])) == "threshold"
    out, out_colour = gray, colour
    if depth is not None:
        out, out_colour = gray.copy(), None if colour is None else colour.copy()
        _fill(out, out_colour, depth, first, 0, below, across=False,
              edge_share=0.0 if ragged else EDGE_SHARE)
        ink = out <= below[None, :]
    # The borders first, whole: a value line's fill lined up a row off a thick border copies its ink beside it.
    taken, out_colour = _borders_off(out, out_colour, top, bottom, below, ragged)
    if taken is not out:
        out, ink = taken, taken <= below[None, :]
    lo, hi = max(0, first - 2), min(gray.shape[0], last + 2)  # about the track, its borders included
    value = find_lines(ink[lo:hi].T, VALUE_SHARE)
    if value is not None:
        if out is gray:
            out, out_colour = gray.copy(), None if colour is None else colour.copy()
        # Ink along a value line: darker than its column's median (over the scan's rows) by MIN_DARKNESS.
        column_ink = np.median(out, axis=0) - MIN_DARKNESS
        _fill(out.T, None if out_colour is None else out_colour.transpose(1, 0, 2), value, 0, lo, column_ink,
              across=True, edge_share=0.0 if ragged else None)
    return out, out_colour


BORDER_REACH = 4  # rows either side of a calibrated edge its border line and the line's blur may lie in
BORDER_HALO = 0.25  # of the scan's width: a row beside a border line inked this widely may be its blurred edge
# ... if the row is also tinted across: its median pixel this many gray levels under the paper. A blurred
# edge's median is 10-25 under it on the page generator's 150-dpi pages (its share 0.4-0.56); a curve running
# along the border inks runs of the row and leaves its median on the paper (0 on a held-out 1-bit log, its
# share 0.2-0.4).
HALO_TINT = MIN_DARKNESS / 3
# On a thresholded 1-bit scan a row has no tint to tell: a border's ragged edge inks the rows beside its run
# on both sides, each over this share of the width (0.22-0.28 on the page generator's 1-bit pages), where a
# curve held along the border inks the one row inside the track.
RAGGED_HALO = 0.15


def _borders_off(gray: np.ndarray, colour: np.ndarray | None, top: float, bottom: float,
                 below: np.ndarray, ragged: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """The track's two border lines taken off whole (a copy where one is found; the inputs as they are): at
    each calibrated edge, the run of rows nearest it within BORDER_REACH whose ink covers VALUE_SHARE of the
    scan's width, with its blurred edges (rows beside it inked over BORDER_HALO and tinted across by
    HALO_TINT), replaced per column from the rows just outside the run (the darker where that one is ink: a
    curve crossing the border goes on through it). Taken off as value lines, a 2-3 px border blurred over 4
    rows was lined up a row off in some blocks and its ink copied beside it, and a curve alone in a page's
    track was traced along what was left (bench/README.md, 2026-11-29). On a thresholded (`ragged`) 1-bit
    scan the rows either side of the run are taken with it where both are inked over RAGGED_HALO of the
    width: copied over it, they left half the border standing at the track's edge. There too, column by
    column, the row beside the run where it is the border's ragged edge (`_stray`): a border that wobbles a row
    leaves its edge on one side over a stretch and on the other over the next."""
    out, out_colour = gray, colour
    height = gray.shape[0]
    paper = below + MIN_DARKNESS
    for edge in (top, bottom):
        centre = int(round(edge))
        rows = [r for r in range(centre - BORDER_REACH, centre + BORDER_REACH + 1) if 0 <= r < height]
        share = {r: float((out[r] <= below).mean()) for r in rows}
        core = [r for r in rows if share[r] >= VALUE_SHARE]
        if not core:
            continue
        lo = hi = min(core, key=lambda r: (abs(r - edge), r))
        while lo - 1 in share and share[lo - 1] >= VALUE_SHARE:
            lo -= 1
        while hi + 1 in share and share[hi + 1] >= VALUE_SHARE:
            hi += 1
        halo = {r for r in rows if share[r] >= BORDER_HALO and float(np.median(paper - out[r])) >= HALO_TINT}
        while lo - 1 in halo:
            lo -= 1
        while hi + 1 in halo:
            hi += 1
        if ragged and share.get(lo - 1, 0.0) >= RAGGED_HALO and share.get(hi + 1, 0.0) >= RAGGED_HALO:
            lo, hi = lo - 1, hi + 1
        cols = np.arange(out.shape[1])
        first, last = np.full(cols.size, lo), np.full(cols.size, hi)  # per column, the rows taken off
        if ragged:  # and the pixels of a ragged edge where the border wobbles over stretches
            first -= _stray(out, lo - 1, lo - 2, below)
            last += _stray(out, hi + 1, hi + 2, below)
        above, under = np.maximum(first - 1, 0), np.minimum(last + 1, height - 1)
        if out is gray:
            out, out_colour = gray.copy(), None if colour is None else colour.copy()
        one, two = out[above, cols].astype(np.int64), out[under, cols].astype(np.int64)
        source = np.where(np.minimum(one, two) <= below, np.where(one <= two, above, under),
                          np.where(one <= two, under, above))
        for r in range(int(first.min()), int(last.max()) + 1):
            at = cols[(first <= r) & (r <= last)]
            out[r, at] = out[source[at], at]
            if out_colour is not None:
                out_colour[r, at] = out_colour[source[at], at]
    return out, out_colour


# A border that wobbles a row on a thresholded 1-bit scan leaves its ragged edge on one side over a stretch and
# on the other over the next, each under RAGGED_HALO of the width: runs along the row beside it shorter than
# this, with paper beyond them (page 12 of seed 5150: 14 % and 8 % of the width, runs of up to 18 px; page 6: a
# run of 36 px at 171 dpi). Copied over the border as a curve's ink, they left it standing four rows thick over
# those stretches, and each page's one dotted curve was traced along it. A curve held along the border in the
# row beside it draws a longer run; a shorter one goes, and the tracer bridges it along the edge.
RAGGED_RUN = 64


def _stray(gray: np.ndarray, row: int, beyond: int, below: np.ndarray) -> np.ndarray:
    """Per column (0 or 1): whether `row`, beside a border's run, is the border's ragged edge there: ink in a
    run along the row shorter than RAGGED_RUN, with paper in the row `beyond` it within a column to either side.
    A curve reaching the border inks the rows beyond too, and one held along it (in the row beside it) draws a
    longer run."""
    width = gray.shape[1]
    if not (0 <= row < gray.shape[0]):
        return np.zeros(width, dtype=np.int64)
    ink = gray[row] <= below
    far = gray[beyond] <= below if 0 <= beyond < gray.shape[0] else np.zeros(width, dtype=bool)
    near = far.copy()
    near[1:] |= far[:-1]
    near[:-1] |= far[1:]
    edges = np.flatnonzero(np.diff(np.concatenate(([0], ink.astype(np.int8), [0]))))
    length = np.zeros(width, dtype=np.int64)
    for start, stop in zip(edges[::2], edges[1::2], strict=True):
        length[start:stop] = stop - start
    return (ink & ~near & (length < RAGGED_RUN)).astype(np.int64)


def shifted(profile: np.ndarray, by: int) -> np.ndarray:
    """`profile` moved `by` places: out[c] = profile[c + by], zero past the ends."""
    out = np.zeros_like(profile)
    n = profile.size
    if by >= 0:
        out[: max(0, n - by)] = profile[by:]
    else:
        out[-by:] = profile[: n + by]
    return out


def find_lines(ink: np.ndarray, share: float, skip: np.ndarray | None = None,
               darkness: np.ndarray | None = None) -> Lines | None:
    """The lines running along axis 0 of `ink` (L, N) whose lined-up column inks `share` of the pixels
    along L not in `skip`; None where there are none (or too few blocks to tell). Blocks where nearly every
    line is missing (a band of a 1-bit scan where the threshold broke them all, as on a lighter stretch of
    paper) are left out of that count, up to BROKEN_SHARE of it: counted, they left many lines of a generated
    1-bit page just under DEPTH_SHARE, and those lines stayed (bench/README.md, 2026-11-29)."""
    length = ink.shape[0]
    counted = np.ones(length, dtype=bool) if skip is None else ~skip
    size = max(4, min(BLOCK, length // 4))
    blocks = length // size
    total = int(counted.sum())
    if blocks < 2 or total < 8:
        return None
    bounds = [(b * size, (b + 1) * size if b < blocks - 1 else length) for b in range(blocks)]
    profiles = np.stack([(ink[a:z] & counted[a:z, None]).sum(axis=0) for a, z in bounds]).astype(np.float64)
    # Blocks are lined up by their ink's `darkness` where it is given: a gray line half a pixel off the
    # columns inks two of them, the darker one nearer its centre. Lined up by the ink alone, such blocks of a
    # generated page were put a column off, and the fill took the lighter column (bench/README.md, 2026-11-29).
    weights = profiles if darkness is None else np.stack(
        [np.where(ink[a:z] & counted[a:z, None], darkness[a:z], 0.0).sum(axis=0) for a, z in bounds])
    offsets = np.zeros(blocks, dtype=np.int64)
    middle = blocks // 2
    each = np.zeros_like(profiles)  # each block's profile lined up
    each[middle] = profiles[middle]
    lined = weights[middle].copy()  # the blocks lined up so far, summed (their darkness)
    for b in [*range(middle + 1, blocks), *range(middle - 1, -1, -1)]:  # out from the middle block
        ref = b - 1 if b > middle else b + 1
        fits = [float(np.dot(shifted(weights[b], int(offsets[ref]) + d), lined)) for d in range(-STEP, STEP + 1)]
        best = max(range(len(fits)), key=lambda k: (fits[k], -abs(k - STEP)))  # ties stay put
        offsets[b] = offsets[ref] + best - STEP
        each[b] = shifted(profiles[b], int(offsets[b]))
        lined += shifted(weights[b], int(offsets[b]))
    lined_up = each.sum(axis=0)
    # Bands where a 1-bit scan's threshold broke every line (the lines' candidates, inking half the pixels,
    # nearly all paper in the block) are left out of the count: a line inks `share` of the rest.
    rows = np.array([int(counted[a:z].sum()) for a, z in bounds])
    candidates = lined_up >= 0.5 * total
    if candidates.sum() >= BROKEN_LINES:
        seen = (each[:, candidates] >= 0.5 * np.maximum(rows, 1)[:, None]).mean(axis=1)
        broken = (seen < BROKEN_SEEN) & (rows > 0)
        if 0 < rows[broken].sum() <= BROKEN_SHARE * total:
            total -= int(rows[broken].sum())
            lined_up = each[~broken].sum(axis=0)
    need = share * total
    line = lined_up >= need
    # A line the blocks' whole-pixel offsets leave split over two lined-up columns (a slanted line at half a
    # pixel's phase moves over between blocks that the rest of the grid keeps in place): both columns, where
    # neither is a line alone, each holds SPLIT_SHARE of its pixels, the two hold `share` together, and they
    # hold it mostly in different blocks (a curve along a line inks both in the same ones; a ragged line, both
    # in the blocks where it moves over).
    fewer = np.minimum(lined_up[:-1], lined_up[1:])
    both = np.minimum(each[:, :-1], each[:, 1:]).sum(axis=0)
    pair = ((lined_up[:-1] + lined_up[1:] >= need) & (fewer >= SPLIT_SHARE * total) & (both <= 0.75 * fewer)
            & ~line[:-1] & ~line[1:])
    line[:-1] |= pair
    line[1:] |= pair
    columns = np.flatnonzero(line)
    return Lines(bounds, offsets, columns) if columns.size else None


BROKEN_LINES = 4  # lines' candidates a track needs before a band without them is taken as broken by its threshold
BROKEN_SEEN = 0.25  # ... where fewer than this share of them are seen in a block
BROKEN_SHARE = 0.25  # ... over at most this share of the pixels counted
RAGGED_SHARE = 0.25  # of a block's rows: a column beside a depth line inked this much there may be its edge
BEYOND_SHARE = 0.1  # of a block's rows: the column past a value line's ragged edge is inked under this
# A line's tone is this percentile of its own ink's gray. Where it lies half a pixel off the columns over
# stretches of the track, its own column is light there and its neighbour the line's darker half, which the
# median tone took for a curve beside the line and left (held-out logs 11.116 -> 10.867 % and 4.851 -> 4.833 %
# with the first quartile; bench/README.md, 2026-11-29).
TONE_PERCENTILE = 25
# On a thresholded 1-bit scan a value line found two rows wide is widened in a block by the row beside it only where
# that row is ragged there (inked over at most STROKE_SHARE of the block's columns) or the line has moved onto it
# (its row on the other side inked over at most MOVED_SHARE of them): a 2-px line that wanders a row, as a page made
# upright leaves it, is two rows wide and a third over stretches, and the fill copied that third row into it as a
# curve's ink, so a line stayed standing there and the model read it as a curve. A solid stroke along the line
# inks the row beside it whole where the line's own rows are inked whole too, and stays. Tuning seeds 1 and 2 of
# the independent page renderer (20 pages each, bench/page_segment_eval.py): 10.791 -> 10.649 % and 8.832 ->
# 8.366 %; either rule alone 10.491 and 8.739 % (the first), 10.740 and 8.684 % (the second); widened whenever,
# 10.610 and 8.020 %, but a stroke along a line went with it (tests/core/test_grid.py). Full-resolution strips
# (bench/digitise_eval.py, seed 7777) read the same; held out, bench/README.md, 2026-12-07.
STROKE_SHARE = 0.75
MOVED_SHARE = 0.5
EDGE_SHARE = 0.2  # ... if it is inked over this much of the whole track beside that line, as a line's edge is


def _fill(gray: np.ndarray, colour: np.ndarray | None, lines: Lines, offset: int, line_offset: int,
          below: np.ndarray, across: bool, edge_share: float | None = EDGE_SHARE) -> None:
    """In place: the pixels of `lines` (found on the image from row `offset` and column `line_offset`)
    replaced, block by block, from the nearest columns off the lines either side. `below` is the gray at or
    under which a pixel is ink, per column of the scan: of `gray`'s columns, or of its rows where `gray` is
    the scan turned (`across`: value lines).

    A depth line is widened, block by block, by a column beside it that is its ragged or blurred edge (`_edges`):
    a 1-px line thresholded to 1 bit is 1 px wide on some rows and 2 on others, and a blurred one has a
    lighter pixel either side; copied into the line as a curve's ink, such an edge left the line standing a
    column over (bench/README.md, 2026-11-29). A curve crossing the line inks a column beside it for its
    stroke's rows, and where that column joins the line it is copied back from the column beyond.
    `edge_share`: how much of the whole track the column on a side of a line must ink to be taken as its
    edge (EDGE_SHARE on a gray scan, where a blurred edge runs all along the line and a light curve's stroke
    beside it does not; none on a thresholded 1-bit one, whose lines are ragged over stretches); None: the
    lines are not widened.

    Value lines are widened on thresholded 1-bit scans only (`thin` in `_widened`): a page made upright
    leaves a 1-px line wandering half a pixel, two rows wide over stretches, and a third of every such line
    stayed (bench/README.md, 2026-11-29). On gray scans, widening them took curves running beside them, which
    logs draw often, and read the logs worse."""
    width = gray.shape[1]
    index = np.arange(width)
    edges = None if edge_share is None else _edges(gray, lines, offset, line_offset, below, across)
    for k, (start, stop) in enumerate(lines.bounds):
        targets = lines.columns + int(lines.offsets[k]) + line_offset
        inside = (targets >= 0) & (targets < width)
        targets = targets[inside]
        rows = np.arange(offset + start, min(offset + stop, gray.shape[0]))
        if targets.size == 0 or rows.size == 0 or targets.size == width:
            continue
        if edges is not None and edge_share is not None:
            targets = _widened(edges, k, inside, targets, rows.size, width, edge_share, thin=across)
            if targets.size == width:
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


@dataclass(frozen=True)
class _Edges:
    """What `_fill` reads of the columns beside each line of `lines` (axis -1), on either side (axis -2: left,
    right): over the whole track, and per block (axis 0)."""

    tones: np.ndarray  # (lines,): the gray of the line's own ink, TONE_PERCENTILE (255 where it has none)
    shares: np.ndarray  # (2, lines): the share of the track's rows inked beside it
    counts: np.ndarray  # (blocks, 2, lines): ink pixels beside it in the block
    sums: np.ndarray  # (blocks, 2, lines): the gray of that ink, summed
    beyond: np.ndarray  # (blocks, 2, lines): ink pixels in the block two columns off it (value lines only)


def _edges(gray: np.ndarray, lines: Lines, offset: int, line_offset: int, below: np.ndarray,
           across: bool = False) -> _Edges:
    """The columns beside each line, block by block and over the whole track (`_Edges`); `across`: `gray` is
    the scan turned (value lines), and `below` per row of it; only then are the columns two off read."""
    width = gray.shape[1]
    count = len(lines.columns)
    values: list[np.ndarray] = []  # per block, (rows, lines): the lines' pixels, 256 where not ink
    counts = np.zeros((len(lines.bounds), 2, count), dtype=np.int64)
    sums = np.zeros_like(counts)
    beyond = np.zeros_like(counts)
    rows = 0
    for k, (start, stop) in enumerate(lines.bounds):
        block = gray[offset + start: offset + stop]
        rows += block.shape[0]
        rows_below = below[offset + start: offset + stop] if across else None
        columns = lines.columns + int(lines.offsets[k]) + line_offset
        inside = (columns >= 0) & (columns < width)
        at = np.clip(columns, 0, width - 1)
        own = _inked(block, at, below, rows_below) & inside[None, :]
        values.append(np.where(own, block[:, at].astype(np.int16), 256))
        for side, step in enumerate((-1, 1)):
            other = columns + step
            ok = (other >= 0) & (other < width)
            near = np.clip(other, 0, width - 1)
            ink = _inked(block, near, below, rows_below)
            counts[k, side] = np.where(ok, ink.sum(axis=0), 0)
            sums[k, side] = np.where(ok, np.where(ink, block[:, near], 0).sum(axis=0), 0)
            if across:
                past = columns + 2 * step
                far = _inked(block, np.clip(past, 0, width - 1), below, rows_below).sum(axis=0)
                beyond[k, side] = np.where((past >= 0) & (past < width), far, 0)
    stacked = np.concatenate(values).astype(np.float64)
    stacked[stacked > 255] = np.nan
    inked = ~np.isnan(stacked).all(axis=0)
    tones = np.full(count, 255.0)
    if inked.any():
        tones[inked] = np.nanpercentile(stacked[:, inked], TONE_PERCENTILE, axis=0)
    return _Edges(tones, counts.sum(axis=0) / max(rows, 1), counts, sums, beyond)


def _inked(block: np.ndarray, cols: np.ndarray, below: np.ndarray, rows_below: np.ndarray | None) -> np.ndarray:
    """(rows, cols): whether each pixel of the block's columns `cols` is ink: at or under `below` per column,
    or, where the block is of a turned scan, `rows_below` per row."""
    limit = below[cols][None, :] if rows_below is None else rows_below[:, None]
    return block[:, cols] <= limit


def _widened(edges: _Edges, k: int, inside: np.ndarray, targets: np.ndarray, rows: int, width: int,
             edge_share: float, thin: bool = False) -> np.ndarray:
    """Block k's line columns `targets` (the lines of `inside`) with the columns beside them that are
    the lines' ragged or blurred edges here: inked over RAGGED_SHARE of the block's `rows`, their ink in the
    block no darker than their line's tone (`_Edges.tones`), and the column on that side of the line inked over
    `edge_share` of the whole track, where the next four columns beyond are not a line's. On a dense grid (a
    line every 3 px) the edges took every column, and a curve crossing it with them (an independent
    renderer's 1-bit log lost 81 % of its curves' ink); on one of a line every 4 px, a third of a 1-bit
    curve's ink beside the lines. A curve's stroke beside a line is darker than a gray grid, or lies beside
    the line over a stretch of the track only, and stays. `thin` (value lines on a 1-bit scan): a column is
    taken only where the one beyond it is paper over all but BEYOND_SHARE of the block (a 2-px stroke along
    the line inks it; a 1-px ragged edge does not), and beside a line found two columns wide (a line with a
    stroke along it, or a 2-px line that wanders a column) only where the column is ragged in the block (inked
    over at most STROKE_SHARE of it) or the line's column on the other side is paper over MOVED_SHARE of it
    there (the line has moved onto this one)."""
    on = np.zeros(width, dtype=bool)
    on[targets] = True
    own = on.copy()  # the lines' own columns
    tones = edges.tones[inside]
    for side, step in enumerate((-1, 1)):
        beside = targets + step
        count, total = edges.counts[k, side][inside], edges.sums[k, side][inside]
        ok = (beside >= 0) & (beside < width) & (edges.shares[side][inside] >= edge_share)
        for further in range(2 * step, 6 * step, step):  # four columns beyond it off any line: not on a dense grid
            past = targets + further
            ok &= (past < 0) | (past >= width) | ~own[np.clip(past, 0, width - 1)]
        ok &= (count >= RAGGED_SHARE * rows) & (total / np.maximum(count, 1) >= tones)
        if thin:  # a 1-px ragged edge: the column beyond it is paper where a 2-px stroke along the line inks it,
            # and a line found two columns wide (a line and a stroke along it) is widened only where the column
            # is ragged in the block or the line has moved onto it (STROKE_SHARE, MOVED_SHARE)
            ok &= edges.beyond[k, side][inside] <= BEYOND_SHARE * rows
            back = targets - step
            two = (back >= 0) & (back < width) & own[np.clip(back, 0, width - 1)]
            moved = edges.counts[k, 1 - side][inside] <= MOVED_SHARE * rows  # the line's row on the other side
            ok &= ~two | (count <= STROKE_SHARE * rows) | moved
        on[beside[ok]] = True
    return np.flatnonzero(on)
