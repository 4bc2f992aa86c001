"""Curves told apart by their ink's tone at the scan's resolution (`veernet_core.digitise.tones`), on
hand-drawn tracks: a light curve crossing a dark one, each traced on the ink of its own tone."""

from __future__ import annotations

import numpy as np
import pytest

from veernet_core.digitise.calibration import Calibration
from veernet_core.digitise.ink import ScanPixels, page_of
from veernet_core.digitise.tones import alone_in_tone, filled, levels_as, tone_masks, traced_by_tone
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


def _specked(gray: np.ndarray, clear_of: list[np.ndarray], count: int, seed: int = 5) -> np.ndarray:
    """`gray` with `count` one-pixel specks of faint ink (a printed grid's remains, dust) in the track,
    at least 4 rows from every curve of `clear_of`."""
    rng = np.random.default_rng(seed)
    out = gray.copy()
    placed = 0
    while placed < count:
        row, col = int(rng.integers(TOP + 2, BOTTOM - 2)), int(rng.integers(0, WIDTH))
        if all(abs(row - rows[col]) >= 4 for rows in clear_of) and out[row, col] == PAPER:
            out[row, col] = PAPER - 25
            placed += 1
    return out


def _on(rows: np.ndarray, level: int | np.ndarray = 0) -> ColumnTrace:
    """A trace drawn along `rows` (NaN: not found there), read on wrap `level` (one, or one per column)."""
    fraction = (rows - TOP) / (BOTTOM - TOP)
    found = np.isfinite(rows)
    return ColumnTrace(fraction + level, np.where(found, level, 0).astype(np.int8), rows.astype(np.float64),
                       found.astype(np.float32), np.zeros(WIDTH, bool))


def test_faint_specks_do_not_put_a_light_curve_with_the_dark_ink() -> None:
    """Twice as many runs of faint specks as of the curves' ink: split over every run of the track, the two
    tones are the specks' and the curves', and the light curve goes with the dark. The tones of the runs the
    traces run through are the curves' own."""
    gray, dark_rows, light_rows = _crossing(light=110)
    gray = _specked(gray, [dark_rows, light_rows], 2 * 2 * WIDTH)
    ink = gray < PAPER - 20
    page = page_of(ScanPixels(gray), TOP, BOTTOM)
    apart = np.abs(dark_rows - light_rows) > 8
    cols = np.arange(WIDTH)[apart]
    light_on = np.rint(light_rows[apart] - 0.5).astype(np.int64)
    whole = tone_masks(ink, gray, page, TOP, BOTTOM)
    assert whole is not None and whole[0][light_on, cols].mean() > 0.9  # what a split of every run does
    traced = tone_masks(ink, gray, page, TOP, BOTTOM, [_on(dark_rows), _on(light_rows)])
    assert traced is not None
    dark, light = traced
    assert light[light_on, cols].mean() > 0.9 and not dark[light_on, cols].any()
    dark_on = np.rint(dark_rows[apart] - 0.5).astype(np.int64)
    assert dark[dark_on, cols].mean() > 0.9
    scan = ScanPixels(gray)
    traces, alone = traced_by_tone([_on(light_rows), _on(dark_rows)], ink, scan, page, _calibration("light", "dark"),
                                   TraceOptions())
    assert alone == {0, 1}
    read = np.isfinite(traces[0].row) & apart
    assert read.sum() > 0.9 * apart.sum()
    assert np.mean(np.abs(traces[0].row[read] - light_rows[read]) <= 1.0) > 0.95  # specks are light ink too


def test_a_tone_trace_takes_the_wrap_levels_of_the_naming_trace_on_its_ink() -> None:
    """The column tracer reads a curve's wraps relative to each other; the naming's trace of the same ink,
    traced with the curve's declared backup scales, says which scale each stretch is on."""
    _, dark_rows, light_rows = _crossing()
    high = np.where(np.arange(WIDTH) < 250, 0, 1).astype(np.int8)  # past the right edge from column 250
    toned = _on(dark_rows)
    toned = ColumnTrace(toned.u + high, high, toned.row, toned.confidence, toned.bridged)
    named = ColumnTrace(toned.u - 1, (high - 1).astype(np.int8), toned.row.copy(), toned.confidence, toned.bridged)
    named.u[:40] = np.nan  # where the naming's trace found nothing, the tone trace stands
    named.row[:40] = np.nan
    got = filled(toned, named, (0, -1))  # the naming's trace reads its scales as 0 and past left
    assert np.array_equal(got.level, high - 1) and np.allclose(got.u, toned.u - 1)
    assert np.array_equal(got.row, toned.row)
    elsewhere = _on(light_rows, level=-1)  # the naming's trace on another curve's ink says nothing of the levels
    far = np.abs(light_rows - dark_rows) > 2
    elsewhere.row[~far] = np.nan
    assert np.array_equal(levels_as(toned, elsewhere).level, toned.level)


def test_a_tone_trace_that_read_a_wrap_the_wrong_way_takes_the_declared_scales_the_naming_trace_reads() -> None:
    """A curve wrapping to and fro over its one declared edge (past left): the column tracer reads one wrap the
    wrong way and every level after it a scale off, so no one shift puts them all on the naming trace's.
    Read again among the declared levels, they are the curve's."""
    cols = np.arange(WIDTH)
    past = (cols // 50) % 2 == 1  # past the left edge every other 50 columns
    fraction = np.where(past, 0.9 + 0.05 * np.sin(cols / 7), 0.1 + 0.05 * np.sin(cols / 9))
    truth = np.where(past, -1, 0).astype(np.int8)
    drifted = (truth + (cols >= 250)).astype(np.int8)  # a wrap at column 250 read the wrong way
    rows = TOP + fraction * (BOTTOM - TOP)
    naming = _on(rows, truth)
    naming.row[::3] = np.nan  # the naming's trace of the same ink, where it saw it
    got = filled(_on(rows, drifted), naming, (0, -1))
    assert np.array_equal(got.level, truth)
    assert np.allclose(got.u, fraction + truth)
    # One shift for the whole trace (the levels as the column tracer read them) leaves half of it a scale off.
    assert np.mean(levels_as(_on(rows, drifted), naming).level != truth) > 0.4


def test_a_broken_tone_trace_keeps_its_levels_where_the_naming_trace_reads_them_so() -> None:
    """A curve on its primary scale that crosses the track unseen (a gap of 100 columns, from near its right edge
    to near its left): read among its declared levels (past right), the trace would take the gap for a wrap and
    stay a scale off after it. The naming's trace, on the same ink on both sides, reads the primary scale."""
    cols = np.arange(WIDTH)
    fraction = np.where(cols < 250, 0.9, 0.1) + 0.03 * np.sin(cols / 11)
    fraction[250:350] = np.nan
    level = np.zeros(WIDTH, dtype=np.int8)
    rows = TOP + fraction * (BOTTOM - TOP)
    got = filled(_on(rows, level), _on(rows, level), (0, 1))
    assert np.array_equal(got.level, level)
    assert np.array_equal(np.isfinite(got.u), np.isfinite(fraction))
