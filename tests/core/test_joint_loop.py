"""The joint tracer's compiled loops (`joint_loop`) against the NumPy and Python code they replaced, kept here
as it was: the Viterbi's path to the last state, ties included, on random tracks of one to three levels and on a
drawn track with a wrap; the run under each path and its centre to the last bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veernet_core.digitise.joint import (
    EDGE_MARGIN,
    HOP_COST,
    INK_SPACING,
    JUMP_COST,
    LEVEL_COST,
    MOVE_COST,
    START_LEVEL_COST,
    CurveHint,
    _centres,
    _Grid,
    _grid,
    _own_cost,
    _viterbi,
    _wrap_steps,
)
from veernet_core.digitise.joint_loop import centroids, runs_under
from veernet_core.digitise.runs import RunTable


def _numpy_slopes(grid: _Grid, position: np.ndarray, n_levels: int) -> np.ndarray:
    bins = grid.ink.shape[0]
    ink = grid.ink.T.astype(np.float64)
    either = np.tile(np.maximum(ink[:-1], ink[1:]), (1, n_levels))
    along = np.minimum(either[:, :-1], either[:, 1:])
    steps = (MOVE_COST * np.diff(position))[None, :] * (1.0 - (1.0 - INK_SPACING) * along)
    steps[:, bins - 1 :: bins] += HOP_COST
    return np.concatenate([np.zeros((steps.shape[0], 1)), np.cumsum(steps, axis=1)], axis=1)


def numpy_viterbi(cost: np.ndarray, grid: _Grid, levels: tuple[int, ...], top: float,
                  span: float) -> tuple[np.ndarray, np.ndarray]:
    """`joint._viterbi` as it was written in NumPy, one column at a time."""
    width, bins = cost.shape
    n_levels = len(levels)
    f = (grid.centre - top) / span
    position = np.concatenate([(f + level) * span for level in levels])
    states = n_levels * bins
    index = np.arange(states)
    slopes = _numpy_slopes(grid, position, n_levels)
    wraps = _wrap_steps(position, bins, min(bins, max(1, math.ceil(EDGE_MARGIN * bins))))
    level_of = np.repeat(np.array(levels, dtype=np.int8), bins)
    off_level = np.repeat(np.array([LEVEL_COST * abs(level) for level in levels], dtype=np.float64), bins)
    here = np.tile(cost.astype(np.float64), (1, n_levels)) + off_level[None, :]
    back = np.zeros((width, states), dtype=np.int32)
    start = np.repeat(np.array([START_LEVEL_COST * abs(level) for level in levels], dtype=np.float64), bins)
    total = here[0] + start
    firsts = np.arange(n_levels) * bins
    for col in range(1, width):
        slope = slopes[col - 1]
        down = total - slope
        best_down = np.minimum.accumulate(down)
        from_down = np.maximum.accumulate(np.where(down == best_down, index, 0))
        up = (total + slope)[::-1]
        best_up = np.minimum.accumulate(up)
        from_up = (states - 1 - np.maximum.accumulate(np.where(up == best_up, index, 0)))[::-1]
        via_down, via_up = best_down + slope, best_up[::-1] - slope
        came = np.where(via_down <= via_up, from_down, from_up)
        moved = np.minimum(via_down, via_up)
        for sources, targets, step in zip(*wraps, strict=True):
            through = total[sources][:, None] + step
            best = np.argmin(through, axis=0)
            cheaper = through[best, np.arange(targets.size)]
            better = cheaper < moved[targets]
            moved[targets] = np.where(better, cheaper, moved[targets])
            came[targets] = np.where(better, sources[best], came[targets])
        jump = np.repeat(np.argmin(total.reshape(n_levels, bins), axis=1) + firsts, bins)
        far = total[jump] + JUMP_COST
        jumped = far < moved
        back[col] = np.where(jumped, jump, came)
        total = np.where(jumped, far, moved) + here[col]
    state = int(np.argmin(total))
    chosen = np.empty(width, dtype=np.int64)
    for col in range(width - 1, -1, -1):
        chosen[col] = state
        state = int(back[col, state])
    return chosen % bins, level_of[chosen]


@pytest.mark.parametrize("levels", [(0,), (0, 1), (-1, 0), (-1, 0, 1)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_compiled_path_is_the_numpy_path_on_random_tracks(levels: tuple[int, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    bins, width, top, span = 23, 160, 3.0, 45.0
    # Costs and ink on a coarse lattice of values, so that many moves tie exactly: ties must break alike.
    ink = (rng.integers(0, 5, size=(bins, width)) / 4).astype(np.float32)
    ink[:, rng.random(width) < 0.2] = 0.0  # gaps the path must jump
    centre = top + (np.arange(bins) + 0.5) * 2.0 - 0.5
    grid = _Grid(int(top), 2, ink, centre)
    cost = np.ascontiguousarray((rng.integers(0, 9, size=(width, bins)) / 8).astype(np.float32))
    bins_found, levels_found = _viterbi(cost, grid, levels, top, span)
    want_bins, want_levels = numpy_viterbi(cost, grid, levels, top, span)
    np.testing.assert_array_equal(bins_found, want_bins)
    np.testing.assert_array_equal(levels_found, want_levels)


def test_the_compiled_path_is_the_numpy_path_through_a_drawn_wrap() -> None:
    """A solid curve that rises through the top edge onto its backup scale past the left and comes back."""
    height, width, top, bottom = 70, 600, 4.0, 64.0
    x = np.arange(width)
    fraction = 0.4 + 0.55 * np.sin(2 * np.pi * x / 300)  # below 0 (past the left end) about column 225 only
    rows = top + np.mod(fraction, 1.0) * (bottom - top)
    prob = np.zeros((height, width), dtype=np.float32)
    for col, row in enumerate(rows):
        prob[int(round(row)) - 1 : int(round(row)) + 2, col] = 1.0
    grid = _grid(prob, top, bottom, 0.5)
    cost = _own_cost(grid, CurveHint("solid", None, (-1, 0, 1)), None)
    for levels in ((-1, 0), (-1, 0, 1)):
        found = _viterbi(cost, grid, levels, top, bottom - top)
        want = numpy_viterbi(cost, grid, levels, top, bottom - top)
        np.testing.assert_array_equal(found[0], want[0])
        np.testing.assert_array_equal(found[1], want[1])
    assert (found[1][200:250] == -1).any() and (found[1][:150] == 0).all()  # the wrap is there to be read


def _python_run_under(lo: list[int], hi: list[int], first: int, last: int, grid: _Grid, b: int) -> int:
    """`joint`'s run lookup as it was written in Python: the run of the column that covers bin `b` (the nearest
    one touching the bin's rows), or -1."""
    row_lo = grid.first + b * grid.step
    row_hi = row_lo + grid.step - 1
    best, best_d = -1, math.inf
    for r in range(first, last):
        if lo[r] <= row_hi + 1 and hi[r] >= row_lo - 1:
            d = max(0, lo[r] - row_hi, row_lo - hi[r])
            if d < best_d:
                best, best_d = r, d
    return best


@pytest.mark.parametrize("seed", [0, 1])
def test_the_runs_under_paths_and_their_centres_are_the_python_ones(seed: int) -> None:
    rng = np.random.default_rng(seed)
    height, width, top, bottom = 90, 120, 5.0, 85.0
    prob = (rng.random((height, width)) * (rng.random((height, width)) < 0.3)).astype(np.float32)
    grid = _grid(prob, top, bottom, 0.5)
    runs = RunTable(prob, 0.5, top, bottom - top)
    lo, hi = runs.arrays[0], runs.arrays[1]
    paths = rng.integers(0, grid.ink.shape[0], size=(3, width))
    under = runs_under(np.ascontiguousarray(grid.ink), paths, lo, hi, np.asarray(runs.bounds, dtype=np.int64),
                       grid.first, grid.step)
    for k in range(3):
        for col in range(width):
            want = -1
            if grid.ink[paths[k, col], col] >= 0.5:
                found = _python_run_under(lo.tolist(), hi.tolist(), runs.bounds[col], runs.bounds[col + 1], grid,
                                          int(paths[k, col]))
                want = found
            assert under[k, col] == want
    cols = np.flatnonzero(under[0] >= 0)
    run = under[0, cols]
    got = centroids(prob, cols, lo[run], hi[run])
    for i, col in enumerate(cols.tolist()):
        assert got[i] == _centres(prob, col, int(lo[run[i]]), int(hi[run[i]]), [0.0])[0]
