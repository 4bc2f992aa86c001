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


def _placeholder(count: int) -> list[ColumnTrace]:
    nothing = np.full(WIDTH, np.nan)
    return [ColumnTrace(nothing, np.zeros(WIDTH, np.int8), nothing, np.zeros(WIDTH, np.float32),
                        np.zeros(WIDTH, bool)) for _ in range(count)]


def test_only_a_curve_alone_in_its_declared_tone_is_traced_by_tone() -> None:
    assert alone_in_tone(_calibration("dark", "light")) == {0: "dark", 1: "light"}
    assert alone_in_tone(_calibration("dark", "dark", "light")) == {2: "light"}
    assert alone_in_tone(_calibration("dark", None)) == {}  # one tone declared: tone tells nothing
    assert alone_in_tone(_calibration("dark", "red")) == {}


def test_a_light_curve_crossing_a_dark_one_is_traced_on_its_own_ink() -> None:
    gray, dark_rows, light_rows = _crossing()
    scan = ScanPixels(gray)
    ink = gray < PAPER - 20
    calibration = _calibration("light", "dark")
    traces, alone = traced_by_tone(_placeholder(2), ink, gray, page_of(scan, TOP, BOTTOM), calibration,
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
    given = _placeholder(2)
    traces, alone = traced_by_tone(given, ink, gray, page, _calibration("light", "dark"), TraceOptions())
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
