"""veernet_core.digitise.track_numbers: depth numbers printed inside a track are found on the scan (through a
fine ruling, beside depth lines, on a slightly skewed scan) and taken out of what the tracer reads; curves of
every style, thick and noisy or cut by the grid, are never taken for numbers."""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from veernet_core.digitise.calibration import Calibration
from veernet_core.digitise.ink import ScanPixels, page_of
from veernet_core.digitise.rescale import resampling_for, scan_curves
from veernet_core.digitise.track_numbers import number_pixels, without_numbers

PAPER = 228
TOP, BOTTOM = 30, 529  # a 499-row track, as a full-resolution scan's
HEIGHT, WIDTH = 560, 3600
HEAVY_EVERY = 300  # columns between heavy depth lines, each with its number
NUMBER_ROW = TOP + 200  # the numbers' top row
MODEL_SCALE = 0.2


def _grid(rng: np.random.Generator) -> np.ndarray:
    """Paper with scanner noise, a faint ruling every 6 columns that drifts a column every 60 rows (a scan
    skewed by about 1 degree), heavy depth lines and value lines, and the track's borders."""
    scan = np.clip(PAPER + rng.normal(0, 3, (HEIGHT, WIDTH)), 0, 255)
    rows = np.arange(TOP, BOTTOM + 1)
    drift = (rows - TOP) // 60
    for col in range(0, WIDTH - 10, 6):
        scan[rows, col + drift] = np.minimum(scan[rows, col + drift], 196)
    for col in range(HEAVY_EVERY // 2, WIDTH - 10, HEAVY_EVERY):
        for d in (0, 1):
            scan[rows, col + d + drift] = 120
    for row in range(TOP, BOTTOM + 1, 125):
        scan[row, :] = np.minimum(scan[row, :], 170)
    scan[[TOP, BOTTOM], :] = 110
    return scan


def _numbers() -> np.ndarray:
    """Darkness (0..1) of a depth number beside every heavy depth line, at NUMBER_ROW."""
    canvas = Image.new("L", (WIDTH, HEIGHT), 0)
    pen = ImageDraw.Draw(canvas)
    font = ImageFont.load_default(size=18)
    for k, col in enumerate(range(HEAVY_EVERY // 2, WIDTH - 10, HEAVY_EVERY)):
        pen.text((col + 8, NUMBER_ROW), f"{8250 + 50 * k}", fill=255, font=font)
    return np.asarray(canvas, dtype=np.float64) / 255.0


def _curve(centre: np.ndarray, stroke: int, on: np.ndarray | None = None) -> np.ndarray:
    """bool ink of a curve along `centre` (rows per column), `stroke` px thick, drawn where `on`."""
    ink = np.zeros((HEIGHT, WIDTH), dtype=bool)
    cols = np.arange(WIDTH) if on is None else np.flatnonzero(on)
    rows = np.rint(centre[cols]).astype(int)
    for d in range(-(stroke // 2), stroke - stroke // 2):
        ink[rows + d, cols] = True
    for c in cols[1:]:  # joined across steep columns, as a pen draws
        a, b = sorted((int(round(centre[c - 1])), int(round(centre[c]))))
        ink[a : b + 1, c] = True
    return ink


def _curves(rng: np.random.Generator) -> np.ndarray:
    """A swinging solid curve across the numbers' band, a flat dashed one, a flat noisy 1-px dash-dot one
    and a thick noisy one (4 px, with spikes) cut by every line of the ruling."""
    x = np.arange(WIDTH, dtype=np.float64)
    swing = TOP + 250 + 180 * np.sin(x / 260.0)
    dashed = np.full(WIDTH, TOP + 80.0) + rng.normal(0, 0.6, WIDTH)
    dash_dot = np.full(WIDTH, TOP + 150.0) + rng.integers(-3, 4, WIDTH)
    phase = x % 60
    thick = np.full(WIDTH, TOP + 440.0) + rng.normal(0, 1.5, WIDTH)
    spikes = _curve(thick, 4)
    for c in rng.choice(WIDTH - 2, 120, replace=False):
        spikes[int(thick[c]) - 9 : int(thick[c]) + 2, c : c + 2] = True
    dash_dot_on = (phase < 30) | ((phase >= 42) & (phase < 45))
    return _curve(swing, 2) | _curve(dashed, 2, phase < 40) | _curve(dash_dot, 1, dash_dot_on) | spikes


def _scan(numbers: bool, seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gray scan, the curves' ink, the numbers' ink)."""
    rng = np.random.default_rng(seed)
    scan = _grid(rng)
    curves = _curves(rng)
    printed = _numbers() if numbers else np.zeros((HEIGHT, WIDTH))
    scan = scan * (1 - printed) + 70 * printed
    scan[curves] = 25
    return np.clip(scan, 0, 255).astype(np.uint8), curves, (printed > 0.5) & ~curves


def _found(scan: np.ndarray) -> np.ndarray:
    pixels = ScanPixels(scan)
    return number_pixels(scan, page_of(pixels, TOP, BOTTOM), TOP, BOTTOM)


def test_depth_numbers_are_found_and_no_curve_ink_with_them() -> None:
    scan, curves, printed = _scan(numbers=True)
    found = _found(scan)
    # Numbers a curve runs through join it into one piece, and are left: most are clear of the curves.
    assert (found & printed).sum() > 0.7 * printed.sum()
    assert not (found & curves).any()
    cols = np.flatnonzero(found.any(axis=0))
    assert found[:, cols].any(axis=0).all()
    assert np.flatnonzero(found.any(axis=1)).min() >= NUMBER_ROW - 2
    assert np.flatnonzero(found.any(axis=1)).max() <= NUMBER_ROW + 24


def test_numbers_in_a_one_pixel_pen_are_found() -> None:
    """Digits whose strokes are a pixel wide (a fine pen, or a light print of which only the strokes' cores
    are dark enough to be ink) step diagonally round their curves: a step is no speck of a ruling."""
    rng = np.random.default_rng(3)
    scan = _grid(rng)
    curves = _curves(rng)
    printed = (_numbers() > 0.7) & ~curves
    scan[printed] = 70
    scan[curves] = 25
    found = _found(np.clip(scan, 0, 255).astype(np.uint8))
    assert (found & printed).sum() > 0.9 * printed.sum()
    assert not (found & curves).any()


def test_curves_of_every_style_on_a_ruled_track_are_never_numbers() -> None:
    for seed in (3, 4, 5):
        scan, _, _ = _scan(numbers=False, seed=seed)
        assert not _found(scan).any()


def test_a_lone_row_of_digits_is_not_a_row_of_depth_numbers() -> None:
    """Fewer than three numbers at one level are not taken: depth numbers repeat along the log."""
    scan, _, printed = _scan(numbers=True)
    gray = scan.copy()
    keep = np.zeros(WIDTH, dtype=bool)
    keep[: 2 * HEAVY_EVERY] = True  # two numbers left
    gray[printed & ~keep[None, :]] = PAPER
    assert not _found(gray).any()


def test_without_numbers_leaves_no_curve_where_a_number_is() -> None:
    numbers = np.zeros((100, 200), dtype=bool)
    numbers[40:50, 60:80] = True
    curve = np.full((20, 40), 0.9, dtype=np.float32)
    probabilities = np.stack([1 - curve, curve])
    cleared = without_numbers(probabilities, numbers)
    assert (cleared[1, 8:10, 12:16] == 0).all() and (cleared[0, 8:10, 12:16] == 1).all()
    untouched = np.ones((20, 40), dtype=bool)
    untouched[8:10, 12:16] = False
    assert (cleared[:, untouched] == probabilities[:, untouched]).all()
    assert without_numbers(probabilities, np.zeros((100, 200), dtype=bool)) is probabilities


def _calibration(*curves: dict[str, Any]) -> Calibration:
    return Calibration.from_dict({"track_top": TOP, "track_bottom": BOTTOM,
                                  "depth": {"top": 1000.0, "bottom": 1899.75, "unit": "ft"}, "step": 0.25,
                                  "curves": list(curves)}, HEIGHT, WIDTH)


def test_a_curve_is_not_traced_along_the_numbers_where_its_own_ink_fades() -> None:
    """A flat curve just below the numbers fades out for 400 columns; the model marks the numbers as ink
    (as the bundled model does another printer's lettering). The trace bridges the fade on the curve's row or
    leaves it null; it never runs along the numbers."""
    rng = np.random.default_rng(8)
    scan = _grid(rng)
    printed = _numbers()
    scan = scan * (1 - printed) + 70 * printed
    row = NUMBER_ROW + 40.0
    on = np.ones(WIDTH, dtype=bool)
    fade = slice(1300, 1700)
    on[fade] = False
    curve = _curve(np.full(WIDTH, row) + rng.normal(0, 0.5, WIDTH), 2, on)
    scan[curve] = 25
    scan = np.clip(scan, 0, 255).astype(np.uint8)
    resampling = resampling_for(scan.shape, MODEL_SCALE, 1.0)
    seen = curve | (printed > 0.5)  # what the model marks
    h, w = resampling.model_size
    cover = np.asarray(Image.fromarray(seen.astype(np.float32)).resize((w, h), Image.Resampling.BOX))
    mark = np.where(cover > 0.05, 0.95, 0.02).astype(np.float32)
    probabilities = np.stack([1 - mark, mark])
    gr = {"mnemonic": "GR", "left": 0, "right": 150, "style": "solid", "ink": "dark"}
    trace = scan_curves(probabilities, _calibration(gr), resampling, scan=ScanPixels(scan)).curves[0].trace
    rows = TOP + trace.u * (BOTTOM - TOP)
    assert not np.any(np.abs(rows[fade] - (NUMBER_ROW + 9)) < 12)  # never on the numbers' rows
    drawn = np.isfinite(rows) & on
    assert drawn.mean() > 0.85 and (np.abs(rows[drawn] - row) <= 4).mean() > 0.99  # elsewhere, on the curve
