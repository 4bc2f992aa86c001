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


def test_a_thick_blurred_border_comes_off_whole_and_a_curve_crossing_it_stays() -> None:
    """A page's border: 3 px of dark ink with a blurred row either side, a row lower over the right half of
    the scan (what a fraction of a degree of skew leaves), under a value grid; a curve crosses the bottom one.
    It comes off to the paper about both edges, with nothing of it copied beside it."""
    rng = np.random.default_rng(5)
    scan = np.clip(PAPER + rng.normal(0, 3, (HEIGHT, WIDTH)), 0, 255)
    for edge in (TOP, BOTTOM):
        for half, drop in ((slice(0, WIDTH // 2), 0), (slice(WIDTH // 2, WIDTH), 1)):
            scan[edge - 1 + drop : edge + 2 + drop, half] = 80
            scan[edge - 2 + drop, half] = scan[edge + 2 + drop, half] = 200
    for y in range(TOP + 50, BOTTOM, 50):
        scan[y, :] = VALUE
    curve = np.zeros((HEIGHT, WIDTH), dtype=bool)
    curve[BOTTOM - 30 : BOTTOM + 8, 700:702] = True  # a steep stroke through the bottom border and past it
    scan[curve] = INK
    scan = scan.astype(np.uint8)
    gray, _ = degrid.without_grid(scan, None, TOP, BOTTOM)
    inked = gray <= PAPER - 18
    for edge in (TOP, BOTTOM):
        band = np.zeros_like(curve)
        band[edge - 4 : edge + 5] = True
        assert inked[band & ~curve].mean() < 0.01, f"the border at row {edge} and its blur are paper again"
    assert inked[curve].mean() > 0.9  # the stroke goes on through the border


@pytest.mark.parametrize("bilevel", [False, True])
def test_a_curve_running_along_a_border_stays_when_the_border_comes_off(bilevel: bool) -> None:
    """A curve pinned at the track's edge over a third of the log, in the row beside a 2-px border: it inks
    that row as widely as a border's blurred edge does, but leaves the rest of the row paper (a blurred edge
    tints the whole row). The border comes off; the curve stays (and where it lies against the border, the
    border's rows take its ink, as where any curve crosses a border)."""
    rng = np.random.default_rng(8)
    scan = np.clip(PAPER + rng.normal(0, 3, (HEIGHT, WIDTH)), 0, 255)
    scan[TOP - 1 : TOP + 1] = scan[BOTTOM : BOTTOM + 2] = INK
    curve = np.zeros((HEIGHT, WIDTH), dtype=bool)
    curve[TOP + 1, 300:720] = True  # along the top border, 35 % of the width
    curve[TOP + 2 : TOP + 60, 719:721] = True  # and away from it
    scan[curve] = INK
    if bilevel:
        scan = np.where(scan < PAPER - 40, 0, 255)
    scan = scan.astype(np.uint8)
    gray, _ = degrid.without_grid(scan, None, TOP, BOTTOM)
    inked = gray <= np.median(scan) - 18
    assert inked[curve].mean() > 0.95, "the curve along the border is still there"
    for edge in (TOP, BOTTOM):
        band = np.zeros_like(curve)
        band[edge - 2 : edge + 3] = True
        band[:, 298:723] = False
        assert inked[band & ~curve].mean() < 0.01, f"the border at row {edge} is paper again"
