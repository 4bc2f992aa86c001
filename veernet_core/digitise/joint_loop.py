"""The joint tracer's loops over the columns, compiled with numba: `cheapest_path` finds one curve's
cheapest path of (bin, level) states through a track, as `joint._viterbi` describes; `runs_under` and
`centroids` read each path's position off the run of ink under it, as `joint._traces` does where a run holds
one path. Every arithmetic step is taken in the order the NumPy code it replaced took it (a cumulative sum as
`np.cumsum`, left to right; a sum as NumPy's pairwise one; ties to the state NumPy's `argmin` and running
minima picked), so that its paths and positions are that code's to the last bit (`tests/core/test_joint_loop.py`
holds that code and checks it), on model grids of a few thousand columns and on full-resolution tracks of tens
of thousands alike.
"""

from __future__ import annotations

import numpy as np

from veernet_core.digitise.tracer_loop import _compiled, _pairwise_sum


@_compiled
def cheapest_path(cost: np.ndarray, ink: np.ndarray, position: np.ndarray, off_level: np.ndarray,
                  start: np.ndarray, wrap_sources: np.ndarray, wrap_targets: np.ndarray, wrap_steps: np.ndarray,
                  move_cost: float, ink_spacing: float, hop_cost: float, jump_cost: float,
                  back: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """The cheapest path's state per column (W,) through `cost` (W, bins) on `n_levels = position.size //
    bins` levels: `ink` (bins, W) the track's ink, `position` (states,) each state's unwrapped position in
    pixels (ascending), `off_level` and `start` (states,) each state's cost per column and at the first
    column, and the moves through an edge as `wrap_sources` and `wrap_targets` (moves, margin) with their
    costs `wrap_steps` (moves, margin, margin). `back` (W, states), of an integer type that holds a state,
    is where each state's best predecessor is kept."""
    width, bins = cost.shape
    states = position.size
    n_levels = states // bins
    total = np.empty(states)
    for s in range(states):
        total[s] = np.float64(cost[0, s % bins]) + off_level[s] + start[s]
    dpos = np.empty(max(states - 1, 0))
    for s in range(states - 1):
        dpos[s] = move_cost * (position[s + 1] - position[s])
    slope = np.empty(states)
    down = np.empty(states)
    best_down = np.empty(states)
    from_down = np.empty(states, dtype=np.int64)
    best_up = np.empty(states)
    from_up = np.empty(states, dtype=np.int64)
    moved = np.empty(states)
    came = np.empty(states, dtype=np.int64)
    jump_to = np.empty(n_levels, dtype=np.int64)
    for col in range(1, width):
        # The cumulative cost of moving up the positions between this column and the one before.
        slope[0] = 0.0
        acc = 0.0
        for s in range(states - 1):
            b, b1 = s % bins, (s + 1) % bins
            either = max(np.float64(ink[b, col - 1]), np.float64(ink[b, col]))
            either1 = max(np.float64(ink[b1, col - 1]), np.float64(ink[b1, col]))
            step = dpos[s] * (1.0 - (1.0 - ink_spacing) * min(either, either1))
            if b == bins - 1:
                step += hop_cost
            acc += step
            slope[s + 1] = acc
        # From a state at or above (a running minimum over ascending positions, ties to the last state).
        run_min, run_at = np.inf, 0
        for s in range(states):
            down[s] = total[s] - slope[s]
            if s == 0 or down[s] < run_min:
                run_min = down[s]
            best_down[s] = run_min
            if down[s] == run_min:
                run_at = s
            from_down[s] = run_at
        # From a state at or below (the same from the far end, ties to the first state).
        run_min, run_at = np.inf, states - 1
        for s in range(states - 1, -1, -1):
            up = total[s] + slope[s]
            if s == states - 1 or up < run_min:
                run_min = up
            best_up[s] = run_min
            if up == run_min:
                run_at = s
            from_up[s] = run_at
        for s in range(states):
            via_down, via_up = best_down[s] + slope[s], best_up[s] - slope[s]
            came[s] = from_down[s] if via_down <= via_up else from_up[s]
            moved[s] = min(via_down, via_up)
        for m in range(wrap_sources.shape[0]):
            sources, targets = wrap_sources[m], wrap_targets[m]
            for t in range(targets.size):
                best, cheapest = 0, total[sources[0]] + wrap_steps[m, 0, t]
                for i in range(1, sources.size):
                    through = total[sources[i]] + wrap_steps[m, i, t]
                    if through < cheapest:
                        best, cheapest = i, through
                target = targets[t]
                if cheapest < moved[target]:
                    moved[target] = cheapest
                    came[target] = sources[best]
        for level in range(n_levels):  # after a gap a curve may come back anywhere on its level
            first = level * bins
            at = first
            for s in range(first + 1, first + bins):
                if total[s] < total[at]:
                    at = s
            jump_to[level] = at
        for s in range(states):
            jump = jump_to[s // bins]
            far = total[jump] + jump_cost
            if far < moved[s]:
                back[col, s] = jump
                moved[s] = far
            else:
                back[col, s] = came[s]
        for s in range(states):
            total[s] = moved[s] + (np.float64(cost[col, s % bins]) + off_level[s])
    state = 0
    for s in range(1, states):
        if total[s] < total[state]:
            state = s
    chosen = np.empty(width, dtype=np.int64)
    for col in range(width - 1, -1, -1):
        chosen[col] = state
        state = back[col, state]
    return chosen


@_compiled
def runs_under(ink: np.ndarray, paths: np.ndarray, lo: np.ndarray, hi: np.ndarray, bounds: np.ndarray, first: int,
               step: int) -> np.ndarray:  # pragma: no cover - compiled
    """(paths, W) the run (an index into `lo` and `hi`, column c's runs `bounds[c]` to `bounds[c + 1]`) under
    each path's bin (`paths` (count, W) of bins of `step` rows from image row `first`): of the runs touching
    the bin's rows or the rows beside them, the nearest, the first on ties; -1 where the bin is paper
    (`ink` (bins, W) below 0.5) or no run is near."""
    count, width = paths.shape
    under = np.full((count, width), -1, dtype=np.int64)
    for k in range(count):
        for col in range(width):
            b = paths[k, col]
            if ink[b, col] < 0.5:
                continue
            row_lo = first + b * step
            row_hi = row_lo + step - 1
            best, best_d = -1, 1 << 62
            for r in range(bounds[col], bounds[col + 1]):
                if lo[r] <= row_hi + 1 and hi[r] >= row_lo - 1:
                    d = max(0, lo[r] - row_hi, row_lo - hi[r])
                    if d < best_d:
                        best, best_d = r, d
            under[k, col] = best
    return under


@_compiled
def centroids(prob: np.ndarray, cols: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:  # pragma: no cover
    """Per (column, run rows `lo`..`hi`): the probability-weighted centre row of the run with a row of margin
    either side, summed as NumPy sums (`_pairwise_sum`)."""
    height = prob.shape[0]
    out = np.empty(cols.size)
    weights = np.empty(height + 2)
    moments = np.empty(height + 2)
    for i in range(cols.size):
        start, stop = max(lo[i] - 1, 0), min(hi[i] + 2, height)
        n = stop - start
        for j in range(n):
            weights[j] = np.float64(prob[start + j, cols[i]])
            moments[j] = weights[j] * (start + j)
        out[i] = _pairwise_sum(moments, 0, n) / max(_pairwise_sum(weights, 0, n), 1e-9)
    return out


def warm_joint_loops(prob: np.ndarray) -> None:
    """Compile (or load from numba's cache) every loop here for a probability map of `prob`'s type, with the
    argument types `joint` passes (`tracer.compile_loops`, which cannot import `joint`: it builds on `tracer`)."""
    bins, width = 4, prob.shape[1]
    ink = np.zeros((bins, width), dtype=np.float32)
    ink[1] = 1.0
    position = np.arange(2 * bins, dtype=np.float64)
    margin = 1
    sources = np.array([[bins - 1], [bins]], dtype=np.int64)
    steps = np.zeros((2, margin, margin))
    for back in (np.zeros((width, 2 * bins), dtype=np.int16), np.zeros((width, 2 * bins), dtype=np.int32)):
        cheapest_path(np.zeros((width, bins)), ink, position, np.zeros(2 * bins),
                      np.zeros(2 * bins), sources, sources[::-1].copy(), steps, 0.005, 0.3, 0.5, 2.5, back)
    lo = np.array([2], dtype=np.int64)
    under = runs_under(ink, np.ones((1, width), dtype=np.int64), lo, lo + 1,
                       np.concatenate([np.zeros(1, dtype=np.int64), np.ones(width, dtype=np.int64)]), 0, 2)
    centroids(np.ascontiguousarray(prob), np.flatnonzero(under[0] >= 0), lo[under[0][under[0] >= 0]],
              lo[under[0][under[0] >= 0]] + 1)
