"""A trace's line style read from the marks of ink along it (`ink.marks_style`), on hand-drawn strokes: the
reading that holds where a curve moves several rows a column, and its limits."""

from __future__ import annotations

import math

import numpy as np

from veernet_core.digitise.ink import (
    MARK_STYLES,
    ScanPixels,
    looks_along,
    marks_evidence,
    marks_style,
    page_of,
    style_label,
)
from veernet_core.digitise.marks import marks_along

HEIGHT, WIDTH = 160, 1200
PAPER = 225


def _path(zigzag: float) -> np.ndarray:
    """Centre row per column: a slow swing, and a saw of `zigzag` rows each column up, up, down, down (a
    noisy tool's reading drawn at full resolution)."""
    cols = np.arange(WIDTH)
    return 80 + 30 * np.sin(cols / 90.0) + zigzag * np.array([0.0, 1.0, 2.0, 1.0])[cols % 4]


def _draw(rows: np.ndarray, pattern: tuple[float, float] | None, gray: int = 30, pen: float = 1.0,
          faint_steep: int | None = None) -> np.ndarray:
    """The polyline through (column, row) drawn with a round pen of radius `pen`, inked along its path in
    `pattern` (ink length, gap length in pixels of path; None: solid); with `faint_steep`, the stretches
    between two columns that move more than 3 rows drawn at that gray instead (a fast pen's light stroke)."""
    image = np.full((HEIGHT, WIDTH), PAPER, dtype=np.uint8)
    x0, y0 = np.arange(WIDTH - 1, dtype=np.float64), rows[:-1]
    dy = np.diff(rows)
    arc_start = np.concatenate([[0.0], np.cumsum(np.hypot(1.0, dy))])[:-1]
    for i in range(WIDTH - 1):
        length = float(np.hypot(1.0, dy[i]))
        t = np.linspace(0.0, 1.0, int(np.ceil(length * 4)) + 1)
        s = arc_start[i] + t * length
        if pattern is not None:
            t = t[(s % (pattern[0] + pattern[1])) < pattern[0]]
        tone = faint_steep if faint_steep is not None and abs(dy[i]) > 3 else gray
        for x, y in zip(x0[i] + t, y0[i] + t * dy[i], strict=True):
            r0, r1 = int(np.floor(y - pen)), int(np.ceil(y + pen))
            c0, c1 = int(np.floor(x - pen)), int(np.ceil(x + pen))
            for r in range(max(r0, 0), min(r1, HEIGHT - 1) + 1):
                for c in range(max(c0, 0), min(c1, WIDTH - 1) + 1):
                    if (r - y) ** 2 + (c - x) ** 2 <= pen * pen + 0.25:
                        image[r, c] = min(image[r, c], tone)
    return image


def _readings(image: np.ndarray, rows: np.ndarray, bridge: int = 0) -> tuple[str, str | None]:
    """(the looks' style column by column over the whole trace, the marks' style)."""
    scan = ScanPixels(image)
    page = page_of(scan, 20.0, 140.0)
    cols = np.arange(WIDTH)
    look = looks_along(scan, page, rows, cols, 2, [(0, WIDTH)])[0]
    assert look is not None
    marked = marks_style(scan, page, rows, cols, 2, bridge)
    return style_label(look), None if marked is None else marked.style


def test_a_dashed_curve_that_moves_rows_a_column_reads_dashed_by_its_marks_not_by_its_columns() -> None:
    rows = _path(4.0)
    looked, marked = _readings(_draw(rows, (40.0, 14.0)), rows)
    assert looked == "solid"  # every column holds ink: the gaps fall between columns on the zigzag
    assert marked == "dashed"


def test_the_marks_read_calm_curves_as_the_columns_do() -> None:
    rows = _path(0.0)
    assert _readings(_draw(rows, None), rows) == ("solid", "solid")
    assert _readings(_draw(rows, (40.0, 14.0)), rows) == ("dashed", "dashed")
    assert _readings(_draw(rows, (1.0, 11.0)), rows)[1] == "dotted"


def test_a_solid_curve_whose_steep_strokes_are_faint_is_not_read_broken() -> None:
    rows = 80 + 40 * np.sin(np.arange(WIDTH) / 8.0)  # steep (5 rows a column) where it crosses the middle
    image = _draw(rows, None, faint_steep=PAPER - 10)  # lighter than scanner noise: gone
    scan = ScanPixels(image)
    track = marks_along(image, page_of(scan, 20.0, 140.0).paper, rows, np.arange(WIDTH), 2, 0, 18.0)
    assert np.count_nonzero(np.diff(track.label[track.label >= 0])) > 20  # the faint strokes break it
    assert _readings(image, rows)[1] == "solid"  # but only where it is steep, which a solid pen may leave faint


def test_marks_join_across_a_bridge_of_paper_and_not_across_the_trace_s_missing_columns() -> None:
    image = np.full((HEIGHT, WIDTH), PAPER, dtype=np.uint8)
    image[79:81, :] = 30
    image[:, 300:302] = PAPER  # a 2-px cut (a grid line taken off a thin stroke)
    rows = np.full(WIDTH, 80.0)
    cols = np.arange(WIDTH)
    paper = np.full(WIDTH, float(PAPER))
    cut = marks_along(image, paper, rows, cols, 2, 0, 18.0)
    assert len(set(cut.label.tolist()) - {-1}) == 2
    bridged = marks_along(image, paper, rows, cols, 2, 2, 18.0)
    assert len(set(bridged.label.tolist()) - {-1}) == 1
    # Columns the trace lacks (another curve touched it there) are no break.
    scan = ScanPixels(image)
    away = np.concatenate([np.arange(0, 500), np.arange(540, WIDTH)])
    marked = marks_style(scan, page_of(scan, 20.0, 140.0), rows[away], away, 2, 2)
    assert marked is not None and marked.style == "solid" and marked.breaks == 0


def _warnings(image: np.ndarray, style: str) -> tuple[str, ...]:
    """The warnings of the one curve of a hand-drawn track read from a perfect mask of its ink, its legend
    declaring `style`."""
    from veernet_core.digitise.calibration import Calibration
    from veernet_core.digitise.curves import digitise

    ink = (image < PAPER - 40).astype(np.float32)
    calibration = Calibration.from_dict(
        {"depth": {"top": 1000.0, "bottom": 1120.0, "unit": "m"}, "track_top": 20.0, "track_bottom": 140.0,
         "step": 0.1, "curves": [{"mnemonic": "GR", "unit": "API", "left": 0, "right": 150, "style": style}]},
        HEIGHT, WIDTH)
    return digitise(np.stack([1.0 - ink, ink]), calibration, scan=ScanPixels(image)).curves[0].warnings


def test_a_style_hint_is_held_against_the_scan_only_where_both_readings_reject_it() -> None:
    """The looks alone would warn against the right hint of a dashed curve that moves rows a column. The
    price: the same curve declared solid is not warned either (the looks agree with the hint)."""
    rows = _path(4.0)
    dashed = _draw(rows, (40.0, 14.0))
    assert _warnings(dashed, "dashed") == ()  # the columns read it solid, its marks dashed: no warning
    assert _warnings(dashed, "solid") == ()
    calm = _path(0.0)
    solid = _warnings(_draw(calm, (40.0, 14.0)), "solid")
    assert len(solid) == 1 and "declared style solid" in solid[0] and "looks dashed" in solid[0]
    assert "read dashed" in solid[0]  # what the marks read, in the warning
    assert _warnings(_draw(calm, None), "solid") == ()
    dotted = _warnings(_draw(calm, None), "dotted")  # both read the solid line solid
    assert len(dotted) == 1 and "looks solid" in dotted[0]


def test_a_hint_the_two_readings_reject_differently_is_not_borne_out_and_its_name_is_in_doubt_unless_the_inks_order_it(
) -> None:
    """The dashed curve that moves rows a column, declared dotted: its columns read it solid, its marks
    dashed. Neither reading shows a dotted curve, nor do they show the same thing, so the result says the
    hint is not borne out and what each read, not that the scan shows a solid curve. As for a contradiction,
    the names that the looks' reading could swap are in doubt, unless the two traces ink their lengths in the
    order of their declared styles (`identity._inked_in_order`): beside a solid curve that inks every column,
    the curve declared dotted inks fewer, and a swap would turn that round."""
    from veernet_core.digitise.calibration import Calibration
    from veernet_core.digitise.curves import digitise

    rows = _path(4.0)
    assert _readings(_draw(rows, (40.0, 14.0)), rows) == ("solid", "dashed")
    said = _warnings(_draw(rows, (40.0, 14.0)), "dotted")
    assert len(said) == 1 and said[0].startswith("declared style dotted, not borne out: the trace named GR"), said
    assert "looks solid by its columns" in said[0] and "and dashed by its marks" in said[0], said
    assert ", but the trace named" not in said[0]

    calm = 25.0 + 10.0 * np.arange(WIDTH) / WIDTH  # a solid curve above it, never touching it
    image = np.minimum(_draw(rows, (40.0, 14.0)), _draw(calm, None))
    ink = (image < PAPER - 40).astype(np.float32)
    calibration = Calibration.from_dict(
        {"depth": {"top": 1000.0, "bottom": 1120.0, "unit": "m"}, "track_top": 20.0, "track_bottom": 140.0,
         "step": 0.1, "curves": [{"mnemonic": "GR", "unit": "API", "left": 0, "right": 150, "style": "dotted"},
                                 {"mnemonic": "SP", "unit": "mV", "left": 0, "right": 150, "style": "solid"}]},
        HEIGHT, WIDTH)
    result = digitise(np.stack([1.0 - ink, ink]), calibration, scan=ScanPixels(image))
    gr, sp = result.curves
    assert any("not borne out" in w for w in gr.warnings) and sp.warnings == (), (gr.warnings, sp.warnings)
    assert (gr.identity, sp.identity) == ("hinted", "hinted")
    # Where the order does not bear the names out, the pair stays in doubt: `tests/core/test_identity.py`,
    # test_a_style_misread_flags_no_pair_whose_shares_of_ink_follow_their_styles.


def test_the_marks_of_a_trace_split_over_its_columns_sum_to_the_marks_reading() -> None:
    """`marks_evidence` spreads the marks' log-likelihood over the columns (a break at the column after it, a
    mark passed wholly over its columns): the whole trace's sum is what `marks_style` reads, and a dash's
    breaks speak in the columns where they are, however the columns are cut into stretches."""
    rows = _path(4.0)
    image = _draw(rows, (40.0, 14.0))
    scan = ScanPixels(image)
    page = page_of(scan, 20.0, 140.0)
    cols = np.arange(WIDTH)
    marks = marks_evidence(scan, page, rows, cols, 2, 0)
    assert marks.loglik.shape == (WIDTH, len(MARK_STYLES))
    reading = marks_style(scan, page, rows, cols, 2, 0)
    assert reading is not None and reading.breaks == marks.breaks > 20
    assert MARK_STYLES[int(marks.loglik.sum(axis=0).argmax())] == reading.style == "dashed"
    solid, dashed = MARK_STYLES.index("solid"), MARK_STYLES.index("dashed")
    favour = marks.loglik[:, dashed] - marks.loglik[:, solid]  # per column: for the dashed style
    pieces = favour[: WIDTH // 10 * 10].reshape(-1, 10).sum(axis=1)  # 10-column stretches
    assert np.count_nonzero(pieces > 0) >= 0.3 * pieces.size  # those with a break in them say dashed
    assert pieces.sum() > 20.0


def test_the_marks_speak_for_each_declared_style_in_the_stretches_they_run_through() -> None:
    """A solid and a dashed curve of one ink, both moving several rows a column (every column of the dashed
    one holds ink), cut into 10-column stretches as a jagged track is: in each stretch where the dashed
    curve's trace passes a break, the marks speak for naming that trace after the dashed curve by at least a
    break's odds (a broken style's rate against a solid one's), and over the track for naming both right."""
    from veernet_core.digitise.calibration import Calibration
    from veernet_core.digitise.identity import _add_marks
    from veernet_core.digitise.ink import BREAK_RATE
    from veernet_core.digitise.tracer import ColumnTrace

    cols = np.arange(WIDTH)
    saw = 4.0 * np.array([0.0, 1.0, 2.0, 1.0])[cols % 4]
    centres = [40 + 10 * np.sin(cols / 90.0) + saw, 110 + 10 * np.sin(cols / 70.0) + saw]  # apart all along
    image = np.minimum(_draw(centres[0], None), _draw(centres[1], (40.0, 14.0)))
    calibration = Calibration.from_dict(
        {"depth": {"top": 1000.0, "bottom": 1120.0, "unit": "m"}, "track_top": 15.0, "track_bottom": 145.0,
         "step": 0.1, "curves": [{"mnemonic": "SOLID", "left": 0, "right": 150, "style": "solid"},
                                 {"mnemonic": "DASHED", "left": 0, "right": 150, "style": "dashed"}]},
        HEIGHT, WIDTH)
    traces = [ColumnTrace((rows - 15.0) / 130.0, np.zeros(WIDTH, np.int8), rows, np.ones(WIDTH, np.float32),
                          np.zeros(WIDTH, bool)) for rows in centres]
    scan = ScanPixels(image)
    page = page_of(scan, 15.0, 145.0)
    assert style_label(looks_along(scan, page, centres[1], cols, 2, [(0, WIDTH)])[0]) == "solid"  # by its columns
    bounds = [(a, a + 10) for a in range(0, WIDTH, 10)]
    evidence = [np.zeros((2, 2)) for _ in bounds]
    _add_marks(evidence, calibration.curves, scan, page, traces, bounds, np.zeros(WIDTH, bool), 2, 0)
    right = np.array([e[0, 0] + e[1, 1] for e in evidence])
    swapped = np.array([e[0, 1] + e[1, 0] for e in evidence])
    breaks = marks_evidence(scan, page, centres[1], cols, 2, 0)
    broken = [s for s, (a, b) in enumerate(bounds)
              if np.any(breaks.loglik[a:b, MARK_STYLES.index("solid")] < math.log(BREAK_RATE["solid"]) + 1)]
    assert len(broken) >= 10
    odds = math.log(BREAK_RATE["dashed"] / BREAK_RATE["solid"])
    assert np.all(right[broken] - swapped[broken] >= odds - 1.0)
    assert right.sum() - swapped.sum() > 20 * odds
