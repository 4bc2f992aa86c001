"""Curves told apart by their ink's tone or colour, read at the scan's own resolution.

On a reduced scan, curves that share a track are traced on the model's grid, where a light curve that
runs beside or across a dark one is a reduced pixel or two of the same ink channel, and then moved onto
the scan's ink (`refine.snap_trace`). But the scan itself tells a light curve from a dark one in every
pixel. Where the calibration declares both tones in a track (`ink: dark` and `ink: light`), a curve that
is the only one of its tone is traced alone, at full resolution, on the ink of its tone
(`traced_by_tone`): the ink the model marks in the track, split into two tones (two-means of the
pixels' darkness against the paper, over the runs of ink the model's traces run through). A dark
stroke's soft edges are as pale as light ink, so light ink is only light pixels clear of dark ink by
EDGE_CLEARANCE pixels; where a dark curve crosses a light one, the light curve is bridged, as across
any gap.

Only the values change: the naming step names the track's traces and judges each name as before
(`identity.name_traces`), and a curve traced by its tone then takes that curve's new trace, with the
naming's verdict, on the backup scales the naming's trace of it reads (`levels_as`). Naming the
tone-traced curves as certain, and the others among themselves, read values better still but named
more curves wrong without a flag (held-out seed 7777, 40 full-resolution logs of the independent
renderer: 2 -> 6), so the verdicts stay the naming's.

On a colour scan, curves declared in colours (`ink: red`, `blue`, ...) are told apart the same way:
each pixel of ink goes to the declared colour, or the gray inks, whose line of mixes with the paper it
lies nearest (`colours.mismatch`: a stroke's pale edge is its ink's, not gray), and the gray ink is split
by tone as above or, where one tone is declared beside the colours, is that tone's. Every curve of the
track must declare its ink: one that does not could be drawn in any, and then no curve is traced this way.

A thresholded 1-bit scan (`ScanPixels.tones_unread`) has one tone, and a scan whose two tones lie closer than
TONES_APART tells nothing: the traces stay as the model's grid gave them. Colour hints on a gray scan tell
nothing here either.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from veernet_core.digitise.calibration import Calibration
from veernet_core.digitise.calibration_fields import INK_COLOURS, INK_SHADES
from veernet_core.digitise.colours import BLACK, ink_line, mismatch
from veernet_core.digitise.ink import Page, ScanPixels
from veernet_core.digitise.joint import TONES_APART, _split_tone
from veernet_core.digitise.refine import _max3
from veernet_core.digitise.tracer import ColumnTrace, TraceOptions, relevelled, trace_curves

EDGE_CLEARANCE = 1  # pixels between light ink and any dark ink pixel (a dark stroke's soft edge is pale)
SAME_INK_PX = 2.0  # rows between a tone trace and the naming's trace of its curve that are one stroke
MIN_TRACED_RUNS = 20  # runs of ink under the traces before their tones, not the whole track's, are split


def alone_in_tone(calibration: Calibration, colour: bool = False) -> dict[int, str]:
    """Curves that are the only one of their declared ink in a track where every curve declares one and
    the inks tell them apart: both tones (`dark`, `light`), or on a colour scan (`colour`) colours, beside
    each other or a tone. A curve that declares no ink could be drawn in any, so it leaves none alone."""
    declared = [curve.ink for curve in calibration.curves]
    inks = set(declared)
    if None in inks or len(inks) < 2:
        return {}
    if inks & set(INK_COLOURS) and not colour:  # a gray scan: a colour hint tells nothing here
        return {}
    return {k: str(ink) for k, ink in enumerate(declared) if declared.count(ink) == 1}


def ink_masks(ink: np.ndarray, scan: ScanPixels, page: Page, top: float, bottom: float,
              inks: set[str], traces: list[ColumnTrace] | None = None) -> dict[str, np.ndarray]:
    """Per declared ink, the track's ink (`refine.ink_mask`'s plane) of that ink: on a colour scan, each
    pixel goes to the declared colour or the gray inks whose line of mixes with the paper it lies nearest
    (`colours.mismatch`); gray ink is split by tone where both tones are declared (`tone_masks`), or is
    the one tone declared, the two tones read on the ink the `traces` run on. An ink that cannot be told (one
    tone on the scan, no colour) has no mask."""
    colours = sorted(inks & set(INK_COLOURS))
    masks: dict[str, np.ndarray] = {}
    grey = ink
    if colours and scan.colour is not None and page.tint is not None:
        first, last = max(0, int(np.floor(top))), min(ink.shape[0], int(np.ceil(bottom)) + 1)
        rows, cols = np.nonzero(ink[first:last])
        rows += first
        rgb, paper = scan.colour[rows, cols], page.paper_rgb(cols)
        nearest = np.argmin(np.stack([mismatch(rgb, paper, line)
                                      for line in [*(ink_line(c) for c in colours), BLACK]]), axis=0)
        grey = ink.copy()
        for k, name in enumerate(colours):
            mask = np.zeros(ink.shape, dtype=bool)
            mine = nearest == k
            mask[rows[mine], cols[mine]] = True
            grey[rows[mine], cols[mine]] = False
            masks[name] = mask
    tones = inks & set(INK_SHADES)
    if len(tones) == 2:
        split = tone_masks(grey, scan.gray, page, top, bottom, traces)
        if split is not None:
            masks.update(zip(INK_SHADES, split, strict=True))
    elif len(tones) == 1 and colours:
        masks[tones.pop()] = grey
    return masks


def tone_masks(ink: np.ndarray, gray: np.ndarray, page: Page, top: float, bottom: float,
               traces: list[ColumnTrace] | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """(dark, light) ink masks (H, W bool) of a track's ink (`refine.ink_mask`'s plane), or None where the
    ink is of one tone. Each run of ink down a column is of one tone, its darkest pixel's: a stroke's soft
    edges are as pale as light ink, and a thin dark stroke between two rows is pale in both. The two tones
    are those of the runs the track's `traces` (on the scan's columns) run through, where they run through
    MIN_TRACED_RUNS or more: the ink mask also holds faint specks and a printed grid's remains, and a split
    of all its runs puts the boundary between those and the curves, a light curve then on the dark side
    (bench/README.md, 2026-12-04). Which trace follows which curve does not matter: only the runs' tones."""
    first, last = max(0, int(np.floor(top))), min(gray.shape[0], int(np.ceil(bottom)) + 1)
    block = ink[first:last].T  # (W, rows): runs down each column are contiguous in this order
    flat = block.ravel()
    starts = flat & ~np.concatenate([[False], flat[:-1]])
    starts[:: block.shape[1]] = flat[:: block.shape[1]]  # a run never continues from the column before
    index = np.flatnonzero(flat)
    if index.size == 0:
        return None
    run = np.cumsum(starts)[index] - 1
    cols, rows = np.divmod(index, block.shape[1])
    rows += first
    paper = page.paper[cols]
    darkness = np.clip((paper - gray[rows, cols]) / np.maximum(paper, 1.0), 0.0, 1.0)
    tone = np.zeros(int(run[-1]) + 1)
    np.maximum.at(tone, run, darkness)
    traced = _traced_runs(traces or [], run, index, first, block.shape)
    split = _split_tone(tone[traced] if traced.size >= MIN_TRACED_RUNS else tone)
    if split is None or split[2] - split[0] < TONES_APART:
        return None
    strong = tone[run] >= split[1]
    dark = np.zeros(gray.shape, dtype=bool)
    dark[rows[strong], cols[strong]] = True
    near_dark = dark
    for _ in range(EDGE_CLEARANCE):  # grown by a pixel each way per step
        near_dark = _max3(near_dark)
    light = np.zeros(gray.shape, dtype=bool)
    weak = ~strong & ~near_dark[rows, cols]
    light[rows[weak], cols[weak]] = True
    return dark, light


def _traced_runs(traces: list[ColumnTrace], run: np.ndarray, index: np.ndarray, first: int,
                 shape: tuple[int, int]) -> np.ndarray:
    """The ids of the runs of ink (`tone_masks`: `run` per ink pixel at flat `index` of the (W, rows) block
    from image row `first`) that a trace's drawn row, or a row beside it, falls in."""
    run_of = np.full(shape[0] * shape[1], -1, dtype=np.int64)
    run_of[index] = run
    found: list[np.ndarray] = []
    for trace in traces:
        cols = np.flatnonzero(np.isfinite(trace.row))
        centre = np.rint(trace.row[cols]).astype(np.int64) - first
        for offset in (-1, 0, 1):
            rows = centre + offset
            inside = (rows >= 0) & (rows < shape[1])
            found.append(run_of[cols[inside] * shape[1] + rows[inside]])
    runs = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
    return runs[runs >= 0]


def traced_by_tone(traces: list[ColumnTrace], ink: np.ndarray, scan: ScanPixels, page: Page,
                   calibration: Calibration, options: TraceOptions) -> tuple[list[ColumnTrace], set[int]]:
    """The traces (one per calibrated curve, on the scan's columns) with each curve alone in its ink
    (`alone_in_tone`) traced again on the ink of its tone or colour at the scan's resolution; and the
    curves so traced."""
    alone = {} if scan.tones_unread else alone_in_tone(calibration, scan.colour is not None)
    if not alone:
        return traces, set()
    masks = ink_masks(ink, scan, page, calibration.track_top, calibration.track_bottom,
                      {str(curve.ink) for curve in calibration.curves}, traces)
    traced = {k for k, name in alone.items() if name in masks}
    if not traced:
        return traces, set()
    out = list(traces)
    for k in traced:
        mask = masks[alone[k]].astype(np.float32)
        out[k] = trace_curves(mask, calibration.track_top, calibration.track_bottom, 1, options)[0]
    return out, traced


def filled(trace: ColumnTrace, fallback: ColumnTrace, levels: tuple[int, ...],
           level_cost: float = TraceOptions.level_cost) -> ColumnTrace:
    """A curve's tone trace, and where it found nothing (its curve hidden under a darker one longer than
    the tracer bridges, or its ink too faint to split off), the `fallback` trace the naming gave it. The
    tone trace's wrap levels are first put on the fallback's scales (`on_fallback_scales`; `levels`, the
    curve's declared ones)."""
    trace = on_fallback_scales(trace, fallback, levels, level_cost)
    found = np.isfinite(trace.u)
    return ColumnTrace(np.where(found, trace.u, fallback.u), np.where(found, trace.level, fallback.level),
                       np.where(found, trace.row, fallback.row), np.where(found, trace.confidence, fallback.confidence),
                       np.where(found, trace.bridged, fallback.bridged))


def on_fallback_scales(trace: ColumnTrace, fallback: ColumnTrace, levels: tuple[int, ...],
                       level_cost: float = TraceOptions.level_cost) -> ColumnTrace:
    """A tone trace's wrap levels read two ways, each shifted onto the fallback's (`levels_as`): as the column
    tracer read them, on any side, and read again among the curve's declared `levels` only
    (`tracer.relevelled`); whichever then reads fewer columns on a scale other than the fallback's where the
    two are drawn on the same ink (`misread`; the first on ties). The column tracer reads a curve's wraps relative to
    each other, and a curve that wraps to and fro over one edge was read two scales apart after a wrap it read
    the wrong way, 45 % of its columns a scale off (bench/README.md, 2026-12-06); read among its declared
    levels only, it cannot drift, but a broken trace then reads a gap the wrong way and stays on the backup
    scale after it. The fallback, traced on the model's grid with the curve's declared scales, tells which."""
    as_read = levels_as(trace, fallback)
    declared = levels_as(relevelled(trace, levels, level_cost), fallback)
    return declared if misread(declared, fallback) < misread(as_read, fallback) else as_read


def _same_ink(trace: ColumnTrace, fallback: ColumnTrace) -> np.ndarray:
    """Columns where the two traces are drawn on the same ink (within SAME_INK_PX rows)."""
    both = np.isfinite(trace.row) & np.isfinite(fallback.row)
    both[both] = np.abs(trace.row[both] - fallback.row[both]) <= SAME_INK_PX
    return both


def misread(trace: ColumnTrace, fallback: ColumnTrace) -> int:
    """Columns where ``trace`` and the `fallback` are drawn on the same ink and read on different scales."""
    both = _same_ink(trace, fallback)
    return int(np.count_nonzero(fallback.level[both] != trace.level[both]))


def levels_as(trace: ColumnTrace, fallback: ColumnTrace) -> ColumnTrace:
    """``trace`` with its wrap levels shifted by the whole number of scales that most often makes them the
    `fallback`'s, in the columns where the two are drawn on the same ink (within SAME_INK_PX rows). A curve
    traced alone on its tone's ink reads its wraps only relative to each other: the column tracer knows no
    declared backup scales, and a curve that spends most of its length past its one declared edge was read
    a whole scale off, on a side it does not declare (bench/README.md, 2026-12-04). The fallback, traced on
    the model's grid with the curve's declared scales, says which offset is the curve's."""
    both = _same_ink(trace, fallback)
    if not both.any():
        return trace
    shifts, counts = np.unique(fallback.level[both].astype(np.int64) - trace.level[both], return_counts=True)
    shift = int(shifts[np.argmax(counts)])
    if shift == 0:
        return trace
    return replace(trace, u=trace.u + shift, level=(trace.level + shift).astype(np.int8))
