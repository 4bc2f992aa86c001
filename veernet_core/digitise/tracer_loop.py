"""The column tracer's loop over the columns, compiled with numba: `follow` takes a probability map's
runs (`runs.RunTable`'s arrays) and follows `count` traces through them column by column, as
`tracer.trace_curves` describes. Every arithmetic step is taken in the order the Python loop it replaced
took it (a sum of a NumPy array as NumPy's own pairwise summation, `_pairwise_sum`), so that its traces
are that loop's to the last bit (bench/README.md), and no longer depend on the Python version's `sum`.

A trace's state is a row of two tables (`ints`, `floats`, columns named below) and its clean detections,
the last `history` of them, oldest first (`hist_c`, `hist_u`): its prediction's history. Its prediction
comes from clean detections only: inside a crossing, where two traces contest one run, a trace coasts on
the line it had before.

The rules, per column:
* A trace is active while its gap (columns since its last detection) is at most `max_gap`.
* Each active trace's candidates are the runs within its gate on its own level or across a track edge
  (`_candidates`). Where every trace's cheapest candidate is a run of its own, each takes it; otherwise
  the assignment of runs to traces is searched (`best_combination`: the most picks on distinct runs,
  then the least cost, then the first), and a trace left without a run shares a near one with the trace
  that took it, where the two split the run's rows between them (`_split_centre`).
* A pick is contested where another trace has its run among its near candidates; a contest longer than
  `max_gap` is two curves running together, and the trace that coasted longer lets go.
* Idle traces start on unclaimed runs that continue over the next columns (`_confirmed`), the surest
  first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from numba import njit

CHOICES = 4  # the cheapest candidates per trace that the assignment of runs to traces weighs
NEVER = -(1 << 30)  # `last_col` of a trace that has never had a detection

# Columns of `ints`, per trace.
LAST = 0  # the column of its last detection of any kind
LEVEL = 1  # wrap level of that detection: 0 the primary scale, +1 / -1 past right / left
CONTESTED = 2  # consecutive contested detections
COUNT = 3  # clean detections held in the history (at most `history`)
HAS_EXTENT = 4  # whether `EXTENT_LO..HI` hold the unwrapped span of the last run (it was not contested)
HAS_SLOPE = 5  # whether the history has two detections close together, so `SLOPE` is its fitted slope
FITTED = 6  # whether `SLOPE` is that of the history as it is
INT_FIELDS = 7
# Columns of `floats`, per trace.
EXTENT_LO, EXTENT_HI, SLOPE = 0, 1, 2

# Columns of a candidate table: run, level shift, far (0 / 1); costs in a float array beside it.
RUN, SHIFT, FAR = 0, 1, 2

F = TypeVar("F", bound=Callable[..., Any])


def _compiled(function: F) -> F:
    """`function` compiled by numba, its machine code kept in numba's cache (NUMBA_CACHE_DIR, else beside this
    file, else the user's cache folder: the first numba may write to); where none is writable, compiled
    afresh in every process that uses it."""
    try:
        return cast(F, njit(cache=True)(function))
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return cast(F, njit(function))


# `follow`'s options, in this order in its `options` array.
OPTION_NAMES = ("gate_px", "gate_per_gap_column", "far_gate", "max_gap", "confirm", "edge_px", "history")


@_compiled
def _block_sum(a: np.ndarray, start: int, n: int) -> float:  # pragma: no cover - compiled
    """NumPy's sum of at most 128 float64s: in order below 8, else eight accumulators then the rest."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[start + i]
        return res
    r0, r1, r2, r3 = a[start], a[start + 1], a[start + 2], a[start + 3]
    r4, r5, r6, r7 = a[start + 4], a[start + 5], a[start + 6], a[start + 7]
    i = 8
    while i < n - (n % 8):
        j = start + i
        r0 += a[j]
        r1 += a[j + 1]
        r2 += a[j + 2]
        r3 += a[j + 3]
        r4 += a[j + 4]
        r5 += a[j + 5]
        r6 += a[j + 6]
        r7 += a[j + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[start + i]
        i += 1
    return res


@_compiled
def _pairwise_sum(a: np.ndarray, start: int, n: int) -> float:  # pragma: no cover - compiled
    """`a[start:start + n].sum()` as NumPy sums a float64 array: blocks of at most 128 (`_block_sum`),
    halved above that (the half a multiple of 8) and the halves' sums added. The halving is walked with
    a stack of its own (numba cannot cache a function that calls itself)."""
    if n <= 128:
        return _block_sum(a, start, n)
    starts = np.empty(64, dtype=np.int64)
    sizes = np.empty(64, dtype=np.int64)
    phases = np.zeros(64, dtype=np.int64)  # 0: neither half summed, 1: the first, 2: both
    sums = np.empty(64)
    top, held = 0, 0
    starts[0], sizes[0] = start, n
    while top >= 0:
        s, m = starts[top], sizes[top]
        if m <= 128:
            sums[held] = _block_sum(a, s, m)
            held += 1
            top -= 1
            continue
        half = m // 2
        half -= half % 8
        if phases[top] < 2:
            child = top + 1
            starts[child] = s if phases[top] == 0 else s + half
            sizes[child] = half if phases[top] == 0 else m - half
            phases[child] = 0
            phases[top] += 1
            top = child
        else:
            sums[held - 2] = sums[held - 2] + sums[held - 1]
            held -= 1
            top -= 1
    return sums[0]


@_compiled
def _reset(ints: np.ndarray, floats: np.ndarray, k: int) -> None:  # pragma: no cover - compiled
    ints[k, :] = 0
    ints[k, LAST] = NEVER
    floats[k, :] = 0.0


@_compiled
def _fit(hist_c: np.ndarray, hist_u: np.ndarray, ints: np.ndarray, floats: np.ndarray, k: int,
         history: int) -> None:  # pragma: no cover - compiled
    """Slope of a least-squares line through the history's detections close together (within 3 *
    `history` columns of the last); none with fewer than two."""
    n = ints[k, COUNT]
    newest = hist_c[k, n - 1]
    first = 0
    if newest - hist_c[k, 0] > 3 * history:  # columns ascend: the oldest may be too far back
        while first < n and newest - hist_c[k, first] > 3 * history:
            first += 1
    kept = n - first
    ints[k, FITTED] = 1
    if kept < 2:
        ints[k, HAS_SLOPE] = 0
        return
    total_c = 0
    total_u = 0.0
    for i in range(first, n):
        total_c += hist_c[k, i]
        total_u += hist_u[k, i]
    mean_c = total_c / kept
    mean_u = total_u / kept
    spread = 0.0
    moment = 0.0
    for i in range(first, n):
        d = hist_c[k, i] - mean_c
        spread += d * d
    for i in range(first, n):
        moment += (hist_c[k, i] - mean_c) * (hist_u[k, i] - mean_u)
    ints[k, HAS_SLOPE] = 1
    floats[k, SLOPE] = moment / spread


@_compiled
def _predict(hist_c: np.ndarray, hist_u: np.ndarray, ints: np.ndarray, floats: np.ndarray, k: int, col: int,
             history: int) -> float:  # pragma: no cover - compiled
    """From the last clean detection along the history's slope (beds make curves step, and a step the
    line has not caught up with is still where the curve is); without a slope, the last detection."""
    if ints[k, FITTED] == 0:
        _fit(hist_c, hist_u, ints, floats, k, history)
    n = ints[k, COUNT]
    if ints[k, HAS_SLOPE] == 0:
        return hist_u[k, n - 1]
    return hist_u[k, n - 1] + floats[k, SLOPE] * (col - hist_c[k, n - 1])


@_compiled
def _add(hist_c: np.ndarray, hist_u: np.ndarray, ints: np.ndarray, floats: np.ndarray, k: int, col: int, u: float,
         level: int, lo: float, hi: float, contested: bool, far: bool, max_gap: int,
         history: int) -> None:  # pragma: no cover - compiled
    ints[k, LAST] = col
    ints[k, LEVEL] = level
    ints[k, CONTESTED] = ints[k, CONTESTED] + 1 if contested else 0
    # A contest longer than a bridgeable gap is two curves running together, not a crossing: follow
    # the shared run again.
    uncontested = ints[k, CONTESTED] == 0 or ints[k, CONTESTED] > max_gap
    ints[k, HAS_EXTENT] = 1 if uncontested else 0
    floats[k, EXTENT_LO] = lo
    floats[k, EXTENT_HI] = hi
    if uncontested and not far:
        n = ints[k, COUNT]
        if n == history:
            for i in range(n - 1):
                hist_c[k, i] = hist_c[k, i + 1]
                hist_u[k, i] = hist_u[k, i + 1]
            n -= 1
        hist_c[k, n] = col
        hist_u[k, n] = u
        ints[k, COUNT] = n + 1
        ints[k, FITTED] = 0


@_compiled
def _coasting(hist_c: np.ndarray, ints: np.ndarray, k: int, col: int) -> int:  # pragma: no cover - compiled
    """Columns since the trace's last clean detection."""
    n = ints[k, COUNT]
    return col - hist_c[k, n - 1] - 1 if n > 0 else 0


@_compiled
def _candidates(k: int, col: int, p: float, first: int, last: int, f_lo: np.ndarray, f_hi: np.ndarray,
                f_c: np.ndarray, hist_c: np.ndarray, ints: np.ndarray, floats: np.ndarray, opts: np.ndarray,
                span: float, picks: np.ndarray, costs: np.ndarray, cheapest_only: bool) -> int:  # pragma: no cover
    """A trace's runs within the gate of its prediction `p`, on its level or across a track edge, into
    `picks` and `costs` from row 0; returns how many. Per level, shifts ascending, the near runs, then the
    far ones (outside the gate, within `far_gate`: a kick or a step hidden by a gap), each top to bottom.

    A run's distance from continuing the trace, read on level `shift`: it continues it if it is near the
    prediction or touches the last run (8-connected, one row of slack); the latter follows kicks the
    prediction overshoots.

    With `cheapest_only`, only the near runs are listed (their costs too), and the first cheapest
    candidate of all goes in row `picks.shape[0] - 1`, its run -1 where there is none: what the
    assignment needs where no two traces want one run, without the far list."""
    gate_px, per_gap, far_gate, edge_px = opts[0] / span, opts[1], opts[2], opts[5] / span
    history = int(opts[6])
    level = ints[k, LEVEL]
    gap = col - ints[k, LAST] - 1
    coasting = _coasting(hist_c, ints, k, col)
    gate = gate_px + per_gap * (gap if gap > coasting else coasting)
    edge = edge_px
    touch = 1.0 / span
    # Where the re-entry column fell in a gap, the trace is back in further from the edge.
    entry = edge + per_gap * gap
    # No wrap without a clean last run, nor for a trace too new to trust (it may have started on a speck
    # at the edge): NaN compares false.
    has_extent = ints[k, HAS_EXTENT] == 1
    ext_lo = floats[k, EXTENT_LO] if has_extent else math.nan
    ext_hi = floats[k, EXTENT_HI] if has_extent else math.nan
    settled = has_extent and ints[k, COUNT] >= history
    out_lo = ext_lo if settled else math.nan
    out_hi = ext_hi if settled else math.nan
    count = 0
    best_slot = picks.shape[0] - 1
    best_cost, best_run, best_shift, best_far = math.inf, -1, 0, 0
    for shift in range(level - 1, level + 2):
        if shift < -1 or shift > 1:
            continue
        # A wrap needs the last run to have reached the edge the trace leaves by; which level a run is
        # then read on is left to the distances, in unwrapped fractions.
        if shift > level and not out_hi >= shift - entry:  # out through the bottom, in at the top
            continue
        if shift < level and not out_lo <= shift + 1 + entry:  # out through the top, in at the bottom
            continue
        level_cost = edge * abs(shift - level)
        near_cost, near_run, far_cost, far_run = math.inf, -1, math.inf, -1
        # The far runs go after the near ones of the level: counted first, placed once the near are known.
        n_far = 0
        for r in range(last - first):
            i = first + r
            lo, hi, centre = f_lo[i], f_hi[i], f_c[i]
            a, b = lo + shift - p, p - hi - shift
            distance = b if b > a else a
            if distance < 0.0:
                distance = 0.0
            if has_extent:
                a, b = lo + shift - ext_hi, ext_lo - hi - shift
                to_last = (b if b > a else a) - touch
                if to_last < 0.0:
                    to_last = 0.0
                if to_last < distance:
                    distance = to_last
            if distance <= gate:
                cost = distance + 0.1 * abs(centre + shift - p) + level_cost
                picks[count, RUN], picks[count, SHIFT], picks[count, FAR] = r, shift, 0
                costs[count] = cost
                count += 1
                if cost < near_cost:
                    near_cost, near_run = cost, r
            elif distance <= far_gate:
                cost = 1.0 + (distance + 0.1 * abs(centre + shift - p) + level_cost)
                if not cheapest_only:
                    # Kept at the table's far end for now, in order, and moved after the level's near runs.
                    slot = best_slot - 1 - n_far
                    picks[slot, RUN], picks[slot, SHIFT], picks[slot, FAR] = r, shift, 1
                    costs[slot] = cost
                n_far += 1
                if cost < far_cost:
                    far_cost, far_run = cost, r
            elif cheapest_only and lo + shift - p > far_gate and (
                    not has_extent or lo + shift - ext_hi - touch > far_gate):
                # Runs are ordered top to bottom: every run below this one is as far or farther from the
                # prediction and the last run (rounding is monotone), out of reach too.
                break
        if not cheapest_only:
            for j in range(n_far):
                slot = best_slot - 1 - j
                picks[count, RUN], picks[count, SHIFT], picks[count, FAR] = (
                    picks[slot, RUN], picks[slot, SHIFT], picks[slot, FAR])
                costs[count] = costs[slot]
                count += 1
        if near_run >= 0 and near_cost < best_cost and not far_cost < near_cost:
            best_cost, best_run, best_shift, best_far = near_cost, near_run, shift, 0
        elif far_run >= 0 and far_cost < best_cost:
            best_cost, best_run, best_shift, best_far = far_cost, far_run, shift, 1
    picks[best_slot, RUN], picks[best_slot, SHIFT], picks[best_slot, FAR] = best_run, best_shift, best_far
    costs[best_slot] = best_cost
    return count


@_compiled
def best_combination(picks: np.ndarray, costs: np.ndarray, counts: np.ndarray,
                     chosen: np.ndarray) -> None:  # pragma: no cover - compiled
    """One pick or none per trace (trace t's candidates are rows 0..counts[t] of `picks[t]` and
    `costs[t]`), from its four cheapest (`CHOICES`, the first of equal costs first), on distinct runs:
    the most picks, then the least cost summed in trace order, then the first in the order of
    `itertools.product` over (none, cheapest, ..., fourth cheapest) per trace. Writes the row taken per
    trace into `chosen` (-1: none). Every combination is tried (at most 5 ** 4 for a track's four
    curves); tests/core/test_digitise.py holds it to a plain search in Python."""
    n = counts.shape[0]
    ranked = np.full((n, CHOICES), -1, dtype=np.int64)
    ranks = np.zeros(n, dtype=np.int64)
    for t in range(n):
        # The CHOICES cheapest, stable: a selection that takes the first of equal costs.
        taken = np.zeros(counts[t], dtype=np.bool_)
        for slot in range(min(CHOICES, counts[t])):
            best = -1
            for i in range(counts[t]):
                if not taken[i] and (best < 0 or costs[t, i] < costs[t, best]):
                    best = i
            taken[best] = True
            ranked[t, slot] = best
            ranks[t] = slot + 1
    # Every trace that can take a run takes its cheapest where those runs are distinct: no combination
    # has more picks or costs less (a rounded sum never falls when a term grows), and of those that tie
    # it comes first.
    distinct = True
    for t in range(n):
        for u in range(t):
            if ranks[t] > 0 and ranks[u] > 0 and picks[t, ranked[t, 0], RUN] == picks[u, ranked[u, 0], RUN]:
                distinct = False
    if distinct:
        for t in range(n):
            chosen[t] = ranked[t, 0] if ranks[t] > 0 else -1
        return
    order = np.zeros(n, dtype=np.int64)  # 0: none, 1 + the rank of the pick taken
    best_picks, best_cost = 0, 0.0
    chosen[:] = -1
    while True:
        picks_taken, cost, clash = 0, 0.0, False
        for t in range(n):
            if order[t] > 0:
                run = picks[t, ranked[t, order[t] - 1], RUN]
                for u in range(t):
                    if order[u] > 0 and picks[u, ranked[u, order[u] - 1], RUN] == run:
                        clash = True
                picks_taken += 1
                cost += costs[t, ranked[t, order[t] - 1]]
        if not clash and (picks_taken > best_picks or (picks_taken == best_picks and cost < best_cost)):
            best_picks, best_cost = picks_taken, cost
            for t in range(n):
                chosen[t] = ranked[t, order[t] - 1] if order[t] > 0 else -1
        # The next combination in the product's order: the last trace's choice moves fastest.
        t = n - 1
        while t >= 0 and order[t] == ranks[t]:
            order[t] = 0
            t -= 1
        if t < 0:
            return
        order[t] += 1


@_compiled
def _split_centre(prob: np.ndarray, col: int, lo: int, hi: int, fallback: float, top: float, span: float,
                  mine: float, others: np.ndarray, n_others: int) -> float:  # pragma: no cover - compiled
    """Centroid of the rows of a shared run (one row either side) nearer this trace's prediction than the
    others' (fractions on the run's own level): two curves crossing pull neither centre off."""
    start = max(lo - 1, 0)
    stop = min(hi + 2, prob.shape[0])
    n = stop - start
    weights = np.empty(max(n, 0))
    moments = np.empty(max(n, 0))
    for i in range(n):
        row = start + i
        f = (row - top) / span
        nearest = True
        for j in range(n_others):
            other = others[j]
            if abs(other - mine) > 1e-9:
                nearest = nearest and abs(f - mine) <= abs(f - other)
        weights[i] = np.float64(prob[row, col]) * (1.0 if nearest else 0.0)
        moments[i] = weights[i] * row
    total = _pairwise_sum(weights, 0, n)
    if total <= 1e-6:
        return fallback
    return _pairwise_sum(moments, 0, n) / total


@_compiled
def _confirmed(col: int, run: int, bounds: np.ndarray, lo_rows: np.ndarray, hi_rows: np.ndarray,
               centres: np.ndarray, confirm: int, gate_px: float, per_gap_px: float,
               width: int) -> bool:  # pragma: no cover - compiled
    """The run continues in `confirm` of the next 2 * `confirm` columns (a speck or a stray kick does not;
    a dashed curve does). A run continues another if its centre is near, or, in the next column, if it
    touches it (8-connected, as in tracking): a steep stretch is one stroke too."""
    i = bounds[col] + run
    centre, lo, hi = centres[i], lo_rows[i], hi_rows[i]
    found, last = 0, col
    for c in range(col + 1, min(col + 1 + 2 * confirm, width)):
        reach = gate_px + per_gap_px * (c - last - 1)
        pick, nearest = -1, math.inf
        for r in range(bounds[c], bounds[c + 1]):
            r_lo, r_hi, distance = lo_rows[r], hi_rows[r], abs(centres[r] - centre)
            near = distance <= reach + (r_hi - r_lo) / 2 or (c == last + 1 and r_lo <= hi + 1 and r_hi >= lo - 1)
            if near and distance < nearest:
                pick, nearest = r, distance
        if pick >= 0:
            centre, lo, hi = centres[pick], lo_rows[pick], hi_rows[pick]
            found, last = found + 1, c
            if found >= confirm:
                return True
    return found >= min(confirm, width - 1 - col)


@_compiled
def follow(prob: np.ndarray, top: float, span: float, count: int, opts: np.ndarray, bounds: np.ndarray,
           lo_rows: np.ndarray, hi_rows: np.ndarray, centres: np.ndarray, confidence: np.ndarray,
           f_lo: np.ndarray, f_hi: np.ndarray, f_c: np.ndarray,
           searched: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:  # pragma: no cover
    """Detections per trace and column: (unwrapped fraction, NaN where none; level; confidence; columns
    where runs were assigned; of these, columns where the assignment was searched). `searched` searches
    every column's assignment, as the quick path (each trace's own cheapest run) must match."""
    width = prob.shape[1]
    max_gap, confirm, history = int(opts[3]), int(opts[4]), int(opts[6])
    u_out = np.full((count, width), np.nan)
    level_out = np.zeros((count, width), dtype=np.int8)
    conf_out = np.zeros((count, width), dtype=np.float32)
    ints = np.zeros((count, INT_FIELDS), dtype=np.int64)
    floats = np.zeros((count, 3))
    hist_c = np.zeros((count, max(history, 1)), dtype=np.int64)
    hist_u = np.zeros((count, max(history, 1)))
    for k in range(count):
        _reset(ints, floats, k)
    most = 1
    for c in range(width):
        most = max(most, bounds[c + 1] - bounds[c])
    rows = 3 * most + 2  # three levels' runs, the slots for far runs being ordered, and the cheapest
    picks = np.zeros((count, rows, 3), dtype=np.int64)
    costs = np.zeros((count, rows))
    counts = np.zeros(count, dtype=np.int64)
    chosen = np.full(count, -1, dtype=np.int64)
    predicted = np.zeros(count)
    active = np.zeros(count, dtype=np.bool_)
    picked = np.zeros(count, dtype=np.bool_)  # per trace: whether it took a run this column
    pick_row = np.zeros(count, dtype=np.int64)  # its row in its candidates
    claim_order = np.zeros(count, dtype=np.int64)  # traces in the order they took runs
    others = np.zeros(count)
    wanted = np.zeros(most, dtype=np.int64)  # per run: how many traces have it among their near candidates
    near_seen = np.zeros(most, dtype=np.bool_)
    per_gap_px = opts[1] * span
    birth_gate = opts[0] / span
    assigned_columns, searched_columns = 0, 0
    for col in range(width):
        first, last = bounds[col], bounds[col + 1]
        n_runs = last - first
        n_active, n_picked = 0, 0
        for k in range(count):
            active[k] = col - ints[k, LAST] - 1 <= max_gap
            picked[k] = False
            if active[k]:
                n_active += 1
        if n_active > 0:
            assigned_columns += 1
        # Each active trace's cheapest candidate and near runs.
        for k in range(count):
            if active[k]:
                predicted[k] = _predict(hist_c, hist_u, ints, floats, k, col, history)
                counts[k] = _candidates(k, col, predicted[k], first, last, f_lo, f_hi, f_c, hist_c, ints, floats,
                                        opts, span, picks[k], costs[k], True)
        distinct = not searched
        for k in range(count):
            for j in range(k):
                if (active[k] and active[j] and picks[k, rows - 1, RUN] >= 0
                        and picks[k, rows - 1, RUN] == picks[j, rows - 1, RUN]):
                    distinct = False
        if n_active == 0:
            distinct = True
        if distinct:  # each trace takes its own cheapest run
            for k in range(count):
                if active[k] and picks[k, rows - 1, RUN] >= 0:
                    picked[k] = True
                    pick_row[k] = rows - 1
                    claim_order[n_picked] = k
                    n_picked += 1
        else:
            searched_columns += 1
            n_listed = 0
            for k in range(count):
                if active[k]:
                    counts[k] = _candidates(k, col, predicted[k], first, last, f_lo, f_hi, f_c, hist_c, ints,
                                            floats, opts, span, picks[k], costs[k], False)
                    n_listed += 1
            # The assignment over the active traces, in trace order.
            sub = np.empty(n_listed, dtype=np.int64)
            j = 0
            for k in range(count):
                if active[k]:
                    sub[j] = k
                    j += 1
            if n_listed == 1:  # one trace: its cheapest candidate, the first of equal costs
                k = sub[0]
                best = -1
                for i in range(counts[k]):
                    if best < 0 or costs[k, i] < costs[k, best]:
                        best = i
                chosen[0] = best
            else:
                best_combination(picks[sub], costs[sub], counts[sub], chosen[:n_listed])
            for j in range(n_listed):
                k = sub[j]
                if chosen[j] >= 0:
                    picked[k] = True
                    pick_row[k] = chosen[j]
                    claim_order[n_picked] = k
                    n_picked += 1
            n_combined = n_picked
            # Curves crossing: a trace left without a run of its own shares a near one.
            for j in range(n_listed):
                k = sub[j]
                if not picked[k] and col - ints[k, LAST] - 1 == 0:
                    best = -1
                    for i in range(counts[k]):
                        if picks[k, i, FAR] == 1:
                            continue
                        taken = False
                        for m in range(n_combined):
                            other = claim_order[m]
                            if picks[other, pick_row[other], RUN] == picks[k, i, RUN]:
                                taken = True
                        if taken and (best < 0 or costs[k, i] < costs[k, best]):
                            best = i
                    if best >= 0:
                        picked[k] = True
                        pick_row[k] = best
                        claim_order[n_picked] = k
                        n_picked += 1
        # Each pick is recorded, contested where another trace has its run among its near candidates (one
        # trace may reach a run on two levels: no contest); traces that share a run split its rows.
        wanted[:n_runs] = 0
        for k in range(count):
            if active[k]:
                near_seen[:n_runs] = False
                for i in range(counts[k]):
                    if picks[k, i, FAR] == 0:
                        near_seen[picks[k, i, RUN]] = True
                for r in range(n_runs):
                    if near_seen[r]:
                        wanted[r] += 1
        for m in range(n_picked):
            k = claim_order[m]
            row = pick_row[k]
            run, shift, far = picks[k, row, RUN], picks[k, row, SHIFT], picks[k, row, FAR]
            n_others = 0
            for m2 in range(n_picked):
                j = claim_order[m2]
                if j != k and picks[j, pick_row[j], RUN] == run:
                    others[n_others] = predicted[j] - picks[j, pick_row[j], SHIFT]
                    n_others += 1
            i = first + run
            if n_others > 0:
                centre = _split_centre(prob, col, lo_rows[i], hi_rows[i], centres[i], top, span,
                                       predicted[k] - shift, others, n_others)
                u = (centre - top) / span + shift
            else:
                u = f_c[i] + shift
            _add(hist_c, hist_u, ints, floats, k, col, u, shift, f_lo[i] + shift, f_hi[i] + shift,
                 wanted[run] > 1, far == 1, max_gap, history)
            u_out[k, col], level_out[k, col], conf_out[k, col] = u, shift, confidence[i]
        # Two traces that have shared one run for longer than a crossing lasts are one curve followed
        # twice: the one that coasted longer lets go, free to start again on a curve nobody follows.
        for m in range(n_picked):
            k = claim_order[m]
            run = picks[k, pick_row[k], RUN]
            partners, all_seen = 0, True
            loser, loser_key = k, _coasting(hist_c, ints, k, ints[k, LAST])
            for m2 in range(n_picked):
                j = claim_order[m2]
                if j != k and picks[j, pick_row[j], RUN] == run:
                    partners += 1
                    if ints[j, LAST] < 0:
                        all_seen = False
                    key = _coasting(hist_c, ints, j, ints[j, LAST])
                    if key > loser_key or (key == loser_key and j > loser):
                        loser, loser_key = j, key
            if partners > 0 and ints[k, CONTESTED] > max_gap and all_seen:
                _reset(ints, floats, loser)
                break
        # Births: idle traces start on unclaimed, confirmed runs, the surest first.
        n_idle = count - n_active
        if n_idle == 0:
            continue
        fresh = np.empty(n_runs, dtype=np.int64)
        n_fresh = 0
        for r in range(n_runs):
            f = f_c[first + r]
            skip = False
            for m in range(n_picked):
                k = claim_order[m]
                if picks[k, pick_row[k], RUN] == r:
                    skip = True
                u = u_out[k, col]
                if abs(f - (u - math.floor(u))) <= birth_gate:
                    skip = True
            if skip:
                continue
            if _confirmed(col, r, bounds, lo_rows, hi_rows, centres, confirm, opts[0], per_gap_px, width):
                fresh[n_fresh] = r
                n_fresh += 1
        # The surest run first; of equal confidence, the upper first (a stable order).
        for a in range(1, n_fresh):
            r = fresh[a]
            b = a - 1
            while b >= 0 and confidence[first + fresh[b]] < confidence[first + r]:
                fresh[b + 1] = fresh[b]
                b -= 1
            fresh[b + 1] = r
        idle = np.empty(n_idle, dtype=np.int64)
        j = 0
        for k in range(count):
            if not active[k]:
                idle[j] = k
                j += 1
        for a in range(n_fresh):
            if n_idle == 0:
                break
            r = fresh[a]
            f = f_c[first + r]
            best, best_distance = -1, math.inf
            for j in range(n_idle):
                k = idle[j]
                distance = abs(hist_u[k, ints[k, COUNT] - 1] - f) if ints[k, COUNT] > 0 else 2.0
                if best < 0 or distance < best_distance:
                    best, best_distance = j, distance
            k = idle[best]
            for j in range(best, n_idle - 1):
                idle[j] = idle[j + 1]
            n_idle -= 1
            _reset(ints, floats, k)
            i = first + r
            _add(hist_c, hist_u, ints, floats, k, col, f_c[i], 0, f_lo[i], f_hi[i], False, False, max_gap, history)
            u_out[k, col], level_out[k, col], conf_out[k, col] = f_c[i], 0, confidence[i]
    return u_out, level_out, conf_out, assigned_columns, searched_columns


@_compiled
def wrap_levels(f: np.ndarray, spans: np.ndarray, level_cost: float,
                barred: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """The wrap level (-1, 0, 1) of each of a trace's detections `f` (fractions of the track; `spans`, the
    columns between each and the next), chosen for the whole trace at once (Viterbi): the levels whose
    unwrapped positions make the trace move least, `level_cost` per column off the primary scale breaking
    ties (`tracer._relevel`); never a level that `barred` (bool per level -1, 0, 1; never 0) bars."""
    n = f.shape[0]
    back = np.zeros((max(n - 1, 0), 3), dtype=np.int8)
    cost = np.array([level_cost * 1, level_cost * 0, level_cost * 1])
    for m in range(3):
        if barred[m]:
            cost[m] = np.inf
    step = np.empty(3)
    for i in range(n - 1):
        here, before = f[i + 1], f[i]
        for to in range(3):  # to level to - 1: the cheapest previous level (the first on ties)
            moved = here + (to - 1) - before
            came, best = 0, cost[0] + abs(moved + 1)
            for m in (1, 2):
                option = cost[m] + abs(moved - (m - 1))
                if option < best:
                    came, best = m, option
            back[i, to] = came
            # level_cost per column off the primary scale, nothing on it
            step[to] = best + level_cost * spans[i] if to != 1 else best
            if barred[to]:
                step[to] = np.inf
        cost[:] = step
    j = 0
    if cost[1] < cost[0]:
        j = 1
    if cost[2] < cost[j]:
        j = 2
    levels = np.empty(n, dtype=np.int8)
    levels[n - 1] = j - 1
    for i in range(n - 2, -1, -1):
        j = back[i, j]
        levels[i] = j - 1
    return levels
