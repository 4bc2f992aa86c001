"""Curves told apart by their ink's tone at the scan's resolution (`veernet_core.digitise.tones`), on
hand-drawn tracks: a light curve crossing a dark one, each traced on the ink of its own tone."""

from __future__ import annotations

import numpy as np
import pytest

from veernet_core.digitise.calibration import Calibration
from veernet_core.digitise.ink import ScanPixels, page_of
from veernet_core.digitise.tones import alone_in_tone, tone_masks, traced_by_tone
from veernet_core.digitise.tracer import ColumnTrace, TraceOptions

HEIGHT, WIDTH, TOP, BOTTOM = 200, 600, 20.0, 180.0
PAPER, DARK, LIGHT = 240, 30, 150


def _calibration(*inks: str | None) -> Calibration:
    curves = [{"mnemonic": f"C{k}", "unit": "API", "left": 0, "right": 100, **({"ink": ink} if ink else {})}
              for k, ink in enumerate(inks)]
    return Calibration.from_dict({"depth": {"top": 1000.0, "bottom": 1100.0, "unit": "m"}, "curves": curves,
                                  "track_top": TOP, "track_bottom": BOTTOM, "step": 1.0}, HEIGHT, WIDTH)


def _crossing(light: int = LIGHT, stroke: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A scan with a dark curve falling and a light one rising across it; (gray, dark rows, light rows)."""
    cols = np.arange(WIDTH)
    dark_rows = 40 + 120 * cols / WIDTH + 6 * np.sin(cols / 17)
    light_rows = 160 - 120 * cols / WIDTH + 6 * np.sin(cols / 23)
    gray = np.full((HEIGHT, WIDTH), PAPER, dtype=np.uint8)
    for rows, ink in ((light_rows, light), (dark_rows, DARK)):  # the dark curve drawn last, over the light
        for d in range(stroke):
            gray[np.rint(rows).astype(np.int64) + d, cols] = ink
    return gray, dark_rows + (stroke - 1) / 2, light_rows + (stroke - 1) / 2


def _untraced(count: int) -> list[ColumnTrace]:
    """Traces that found nothing: what the model's grid hands over where it saw no curve."""
    nothing = np.full(WIDTH, np.nan)
    return [ColumnTrace(nothing, np.zeros(WIDTH, np.int8), nothing, np.zeros(WIDTH, np.float32),
                        np.zeros(WIDTH, bool)) for _ in range(count)]


def test_only_a_curve_alone_in_its_declared_tone_is_traced_by_tone() -> None:
    assert alone_in_tone(_calibration("dark", "light")) == {0: "dark", 1: "light"}
    assert alone_in_tone(_calibration("dark", "dark", "light")) == {2: "light"}
    assert alone_in_tone(_calibration("dark", "dark")) == {}  # one tone declared: tone tells nothing
    assert alone_in_tone(_calibration("dark", "light", None)) == {}  # the third could be drawn in either
    assert alone_in_tone(_calibration("dark", "red")) == {}  # a gray scan: the colour tells nothing
    assert alone_in_tone(_calibration("dark", "red"), colour=True) == {0: "dark", 1: "red"}
    assert alone_in_tone(_calibration("red", "red", "blue"), colour=True) == {2: "blue"}


def test_a_light_curve_crossing_a_dark_one_is_traced_on_its_own_ink() -> None:
    gray, dark_rows, light_rows = _crossing()
    scan = ScanPixels(gray)
    ink = gray < PAPER - 20
    calibration = _calibration("light", "dark")
    traces, alone = traced_by_tone(_untraced(2), ink, scan, page_of(scan, TOP, BOTTOM), calibration,
                                   TraceOptions())
    assert alone == {0, 1}
    light, dark = traces
    crossing = np.abs(dark_rows - light_rows) < 8  # the light curve is hidden there and bridged
    for trace, truth in ((light, light_rows), (dark, dark_rows)):
        read = np.isfinite(trace.row) & ~crossing
        assert read.mean() > 0.9
        assert np.max(np.abs(trace.row[read] - truth[read])) <= 1.0


def test_ink_of_one_tone_gives_no_masks_and_leaves_the_traces() -> None:
    gray, _, _ = _crossing(light=DARK)  # a 1-bit scan: both curves black
    scan = ScanPixels(gray)
    ink = gray < PAPER - 20
    page = page_of(scan, TOP, BOTTOM)
    assert tone_masks(ink, gray, page, TOP, BOTTOM) is None
    given = _untraced(2)
    traces, alone = traced_by_tone(given, ink, scan, page, _calibration("light", "dark"), TraceOptions())
    assert alone == set() and traces is given


@pytest.mark.parametrize("stroke", [1, 3])
def test_a_dark_strokes_pale_edges_are_dark_ink(stroke: int) -> None:
    gray, dark_rows, _ = _crossing(stroke=stroke)
    cols = np.arange(WIDTH)
    edge = np.rint(dark_rows - (stroke - 1) / 2).astype(np.int64) - 1
    gray[edge, cols] = (PAPER + LIGHT) // 2  # a soft edge above the dark stroke, paler than the light ink
    ink = gray < PAPER - 20
    masks = tone_masks(ink, gray, page_of(ScanPixels(gray), TOP, BOTTOM), TOP, BOTTOM)
    assert masks is not None
    dark, light = masks
    assert dark[edge, cols].mean() > 0.9  # the run it belongs to is dark
    assert not light[edge, cols].any()


def _coloured(gray: np.ndarray, rows: list[np.ndarray], colours: list[tuple[int, int, int]]) -> np.ndarray:
    """A colour scan of `gray` with each curve of `rows` (in drawing order, 2 px) in its colour."""
    rgb = np.repeat(gray[..., None], 3, axis=-1)
    cols = np.arange(WIDTH)
    for curve, colour in zip(rows, colours, strict=True):
        for d in range(2):
            rgb[np.rint(curve).astype(np.int64) + d, cols] = colour
    return rgb


def test_curves_in_declared_colours_are_traced_each_on_its_colour() -> None:
    cols = np.arange(WIDTH)
    red_rows = 40 + 120 * cols / WIDTH + 6 * np.sin(cols / 17)
    blue_rows = 160 - 120 * cols / WIDTH + 6 * np.sin(cols / 23)
    black_rows = 100 + 50 * np.sin(cols / 41)
    rgb = _coloured(np.full((HEIGHT, WIDTH), PAPER, dtype=np.uint8), [red_rows, blue_rows, black_rows],
                    [(190, 50, 45), (50, 60, 190), (20, 20, 20)])
    gray = rgb.mean(axis=-1).astype(np.uint8)
    scan = ScanPixels(gray, rgb)
    ink = gray < PAPER - 20
    calibration = _calibration("red", "blue", "dark")
    traces, alone = traced_by_tone(_untraced(3), ink, scan, page_of(scan, TOP, BOTTOM), calibration,
                                   TraceOptions())
    assert alone == {0, 1, 2}
    truths = [red_rows + 0.5, blue_rows + 0.5, black_rows + 0.5]
    for k, (trace, truth) in enumerate(zip(traces, truths, strict=True)):
        others = [t for j, t in enumerate(truths) if j != k]
        clear = np.all([np.abs(truth - o) > 8 for o in others], axis=0)  # where no other curve covers it
        read = np.isfinite(trace.row) & clear
        assert read.sum() > 0.9 * clear.sum()
        assert np.max(np.abs(trace.row[read] - truth[read])) <= 1.0, k


def test_colour_hints_on_a_gray_scan_trace_nothing_by_colour() -> None:
    gray, _, _ = _crossing()
    scan = ScanPixels(gray)
    given = _untraced(2)
    traces, alone = traced_by_tone(given, gray < PAPER - 20, scan, page_of(scan, TOP, BOTTOM),
                                   _calibration("red", "blue"), TraceOptions())
    assert alone == set() and traces is given
