"""Naming a track's traces from what the log says, never from drawing order.

The tracer hands over one trace per calibrated curve (a binary model's curves all from one channel, a
multiclass model's from their channels). Where two traces cross or touch, the tracer may have swapped
them, so the traces are cut there into stretches (`stretches`), and in every stretch each trace is looked
at on the scan's own pixels (`veernet_core.digitise.ink`: line style, ink), and the marks of ink along each
whole trace speak in every stretch they run through (`ink.marks_evidence`: its breaks and the marks it passes,
which hold where a curve moves several rows a column). Each curve's hints (style, ink, anchors) score each
assignment of traces to curves per stretch; the assignments along the scan are
chosen together (Viterbi over the N! assignments, N <= 4), a change between stretches costing
SWITCH_COST, so one stretch's weak evidence does not swap curves that the stretches around it name, and a
curve going on from one stretch to the next off the line its trace came in on costing more (`_continuity`):
a crossing of two curves drawn alike is the tracer's guess, which their lines through it correct.
Where the track's curves are drawn with pens of different widths, a curve also keeps its pen: a change
between two long stretches costs what it makes each curve's pen width move (`_Links`), and then each
curve's pen, as the long stretches read it, speaks in every stretch, short ones too (`_pens_said`).

Where nothing tells two curves apart (no hints, equal hints, or a measure that does not separate them),
the tracer's order is kept and both are marked ambiguous; a hint the scan contradicts is a warning.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from veernet_core.digitise.calibration import Calibration, CurveScale
from veernet_core.digitise.calibration_fields import INK_COLOURS, INK_SHADES
from veernet_core.digitise.dots import dotted_columns
from veernet_core.digitise.ink import (
    MARK_STYLES,
    PEN_QUANTUM,
    Look,
    MarksReading,
    Page,
    PenWidth,
    ScanPixels,
    ink_label,
    ink_scores,
    looks_along,
    marks_evidence,
    marks_style,
    page_of,
    stroke_widths,
    style_label,
    style_scores,
)
from veernet_core.digitise.tracer import ColumnTrace

# Evidence a stretch needs to name its traces otherwise than the stretches around it. At 2, style hints
# on the bundled model's two-curve logs (bench/digitise_eval.py's 40 held-out logs) swapped a few short
# stretches (mae_pct 1.37 % -> 1.42 %); at 4 they name every curve with no loss.
SWITCH_COST = 4.0
AMBIGUOUS_MARGIN = 1.0  # two curves whose swap costs less evidence than this are not told apart
# Share of the log's columns a cheap swap must cover to leave two curves' names in doubt. 0.25 left 11 of 204
# curves named wrong without a flag on the independent renderer at the model's scale (tuning seed 8888), 0.15 left 3
# (bench/README.md, 2026-11-27).
AMBIGUOUS_SHARE = 0.15
ANCHOR_WEIGHT = 200.0  # per track width of distance: a point a person read off the scan outweighs a measure
WRAP_WEIGHT = 2.0  # per square root of a stretch's columns on a backup scale the curve does not declare
MIN_COLUMNS = 3  # a stretch shorter than this (in measured columns) says nothing about style or ink
MIN_WARN_COLUMNS = 20  # columns a curve needs before its look is held against its hints
# Rows either side of a trace its stroke may cover: 1.2 % of the track on the model's grid, but never more
# than 2 (pens draw 1 to 4 px at any resolution), so that on a full-resolution track (about 500 rows) the
# looks are not read 6 rows about a 1-px line, where other curves' ink is (held-out seed 7777, 30 logs at
# full resolution, perfect probabilities: curves of distinct looks 6.3 -> 5.8 % of the range).
STROKE_HALF_MAX = 2
# Paper between two pieces of ink that the marks along a trace bridge, as a share of the track's height: 2 px
# on a full-resolution track (about 500 rows), where a thin or faint stroke breaks for a pixel or two and a
# dash's gap is 8 px or more; none on a track at the model's scale (about 50 rows), where a gap is 2-3 px.
BRIDGE_SHARE = 0.004
ANCHOR_TOLERANCE = 0.1  # track widths between an anchor and the named trace before it is a warning
# A curve keeps its pen through the places where it touches another. Where a track's curves are drawn with
# pens of different widths (over at least PEN_STRETCHES long stretches, the median of the least log ratio
# between two traces' widths is PEN_APART or more), a change of names between two long stretches (every
# trace seen over LINK_COLUMNS columns or more) costs, per curve, the standard errors by which its trace's
# width moves beyond PEN_SLACK of them, at most PEN_CAP. Tuned on seed 7777 with a perfect segmenter
# (bench/README.md, 2026-11-28): charged between neighbouring stretches instead, or on the ink's darkness
# too, it named curves no better on one renderer or the other.
LINK_COLUMNS = 30
PEN_STRETCHES = 3
PEN_APART = 0.2
PEN_SLACK = 2.0
PEN_CAP = 8.0
# The marks of ink along each trace speak in every stretch by their log-likelihood of each declared style
# (`ink.marks_evidence`), at this weight beside the looks' style scores. 0.5 and 2 named the independent
# renderer's tuning logs (seed 7777, full resolution) as well as 1; the looks' scores weighed at 0 or 0.5
# beside them named them worse (bench/README.md, 2026-11-28).
MARKS_WEIGHT = 1.0
# Then, per stretch, a trace whose width is further from a curve's pen (the median over the curve's long
# stretches) than PEN_SLACK standard errors speaks against that curve by the excess, at most PEN_SAID: the
# short stretches between two long ones, where a jagged curve's track is cut every ten columns or so, are
# named by their pens too. Tuning seeds 7777 and 8888, full resolution, bundled model: at most 4 it named
# the independent renderer's curves 0.1-0.2 points better and the generator's no worse; 8 no better than 4.
PEN_SAID = 4.0
# A curve's declared weight (thin or thick, against the track's other curves) speaks in every stretch where
# every trace's pen is read: a trace's log width above the traces' mean there, in its standard errors (at most
# WEIGHT_CAP), speaks for a thick curve and against a thin one, WEIGHT_WEIGHT per unit. Tuning seeds 7777 and
# 8888, 60 full-resolution logs each, weights read where a track's pens differ twofold (bench/digitise_eval.py):
# the independent renderer 12.00 -> 10.81 % and 13.03 -> 11.97 %, the generator 7.66 -> 6.97 % and 7.44 ->
# 6.41 %; at 1.0 a little less on the independent renderer (10.94 %, 12.33 %) and more on the generator (7.06 %,
# 6.49 %) (bench/README.md, 2026-11-29).
WEIGHT_WEIGHT = 0.5
WEIGHT_CAP = 4.0
WEIGHT_SIGNS = {"thick": 1.0, "thin": -1.0}
# A dotted curve's pen is not read by its columns' widths as a line's is: a column crosses a round dot off its
# centre (a 4 px dot's columns read 2, 4, 4, 2 rows) or not at all, while a thin solid pen that moves rows every
# column reads wider than its pen. On the independent renderer's tuning log 7777/52 a thick dotted DT (4 px dots)
# read 4.0 px where flat and a thin solid GR (2 px) 4.8 px, so the declared weights named the two the wrong way
# round over 0.7 of the log. Weights compare dots with dots and lines with lines: a curve's declared weight speaks
# where a curve of its kind is declared the other weight (`_weight_signs`); where the legend weighs a dotted curve
# against a line, the names stand only where reading the dots' widths as pens names the curves alike. Tuning seeds
# 7777 and 8888 of the independent renderer (60 full-resolution logs each): 9.258 -> 8.899 % and 11.506 ->
# 11.343 %; the generator's 6666 and 7777: 9.806 -> 9.781 % and 7.211 -> 7.245 % (its log 7777/48, a thick
# dotted and a thin dashed curve: its dots read wider than the dashes); independent tuning pages 1 and 2 9.321 ->
# 9.260 % and 8.170 -> 8.099 %, none more named wrong without a flag (bench/README.md, 2026-12-07).
DOT_STYLES = ("dotted",)

# A trace's share of columns on dots speaks for a dotted curve and against one of another declared style, by
# DOT_WEIGHT per square root of a stretch's columns: fully at DOT_HIGH of its columns or more, fully against at
# DOT_LOW or less. Along the true rows of 30 full-resolution logs (tuning seed 7777) dotted curves had 0.36 of
# their columns on dots or more on the independent renderer and 0.56 or more on the generator; other styles 0.14
# and 0.23 at the 90th percentile (`dots`; bench/README.md, 2026-12-05).
DOT_WEIGHT = 0.5
DOT_LOW, DOT_HIGH = 0.1, 0.4

# A track's declared styles in the order of their share of inked columns. In every stretch where two or more
# traces are seen, a trace inked more of its columns than the traces' mean there (in DUTY_SCALE, at most 1) speaks
# for the curves whose style inks more, by the square root of its columns. This order holds where each trace's own
# reading misreads its style (long dots read as dashes, dashes with short gaps as solid), but it only flags: a pair
# whose names it contradicts, over the whole track, by more than AMBIGUOUS_MARGIN and DUTY_SHARE of all it says
# about them. Let it name the curves, it read the independent renderer's logs better but named a page generator
# pair wrong without a flag (tuning seed 6060) and made the held-out pages' worst curve worse (bench/README.md,
# 2026-12-04).
DUTY = {"solid": 1.0, "dashed": 0.67, "dash-dot": 0.55, "dotted": 0.4}
DUTY_SCALE = 0.1
DUTY_SHARE = 0.2

Assignment = tuple[int, ...]  # assignment[c] = the trace that calibrated curve c is read from


@dataclass(frozen=True)
class Naming:
    traces: list[ColumnTrace]  # one per calibrated curve, in the calibration's order
    identity: list[str]  # per curve: single, anchored, hinted or ambiguous
    warnings: list[tuple[str, ...]]  # per curve: hints the scan contradicts


def name_traces(traces: list[ColumnTrace], calibration: Calibration, scan: ScanPixels | None,
                assigned: bool = False, checked: bool = False, one_channel: bool = True) -> Naming:
    """The traces of one track (on the scan's own columns) named after the calibration's curves. Traces
    the tracer already `assigned` to the curves (`joint.trace_joint`: each traced as its curve, from its
    hints) keep their curves; the scan's looks then only say how sure each name is, and warn. Traces named
    by their looks may be `checked` against the tracer's own assignment, graded by the same evidence
    (`checked_against`): a curve the two read differently is flagged ambiguous. Traces from `one_channel`
    (`curves.one_channel`) go on through their touches as their lines say (`_continuity`); a channel per curve
    keeps each trace its curve's. A dotted curve's declared weight is held only against another dotted curve's
    (DOT_STYLES); where the legend weighs one against a line, the track is named again from the same evidence
    with the dots' widths read as pens, and a curve the two namings read differently is flagged."""
    track = _track_evidence(traces, calibration, scan, assigned, one_channel)
    signs = _weight_signs(calibration.curves)
    naming = _named(track, traces, calibration, assigned, checked, signs)
    as_pens = _weight_signs(calibration.curves, dots_as_pens=True)
    if not assigned and as_pens != signs:
        # A dotted curve's weight against a line's says nothing of the pens the scan shows (DOT_STYLES), but the
        # legend still says it: the names stand where reading the dots' widths as pens names the curves alike.
        naming = checked_against(naming, _named(track, traces, calibration, assigned, checked, as_pens))
    return naming


@dataclass
class _TrackEvidence:
    """What `name_traces` reads of one track before it weighs the curves' declared weights: the same for every
    naming of its traces (`_named`)."""

    scan: ScanPixels | None  # None where no curve declares a look: anchors alone name the curves
    page: Page | None
    half: int
    near: np.ndarray
    bounds: list[tuple[int, int]]
    looks: list[list[Look | None]]  # per stretch, per trace
    shades: bool
    evidence: list[np.ndarray]  # per stretch, (curves, traces): looks, marks, dots, anchors and wraps
    hinted: list[np.ndarray]  # what the style and ink hints say, before anchors and wraps
    wraps: list[np.ndarray]  # what the wraps say
    anchored: set[int]
    bridge: int
    links: _Links | None
    turns: list[np.ndarray] | None
    widths: list[list[PenWidth | None]] | None = None  # per trace, per stretch: read once, where first needed

    def pen_widths(self, traces: list[ColumnTrace]) -> list[list[PenWidth | None]]:
        if self.widths is None:
            assert self.scan is not None and self.page is not None
            self.widths = [_pen_widths(self.scan, self.page, trace, self.bounds, self.near, self.half)
                           for trace in traces]
        return self.widths


def _track_evidence(traces: list[ColumnTrace], calibration: Calibration, scan: ScanPixels | None, assigned: bool,
                    one_channel: bool) -> _TrackEvidence:
    span = calibration.track_bottom - calibration.track_top
    half = max(1, min(round(0.012 * span), STROKE_HALF_MAX))  # rows either side of a trace that its stroke may cover
    near = _touching(traces, max(2.0 * half + 2.0, 2.0))
    bounds = stretches(near)
    if not any(curve.style or curve.ink or curve.weight for curve in calibration.curves):
        scan = None  # nothing to hold the looks against: anchors alone name the curves
    page = None if scan is None else page_of(scan, calibration.track_top, calibration.track_bottom)
    looks = [list(row) for row in zip(*[_looks(scan, page, t, bounds, near, half) for t in traces], strict=True)]
    shades = not _shades_unread(scan)
    evidence = [_stretch_evidence(calibration.curves, row, shades) for row in looks]
    bridge = round(BRIDGE_SHARE * span)
    if scan is not None and page is not None:
        _add_marks(evidence, calibration.curves, scan, page, traces, bounds, near, half, bridge)
        _add_dots(evidence, calibration.curves, scan, page, traces, bounds, near, half)
    hinted = [scores.copy() for scores in evidence]
    anchored = _add_anchors(evidence, bounds, traces, calibration)
    wraps = [np.zeros_like(scores) for scores in evidence]
    _add_wraps(wraps, bounds, traces, calibration)
    evidence = [scores + said for scores, said in zip(evidence, wraps, strict=True)]
    links = None if assigned or scan is None or page is None else _links(scan, page, traces, bounds, near, half, looks)
    turns = _continuity(traces, bounds, near) if one_channel and not assigned else None
    return _TrackEvidence(scan, page, half, near, bounds, looks, shades, evidence, hinted, wraps, anchored, bridge,
                          links, turns)


def _named(track: _TrackEvidence, traces: list[ColumnTrace], calibration: Calibration, assigned: bool,
           checked: bool, signs: list[float]) -> Naming:
    """`name_traces`'s naming of the track's traces from its evidence, the declared weights read by `signs`
    (`_weight_signs`)."""
    scan, page, bounds, looks = track.scan, track.page, track.bounds, track.looks
    links, turns = track.links, track.turns
    evidence = [scores.copy() for scores in track.evidence]
    # The names' verdicts stand on the evidence without the weights: a pen's width names curves better than
    # nothing, but two curves told apart by weight alone are not vouched for (tuning seed 8888 of the independent
    # renderer: three curves named wrong without a flag where the verdicts weighed it; bench/README.md, 2026-11-29).
    # Traces the tracer `assigned` keep their curves: the weights would name nothing.
    vouched = evidence
    if not assigned and scan is not None and page is not None and any(signs):
        vouched = [scores.copy() for scores in evidence]
        _add_weights(evidence, signs, track.pen_widths(traces))
    kept = [tuple(range(len(traces)))] * len(bounds)  # the tracer's own assignment, every stretch
    # Where the pens link the long stretches, the first path is the one their pens are read off (`_pens_said`),
    # found without the lines through the touches: found with them, it set a pair's pens wrong on the generator's
    # held-out page 5150/5, and the pens then named the pair wrong without a flag.
    path = kept if assigned else _best_path(evidence, links, None if links is not None else turns)
    if links is not None and scan is not None and page is not None:
        path = _best_path(_pens_said(evidence, links, path, track.pen_widths(traces)), links, turns)
    named = _stitch(traces, bounds, path)
    if assigned or checked:
        # The tracer traced each curve on the levels it declares (`joint.hint_levels`): a trace's wraps are its
        # reading of those hints, so they vouch for no name. On the independent renderer's tuning log 8888/53 a
        # solid black RT (backup scale right) and CALI (left) were read on each other's ink over a third of the
        # log, wraps and all, and named without a flag by the wraps alone (bench/README.md, 2026-12-07).
        vouched = [scores - said for scores, said in zip(vouched, track.wraps, strict=True)]
    unhinted = _unhinted(vouched, track.hinted, calibration.curves)
    identity = _verdicts(path, track.anchored, bounds, unhinted)
    reading = _Reading(scan, page, track.near, track.half, track.bridge)
    named_looks = [[row[a[c]] for row, a in zip(looks, path, strict=True)] for c in range(len(calibration.curves))]
    shade_read = _shades_by_order(calibration.curves, named_looks)
    inked = [_inked_share(curve_looks) for curve_looks in named_looks]
    read = [_contradictions(curve, named_looks[c], named[c], calibration, reading, inked[c], shade_read[c])
            for c, curve in enumerate(calibration.curves)]
    warnings = [lines + _unseen_ink(curve, scan, calibration)
                for (lines, _), curve in zip(read, calibration.curves, strict=True)]
    identity = _doubted(identity, [seen for _, seen in read], calibration, track.shades, inked)
    if not assigned:
        for i, j in _order_doubted(_duty_evidence(calibration.curves, looks, evidence), path, calibration.curves):
            identity[i] = identity[j] = "ambiguous"
            for a, b in ((i, j), (j, i)):
                warnings[a] = (*warnings[a], _order_warning(calibration.curves[a], calibration.curves[b],
                                                            inked[a], inked[b]))
    naming = Naming(named, identity, warnings)
    if checked and not assigned:
        second = Naming(_stitch(traces, bounds, kept), _verdicts(kept, track.anchored, bounds, unhinted),
                        [()] * len(traces))
        naming = checked_against(naming, second)
    return naming


# A named trace that runs on another's (within DOUBLED_U of the track, at least a row) over this share of its
# columns may follow that curve and not its own: a curve the segmenter barely sees (a thin or light broken
# stroke) is traced along its neighbour's ink, by the tracer or by its tone after the naming, and its hints,
# read on that ink, may still name it. On the tuning seeds (6666, 7777, 8888 and 9999 of the generator, 7777 and
# 8888 of the independent renderer; 60 full-resolution logs each), no curve left named ran on another curve's
# trace over more than 0.29 of its columns; the one this flags, named wrong without a flag before, ran on its
# neighbour's over 0.52 (bench/README.md, 2026-12-04). Within 0.01 of the track, a faint light curve's trace that
# ran beside a thick dark curve's ink, a row or more off its trace, was on it over only 0.32 of its columns (tuning
# seed 6666 of the generator, log 55: named wrong without a flag); within 0.02, 0.50, where no right-named curve
# of those tuning sets was over 0.30 but that curve's partner (bench/README.md, 2026-12-07).
DOUBLED_SHARE = 0.35
DOUBLED_U = 0.02


def doubled_shares(traces: list[ColumnTrace], span: float) -> list[float]:
    """Per trace: the share of its traced columns where another trace runs within DOUBLED_U of the track's
    `span` (at least a row) of it, on the same ink."""
    distance = max(1.0, DOUBLED_U * span)
    shares = []
    with np.errstate(invalid="ignore"):
        for k, trace in enumerate(traces):
            found = np.isfinite(trace.row)
            on = np.zeros(trace.row.size, dtype=bool)
            for j, other in enumerate(traces):
                if j != k:
                    on |= np.abs(trace.row - other.row) <= distance
            shares.append(float(on[found].mean()) if found.any() else 0.0)
    return shares


def doubled(naming: Naming, calibration: Calibration) -> Naming:
    """``naming`` with every curve flagged ambiguous, and warned, whose named trace runs on another curve's
    over more than DOUBLED_SHARE of its columns: there the one ink was traced twice, and which of the curves it is
    the scan does not say. Held against the traces a result gives (`curves.calibrate`), after every step that
    may retrace a curve."""
    if len(naming.traces) < 2:
        return naming
    shares = doubled_shares(naming.traces, calibration.track_bottom - calibration.track_top)
    identity, warnings = list(naming.identity), list(naming.warnings)
    for k, share in enumerate(shares):
        if share > DOUBLED_SHARE:
            identity[k] = "ambiguous"
            warnings[k] = (*warnings[k], f"the trace named {calibration.curves[k].mnemonic} runs on another curve's "
                           f"trace over {100 * share:.0f} % of its length: it may follow that curve, not its own")
    return replace(naming, identity=identity, warnings=warnings)


def _touching(traces: list[ColumnTrace], distance: float) -> np.ndarray:
    """Columns where the tracer may have swapped traces: where two traces come within `distance` rows or
    change sides (a step can carry a curve across another between two columns), and where a trace jumps
    by more than `distance` rows or starts or stops (it may have been handed another curve there)."""
    width = traces[0].u.size if traces else 0
    near = np.zeros(width, dtype=bool)
    with np.errstate(invalid="ignore"):
        for a, b in itertools.combinations(traces, 2):
            near |= np.abs(a.row - b.row) <= distance
            both = np.flatnonzero(np.isfinite(a.row) & np.isfinite(b.row))
            side = np.sign(a.row[both] - b.row[both])
            near[both[1:][side[1:] != side[:-1]]] = True
        for trace in traces:
            found = np.isfinite(trace.row)
            near[1:] |= found[1:] != found[:-1]
            near[1:] |= np.abs(np.diff(trace.row)) > distance
    return near


def stretches(near: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) column ranges cut at the middle of every run of touching columns."""
    edges = np.flatnonzero(np.diff(near.astype(np.int8))) + 1
    starts = edges[near[edges]] if edges.size else edges
    stops = edges[~near[edges]] if edges.size else edges
    if near.size and near[0]:
        starts = np.concatenate([[0], starts])
    if near.size and near[-1]:
        stops = np.concatenate([stops, [near.size]])
    cuts = [int((a + b) // 2) for a, b in zip(starts.tolist(), stops.tolist(), strict=True)
            if 0 < (a + b) // 2 < near.size]
    bounds = [0, *sorted(set(cuts)), int(near.size)]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def _looks(scan: ScanPixels | None, page: Page | None, trace: ColumnTrace, bounds: list[tuple[int, int]],
           near: np.ndarray, half: int) -> list[Look | None]:
    """The trace's look in each stretch, over its columns away from other traces, or None with too little
    to see."""
    if scan is None or page is None:
        return [None] * len(bounds)
    cols = np.flatnonzero(np.isfinite(trace.row) & ~near)
    return looks_along(scan, page, trace.row[cols], cols, half, bounds, MIN_COLUMNS)


def _stretch_evidence(curves: tuple[CurveScale, ...], looks: list[Look | None], shades: bool = True) -> np.ndarray:
    """(curves, traces): how well each trace's look in one stretch agrees with each curve's hints (`dark`
    and `light` ones only where the scan `shades` its inks: `ScanPixels.tones_unread`)."""
    scores = np.zeros((len(curves), len(looks)))
    for t, look in enumerate(looks):
        if look is None:
            continue
        weight = math.sqrt(look.columns)  # a longer stretch is surer, as a sample mean is
        styles, inks = style_scores(look), ink_scores(look)
        for c, curve in enumerate(curves):
            if curve.style is not None:
                scores[c, t] += weight * (2.0 * styles[curve.style] - 1.0)
            if curve.ink is not None and (shades or curve.ink not in INK_SHADES):
                scores[c, t] += weight * inks[curve.ink]
    return scores


def _add_marks(evidence: list[np.ndarray], curves: tuple[CurveScale, ...], scan: ScanPixels, page: Page,
               traces: list[ColumnTrace], bounds: list[tuple[int, int]], near: np.ndarray, half: int,
               bridge: int) -> None:
    """In place: what the marks of ink along each trace say of the curves' declared styles, stretch by stretch
    (`ink.marks_evidence`, MARKS_WEIGHT per unit of log-likelihood against the mean of the styles). A mark
    speaks in every stretch it runs through, by its share of columns there, so a dash that a jagged track's
    stretches cut into pieces still reads as a dash, where each piece's own columns read as solid."""
    styled = [c for c, curve in enumerate(curves) if curve.style is not None]
    if not styled:
        return
    declared = [MARK_STYLES.index(curves[c].style) for c in styled]
    for t, trace in enumerate(traces):
        cols = np.flatnonzero(np.isfinite(trace.row) & ~near)
        if cols.size < 2:
            continue
        loglik = marks_evidence(scan, page, trace.row[cols], cols, half, bridge).loglik
        per_stretch = _stretch_sums(loglik - loglik.mean(axis=1, keepdims=True), cols, bounds)
        for scores, said in zip(evidence, MARKS_WEIGHT * per_stretch[:, declared], strict=True):
            scores[styled, t] += said


def _stretch_sums(values: np.ndarray, cols: np.ndarray, bounds: list[tuple[int, int]]) -> np.ndarray:
    """Per stretch of `bounds`, the sum of `values` over a trace's measured columns `cols` (ascending; `values`
    has one row per column)."""
    summed = np.concatenate([np.zeros((1, *values.shape[1:])), np.cumsum(values, axis=0)])
    starts = np.searchsorted(cols, [a for a, _ in bounds])
    stops = np.searchsorted(cols, [b for _, b in bounds])
    return summed[stops] - summed[starts]


def _add_dots(evidence: list[np.ndarray], curves: tuple[CurveScale, ...], scan: ScanPixels, page: Page,
              traces: list[ColumnTrace], bounds: list[tuple[int, int]], near: np.ndarray, half: int) -> None:
    """In place, in a track that declares dotted curves beside curves of other styles: in every stretch, a
    trace's share of columns on dots (`dots.dotted_columns`: its ink there a piece of a few pen widths) speaks
    for the dotted curves and against the others, DOT_WEIGHT by the square root of its columns, fully from
    DOT_HIGH up and fully the other way at DOT_LOW or below. Where a dotted curve moves several rows a column
    its dots cover most columns and touch along the band the marks read, so both other readings take it for
    solid; its dots are still apart on the scan."""
    styled = [c for c, curve in enumerate(curves) if curve.style is not None]
    dotted = [c for c in styled if curves[c].style == "dotted"]
    if not dotted or len(dotted) == len(styled):
        return
    sign = np.array([1.0 if curves[c].style == "dotted" else -1.0 for c in styled])
    for t, trace in enumerate(traces):
        cols = np.flatnonzero(np.isfinite(trace.row) & ~near)
        if cols.size < 2:
            continue
        found, dots = dotted_columns(scan, page, trace.row[cols], cols, half)
        n, on_dots = _stretch_sums(np.stack([found, dots], axis=1).astype(np.float64), cols, bounds).T
        share = on_dots / np.maximum(n, 1)
        said = DOT_WEIGHT * np.sqrt(n) * (2.0 * np.clip((share - DOT_LOW) / (DOT_HIGH - DOT_LOW), 0.0, 1.0) - 1.0)
        said = np.where(n >= MIN_COLUMNS, said, 0.0)
        for scores, value in zip(evidence, said, strict=True):
            scores[styled, t] += value * sign


def _weight_signs(curves: tuple[CurveScale, ...], dots_as_pens: bool = False) -> list[float]:
    """Per curve: +1 for thick, -1 for thin, where its declared weight tells it from a curve whose pen is read
    alike (DOT_STYLES: dots against dots, lines against lines; `dots_as_pens`: any against any); else 0."""
    dots = [curve.style in DOT_STYLES and not dots_as_pens for curve in curves]
    differ = {kind: set(WEIGHT_SIGNS) <= {c.weight for c, d in zip(curves, dots, strict=True) if d == kind}
              for kind in (False, True)}
    return [WEIGHT_SIGNS.get(curve.weight or "", 0.0) if differ[d] else 0.0
            for curve, d in zip(curves, dots, strict=True)]


def _add_weights(evidence: list[np.ndarray], signs: list[float], widths: list[list[PenWidth | None]]) -> None:
    """In place: what the traces' pen widths (`widths`: per trace, per stretch) say of the curves' declared
    weights (`signs`, per curve: `_weight_signs`), in every stretch where each trace's pen is read (WEIGHT_WEIGHT,
    WEIGHT_CAP). Weights are relative: a pen is thick beside the track's others, whatever its width in pixels."""
    for s, scores in enumerate(evidence):
        pens = [pen for pen in (trace_widths[s] for trace_widths in widths) if pen is not None]
        if len(pens) < len(widths):
            continue
        logs = [math.log(max(pen.px, 0.5)) for pen in pens]
        mean = sum(logs) / len(logs)
        for t, (pen, value) in enumerate(zip(pens, logs, strict=True)):
            said = min(max((value - mean) / max(pen.error / max(pen.px, 0.5), 1e-3), -WEIGHT_CAP), WEIGHT_CAP)
            for c, sign in enumerate(signs):
                scores[c, t] += WEIGHT_WEIGHT * sign * said


def _duty_evidence(curves: tuple[CurveScale, ...], looks: list[list[Look | None]],
                   like: list[np.ndarray]) -> list[np.ndarray] | None:
    """Per stretch, (curves, traces): what each trace's share of inked columns, beside the other traces' there,
    says of the curves' declared styles (DUTY); None where the declared styles do not differ in it."""
    declared = np.array([DUTY.get(curve.style or "", np.nan) for curve in curves])
    known = np.isfinite(declared)
    if np.count_nonzero(known) < 2 or np.nanmax(declared) == np.nanmin(declared):
        return None
    said = np.where(known, (declared - np.nanmean(declared)) / (np.nanmax(declared) - np.nanmin(declared)), 0.0)
    evidence = [np.zeros_like(scores) for scores in like]
    for scores, row in zip(evidence, looks, strict=True):
        seen = [(t, look) for t, look in enumerate(row) if look is not None]
        if len(seen) < 2:
            continue
        shares = np.array([float(look.inked.mean()) for _, look in seen])
        mean = float(shares.mean())
        for (t, look), share in zip(seen, shares, strict=True):
            scores[:, t] += math.sqrt(look.columns) * min(max((share - mean) / DUTY_SCALE, -1.0), 1.0) * said
    return evidence


def _order_doubted(evidence: list[np.ndarray] | None, path: list[Assignment],
                   curves: tuple[CurveScale, ...]) -> list[tuple[int, int]]:
    """The pairs of curves, of declared styles that ink different shares (DUTY), whose swap the `evidence`
    (`_duty_evidence`) favours over the whole track, by more than AMBIGUOUS_MARGIN and DUTY_SHARE of what it
    says, stretch by stretch, either way. A curve of no declared style could ink any share: it is in no pair."""
    n = len(path[0]) if path else 0
    if evidence is None or n < 2:
        return []
    duty = [DUTY.get(curve.style or "") for curve in curves]
    pairs = []
    for i, j in itertools.combinations(range(n), 2):
        if duty[i] is None or duty[j] is None or duty[i] == duty[j]:
            continue
        swapped = _swapped(path, i, j)
        gain = np.array([_score(e, b) - _score(e, a) for e, a, b in zip(evidence, path, swapped, strict=True)])
        if gain.sum() > max(AMBIGUOUS_MARGIN, DUTY_SHARE * float(np.abs(gain).sum())):
            pairs.append((i, j))
    return pairs


def _inked_share(looks: list[Look | None]) -> float | None:
    """The share of a named trace's seen columns that are inked."""
    seen = [look for look in looks if look is not None]
    columns = sum(look.columns for look in seen)
    return sum(int(np.count_nonzero(look.inked)) for look in seen) / columns if columns else None


def _order_warning(curve: CurveScale, other: CurveScale, share: float | None, others: float | None) -> str:
    def inked(value: float | None) -> str:
        return "" if value is None else f" (ink in {100 * value:.0f} % of its columns)"
    return (f"the trace named {curve.mnemonic}{inked(share)} and the one named {other.mnemonic}{inked(others)} "
            f"ink their lengths the other way round from their declared styles ({curve.style} and {other.style}): "
            "the names may be swapped")


def _add_anchors(evidence: list[np.ndarray], bounds: list[tuple[int, int]], traces: list[ColumnTrace],
                 calibration: Calibration) -> set[int]:
    """Anchor evidence added in the stretches the anchors fall in; returns the curves an anchor spoke for."""
    anchored: set[int] = set()
    width = traces[0].u.size if traces else 0
    reach = max(3, width // 200)  # columns either side to find the trace at an anchor's depth
    for c, curve in enumerate(calibration.curves):
        for anchor in curve.anchors:
            col = int(round(float(calibration.depth.column_of(anchor.depth))))
            s = next((k for k, (a, b) in enumerate(bounds) if a <= col < b), None)
            if s is None:
                continue
            wanted = curve.to_fraction(anchor.value)
            for t, trace in enumerate(traces):
                evidence[s][c, t] -= ANCHOR_WEIGHT * min(_distance_at(trace, col, wanted, reach), 1.0)
            anchored.add(c)
    return anchored


def _add_wraps(evidence: list[np.ndarray], bounds: list[tuple[int, int]], traces: list[ColumnTrace],
               calibration: Calibration) -> None:
    """In place: a trace read on a backup scale past an edge speaks against every curve that declares no
    backup scale on that side (a misread wrap is possible, so as a measure, not as an anchor)."""
    for s, (a, b) in enumerate(bounds):
        for t, trace in enumerate(traces):
            level = trace.level[a:b][np.isfinite(trace.u[a:b])]
            for side in np.unique(level[level != 0]).tolist():
                columns = int(np.count_nonzero(level == side))
                for c, curve in enumerate(calibration.curves):
                    if side not in curve.wrap_levels:
                        evidence[s][c, t] -= WRAP_WEIGHT * math.sqrt(columns)


def _distance_at(trace: ColumnTrace, col: int, fraction: float, reach: int) -> float:
    """Track widths between the trace near column `col` and `fraction` (unwrapped); inf where it is absent."""
    lo, hi = max(0, col - reach), min(trace.u.size, col + reach + 1)
    found = np.flatnonzero(np.isfinite(trace.u[lo:hi]))
    if found.size == 0:
        return math.inf
    nearest = lo + int(found[np.argmin(np.abs(found + lo - col))])
    return abs(float(trace.u[nearest]) - fraction)


def _assignments(n: int) -> list[Assignment]:
    return list(itertools.permutations(range(n)))


def _score(evidence: np.ndarray, assignment: Assignment) -> float:
    return float(sum(evidence[c, t] for c, t in enumerate(assignment)))


def _swapped(path: list[Assignment], i: int, j: int) -> list[Assignment]:
    """`path` with curves `i` and `j` read from each other's traces in every stretch."""
    return [tuple(a[j] if c == i else a[i] if c == j else a[c] for c in range(len(a))) for a in path]


# Where the traces touch, which of them goes on as which is the tracer's guess: the joint tracer's paths cost only
# their movement from column to column, so at a crossing of two curves drawn alike, going on straight and
# turning back cost the same. Across each cut between stretches, every trace's line fitted over the last
# CONTINUITY_COLUMNS columns it is seen in before the touch is held against every trace's line over the first as
# many after it: how far each line is, at the other's window, from the other, in CONTINUITY_U of the track, at most
# CONTINUITY_CAP, weighed CONTINUITY_WEIGHT per unit beside the least such cost (`_continuity`). Straight through
# a crossing both lines agree. Two curves that come together at a slope and part again, each turning back, read as
# a crossing too (a strict xfail in tests/core/test_identity.py): a line cannot tell them. Tuning seeds 1 and
# 2 of the independent page renderer (20 pages each, bench/page_segment_eval.py) and 7777 of both strip renderers
# (60 full-resolution logs, bench/digitise_eval.py): at 1 the pages' error went 10.98 -> 10.87 % and 8.98 ->
# 8.72 %; at 3, 10.49 % and 8.77 %, and the strips' 9.68 -> 9.58 % (independent) and 6.37 -> 6.18 % (generator);
# at 6 no better than 3. Fitted 30 columns each side, or held only where the lines meet at the touch's middle, no
# better either. Held out, as it stands: the independent renderer's pages (seed 4) 13.58 -> 13.33 % and strips
# (seed 424242) 10.49 -> 9.88 %, the generator's strips 4.49 -> 4.29 %, its pages (seed 5150) 6.86 -> 6.92 %
# (bench/README.md, 2026-12-07).
CONTINUITY_WEIGHT = 3.0
CONTINUITY_COLUMNS = 10
CONTINUITY_U = 0.02
CONTINUITY_CAP = 4.0


def _line(cols: np.ndarray, values: np.ndarray) -> tuple[float, float, float] | None:
    """The least-squares line through (cols, values): (slope, value at the columns' mean, that mean); None under
    half of CONTINUITY_COLUMNS points."""
    if cols.size < max(2, CONTINUITY_COLUMNS // 2):
        return None
    centre = float(cols.mean())
    x = cols - centre
    return float(np.dot(x, values - values.mean()) / np.dot(x, x)), float(values.mean()), centre


def _continuity(traces: list[ColumnTrace], bounds: list[tuple[int, int]], near: np.ndarray) -> list[np.ndarray]:
    """Per cut between two stretches (`bounds`, cut in the runs of touching columns `near`): (traces, traces), what
    going on from each trace before the touch as each trace after it costs, in CONTINUITY_U of the track (at most
    CONTINUITY_CAP): each trace's line over the last CONTINUITY_COLUMNS columns it is seen in before the run of
    touching columns, the other's over the first as many after it, each held at the other's window's middle, and
    the two distances averaged. Nothing where a trace is seen too little either side."""
    width = near.size
    cols = np.arange(width, dtype=np.float64)
    reach = 4 * CONTINUITY_COLUMNS
    out = []
    for start, _ in bounds[1:]:
        lo, hi = start, start
        while lo > 0 and near[lo - 1]:
            lo -= 1
        while hi < width and near[hi]:
            hi += 1
        lines = []
        for window, last in ((slice(max(0, lo - reach), lo), True), (slice(hi, min(width, hi + reach)), False)):
            side = []
            for trace in traces:
                seen = np.flatnonzero(np.isfinite(trace.u[window]))
                seen = seen[-CONTINUITY_COLUMNS:] if last else seen[:CONTINUITY_COLUMNS]
                side.append(_line(cols[window][seen], trace.u[window][seen]))
            lines.append(side)
        cost = np.zeros((len(traces), len(traces)))
        for i, a in enumerate(lines[0]):
            for j, b in enumerate(lines[1]):
                if a is not None and b is not None:
                    off = 0.5 * (abs(a[1] + a[0] * (b[2] - a[2]) - b[1]) + abs(b[1] + b[0] * (a[2] - b[2]) - a[1]))
                    cost[i, j] = min(off / CONTINUITY_U, CONTINUITY_CAP)
        out.append(cost)
    return out


def _best_path(evidence: list[np.ndarray], links: _Links | None = None,
               turns: list[np.ndarray] | None = None) -> list[Assignment]:
    """The assignment per stretch with the most evidence, less SWITCH_COST per change, less, where `turns` are
    given (`_continuity`, per cut), CONTINUITY_WEIGHT times what each curve going on from its trace before the cut as
    its trace after it costs beyond the least any assignment after it costs, and, where `links` are
    given, less what continuing each curve's trace of one long stretch as its trace of the next long stretch
    costs (`_Links.between`); ties keep the tracer's order (the identity assignment).

    Viterbi over (the assignment at the last long stretch, the assignment now): the short stretches between
    two long ones may change the names as their evidence says, and the change is charged at the next long
    stretch by how far its traces' pens are from those the curves had at the last. A track is cut into
    stretches wherever its traces touch or one jumps by more than a stroke: a jagged curve's track into
    stretches of about ten columns (bench/README.md, 2026-11-28), too few for a pen's width to tell."""
    if not evidence:
        return []
    options = _assignments(evidence[0].shape[0])
    count = len(options)
    table = np.array(options, dtype=np.int64)  # (assignments, curves): the trace each curve is read from
    curves = np.arange(table.shape[1])
    switch = np.where(np.eye(count, dtype=bool), 0.0, SWITCH_COST)  # [before, now]
    long = set() if links is None else set(links.long)
    # total[p, a]: the best score with assignment p at the last long stretch (any, before the first) and a now
    total = np.full((count, count), -np.inf)
    first = evidence[0][curves, table].sum(axis=1)
    first[0] += 1e-9  # the identity: itertools lists it first
    total[np.arange(count), np.arange(count)] = first
    previous = 0 if 0 in long else None  # the last long stretch
    back: list[np.ndarray] = []
    for s in range(1, len(evidence)):
        scores = evidence[s][curves, table].sum(axis=1)
        turn = switch
        if turns is not None:  # each curve going on from its trace before the cut as its trace after it
            went = turns[s - 1][table[:, None, :], table[None, :, :]].sum(axis=2)  # [before, now]
            turn = switch + CONTINUITY_WEIGHT * (went - went.min(axis=1, keepdims=True))
        reach = total[:, :, None] - turn[None, :, :]  # [p, before, now]
        if s in long:
            cost = np.zeros((count, count))
            if previous is not None and links is not None:
                cost = links.between(previous, s)[table[:, None, :], table[None, :, :]].sum(axis=2)  # [p, now]
            best = reach.reshape(count * count, count) - np.repeat(cost, count, axis=0)  # [(p, before), now]
            came_flat = best.argmax(axis=0)
            now = best[came_flat, np.arange(count)] + scores
            total = np.full((count, count), -np.inf)
            total[np.arange(count), np.arange(count)] = now
            came = np.full((count, count), -1, dtype=np.int64)
            came[np.arange(count), np.arange(count)] = came_flat
            previous = s
        else:
            came = reach.argmax(axis=1)  # [p, now]: the best before
            total = np.take_along_axis(reach, came[:, None, :], axis=1)[:, 0, :] + scores[None, :]
            came = came + np.arange(count)[:, None] * count  # as (p, before) flat
        back.append(came)
    state = int(total.argmax())  # flat (p, now)
    path = [options[state % count]]
    for came in reversed(back):
        state = int(came[state // count, state % count])
        path.append(options[state % count])
    return path[::-1]


@dataclass(frozen=True)
class _Links:
    """A track's long stretches (every trace seen over LINK_COLUMNS columns or more) and its traces' pen widths
    in each of them, where the pens tell its curves apart (`_links`)."""

    long: tuple[int, ...]
    widths: dict[int, list[PenWidth | None]]  # per long stretch, per trace

    def between(self, s: int, t: int) -> np.ndarray:
        """(traces, traces): what continuing each trace of long stretch `s` as each trace of long stretch `t`
        costs: the standard errors by which the width moves beyond PEN_SLACK of them, at most PEN_CAP."""
        before, after = self.widths[s], self.widths[t]
        cost = np.zeros((len(before), len(after)))
        for i, a in enumerate(before):
            for j, b in enumerate(after):
                if a is not None and b is not None:
                    cost[i, j] = _pen_moved(a, b, PEN_CAP)
        return cost


def _pen_moved(width: PenWidth, pen: PenWidth, cap: float) -> float:
    """The standard errors by which `width` is off `pen`, beyond PEN_SLACK of them, at most `cap`."""
    return min(max(0.0, abs(width.px - pen.px) / math.hypot(width.error, pen.error) - PEN_SLACK), cap)


def _links(scan: ScanPixels, page: Page, traces: list[ColumnTrace], bounds: list[tuple[int, int]],
           near: np.ndarray, half: int, looks: list[list[Look | None]]) -> _Links | None:
    """The track's `_Links` where its curves are drawn with pens of different widths, else None. Each trace's
    pen is read in the long stretches alone (`ink.stroke_widths`), over its columns away from other traces
    and across the rows within which another trace would touch it."""
    if len(traces) < 2:
        return None
    long = tuple(s for s, row in enumerate(looks)
                 if all(look is not None and look.columns >= LINK_COLUMNS for look in row))
    spans = [bounds[s] for s in long]
    per_trace = [_pen_widths(scan, page, trace, spans, near, half) for trace in traces]
    widths = {s: [pens[k] for pens in per_trace] for k, s in enumerate(long)}
    apart = [min(abs(math.log(max(a.px, 0.5) / max(b.px, 0.5))) for a, b in itertools.combinations(measured, 2))
             for measured in ([pen for pen in pens if pen is not None] for pens in widths.values())
             if len(measured) == len(traces)]
    if len(apart) < PEN_STRETCHES or float(np.median(apart)) < PEN_APART:
        return None
    return _Links(long, widths)


def _pen_widths(scan: ScanPixels, page: Page, trace: ColumnTrace, spans: list[tuple[int, int]], near: np.ndarray,
                half: int) -> list[PenWidth | None]:
    """A trace's pen width in each span (`ink.stroke_widths`), over its columns away from other traces and
    across the rows within which another trace would touch it."""
    cols = np.flatnonzero(np.isfinite(trace.row) & ~near)
    return stroke_widths(scan, page, trace.row[cols], cols, 2 * half + 2, spans, MIN_COLUMNS)


def _pens_said(evidence: list[np.ndarray], links: _Links, path: list[Assignment],
               widths: list[list[PenWidth | None]]) -> list[np.ndarray]:
    """`evidence` with what each curve's pen says in every stretch. A curve's pen is the median of the widths
    of the traces `path` names it by in the long stretches, give or take their spread (1.4826 median absolute
    deviations, at least PEN_QUANTUM); a trace (`widths`: per trace, per stretch) as far from it as PEN_SLACK
    standard errors or more speaks against the curve by the excess, at most PEN_SAID. Which curve is which
    is still the hints' to say: a pen is a curve's own along the track, not a name."""
    pens: list[PenWidth | None] = []  # per curve: its pen's width, give or take its spread
    for c in range(len(widths)):
        read = np.array([w.px for w in (links.widths[s][path[s][c]] for s in links.long) if w is not None])
        if read.size == 0:
            pens.append(None)
            continue
        centre = float(np.median(read))
        pens.append(PenWidth(centre, max(1.4826 * float(np.median(np.abs(read - centre))), PEN_QUANTUM)))
    said = []
    for s, scores in enumerate(evidence):
        against = np.zeros(scores.shape)
        for t, trace_widths in enumerate(widths):
            width = trace_widths[s]
            for c, pen in enumerate(pens):
                if width is not None and pen is not None:
                    against[c, t] = _pen_moved(width, pen, PEN_SAID)
        said.append(scores - against)
    return said


def _verdicts(path: list[Assignment], anchored: set[int], bounds: list[tuple[int, int]],
              weighed: Callable[[int, int], list[np.ndarray]]) -> list[str]:
    """Per curve: ambiguous where swapping it with another curve over a run of stretches at least
    AMBIGUOUS_SHARE of the log's columns long (the whole log included) loses less than AMBIGUOUS_MARGIN
    of evidence; else anchored (an anchor spoke for it) or hinted. An anchor or a telling stretch vouches
    for the names about it, not for a part of the log where nothing tells the curves apart and the tracer
    may have swapped them where they touch. `weighed(i, j)` is the evidence, per stretch, that weighs the swap
    of curves i and j (`_unhinted`)."""
    n = len(path[0]) if path else 0
    if n == 1:
        return ["single"]
    lengths = np.array([b - a for a, b in bounds], dtype=np.float64)
    total = float(lengths.sum())
    ambiguous: set[int] = set()
    for i, j in itertools.combinations(range(n), 2):
        swapped = _swapped(path, i, j)
        lost = np.array([_score(e, a) - _score(e, b) for e, a, b in zip(weighed(i, j), path, swapped, strict=True)])
        if _cheap_swap(lost, lengths, total):
            ambiguous |= {i, j}
    return ["ambiguous" if c in ambiguous else "anchored" if c in anchored else "hinted" for c in range(n)]


def _unhinted(evidence: list[np.ndarray], hinted: list[np.ndarray],
              curves: tuple[CurveScale, ...]) -> Callable[[int, int], list[np.ndarray]]:
    """For a pair of curves, the evidence that may tell them apart: all of it where their hints differ in a
    style or an ink both declare; else only what is not the hints' (anchors, wraps). A hint says what its own
    curve looks like, not what a curve with no hint of that kind does not: a declared "dotted" beside a curve of
    no declared style tells nothing apart, for that curve may be dotted too, and a look that merely fits the
    hint better (a wide pen's trace reading darker than a thin one's) would vouch for a guess. Where every two
    curves' hints differ or match in full, as a header legend gives them, nothing changes: matching hints weigh
    a swap at nothing (bench/page_segment_eval.py --hints read, 2026-12-06)."""
    rest = [total - said for total, said in zip(evidence, hinted, strict=True)]

    def weighed(i: int, j: int) -> list[np.ndarray]:
        a, b = curves[i], curves[j]
        apart = any(x is not None and y is not None and x != y for x, y in ((a.style, b.style), (a.ink, b.ink)))
        return evidence if apart else rest
    return weighed


def _cheap_swap(lost: np.ndarray, lengths: np.ndarray, total: float) -> bool:
    """Whether some run of consecutive stretches covering AMBIGUOUS_SHARE of the columns loses less than
    AMBIGUOUS_MARGIN of evidence when swapped (`lost` per stretch; a run may start and end anywhere)."""
    cost = np.concatenate([[0.0], np.cumsum(lost)])
    covered = np.concatenate([[0.0], np.cumsum(lengths)])
    ends = np.searchsorted(covered, covered[:-1] + AMBIGUOUS_SHARE * total - 1e-9)  # shortest run from each start
    later = np.minimum.accumulate(cost[::-1])[::-1]  # the cheapest end at or after each index
    starts = np.flatnonzero(ends < cost.size)
    return bool(np.any(later[ends[starts]] - cost[starts] < AMBIGUOUS_MARGIN))


def _stitch(traces: list[ColumnTrace], bounds: list[tuple[int, int]], path: list[Assignment]) -> list[ColumnTrace]:
    """One trace per curve, each stretch taken from the trace its assignment names."""
    named = []
    for c in range(len(traces)):
        parts = [traces[assignment[c]] for assignment in path]
        def joined(name: str, parts: list[ColumnTrace] = parts) -> np.ndarray:
            return np.concatenate([getattr(p, name)[a:b] for p, (a, b) in zip(parts, bounds, strict=True)])
        named.append(ColumnTrace(joined("u"), joined("level"), joined("row"), joined("confidence"), joined("bridged")))
    return named


def _vote(looks: list[Look], label: Callable[[Look], str]) -> str:
    votes: dict[str, int] = {}
    for look in looks:
        votes[label(look)] = votes.get(label(look), 0) + look.columns
    return max(votes, key=votes.__getitem__)


def _unseen_ink(curve: CurveScale, scan: ScanPixels | None, calibration: Calibration) -> tuple[str, ...]:
    """An ink hint the upload cannot bear out says nothing, and the user should know it went unused: a
    colour on a gray scan, and a tone on a thresholded 1-bit scan in a track where light ink was to tell
    curves apart."""
    if scan is not None and scan.colour is None and curve.ink in INK_COLOURS:
        return (f"declared ink {curve.ink}, but the scan is gray: colour hints need a colour upload",)
    if _shades_unread(scan) and curve.ink in INK_SHADES and any(c.ink == "light" for c in calibration.curves) \
            and len(calibration.curves) > 1:
        return (f"declared ink {curve.ink}, but the scan is 1-bit (thresholded): ink tones cannot be read on it, so "
                "they do not tell its curves apart",)
    return ()


def _shades_unread(scan: ScanPixels | None) -> bool:
    return scan is not None and scan.tones_unread


@dataclass(frozen=True)
class _Reading:
    """What `_contradictions` needs to read a named trace's marks on the scan (`ink.marks_style`)."""

    scan: ScanPixels | None
    page: Page | None
    near: np.ndarray  # columns where traces touch: another curve's ink there is no break of this one's
    half: int
    bridge: int

    def marks(self, trace: ColumnTrace) -> MarksReading | None:
        if self.scan is None or self.page is None:
            return None
        cols = np.flatnonzero(np.isfinite(trace.row) & ~self.near)
        return marks_style(self.scan, self.page, trace.row[cols], cols, self.half, self.bridge)

    def on_dots(self, trace: ColumnTrace) -> bool:
        """Whether the trace's ink lies on dots (`dots.dotted_columns`) in DOT_HIGH of its columns or more, over
        at least MIN_WARN_COLUMNS."""
        if self.scan is None or self.page is None:
            return False
        cols = np.flatnonzero(np.isfinite(trace.row) & ~self.near)
        found, dots = dotted_columns(self.scan, self.page, trace.row[cols], cols, self.half)
        seen = int(np.count_nonzero(found))
        return seen >= MIN_WARN_COLUMNS and int(np.count_nonzero(dots)) >= DOT_HIGH * seen


Seen = tuple[tuple[str, str], ...]  # per hint the scan contradicts: (the hint's field, what the scan shows instead)


def _doubted(identity: list[str], seen: list[Seen], calibration: Calibration, shades: bool = True,
             inked: list[float | None] | None = None) -> list[str]:
    """`identity` with the names the scan contradicts flagged ambiguous: a curve whose named trace does not
    look as its style or ink hint says, or misses one of its anchors, and every other curve whose hint is
    what that trace looks like (a trace that looks solid under a dashed name may be the solid curve's,
    and the solid curve's name then on the dashed one's trace). Either the names are swapped or a hint is
    wrong, and the naming stood on the hints: it vouches for neither. A style read against its hint does
    not flag a curve whose ink is its own in the track and reads as declared: that ink names it, and a
    misread style (bench/README.md: style warnings are often wrong) says nothing about a swap. Without
    this, a name swapped between two curves was flagged on neither when each curve's looks disagreed with
    its own name but the grading of the whole log still favoured the swap (bench/README.md, 2026-11-27).
    Where the scan does not `shades` its inks (`ScanPixels.tones_unread`) a dark or light ink names nothing.
    Given each named trace's share of `inked` columns, a style read against its hint does not flag a swap with a
    curve whose trace inks its columns the other way by INKED_APART or more, as their declared styles do
    (`_inked_in_order`): a dotted curve on a jagged path reads solid by both readings, but still inks less of
    its length than the solid curve beside it, and a swap would have it ink more.
    A curve alone in its track keeps `single`: there is nothing to swap it with."""
    if len(identity) < 2:
        return identity
    curves = calibration.curves

    def named_by_ink(c: int) -> bool:  # never by a tone the scan cannot show
        ink = curves[c].ink
        return (ink is not None and (shades or ink not in INK_SHADES) and sum(curve.ink == ink for curve in curves) == 1
                and all(field != "ink" for field, _ in seen[c]))

    doubted = list(identity)
    for c, contradicted in enumerate(seen):
        for field, shown in contradicted:
            if field == "style" and named_by_ink(c):
                continue
            swaps = [d for d, curve in enumerate(curves)
                     if d != c and field in ("style", "ink") and getattr(curve, field) == shown]
            if field == "style" and swaps and inked is not None:
                swaps = [d for d in swaps if not _inked_in_order(curves[c], curves[d], inked[c], inked[d])]
                if not swaps:  # every curve that looks as the trace does inks its length as its style says
                    continue
            for d in [c, *swaps]:
                if field != "style" or not named_by_ink(d):
                    doubted[d] = "ambiguous"
    return doubted


# How much darker (of the way from the paper to black) every trace named for a dark curve must be than every one
# named for a light curve before their order bears the two shades out. With any order, 3 more of the page
# generator's shared-track curves were named wrong without a flag with the bundled model (seed 5150, 20 pages):
# traces that run on two curves in turn were 0.007 and 0.07-0.09 apart (bench/README.md, 2026-11-30).
SHADES_APART = 0.1
# How much less of its columns a named trace must ink than a trace named for a curve of a style that inks more
# (`DUTY`), or more than one of a style that inks less, before the pair's order bears their styles out against a
# style misread (`_doubted`). On the tuning sets (independent renderer 7777, 8888, 1111; generator 7777, 8888,
# 6666, 9999, 1212, 3434; pages 6060) 19 fewer curves are flagged, 15 of them on the independent renderer, and
# none more is named wrong without a flag; held out, one fewer flagged (bench/README.md, 2026-12-05).
INKED_APART = 0.05


def _inked_in_order(curve: CurveScale, other: CurveScale, share: float | None, others: float | None) -> bool:
    """Whether the named traces of `curve` and `other` (inking `share` and `others` of their seen columns) ink
    their lengths in the order of their declared styles' DUTY, INKED_APART apart or more."""
    duty, other_duty = DUTY.get(curve.style or ""), DUTY.get(other.style or "")
    if duty is None or other_duty is None or duty == other_duty or share is None or others is None:
        return False
    return (others - share if other_duty > duty else share - others) >= INKED_APART


def _shades_by_order(curves: tuple[CurveScale, ...], looks: list[list[Look | None]]) -> list[str | None]:
    """Per curve declared dark or light in a track that declares both: its declared shade where its named trace
    bears it out beside the others', lighter by SHADES_APART than every trace named for a dark curve (a light
    curve) or darker by as much than every trace named for a light one (a dark curve); else None, and its own
    reading says (as where a trace has under MIN_WARN_COLUMNS to show).

    "Dark" and "light" are what a legend tells apart within a log, not tones on a scale. On the page
    generator's pages a gray pen (gray 90-140 on white) and a thin, blurred black dotted line both ink about
    half way to black (`ink.DARK_RATIO`). Held against that mark alone, each was read as the other's shade,
    and with perfect probabilities 101 of 141 shared-track curves were flagged, many of them told apart by
    their hints (bench/README.md, 2026-11-30). The order only bears a shade out: a trace whose order says
    otherwise is held against its own reading, as before (blamed on the order, a light curve was warned against
    where a thin dark dotted one beside it read lighter, on more of the generator's logs)."""
    darkness = [_darkness(row) for row in looks]
    declared = {shade: [d for c, d in enumerate(darkness) if curves[c].ink == shade and d is not None]
                for shade in INK_SHADES}
    if not declared["dark"] or not declared["light"]:
        return [None] * len(curves)
    out: list[str | None] = []
    for curve, d in zip(curves, darkness, strict=True):
        if d is None or curve.ink not in INK_SHADES:
            out.append(None)
        elif curve.ink == "light":
            out.append("light" if d <= min(declared["dark"]) - SHADES_APART else None)
        else:
            out.append("dark" if d >= max(declared["light"]) + SHADES_APART else None)
    return out


def _darkness(looks: list[Look | None]) -> float | None:
    """How dark a named trace's ink is, 0 paper to 1 black, over its stretches' looks; None where they show
    under MIN_WARN_COLUMNS columns, too few to hold against a hint."""
    seen = [look for look in looks if look is not None]
    if sum(look.columns for look in seen) < MIN_WARN_COLUMNS:
        return None
    return float(np.mean([look.ink_ratio for look in seen]))


def _contradictions(curve: CurveScale, looks: list[Look | None], trace: ColumnTrace,
                    calibration: Calibration, reading: _Reading, inked: float | None,
                    shade: str | None = None) -> tuple[tuple[str, ...], Seen]:
    """A line per hint the scan does not bear out for this curve's named trace, and per such hint its field
    and what the scan shows instead ("anchor", "" for a missed anchor): its stretches' looks vote,
    by their columns, on its style and ink. A style is held against its hint only where the looks and the
    marks along the whole trace (`ink.marks_style`) both read another style: each reading misreads its
    own kind of curve (the looks a broken curve that moves several rows a column, the marks a solid one
    whose steep strokes are drawn faint), and a warning against a right hint tells a user to doubt a
    legend that is right (bench/README.md, 2026-11-27: 48 % of the independent renderer's held-out curves
    were so warned by the looks alone). Where the two readings also disagree with each other (the looks
    read a broken curve solid, its marks another broken style), the scan does not show what the curve is:
    the line says the hint is not borne out and what each reading saw, not that the scan contradicts it,
    and the curve's name stays in doubt as for a contradiction (`_doubted`, by what its looks read). On the
    independent renderer's tuning logs, 57 % of the warnings against right style hints were such (bench/README.md,
    2026-11-28). `shade`, where given, is the ink the trace shows beside the track's other curves
    (`_shades_by_order`), held against a dark or light hint in place of its own reading; `inked` is the share
    of the looks' columns that are inked (`_inked_share`)."""
    lines: list[str] = []
    shown: list[tuple[str, str]] = []
    seen = [look for look in looks if look is not None]
    dark = _darkness(looks)
    if dark is not None and inked is not None:  # both where its looks show any column
        looked = _vote([look for look in seen if look.columns >= MIN_WARN_COLUMNS] or seen, style_label)
        marked = reading.marks(trace) if curve.style is not None and looked != curve.style else None
        if curve.style == "dotted" and marked is not None and marked.style == "solid" and reading.on_dots(trace):
            looked, marked = "dotted", None  # dots that touch in its band, both readings' solid, apart on the scan
        style = curve.style
        breaks = "" if marked is None else (f"{marked.breaks} breaks in its ink along {marked.length:.0f} stroke "
                                            "widths of its path")
        if marked is not None and marked.style == looked:  # both readings show the same other style
            style = looked
        elif marked is not None and marked.style != curve.style:  # each reads another style, not the same one
            lines.append(f"declared style {curve.style}, not borne out: the trace named {curve.mnemonic} looks "
                         f"{looked} by its columns (ink in {100 * inked:.0f} % of them) and {marked.style} by its "
                         f"marks ({breaks})")
            shown.append(("style", looked))
        along = "" if marked is None else f"; {breaks} read {marked.style}"
        for name, hint, label, measured in (
                ("style", curve.style, style, f"ink in {100 * inked:.0f} % of its columns{along}"),
                ("ink", curve.ink, shade or _vote(seen, ink_label), f"ink {100 * dark:.0f} % as dark as black"
                 + (" beside the track's other curves" if shade else ""))):
            unseen = name == "ink" and (hint in INK_COLOURS and all(look.rgb is None for look in seen)  # a gray scan
                                        or hint in INK_SHADES and _shades_unread(reading.scan))
            if hint is not None and label is not None and label != hint and not unseen:
                lines.append(f"declared {name} {hint}, but the trace named {curve.mnemonic} looks {label} ({measured})")
                shown.append((name, label))
    width = trace.u.size
    for anchor in curve.anchors:
        col = int(round(float(calibration.depth.column_of(anchor.depth))))
        off = _distance_at(trace, col, curve.to_fraction(anchor.value), max(3, width // 200))
        if off > ANCHOR_TOLERANCE:
            where = "has no trace there" if math.isinf(off) else f"passes {100 * off:.0f} % of the track away"
            lines.append(f"anchor {anchor.value:g} at depth {anchor.depth:g}: the trace named {curve.mnemonic} {where}")
            shown.append(("anchor", ""))
    return tuple(lines), tuple(shown)


DISAGREE_SHARE = 0.10  # of a curve's columns read by both namings: more apart than DISAGREE_U, the names differ
DISAGREE_U = 0.02  # of the track: two traces this far apart at a column are not the same trace there


def checked_against(naming: Naming, second: Naming) -> Naming:
    """``naming`` with every curve flagged ambiguous that a ``second`` naming of the same traces gives a
    different trace (more than DISAGREE_U of the track apart in over DISAGREE_SHARE of the columns both
    read), or leaves ambiguous itself. Anchored names too: at full resolution with two anchors per curve,
    exempting them left 18 of 115 held-out curves named wrong without a flag, against 4 (bench/README.md).
    At the model's scale, checking the joint tracer's names against the looks' caught no wrong name on
    100 held-out logs of either renderer, so it is not done there."""
    identity = list(naming.identity)
    for k, (a, b) in enumerate(zip(naming.traces, second.traces, strict=True)):
        both = np.isfinite(a.u) & np.isfinite(b.u)
        differ = both & (np.abs(a.u - b.u) > DISAGREE_U)
        if second.identity[k] == "ambiguous" or differ.sum() > DISAGREE_SHARE * max(1, both.sum()):
            identity[k] = "ambiguous"
    return replace(naming, identity=identity)
