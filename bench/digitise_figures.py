"""Figures of bench/digitise_eval.py: per curve, per curve position and per factor level, worst first.

Imported as ``digitise_figures`` by bench/digitise_eval.py (its folder is on sys.path).

A row is one true curve of one log with the trace the digitiser gave for it (the calibration's curve
at the same position: the digitiser's own naming, never re-matched), and what the log says of it
(style, ink class, stroke, the log's factors). Positions are fractions of the track (unwrapped: -1..2),
so errors read as % of the track range (value units on linear scales, decades on log ones).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from veernet_core.digitise.identity import stretches

Row = dict[str, Any]
OFF_BY = 0.05  # a sample "off" is more than 5 % of the track range away from the truth
PAGE_FACTORS = ("bilevel", "jpeg", "low_res", "stains", "skew", "labels_in_track",
                "same_ink_solid_pair", "solid_pair_by_ink")


NAMES_APART = 0.05  # of the track: curves are told apart by their traces only where every two are further apart


def named_right(truths: np.ndarray, preds: list[np.ndarray]) -> list[bool]:
    """Per curve of one track (`truths` (curves, samples) and its traces `preds`, as fractions of the track):
    whether its trace is nearer its own true curve than any other in most of the samples where every two
    true curves are more than NAMES_APART apart and the trace has a value (False where there are none)."""
    apart = np.all(np.isfinite(truths), axis=0)
    for a, b in itertools.combinations(range(len(truths)), 2):
        apart &= np.abs(truths[a] - truths[b]) > NAMES_APART
    right = []
    for k, pred in enumerate(preds):
        columns = apart & np.isfinite(pred)
        distance = np.abs(truths[:, columns] - pred[columns])
        right.append(bool(columns.any()) and float((distance.argmin(axis=0) == k).mean()) > 0.5)
    return right


def scored(row: Row) -> np.ndarray:
    """Columns whose position is scored: the curve inked there and on its own scale, and both readings exist."""
    return np.isfinite(row["pred"]) & np.isfinite(row["truth"]) & row["inked"] & ~row["wrapped"]


def figures(rows: list[Row]) -> dict[str, Any] | None:
    """coverage: share of the true curve's columns (ink, style gaps, wraps) where the digitiser gives a
    value; mae_pct: mean |read - true| position; off_5pct: share of scored samples off by more than 5 %;
    mae_pct_wrapped: the same as mae_pct on the columns drawn on a backup scale; mae_pct_all: the same over
    both, every sample a user reads off the curve (wrapped samples weigh in by their count); scale_slip and
    scale_slip_wrapped: the share of the scored samples, and of those drawn on a backup scale, read on the
    curve's own line but on another scale (off by more than 5 % of the range, and within 5 % of it once
    whole track widths are taken off: a wrap missed or read where there is none); ink_found: share of the
    curve's inked columns where the segmenter marked ink within a pixel of it (the model alone, before
    tracing and naming; None where no log was read on its own grid); style_warned and ink_warned: the share of
    curves whose result says the scan contradicts their declared style, or ink. The evaluation's hints are
    the renderer's own, so every such warning is false: a user told to doubt a hint that is right.
    style_unconfirmed: the share whose result says their style hint is not borne out (the scan's two
    readings of it disagree with the hint and with each other)."""
    if not rows:
        return None
    errors = np.concatenate([(r["pred"] - r["truth"])[scored(r)] for r in rows])
    wrapped = np.concatenate([(r["pred"] - r["truth"])[np.isfinite(r["pred"]) & r["inked"] & r["wrapped"]
                                                       & np.isfinite(r["truth"])] for r in rows])
    slips, wrapped_slips = scale_slips(errors), scale_slips(wrapped)
    errors, wrapped = np.abs(errors), np.abs(wrapped)
    has_value = sum(int(np.count_nonzero(r["has_value"])) for r in rows)
    covered = sum(int(np.count_nonzero(r["has_value"] & np.isfinite(r["pred"]))) for r in rows)
    found = [r["ink_found"] for r in rows if r.get("ink_found") is not None]
    inked_columns = sum(f.size for f in found)
    return {
        "curves": len(rows),
        "coverage": round(covered / has_value, 4) if has_value else None,
        "mae_pct": round(100 * float(errors.mean()), 3) if errors.size else None,
        "off_5pct": round(float((errors > OFF_BY).mean()), 4) if errors.size else None,
        "mae_pct_wrapped": round(100 * float(wrapped.mean()), 3) if wrapped.size else None,
        "mae_pct_all": round(100 * float(np.concatenate([errors, wrapped]).mean()), 3)
        if errors.size + wrapped.size else None,
        "scale_slip": round(float(slips.mean()), 4) if slips.size else None,
        "scale_slip_wrapped": round(float(wrapped_slips.mean()), 4) if wrapped_slips.size else None,
        "columns_scored": int(errors.size),
        "ink_found": round(sum(int(f.sum()) for f in found) / inked_columns, 4) if inked_columns else None,
        "style_warned": round(sum("style" in r.get("hint_warnings", ()) for r in rows) / len(rows), 4),
        "ink_warned": round(sum("ink" in r.get("hint_warnings", ()) for r in rows) / len(rows), 4),
        "style_unconfirmed": round(sum(bool(r.get("style_unconfirmed")) for r in rows) / len(rows), 4),
    }


def scale_slips(differences: np.ndarray) -> np.ndarray:
    """Per signed reading error (track widths): whether it is a whole number of track widths off, to within
    OFF_BY, and not within OFF_BY of the truth itself: the curve's own line read on another scale."""
    return (np.abs(differences) > OFF_BY) & (np.abs(differences - np.round(differences)) <= OFF_BY)


def told_apart(hints: list[tuple[str, str]], k: int) -> str:
    """What a legend's hints (per curve of the track: style, ink) tell curve `k` apart from the others by:
    `single` (alone in its track), `style` (another style than every other curve, and an ink some other
    shares), `ink` (the reverse), `style+ink` (another style and another ink than every other), `partly`
    (neither alone: from some curves by its style, from the rest by its ink) or `none` (another curve has
    its style and ink: nothing in the hints names the two)."""
    if len(hints) == 1:
        return "single"
    others = [h for j, h in enumerate(hints) if j != k]
    style, ink = hints[k]
    if any(h == hints[k] for h in others):
        return "none"
    by_style = all(h[0] != style for h in others)
    by_ink = all(h[1] != ink for h in others)
    return "style+ink" if by_style and by_ink else "style" if by_style else "ink" if by_ink else "partly"


def levels(row: Row) -> dict[str, str]:
    """The factor levels a row belongs to, by factor; and the digitiser's own verdict on the curve's name
    (`identity`: single, anchored, hinted, ambiguous or refused), so that a user reads how far to trust a
    curve the service names and one it flags."""
    found = {"style": row["style"], "ink": row["ink_class"], "stroke_px": str(row["stroke_px"]),
             "curves_in_log": str(row["curves_in_log"]), "wrap": row["wrap"], "identity": row["identity"],
             "told_apart_by": row["told_apart_by"]}
    if row.get("weight") is not None:  # the line weight the legend shows (bench/digitise_eval.py may read it)
        found["weight"] = row["weight"]
    found.update({name: "yes" if row["factors"].get(name) else "no" for name in PAGE_FACTORS})
    for name in ("held", "constant"):  # a curve held at an edge, or at a value: known on the generator's logs only
        if row.get(name) is not None:
            found[name] = row[name]
    return found


def per_position(rows: list[Row]) -> dict[str, Any]:
    """Figures per curve position 1..4."""
    return {str(p): figures([r for r in rows if r["position"] == p]) for p in sorted({r["position"] for r in rows})}


def grouped(rows: list[Row]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(figures per curve position 1..4, figures per factor and level)."""
    by_position = per_position(rows)
    by_factor: dict[str, dict[str, Any]] = {}
    for row in rows:
        for factor, level in levels(row).items():
            by_factor.setdefault(factor, {}).setdefault(level, []).append(row)
    return by_position, {f: {lv: figures(group) for lv, group in sorted(lvs.items())} for f, lvs in by_factor.items()}


def worst(by_position: dict[str, Any], by_factor: dict[str, Any], count: int = 10) -> list[dict[str, Any]]:
    """The groups with the largest mean error first (a group that reads nothing counts as the worst)."""
    groups = [(f"position={p}", fig) for p, fig in by_position.items()]
    groups += [(f"{factor}={level}", fig) for factor, lvs in by_factor.items() for level, fig in lvs.items()]
    ranked = sorted((g for g in groups if g[1]), key=lambda g: -(g[1]["mae_pct"] if g[1]["mae_pct"] is not None
                                                                  else float("inf")))
    return [{"group": name, **{k: fig[k] for k in ("mae_pct", "coverage", "off_5pct", "curves")}}
            for name, fig in ranked[:count]]


MEET = 0.05  # two traces this close (share of the track), or trading sides, are where a tracer may swap them


def meeting_stretches(preds: list[np.ndarray]) -> list[tuple[int, int]]:
    """[start, stop) column ranges of a log's traces between the places where they meet: where two traces
    come within MEET of the track or change sides between neighbouring columns, and where a trace starts
    or stops. Cut in the middle of every run of such columns (`identity.stretches`); one stretch for a
    single trace."""
    width = preds[0].size
    meet = np.zeros(width, dtype=bool)
    with np.errstate(invalid="ignore"):
        for a, b in itertools.combinations(preds, 2):
            meet |= np.abs(a - b) <= MEET
            side = np.sign(a - b)
            meet[1:] |= np.isfinite(side[1:]) & np.isfinite(side[:-1]) & (side[1:] != side[:-1])
    for p in preds:
        found = np.isfinite(p)
        meet[1:] |= found[1:] != found[:-1]
    return stretches(meet)  # cut as the naming step cuts its own


def nearest_per_stretch(preds: list[np.ndarray], truths: list[np.ndarray]) -> list[np.ndarray]:
    """Traces re-matched to true curves stretch by stretch (`meeting_stretches`): the error if every
    stretch between two places where the traces meet were named right, the tracer's positions and its
    continuity between meetings kept. Between `identity_blind` (any column may be re-matched) and the
    digitiser's own names: how much of the error is naming and how much is tracing."""
    out = [np.full_like(p, np.nan) for p in preds]
    for a, b in meeting_stretches(preds):
        best, chosen = np.inf, tuple(range(len(preds)))
        for perm in itertools.permutations(range(len(preds))):
            error = sum(float(np.nansum(np.minimum(np.abs(preds[p][a:b] - truths[k][a:b]), 1.0)))
                        + float(np.count_nonzero(np.isnan(preds[p][a:b]) & np.isfinite(truths[k][a:b])))
                        for k, p in enumerate(perm))
            if error < best - 1e-12:
                best, chosen = error, perm
        for k, p in enumerate(chosen):
            out[k][a:b] = preds[p][a:b]
    return out


def nearest_per_column(preds: list[np.ndarray], truths: list[np.ndarray]) -> list[np.ndarray]:
    """Traces re-matched to true curves column by column: position error with identity set aside."""
    out = [p.copy() for p in preds]
    best = sum(np.nan_to_num(np.abs(preds[k] - truths[k]), nan=9.0) for k in range(len(preds)))
    for perm in itertools.permutations(range(len(preds))):
        error = sum(np.nan_to_num(np.abs(preds[p] - truths[k]), nan=9.0) for k, p in enumerate(perm))
        better = error < best
        best = np.where(better, error, best)
        for k, p in enumerate(perm):
            out[k] = np.where(better, preds[p], out[k])
    return out
