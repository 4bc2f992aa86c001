"""veernet_core.digitise.pinned: a curve held flat at its track's edge, which the model leaves unmarked, is
found on the scan and traced there, in any track of a reduced scan; grid and border lines and jagged curves
are left alone."""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

from veernet_core.digitise.calibration import Calibration
from veernet_core.digitise.ink import ScanPixels
from veernet_core.digitise.pinned import pinned_ink, with_pinned
from veernet_core.digitise.rescale import resampling_for, scan_curves
from veernet_core.digitise.tracer import TraceOptions

PAPER, BORDER, INK = 228, 150, 20
TOP, BOTTOM = 30, 529  # track rows: a 499-row track, as a full-resolution scan's
HEIGHT, WIDTH = 560, 4000
HELD = (1240, 2600)  # columns where the curve is held at the track's right-hand (bottom) edge
HELD_AT = 0.985  # of the track, as a recorder's pen holds it: a few pixels inside the border
MODEL_SCALE = 0.2
THRESHOLD = TraceOptions().threshold


def _centre(held: bool = True) -> np.ndarray:
    """The curve's centre row per column: a swing through the track, and with `held` a run of HELD columns
    flat at HELD_AT (reached and left over 40 columns)."""
    x = np.arange(WIDTH, dtype=np.float64)
    u = 0.5 + 0.25 * np.sin(x / 150.0)
    if held:
        first, last = HELD
        u[first:last] = HELD_AT
        u[first - 40 : first] = np.linspace(u[first - 40], HELD_AT, 40)
        u[last : last + 40] = np.linspace(HELD_AT, u[last + 40], 40)
    return TOP + u * (BOTTOM - TOP)


def _scan(centre: np.ndarray, extra: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(gray scan, the curve's ink): paper with scanner noise, the track's borders across the scan and a
    3-px curve along `centre`; `extra` (bool) inked too."""
    rng = np.random.default_rng(5)
    scan = np.clip(PAPER + rng.normal(0, 3, (HEIGHT, WIDTH)), 0, 255)
    scan[[TOP, BOTTOM], :] = BORDER
    ink = np.zeros((HEIGHT, WIDTH), dtype=bool)
    rows = np.rint(centre).astype(int)
    for d in (-1, 0, 1):
        ink[rows + d, np.arange(WIDTH)] = True
    scan[ink] = INK
    if extra is not None:
        scan[extra] = INK
    return scan.astype(np.uint8), ink


def _calibration(*curves: dict[str, Any]) -> Calibration:
    return Calibration.from_dict({"track_top": TOP, "track_bottom": BOTTOM,
                                  "depth": {"top": 1000.0, "bottom": 1999.75, "unit": "ft"}, "step": 0.25,
                                  "curves": list(curves)}, HEIGHT, WIDTH)


GR = {"mnemonic": "GR", "left": 0, "right": 150, "style": "solid", "ink": "dark"}


def _model_blind_to_held(ink: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(2, h, w) probabilities as the model gives them on its grid: the curve's ink marked, except where it
    is held at the edge (a long flat line along the border reads to it as grid)."""
    seen = ink.copy()
    seen[:, HELD[0] : HELD[1]] = False
    cover = np.asarray(Image.fromarray(seen.astype(np.float32)).resize((size[1], size[0]), Image.Resampling.BOX))
    curve = np.where(cover > 0.1, 0.95, 0.02).astype(np.float32)
    return np.stack([1 - curve, curve])


def test_the_held_stretch_is_found_on_the_scan_and_nothing_else() -> None:
    scan, ink = _scan(_centre())
    found = pinned_ink(ScanPixels(scan), TOP, BOTTOM)
    cols = np.flatnonzero(found.any(axis=0))
    assert cols.min() >= HELD[0] - 40 and cols.max() < HELD[1] + 40  # only along the held run
    assert found[:, HELD[0] : HELD[1]].any(axis=0).mean() > 0.99
    assert (found <= ink).all()  # the curve's own pixels, never paper or the border
    assert not found[[TOP, BOTTOM]].any()


def test_lines_along_the_scan_and_jagged_curves_near_the_edge_are_not_held_curves() -> None:
    extra = np.zeros((HEIGHT, WIDTH), dtype=bool)
    value_line = BOTTOM - 15  # a value line inside the band, across the scan
    extra[value_line, :] = True
    # What grid removal may leave of a line: groups of ten 6-px dashes (12 px apart) every 144 px across the
    # scan, less than half of its pixels, but in runs along most of it.
    broken = TOP + 12
    for group in range(0, WIDTH, 144):
        for start in range(group, min(group + 120, WIDTH), 12):
            extra[broken, start : start + 6] = True
    beside_border = BOTTOM - 3  # 600 columns of a line 3 px inside the border: the border's, misregistered
    extra[beside_border, 100:700] = True
    jagged = np.zeros((HEIGHT, WIDTH), dtype=bool)  # a noisy curve running near the edge: 12-row strokes
    for c in range(HELD[0], HELD[1]):
        low = BOTTOM - 22 + (c % 7)
        jagged[low : low + 12, c] = True
    scan, _ = _scan(_centre(held=False), extra | jagged)
    found = pinned_ink(ScanPixels(scan), TOP, BOTTOM)
    assert not found[value_line].any() and not found[broken].any() and not found[beside_border].any()
    assert not found[jagged].any()


def test_a_curve_held_at_the_edge_is_traced_there() -> None:
    """The model leaves the held stretch unmarked; the tracer reads it at the edge, where the curve is
    (without the held ink it would be null over the stretch, 1,360 columns of it)."""
    scan, ink = _scan(_centre())
    resampling = resampling_for(scan.shape, MODEL_SCALE, 1.0)
    assert resampling.reduced
    probabilities = _model_blind_to_held(ink, resampling.model_size)
    digitised = scan_curves(probabilities, _calibration(GR), resampling, scan=ScanPixels(scan))
    u = digitised.curves[0].trace.u[HELD[0] + 20 : HELD[1] - 20]
    assert np.isfinite(u).mean() > 0.99
    assert np.nanmax(np.abs(u - HELD_AT)) < 0.006  # 3 px: on the held line, not the border (1.0)
    swing = digitised.curves[0].trace.u[200:1100]
    assert np.nanmax(np.abs(swing - (0.5 + 0.25 * np.sin(np.arange(200, 1100) / 150.0)))) < 0.01


def test_held_ink_is_added_on_a_reduced_scan_whatever_the_hints() -> None:
    scan, ink = _scan(_centre())
    pixels = ScanPixels(scan)
    reduced = resampling_for(scan.shape, MODEL_SCALE, 1.0)
    probabilities = _model_blind_to_held(ink, reduced.model_size)
    dashed = {"mnemonic": "SP", "left": -100, "right": 0, "style": "dashed", "ink": "dark"}
    raised = with_pinned(probabilities, pixels, _calibration(GR, dashed), reduced.reduced, THRESHOLD)
    held_cols = slice(round(HELD[0] * MODEL_SCALE) + 4, round(HELD[1] * MODEL_SCALE) - 4)
    assert (raised[1, :, held_cols].max(axis=0) >= 0.9).all()
    assert np.allclose(raised.sum(axis=0), 1.0)
    alike = dict(GR, mnemonic="GR2")  # the same style and ink: held ink all the same
    assert np.array_equal(with_pinned(probabilities, pixels, _calibration(GR, alike), reduced.reduced, THRESHOLD),
                          raised)
    as_is = resampling_for(scan.shape, 1.0, 1.0)  # a scan at the model's scale: its track is short
    assert with_pinned(probabilities, pixels, _calibration(GR), as_is.reduced, THRESHOLD) is probabilities


def test_a_flat_line_no_curve_comes_to_is_not_given_to_the_tracer() -> None:
    """A piece of a grid line the grid removal left, flat near the edge like a held curve, but no curve the
    model marks comes to either of its ends: its ink stays out of the probabilities."""
    piece = np.zeros((HEIGHT, WIDTH), dtype=bool)
    piece[BOTTOM - 12, 1800:2600] = True
    scan, ink = _scan(_centre(held=False), piece)
    pixels = ScanPixels(scan)
    assert pinned_ink(pixels, TOP, BOTTOM)[BOTTOM - 12, 1800:2600].all()  # a flat run on the scan
    reduced = resampling_for(scan.shape, MODEL_SCALE, 1.0)
    cover = np.asarray(Image.fromarray(ink.astype(np.float32)).resize(reduced.model_size[::-1], Image.Resampling.BOX))
    curve = np.where(cover > 0.1, 0.95, 0.02).astype(np.float32)
    probabilities = np.stack([1 - curve, curve])
    assert with_pinned(probabilities, pixels, _calibration(GR), reduced.reduced, THRESHOLD) is probabilities


def test_a_thick_border_a_few_rows_off_the_calibration_is_the_border() -> None:
    """The border drawn 6 rows thick from 2 rows inside the calibrated edge, its inner side blurred onto one
    more row over part of the scan: that row is the border's, not a held curve."""
    border = np.zeros((HEIGHT, WIDTH), dtype=bool)
    border[BOTTOM - 2 : BOTTOM + 4, :] = True
    border[BOTTOM - 6, 300:900] = True
    scan, _ = _scan(_centre(held=False), border)
    assert not pinned_ink(ScanPixels(scan), TOP, BOTTOM).any()
