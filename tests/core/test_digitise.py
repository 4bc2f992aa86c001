"""Curve extraction on probability maps whose curves are known exactly."""

from __future__ import annotations

import dataclasses
import io
import itertools
import math
from typing import NamedTuple

import numpy as np
import pytest

from veernet_core.digitise import tracer as tracer_module
from veernet_core.digitise import tracer_loop
from veernet_core.digitise.calibration import Calibration, CalibrationError, CurveScale, DepthScale
from veernet_core.digitise.calibration_fields import LEGACY_WRAP
from veernet_core.digitise.curves import depth_grid, digitise, trace_channels
from veernet_core.digitise.joint import CurveHint, trace_joint
from veernet_core.digitise.tracer import ColumnTrace, TraceOptions, trace_curves
from veernet_core.synth import SynthLog, generate

HEIGHT, WIDTH, TOP, BOTTOM = 64, 400, 4.0, 59.0


def tent_map(rows: np.ndarray, height: int = HEIGHT) -> np.ndarray:
    """Probability 1 - |row - centre| on the two pixels around each column's centre: a map whose
    probability-weighted centroid is exactly the centre (NaN rows: no curve in that column)."""
    prob = np.zeros((height, rows.size), dtype=np.float32)
    grid = np.arange(height, dtype=np.float64)[:, None]
    weights = np.clip(1.0 - np.abs(grid - rows[None, :]), 0.0, 1.0)
    prob[:] = np.where(np.isfinite(rows)[None, :], weights, 0.0)
    return prob


def smooth_rows(width: int = WIDTH, low: float = 0.2, high: float = 0.8) -> np.ndarray:
    """A gently winding curve between two track fractions, as image rows."""
    x = np.arange(width) / width
    fraction = low + (high - low) * (0.5 + 0.5 * np.sin(2 * math.pi * 1.5 * x + 0.3))
    return TOP + fraction * (BOTTOM - TOP)


def fraction_of(rows: np.ndarray) -> np.ndarray:
    return (rows - TOP) / (BOTTOM - TOP)


def calibration(*curves: CurveScale, step: float = 0.5, width: int = WIDTH) -> Calibration:
    return Calibration(DepthScale.from_ends(1000.0, 1000.0 + (width - 1) * 0.25, "m", width), curves,
                       TOP, BOTTOM, step)


def two_class(prob: np.ndarray) -> np.ndarray:
    """A binary model's output: (background, curve)."""
    return np.stack([1.0 - prob, prob])


def test_perfect_probabilities_give_the_curve_to_a_tiny_tolerance() -> None:
    rows = smooth_rows()
    (trace,) = trace_curves(tent_map(rows), TOP, BOTTOM)
    np.testing.assert_allclose(trace.row, rows, atol=1e-6)
    np.testing.assert_allclose(trace.u, fraction_of(rows), atol=1e-7)
    assert not trace.bridged.any() and not trace.wrapped.any()
    assert (trace.confidence >= 0.5).all()  # the tent peaks at 0.5 when the centre falls between two rows


def test_values_on_linear_and_log_scales_are_read_exactly() -> None:
    rows = smooth_rows()
    gr = CurveScale("GR", "API", 0.0, 150.0)
    ild = CurveScale("ILD", "ohm.m", 0.2, 2000.0, log=True)
    for scale, expected in ((gr, 150.0 * fraction_of(rows)), (ild, 0.2 * 10 ** (4 * fraction_of(rows)))):
        result = digitise(two_class(tent_map(rows)), calibration(scale, step=0.25))
        np.testing.assert_allclose(result.depth, 1000.0 + 0.25 * np.arange(WIDTH))
        np.testing.assert_allclose(result.curves[0].values, expected, rtol=1e-6, atol=1e-6)


def test_resampling_interpolates_between_columns_on_a_regular_step() -> None:
    rows = smooth_rows()
    result = digitise(two_class(tent_map(rows)), calibration(CurveScale("GR", "API", 0.0, 100.0), step=0.1))
    assert np.allclose(np.diff(result.depth), 0.1)
    assert result.depth[0] == 1000.0 and result.depth[-1] == pytest.approx(1099.7)  # last column: 1099.75
    cols = (result.depth - 1000.0) / 0.25
    np.testing.assert_allclose(result.curves[0].values, 100.0 * np.interp(cols, np.arange(WIDTH), fraction_of(rows)),
                               atol=1e-9)


def test_depth_grid_is_multiples_of_the_step_inside_the_scan() -> None:
    grid = depth_grid(DepthScale("ft", 0.0, 1234.56, 999.0, 2345.67), 1000, 0.5)
    assert grid[0] == 1235.0 and grid[-1] == 2345.5
    assert np.all(np.mod(grid * 2, 1) == 0)


def test_short_gaps_are_bridged_and_long_gaps_stay_null() -> None:
    rows = smooth_rows()
    holed = rows.copy()
    holed[100:110] = np.nan  # shorter than max_gap
    holed[200:300] = np.nan  # longer
    (trace,) = trace_curves(tent_map(holed), TOP, BOTTOM, options=TraceOptions(max_gap=32))
    assert trace.bridged[100:110].all() and not trace.bridged[:100].any()
    assert np.abs(trace.row[100:110] - rows[100:110]).max() < 0.5  # a straight bridge under a gentle curve
    assert np.isnan(trace.u[200:300]).all()
    assert np.isfinite(trace.u[300:]).all()  # found again after the long gap
    assert (trace.confidence[100:110] < trace.confidence[99]).all()


def test_a_curve_that_starts_on_a_steep_stroke_is_traced_from_its_first_column() -> None:
    """The first columns of a steep stretch are far apart by centre but touch (8-connected): one stroke."""
    rows = smooth_rows()
    prob = tent_map(rows)
    prob[:, :3] = 0.0
    for col, (lo, hi) in enumerate([(10, 15), (15, 25), (25, int(rows[3]))]):
        prob[lo : hi + 1, col] = 1.0
    (trace,) = trace_curves(prob, TOP, BOTTOM)
    assert np.isfinite(trace.u).all() and not trace.bridged.any()
    assert trace.row[0] == pytest.approx(12.5, abs=0.5)
    np.testing.assert_allclose(trace.row[4:], rows[4:], atol=1e-6)


def test_two_curves_crossing_keep_their_identity() -> None:
    x = np.arange(WIDTH, dtype=np.float64)
    falling = TOP + (0.1 + 0.8 * x / WIDTH) * (BOTTOM - TOP)
    rising = TOP + (0.9 - 0.8 * x / WIDTH) * (BOTTOM - TOP)
    prob = np.maximum(tent_map(falling), tent_map(rising))
    upper, lower = trace_curves(prob, TOP, BOTTOM, count=2)  # ordered by mean position
    first, second = (upper, lower) if upper.row[0] < lower.row[0] else (lower, upper)
    away = np.abs(falling - rising) > 3  # centroids of merged runs are not exact at the crossing itself
    np.testing.assert_allclose(first.row[away], falling[away], atol=1e-6)
    np.testing.assert_allclose(second.row[away], rising[away], atol=1e-6)


def _noisy_single_curve(seed: int, width: int = 600) -> np.ndarray:
    """One wrapping, stepping curve with short and long gaps among specks, some right beside it: a map
    on which a trace meets near and far candidates, ties, wraps and restarts."""
    rng = np.random.default_rng(seed)
    x = np.arange(width, dtype=np.float64)
    fraction = 0.5 + 0.75 * np.sin(2 * math.pi * x / rng.uniform(150, 400) + rng.uniform(0, 2 * math.pi))
    fraction[width // 3:] += rng.choice([-0.15, 0.15])  # a bed step
    rows = TOP + np.mod(fraction, 1.0) * (BOTTOM - TOP)  # past an edge the curve comes back at the other
    for _ in range(6):
        start = int(rng.integers(0, width - 10))
        rows[start : start + int(rng.integers(1, 10))] = np.nan
    long_gap = int(rng.integers(0, width - 60))  # longer than max_gap: the trace goes idle and starts again
    prob = tent_map(rows)
    for col in range(width):
        for _ in range(int(rng.poisson(2.0))):
            centre = rows[col] + rng.uniform(-5, 5) if np.isfinite(rows[col]) and rng.random() < 0.4 \
                else rng.uniform(0, HEIGHT - 1)
            lo = int(np.clip(round(centre), 0, HEIGHT - 1))
            speck = prob[lo : lo + int(rng.integers(1, 4)), col]
            speck[:] = np.maximum(speck, rng.uniform(0.5, 1.0))
    prob[:, long_gap : long_gap + 50] = 0.0  # blank paper: no speck to follow across it either
    return prob


def _assert_same_traces(got: list[ColumnTrace], want: list[ColumnTrace]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        for name in ("u", "level", "row", "confidence", "bridged"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_a_one_trace_channel_takes_the_runs_the_general_search_takes() -> None:
    """A trace alone in its channel takes its cheapest run without the search over combinations; the
    search must give exactly the same trace on noisy maps that wrap, bridge gaps and lose the curve."""
    for seed in range(12):
        prob = _noisy_single_curve(seed)
        fast, assigned, searched = tracer_module._traced(prob, TOP, BOTTOM, 1, TraceOptions())
        slow, assigned_slow, searched_slow = tracer_module._traced(prob, TOP, BOTTOM, 1, TraceOptions(), searched=True)
        assert searched == 0 and assigned > 0.8 * prob.shape[1]
        assert searched_slow == assigned_slow == assigned
        assert fast[0].wrapped.any() and fast[0].bridged.any() and np.isnan(fast[0].u).any()  # what the map has
        _assert_same_traces(fast, slow)


def test_several_traces_take_the_runs_the_general_search_takes() -> None:
    """Where every trace's cheapest run is its own, each takes it without the search over combinations;
    on noisy maps of two and three curves that cross, wrap and break off, the traces must be exactly
    those of the search in every column."""
    quick, total = 0, 0
    for seed in range(6):
        for count in (2, 3):
            prob = np.maximum.reduce([_noisy_single_curve(3 * seed + k) for k in range(count)])
            fast, assigned, searched = tracer_module._traced(prob, TOP, BOTTOM, count, TraceOptions())
            slow, _, _ = tracer_module._traced(prob, TOP, BOTTOM, count, TraceOptions(), searched=True)
            quick, total = quick + assigned - searched, total + assigned
            assert 0 < searched < 0.5 * assigned  # both ways were taken
            _assert_same_traces(fast, slow)
    assert quick > 0.5 * total


def _relevel_by_loops(fraction: np.ndarray, level_cost: float,
                      levels: tuple[int, ...] = (-1, 0, 1)) -> tuple[np.ndarray, np.ndarray]:
    """The wrap levels' Viterbi as plain Python loops over the states (what `tracer_loop.wrap_levels` compiles),
    a state not among `levels` never taken."""
    cols = np.nonzero(np.isfinite(fraction))[0]
    level = np.zeros(fraction.shape, dtype=np.int8)
    if cols.size == 0:
        return fraction.copy(), level
    states = (-1, 0, 1)
    f = fraction[cols].tolist()
    cost = [level_cost * abs(s) if s in levels else math.inf for s in states]
    spans = np.diff(cols).tolist()
    back = []
    for i in range(1, len(f)):
        came, step = [0, 0, 0], [0.0, 0.0, 0.0]
        for n, s in enumerate(states):
            moved = f[i] + s - f[i - 1]
            j, best = 0, cost[0] + abs(moved - states[0])
            for m in (1, 2):
                option = cost[m] + abs(moved - states[m])
                if option < best:
                    j, best = m, option
            step[n], came[n] = best + level_cost * abs(s) * spans[i - 1] if s in levels else math.inf, j
        cost = step
        back.append(came)
    j = min(range(3), key=cost.__getitem__)
    chosen = [j]
    for links in reversed(back):
        j = links[j]
        chosen.append(j)
    level[cols] = [states[j] for j in reversed(chosen)]
    return fraction + level, level


def test_the_compiled_wrap_levels_are_those_of_plain_loops() -> None:
    rng = np.random.default_rng(11)
    for _ in range(500):
        n = int(rng.integers(1, 120))
        fraction = np.mod(np.cumsum(rng.normal(0, rng.choice([0.01, 0.1, 0.4]), n)) + rng.uniform(), 1.0)
        if rng.random() < 0.5:
            fraction = np.round(fraction * 40) / 40  # ties
        fraction[rng.random(n) < 0.2] = np.nan
        level_cost = float(rng.choice([0.0, 0.001, 0.05]))
        levels = [(-1, 0, 1), (0, -1), (0, 1), (0,)][int(rng.integers(4))]
        got = tracer_module._relevel(fraction, level_cost, levels)
        want = _relevel_by_loops(fraction, level_cost, levels)
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[0], want[0])
        assert set(np.unique(got[1][np.isfinite(fraction)]).tolist()) <= set(levels)


class _Pick(NamedTuple):
    run: int
    shift: int
    cost: float
    far: bool


def _every_combination(options: list[list[_Pick]]) -> tuple[_Pick | None, ...]:
    """The assignment of runs to traces by trying every combination in turn: the most picks on distinct
    runs, then the least summed cost, then the first."""
    best: tuple[_Pick | None, ...] = (None,) * len(options)
    best_key = (0, 0.0)
    ranked = [[None, *sorted(opts, key=lambda p: p.cost)[: tracer_loop.CHOICES]] for opts in options]
    for combo in itertools.product(*ranked):
        runs_used = [p.run for p in combo if p is not None]
        if len(set(runs_used)) < len(runs_used):
            continue
        key = (-len(runs_used), sum(p.cost for p in combo if p is not None))
        if key < best_key:
            best, best_key = combo, key
    return best


def _compiled_combination(options: list[list[_Pick]]) -> tuple[_Pick | None, ...]:
    """`tracer_loop.best_combination` on the candidate tables the tracer builds from `options`."""
    rows = max([len(opts) for opts in options] + [1])
    picks = np.zeros((len(options), rows, 3), dtype=np.int64)
    costs = np.zeros((len(options), rows))
    for t, opts in enumerate(options):
        for i, pick in enumerate(opts):
            picks[t, i] = pick.run, pick.shift, int(pick.far)
            costs[t, i] = pick.cost
    chosen = np.full(len(options), -1, dtype=np.int64)
    tracer_loop.best_combination(picks, costs, np.array([len(o) for o in options], dtype=np.int64), chosen)
    return tuple(options[t][i] if i >= 0 else None for t, i in enumerate(chosen.tolist()))


def test_the_assignment_of_runs_to_traces_is_that_of_trying_every_combination() -> None:
    """Two to four traces, a few candidates each, often on the same runs and at equal costs (ties must
    go to the combination the exhaustive search meets first)."""
    rng = np.random.default_rng(5)
    for _ in range(3000):
        traces, runs = int(rng.integers(2, 5)), int(rng.integers(1, 6))
        options = [[_Pick(int(rng.integers(0, runs)), int(rng.integers(-1, 2)),
                          float(rng.choice([0.0, 0.05, 0.1, 0.25, 1.0, 1.05])) + float(rng.random() < 0.3)
                          * float(rng.random()), bool(rng.random() < 0.3))
                    for _ in range(int(rng.integers(0, 7)))] for _ in range(traces)]
        assert _compiled_combination(options) == _every_combination(options), options


def test_sums_are_numpys_own() -> None:
    """The tracer's sums of a run's weights, as NumPy sums them (pairwise, in blocks), to the last bit."""
    rng = np.random.default_rng(8)
    for n in [*range(0, 300), 1000, 4097]:
        values = rng.random(n + 5) * 10.0 ** rng.uniform(-3, 3, n + 5)
        assert tracer_loop._pairwise_sum(values, 3, n) == values[3 : 3 + n].sum(), n


def _wrapping_log() -> SynthLog:
    """A held-out synthetic log with one curve that wraps onto its backup scale."""
    for index in range(200):
        log = generate(424242, index, 0.1, classes=2)
        if len(log.curves) == 1 and log.curves[0].wrapped.sum() > 20 and not log.curves[0].dashed:
            return log
    raise AssertionError("no wrapping single-curve log in the first 200 of the held-out seed")


def _log_calibration(log: SynthLog, wrap: int) -> Calibration:
    """The log's calibration with the wrap given in the older integer form (1 right, -1 left, 0 none)."""
    s = log.curves[0].scale
    width = log.image.shape[1]
    depth = DepthScale.from_ends(log.depth.top, log.depth.bottom, log.depth.unit, width)
    step = float(depth.depth_of(1) - depth.depth_of(0))
    return Calibration(depth, (CurveScale(s.mnemonic, s.unit, s.left, s.right, s.log, LEGACY_WRAP[wrap]),),
                       float(log.track[0]), float(log.track[1]), step)


def test_wrap_around_is_flagged_and_read_on_the_backup_scale() -> None:
    log = _wrapping_log()
    curve = log.curves[0]
    assert curve.backup_scale is not None
    direction = 1 if curve.backup_scale.left == curve.scale.right else -1
    probs = two_class((log.mask == 1).astype(np.float32))  # the generator's mask: a perfect segmenter
    result = digitise(probs, _log_calibration(log, direction)).curves[0]
    inked = curve.inked
    assert result.trace.wrapped[curve.wrapped & inked].mean() > 0.9
    assert not result.trace.wrapped[~curve.wrapped & inked].any()
    error_rows = np.abs(result.trace.row - curve.row)[inked]
    assert np.nanmax(error_rows) <= 0.5 + 1e-9  # a mask column's centroid is within half a pixel of the stroke
    # Read on the backup scale, one track width on: the value error is the row error in value units.
    scale = _log_calibration(log, direction).curves[0]
    on_backup = inked & curve.wrapped
    values = scale.to_value(result.trace.u[on_backup])
    value_range = abs(curve.scale.right - curve.scale.left)
    track_rows = log.track[1] - log.track[0]
    assert np.abs(values - curve.values[on_backup]).max() <= 0.5 / track_rows * value_range + 1e-6
    assert np.isfinite(result.values[result.wrapped]).all()  # resampled values on the backup are kept


def test_a_wrap_where_none_is_declared_is_read_on_the_primary_scale_and_flagged_never_nulled() -> None:
    log = _wrapping_log()
    probs = two_class((log.mask == 1).astype(np.float32))
    result = digitise(probs, _log_calibration(log, wrap=0)).curves[0]
    assert (result.trace.wrapped & log.curves[0].inked).sum() > 20
    assert result.wrap_unexpected.any() and not result.wrapped.any()
    assert np.isfinite(result.values[result.wrap_unexpected]).all(), "no null stretch where the wrap was undeclared"
    assert np.isfinite(result.values).mean() > 0.95
    # Read where it is drawn: inside the primary scale's range.
    scale = log.curves[0].scale
    lo, hi = sorted((scale.left, scale.right))
    drawn = result.values[result.wrap_unexpected]
    assert ((drawn >= lo - 0.02 * (hi - lo)) & (drawn <= hi + 0.02 * (hi - lo))).all()


def test_a_wrap_on_both_sides_reads_each_side_on_its_backup_scale() -> None:
    log = _wrapping_log()
    curve = log.curves[0]
    assert curve.backup_scale is not None
    direction = 1 if curve.backup_scale.left == curve.scale.right else -1
    probs = two_class((log.mask == 1).astype(np.float32))
    one_side = digitise(probs, _log_calibration(log, direction)).curves[0]
    both = digitise(probs, dataclasses.replace(_log_calibration(log, direction), curves=(dataclasses.replace(
        _log_calibration(log, direction).curves[0], wrap="both"),))).curves[0]
    np.testing.assert_array_equal(both.values, one_side.values)
    assert both.wrapped.sum() > 20 and not both.wrap_unexpected.any()


def test_a_synthetic_log_with_perfect_probabilities_is_read_within_half_a_pixel() -> None:
    log = next(g for g in (generate(424242, i, 0.1, classes=2) for i in range(50))
               if len(g.curves) == 1 and not g.curves[0].wrapped.any() and not g.curves[0].dashed)
    probs = two_class((log.mask == 1).astype(np.float32))
    result = digitise(probs, _log_calibration(log, 0)).curves[0]
    inked = log.curves[0].inked
    assert np.isfinite(result.trace.row[inked]).all()
    assert np.abs(result.trace.row - log.curves[0].row)[inked].max() <= 0.5 + 1e-9


def test_multiclass_probabilities_read_one_curve_per_channel() -> None:
    rows_a, rows_b = smooth_rows(low=0.1, high=0.4), smooth_rows(low=0.6, high=0.9)
    probs = np.stack([np.zeros((HEIGHT, WIDTH), np.float32), tent_map(rows_b), tent_map(rows_a)])
    result = digitise(probs, calibration(CurveScale("A", "u", 0, 1), CurveScale("B", "u", 0, 1), step=0.25))
    np.testing.assert_allclose(result.curves[0].values, fraction_of(rows_b), atol=1e-6)
    np.testing.assert_allclose(result.curves[1].values, fraction_of(rows_a), atol=1e-6)


def _clear_of(own: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Columns where `own` pixels form one run with no `other` pixel in it or next to it."""
    height, width = own.shape
    first, last = own.argmax(axis=0), height - 1 - own[::-1].argmax(axis=0)
    one_run = own.any(axis=0) & (own.sum(axis=0) == last - first + 1)
    below = np.concatenate([np.zeros((1, width), np.int64), np.cumsum(other, axis=0)])
    cols = np.arange(width)
    return one_run & (below[np.minimum(last + 2, height), cols] - below[np.maximum(first - 1, 0), cols] == 0)


def test_a_dashed_second_curve_is_read_from_its_own_channel_across_its_gaps() -> None:
    """Multiclass probabilities of two-curve synthetic logs (the generator's mask: a perfect segmenter):
    each curve comes from its own class channel, so crossings cannot swap them, and the second curve's
    dash gaps, bare paper in the mask, are bridged."""
    logs = [g for g in (generate(424242, i, 0.1, classes=3) for i in range(120))
            if len(g.curves) == 2 and not any(c.wrapped.any() for c in g.curves)
            and g.curves[0].style == "solid" and g.curves[1].style != "solid"][:3]
    assert len(logs) == 3
    for log in logs:
        probs = np.stack([(log.mask == c).astype(np.float32) for c in range(3)])
        result = digitise(probs, Calibration.from_dict(log.calibration(), *log.image.shape))
        assert [c.mnemonic for c in result.curves] == [c.mnemonic for c in log.curves]
        solid, dashed = log.curves
        assert not solid.dashed and dashed.dashed
        for k, curve in enumerate(log.curves):
            trace = result.curves[k].trace
            alone = curve.inked & _clear_of(log.mask == k + 1, log.mask == 2 - k)
            assert alone.sum() > 0.5 * curve.inked.sum()
            # A thick dash's end can leave a column or two unread; every column read is within half a pixel.
            assert np.isfinite(trace.row[alone]).mean() > 0.99
            assert np.nanmax(np.abs(trace.row - curve.row)[alone]) <= 0.5 + 1e-9
            valued = np.isfinite(curve.values)
            assert np.isfinite(trace.u)[valued].mean() > 0.97
        trace = result.curves[1].trace
        found = np.flatnonzero(np.isfinite(trace.u) & ~trace.bridged)
        gaps = np.flatnonzero(np.isfinite(dashed.values) & ~dashed.inked)
        inner = gaps[(gaps > found[0]) & (gaps < found[-1])]
        assert inner.size > 0.2 * dashed.values.size  # a gap every few columns...
        assert trace.bridged[inner].all() and np.isfinite(trace.u[inner]).all()  # ...and every one bridged


@pytest.mark.parametrize(("data", "field"), [
    ({"depth": {"top": 1200, "bottom": 1000, "unit": "m"}}, "depth.bottom"),
    ({"depth": {"ticks": [[10, 500], [300, 400]], "unit": "m"}}, "depth.ticks[1]"),
    ({"depth": {"ticks": [[10, 500]], "unit": "m"}}, "depth.ticks"),
    ({"depth": {"top": 1000, "bottom": 1200}}, "depth.unit"),
    ({"curves": [{"mnemonic": "ILD", "unit": "ohm.m", "left": 0, "right": 2000, "log": True}]}, "curves[0].left"),
    ({"curves": [{"mnemonic": "ILD", "unit": "ohm.m", "left": 0.2, "right": -1, "log": True}]}, "curves[0].right"),
    ({"curves": [{"mnemonic": "GR", "unit": "API", "left": 0, "right": 0}]}, "curves[0].right"),
    ({"curves": [{"mnemonic": "GR", "unit": "API", "left": 0, "right": 150, "wrap": 2}]}, "curves[0].wrap"),
    ({"curves": []}, "curves"),
    ({"track_top": 40, "track_bottom": 20}, "track_bottom"),
    ({"step": 0}, "step"),
    ({"step": "0.5"}, "step"),
])
def test_nonsense_calibration_is_refused_naming_the_field(data: dict[str, object], field: str) -> None:
    good: dict[str, object] = {"depth": {"top": 1000, "bottom": 1200, "unit": "m"},
                               "curves": [{"mnemonic": "GR", "unit": "API", "left": 0, "right": 150}],
                               "track_top": 2, "track_bottom": HEIGHT - 3, "step": 0.5}
    with pytest.raises(CalibrationError) as caught:
        Calibration.from_dict({**good, **data}, HEIGHT, WIDTH)
    assert list(caught.value.errors) == [field]
    assert str(caught.value).startswith(field)


def test_a_calibration_round_trips_through_its_dict() -> None:
    data = {"depth": {"ticks": [[20, 1500.0], [380, 1590.0]], "unit": "ft"},
            "curves": [{"mnemonic": "GR", "unit": "API", "left": 0, "right": 150, "wrap": 1}],
            "track_top": 3, "track_bottom": 60, "step": 0.5}
    parsed = Calibration.from_dict(data, HEIGHT, WIDTH)
    assert parsed.depth.depth_of(20) == 1500.0 and parsed.depth.depth_of(380) == 1590.0
    assert Calibration.from_dict(parsed.to_dict(), HEIGHT, WIDTH) == parsed


def test_round_trip_through_the_bundled_model_recovers_known_curves() -> None:
    """Scan bytes -> bundled model -> curves, against the generator's truth on a held-out log."""
    from PIL import Image

    from veernet_core.digitise.predict import bundled_model_path, load_image, load_model, predict_probabilities

    model, _ = load_model(bundled_model_path())
    log = next(g for g in (generate(424242, i, 0.1, classes=2) for i in range(60))
               if len(g.curves) == 1 and not g.curves[0].wrapped.any())
    buffer = io.BytesIO()
    Image.fromarray(log.image).convert("RGB").save(buffer, format="PNG")  # colour in, as users upload
    image = load_image(buffer.getvalue())
    assert np.array_equal(image, log.image)
    cal = _log_calibration(log, 0)
    result = digitise(predict_probabilities(model, image), cal).curves[0]
    curve = log.curves[0]
    truth_fraction = (curve.row - log.track[0]) / (log.track[1] - log.track[0])
    cols = cal.depth.column_of(depth_grid(cal.depth, image.shape[1], cal.step))
    truth = np.interp(cols, np.arange(truth_fraction.size), truth_fraction, left=np.nan, right=np.nan)
    inked = np.interp(cols, np.arange(curve.inked.size), curve.inked.astype(float)) == 1.0
    found = np.isfinite(result.values)
    assert found[np.isfinite(truth)].mean() > 0.95
    scale = cal.curves[0]
    ends = np.log10([scale.left, scale.right]) if scale.log else np.array([scale.left, scale.right])
    read = ((np.log10(result.values) if scale.log else result.values) - ends[0]) / (ends[1] - ends[0])
    error = np.abs(read - truth)[found & inked]
    assert 100 * error.mean() < 1.5  # % of the track range


def _flickering_at_the_left_end(height: int, width: int, top: float, bottom: float) -> tuple[np.ndarray, np.ndarray]:
    """A curve that moves up to its scale's left end, wavers across it (drawn by the top edge on its own scale
    and by the bottom edge on its backup scale past the left) for a third of the log, and moves back: its ink
    (H, W) as the generator draws a wrap (each side of the edge drawn on its own level) and its unwrapped
    fraction per column."""
    x = np.arange(width, dtype=np.float64)
    u = (0.3 - 0.35 * np.clip(x / 200, 0, 1) + 0.35 * np.clip((x - 600) / 200, 0, 1)
         + 0.04 * np.sin(x / 3.1) + 0.02 * np.sin(x / 7.3))
    grid = np.arange(height, dtype=np.float64)[:, None]
    inside = (grid >= top) & (grid <= bottom)
    prob = np.zeros((height, width), dtype=np.float32)
    for side in (-1, 0):
        rows = top + (u - side) * (bottom - top)
        prev, nxt = np.concatenate(([rows[0]], rows[:-1])), np.concatenate((rows[1:], [rows[-1]]))
        lo = np.minimum.reduce([rows, (rows + prev) / 2, (rows + nxt) / 2]) - 1.0
        hi = np.maximum.reduce([rows, (rows + prev) / 2, (rows + nxt) / 2]) + 1.0
        prob = np.maximum(prob, ((grid >= lo[None, :]) & (grid <= hi[None, :]) & inside).astype(np.float32))
    return prob, u


def test_a_curve_alone_with_a_backup_scale_is_traced_jointly_on_a_full_resolution_track() -> None:
    """A track far taller than the joint tracer's `joint_max_rows` (a full-resolution scan's): a curve alone in
    its binary channel that declares a backup scale is still traced by the joint tracer, whose levels change
    only through the edges, for the whole log at once (bench/README.md, 2026-12-05); one that declares none
    by the column tracer, which reads an undeclared wrap where it is drawn."""
    height, width, top, bottom = 420, 900, 10.0, 410.0
    prob, u = _flickering_at_the_left_end(height, width, top, bottom)
    level = np.floor(u).astype(np.int8)
    assert (level == -1).mean() > 0.3 and bottom - top > TraceOptions().joint_max_rows
    depth = DepthScale.from_ends(1000.0, 1000.0 + (width - 1) * 0.25, "m", width)
    probs = two_class(prob)
    declared = Calibration(depth, (CurveScale("GR", "API", 0, 150, wrap="left", style="solid"),), top, bottom, 0.5)
    trace, = trace_channels(probs, declared)
    joint, = trace_joint(prob, top, bottom, [CurveHint("solid", None, (0, -1))])
    np.testing.assert_array_equal(trace.u, joint.u)
    np.testing.assert_array_equal(trace.level, joint.level)
    assert np.mean(trace.level == level) > 0.98
    assert np.mean(np.abs(trace.u - u)) < 0.002
    undeclared = Calibration(depth, (CurveScale("GR", "API", 0, 150, style="solid"),), top, bottom, 0.5)
    column, = trace_channels(probs, undeclared)
    followed, = trace_curves(prob, top, bottom, 1)
    np.testing.assert_array_equal(column.u, followed.u)
