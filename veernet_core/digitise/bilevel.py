"""1-bit scans: whether a scan is one, and of which kind.

Public archives hold many logs as 1-bit scans, made one of two ways. A threshold turns every pixel darker
than some level black: every ink, light or dark, is then black, and the paper white. A dither (ordered, or
error diffusion) prints each gray as a share of black dots: the paper is speckled with them, and every
ink's strokes are black dots too.

On a thresholded scan no ink's tone can be read, so a `dark` or `light` hint is neither the tracer's nor
the naming's evidence, nor held against the scan, and the result says so (`identity`, `curves`). A
dithered scan is still read as a gray one: reduced for the model its dots are tones again, and at full
resolution its looks misread styles as well as tones (its paper's dots fill a broken curve's gaps), so
the warnings its tones raise keep in doubt names that its styles alone would give wrongly. Reading a
dithered scan back as gray (the share of black about each pixel) before the naming step was tried and not
kept: on the independent renderer's dithered logs it read one tuning seed better and the other worse, and
named a curve wrong without a flag (bench/README.md, 2026-11-27).
"""

from __future__ import annotations

import numpy as np

# Share of a scan's pixels strictly between these grays: under MID_SHARE, the scan is 1-bit (a JPEG of a
# 1-bit scan rings about its edges: 2.5 % at quality 44 on the independent renderer's logs; a gray scan of
# paper has most of its pixels in between).
MID_LOW, MID_HIGH = 40, 215
MID_SHARE = 0.05
# Share of a 1-bit scan's black pixels with no black 4-neighbour: a dither scatters single dots over the
# paper and through light ink (0.66-0.78 on the independent renderer's dithered logs), a threshold leaves
# strokes (0.00).
ISOLATED_SHARE = 0.3


def one_bit_kind(gray: np.ndarray) -> str | None:
    """"threshold" or "dither" for a 1-bit scan (uint8 (H, W), as decoded), None for a gray one."""
    if gray.size == 0:
        return None
    mid = np.count_nonzero((gray > MID_LOW) & (gray < MID_HIGH))
    if mid >= MID_SHARE * gray.size:
        return None
    black = gray < 128
    count = int(np.count_nonzero(black))
    if count == 0:
        return None
    neighbour = np.zeros_like(black)
    neighbour[1:] |= black[:-1]
    neighbour[:-1] |= black[1:]
    neighbour[:, 1:] |= black[:, :-1]
    neighbour[:, :-1] |= black[:, 1:]
    isolated = int(np.count_nonzero(black & ~neighbour))
    return "dither" if isolated >= ISOLATED_SHARE * count else "threshold"
