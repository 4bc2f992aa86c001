"""Ink at the scan's own resolution, from the model's reduced reading and the scan's pixels.

The bundled model reads a scan reduced to its training scale (a tenth of a full-resolution log), where a
curve moves a large share of the track between neighbouring columns and its position is known to a
reduced pixel (a tenth of the scan's). So the model says *where* the curves are (a band a reduced pixel
or two about its ink) and the scan's own pixels say *which* pixels in that band are ink (darker than the
paper by more than scanner noise, and not on a grid line that crosses the whole track).

`rescale.scan_curves` uses it two ways (bench/README.md has the figures): a curve alone in its track is
traced on this ink at full resolution; curves that share a track are traced and named on the model's
grid, where the joint tracer weighs the whole log and the hints, and each trace is then moved onto the
run of this ink nearest it (`snap_trace`). Tracing curves that share a track at full resolution and naming
its stretches by their looks read positions better but named curves worse, without saying so (held-out
seed 424242 at full resolution, bundled model: curves named wrong without a flag 17 -> 29 of 115 on the
generator's logs and 27 -> 66 of 108 on the independent renderer's).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from veernet_core.digitise.ink import MIN_DARKNESS, Page
from veernet_core.digitise.tracer import ColumnTrace

SUPPORT = 0.3  # the model's curve probability (after a 3x3 maximum) above which a reduced pixel may hold ink


def full_resolution_ink(probabilities: np.ndarray, gray: np.ndarray, page: Page, top: float,
                        bottom: float) -> np.ndarray:
    """(C, h, w) class probabilities on the model's reduced grid and the scan's (H, W) gray pixels ->
    (C, H, W) probabilities on the scan's grid: each curve channel is 1 on its `ink_mask`, 0 elsewhere;
    channel 0 is what is left."""
    mask = ink_mask(probabilities, gray, page, top, bottom)
    out = np.empty((mask.shape[0] + 1, *gray.shape), dtype=np.float32)
    out[1:] = mask
    out[0] = 1.0 - out[1:].max(axis=0) if mask.shape[0] else 1.0
    return out


def ink_mask(probabilities: np.ndarray, gray: np.ndarray, page: Page, top: float, bottom: float) -> np.ndarray:
    """(C - 1, H, W) bool, per curve channel of the (C, h, w) reduced probabilities: the scan's ink pixels
    inside the band where the model found that channel's ink (its probability, after a 3x3 maximum, at
    least SUPPORT). Grid lines across the track (`page`) are not ink: the tracer bridges a curve across
    them. Rows outside the track (with a margin of a reduced pixel) hold none."""
    classes, small_h, small_w = probabilities.shape
    height, width = gray.shape
    # The reduced pixel each scan row and column lies in (pixel centres), as counts per reduced pixel.
    rows = np.minimum(((np.arange(height) + 0.5) * (small_h / height)).astype(np.int64), small_h - 1)
    cols = np.minimum(((np.arange(width) + 0.5) * (small_w / width)).astype(np.int64), small_w - 1)
    row_counts, col_counts = np.bincount(rows, minlength=small_h), np.bincount(cols, minlength=small_w)
    ink = np.less_equal(gray, (page.paper - MIN_DARKNESS)[None, :])  # as ink.page_of counts it; no float copy
    ink[page.grid_rows[:height], :] = False
    ink[:, page.grid_cols] = False
    margin = int(np.ceil(height / small_h))
    ink[: max(0, int(np.floor(top)) - margin)] = False
    ink[int(np.ceil(bottom)) + margin + 1 :] = False
    out = np.empty((classes - 1, height, width), dtype=bool)
    for channel in range(1, classes):
        support = _max3(probabilities[channel]) >= SUPPORT
        np.logical_and(np.repeat(np.repeat(support, row_counts, axis=0), col_counts, axis=1), ink, out=out[channel - 1])
    return out


def _max3(image: np.ndarray) -> np.ndarray:
    """The maximum over each pixel's 3x3 neighbourhood (edges repeated)."""
    padded = np.pad(image, 1, mode="edge")
    h, w = image.shape
    return np.max([padded[dy : dy + h, dx : dx + w] for dy in range(3) for dx in range(3)], axis=0)



def snap_trace(trace: ColumnTrace, ink: np.ndarray, top: float, bottom: float, reach: int) -> ColumnTrace:
    """A trace found on the model's grid and mapped to the scan's columns, moved in each column onto the
    scan's own ink: the centre of the run of ink pixels nearest its row within `reach` rows (the run cut at
    the reach); where there is none, it stays where it was."""
    height = ink.shape[0]
    cols = np.flatnonzero(np.isfinite(trace.row))
    if cols.size == 0:
        return trace
    centre = np.rint(trace.row[cols]).astype(np.int64)
    offsets = np.arange(-reach, reach + 1)
    window = ink[np.clip(centre[:, None] + offsets[None, :], 0, height - 1), cols[:, None]]
    nearest_first = np.argsort(np.abs(offsets), kind="stable")
    found = window.any(axis=1)
    nearest = nearest_first[np.argmax(window[:, nearest_first], axis=1)]
    begins = window & ~np.concatenate([np.zeros((cols.size, 1), dtype=bool), window[:, :-1]], axis=1)
    label = np.cumsum(begins, axis=1) * window
    mine = label == label[np.arange(cols.size), nearest][:, None]
    shift = (mine * offsets[None, :]).sum(axis=1) / np.maximum(mine.sum(axis=1), 1)
    row = trace.row.copy()
    row[cols] = np.where(found, centre + shift, trace.row[cols])
    u = trace.u.copy()
    u[cols] = (row[cols] - top) / (bottom - top) + trace.level[cols]
    return replace(trace, u=u, row=row)
