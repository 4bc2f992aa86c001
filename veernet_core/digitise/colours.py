"""Ink colours on a colour scan, read as blends of paper and ink.

A stroke's pixel is seldom its ink's full colour: a thin line, a stroke's soft edge, a scan reduced for
the model, a faded pen, all mix the ink with the paper under it. Every mix of one ink with the paper lies
on the straight line from the paper's colour to the ink's, so a pixel is held against each declared ink's
line, not its end: a pale red pixel lies on the line to red however pale, and off the lines to blue and to
black. The distance from a line is measured against the pixel's own distance from the paper, so a faint
stroke is judged by its hue as a strong one is. Gray inks (`dark`, `light`) share one line, the one to
black: on that line only darkness tells them apart (`joint._split_tone`, `ink.DARK_RATIO`).
"""

from __future__ import annotations

import numpy as np

from veernet_core.digitise.calibration_fields import INK_COLOURS

BLACK = (0, 0, 0)
# Below this many gray levels from the paper, a pixel's hue is scanner noise: its mismatch is measured
# against this distance instead of its own, so paper matches every line about equally.
HUE_FLOOR = 24.0


def ink_line(ink: str) -> tuple[int, int, int]:
    """The end of the line an ink's mixes lie on: the colour's RGB, or black for the gray inks."""
    return INK_COLOURS.get(ink, BLACK)


def mismatch(rgb: np.ndarray, paper: np.ndarray, ink: tuple[int, int, int]) -> np.ndarray:
    """(...) distance of colours `rgb` (..., 3) from the line of mixes of `paper` (..., 3 or 3,) and `ink`,
    as a share of their distance from the paper (at least HUE_FLOOR): 0 on the line, about the sine of the
    angle between hues off it."""
    rgb = np.asarray(rgb, dtype=np.float32)
    paper = np.asarray(paper, dtype=np.float32)
    towards = np.asarray(ink, dtype=np.float32) - paper
    offset = rgb - paper
    reach = np.maximum(np.sum(towards * towards, axis=-1), 1.0)
    share = np.clip(np.sum(offset * towards, axis=-1) / reach, 0.0, 1.0)
    off_line = np.linalg.norm(offset - share[..., None] * towards, axis=-1)
    return off_line / np.maximum(np.linalg.norm(offset, axis=-1), HUE_FLOOR)


def paper_tint(colour: np.ndarray, gray: np.ndarray) -> np.ndarray:
    """(3,) the paper's colour per gray level: the median colour of the pixels as bright as the median gray
    (the paper, on a page mostly paper) over that gray, so that a column's paper colour is its paper gray
    times this."""
    bright = gray >= np.median(gray)
    picked = colour[bright].astype(np.float64)
    level = max(float(np.median(gray[bright])), 1.0)
    return np.median(picked, axis=0) / level if picked.size else np.ones(3)
