"""veernet_core.digitise.grid: a printed grid taken off a full-resolution scan, and
pipeline.readable_scan, which does it for scans reduced for the model only."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veernet_core.digitise import grid as degrid
from veernet_core.digitise.calibration import Calibration
from veernet_core.digitise.ink import ScanPixels
from veernet_core.digitise.pipeline import readable_scan
from veernet_core.digitise.rescale import resampling_for

PAPER, GRID, VALUE, INK = 228, 192, 170, 20
TOP, BOTTOM = 20, 419  # track rows
HEIGHT, WIDTH = 440, 1200


def _page(skew_degrees: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(scan, grid-only pixels, curve pixels, spike pixels): a dense skewed depth grid (a line every 4
    columns, every 5th two pixels wide), value lines every 50 rows and the track borders, under a curve
    of 2-px stroke with a spike along the depth lines' direction."""
    rng = np.random.default_rng(3)
    scan = np.clip(PAPER + rng.normal(0, 3, (HEIGHT, WIDTH)), 0, 255)
    grid = np.zeros((HEIGHT, WIDTH), dtype=bool)
    rows = np.arange(TOP, BOTTOM + 1)
    slant = math.tan(math.radians(skew_degrees)) * (rows - (TOP + BOTTOM) / 2)
    for k, x in enumerate(range(6, WIDTH - 6, 4)):
        cols = np.rint(x + slant).astype(int)
        grid[rows, cols] = True
        if k % 5 == 0:
            grid[rows, cols + 1] = True
    for y in [TOP, *range(TOP + 50, BOTTOM, 50), BOTTOM]:
        grid[y, :] = True
    scan[grid] = GRID
    scan[TOP + 50 :: 50][: (BOTTOM - TOP) // 50] = VALUE
    curve = np.zeros_like(grid)
    centre = (TOP + BOTTOM) / 2 + 120 * np.sin(np.arange(WIDTH) / 90.0)
    for c in range(WIDTH):
        r = int(round(centre[c]))
        curve[r - 1 : r + 1, c] = True
    spike = np.zeros_like(grid)
    r = int(round(centre[600]))
    spike[r - 150 : r, 601:603] = True  # 150 rows straight along the depth lines, beside them
    curve |= spike
    scan[curve] = INK
    return scan.astype(np.uint8), grid & ~curve, curve, spike


@pytest.mark.parametrize("skew", [0.0, 0.8, -1.0])
def test_a_dense_skewed_grid_comes_off_and_the_curve_and_its_spike_stay(skew: float) -> None:
    scan, grid, curve, spike = _page(skew)
    gray, colour = degrid.without_grid(scan, None, TOP, BOTTOM)
    assert colour is None
    inked = gray <= PAPER - 18
    assert (scan[grid] <= PAPER - 18).all()
    assert inked[grid].mean() < 0.02  # the grid's pixels are paper again
    assert inked[spike].all()  # a spike along a dense grid is the curve's, not a line's
    # The curve keeps its ink where it crosses a line and a pixel beside the line holds it; where it
    # crosses a 2-px line at a slope neither side does, and it loses those pixels (the tracer bridges them).
    assert inked[curve].mean() > 0.9
    assert (inked & curve).any(axis=0).mean() > 0.95


def test_a_scan_without_lines_comes_back_as_it_is() -> None:
    rng = np.random.default_rng(1)
    scan = np.clip(PAPER + rng.normal(0, 3, (120, 400)), 0, 255).astype(np.uint8)
    scan[60, 50:90] = INK  # a short flat stretch of curve is not a value line
    colour = np.repeat(scan[..., None], 3, axis=2)
    gray, rgb = degrid.without_grid(scan, colour, 10, 110)
    assert gray is scan and rgb is colour


def test_a_colour_scan_takes_each_pixel_from_the_same_place_as_its_gray() -> None:
    scan, grid, curve, _ = _page(0.5)
    colour = np.stack([scan, np.clip(scan.astype(int) + 7, 0, 255).astype(np.uint8), scan // 2], axis=-1)
    colour[curve] = (200, 30, 30)  # a red curve
    gray, rgb = degrid.without_grid(scan, colour, TOP, BOTTOM)
    assert rgb is not None and rgb is not colour
    red = (rgb == (200, 30, 30)).all(axis=-1)
    assert ((gray == INK) == red).all()  # the curve's gray and its red go together, wherever they came from
    # Every pixel's colour is the colour of the pixel its gray came from: a grid pixel (gray, green 7
    # lighter, blue half) became paper of that same kind, or the curve's red.
    moved = grid & (gray != scan)
    paper_like = (rgb[moved, 1].astype(int) == np.minimum(gray[moved].astype(int) + 7, 255)) & \
                 (rgb[moved, 2] == gray[moved] // 2) & (rgb[moved, 0] == gray[moved])
    assert (paper_like | red[moved]).all()


def _calibration() -> Calibration:
    return Calibration.from_dict({"track_top": TOP, "track_bottom": BOTTOM,
                                  "depth": {"top": 1000.0, "bottom": 1100.0, "unit": "ft"}, "step": 0.5,
                                  "curves": [{"mnemonic": "GR", "left": 0, "right": 150}]}, HEIGHT, WIDTH)


def test_a_scan_reduced_for_the_model_is_read_without_its_grid_and_one_at_its_scale_as_it_is() -> None:
    scan, grid, curve, _ = _page(0.5)
    pixels = ScanPixels(scan)
    reduced = resampling_for(scan.shape, 0.1, 1.0)
    assert reduced.resampled and reduced.model_size[0] < scan.shape[0]
    read = readable_scan(pixels, _calibration(), reduced)
    assert (read.gray[grid] <= PAPER - 18).mean() < 0.02 and (read.gray[curve] <= PAPER - 18).mean() > 0.9
    assert (pixels.gray == scan).all()  # the upload itself is untouched
    as_is = resampling_for(scan.shape, 0.1, 0.1)
    assert not as_is.resampled and readable_scan(pixels, _calibration(), as_is) is pixels
