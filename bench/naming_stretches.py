"""Where the naming of shared tracks goes wrong, stretch by stretch: one JSON line.

    python bench/naming_stretches.py [--renderer synth|paper] [--logs 20] [--seed 7777] [--scale 1.0] [...]

The logs are read as `bench/digitise_eval.py` reads them (same options, same renderers). In every track
of two or more curves, each stretch that `identity.name_traces` names is judged against the assignment of
traces to curves that fits the truth best there (the least summed mean distance). Stretches where the
next best assignment fits within 2 % of the track range per curve are not judged (the curves run
together there, and the name makes no difference); their columns are counted as `unjudged_columns`.

Per judged stretch, in columns:
  wrong             the naming's assignment is not the best one;
  no_evidence       of those, the stretch's own evidence (looks, anchors, wraps, pens: what `_best_path` was
                    given) scores the naming's assignment and the best one alike: the name came from the
                    stretches around it;
  favours_wrong     the stretch's own evidence scores the naming's assignment higher;
  against_evidence  the naming chose it although the stretch's own evidence scores the best one higher;
  tracer_wrong      of the wrong columns, those where the tracer's own assignment (the traces as handed
                    over, before naming) is wrong too.
  naming_excess_pct the error the wrong names add, per judged column and curve, in % of the track range:
                    how far off the wrong columns are, which their count does not weigh.
And per meeting (the cut between two judged stretches), `hand_ons` and `tracer_hand_ons_right`: how often the
tracer handed each trace on to the trace that continues its curve.

A diagnosis, not a target: it looks inside `identity.name_traces` (it wraps `stretches` and `_best_path` for
the duration of each log's reading).
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import digitise_eval  # noqa: E402

from veernet_core.digitise import identity  # noqa: E402

UNJUDGED = 0.02  # per curve, in track widths: the next best assignment fits within this of the best
KEYS = ("judged_columns", "unjudged_columns", "wrong", "no_evidence", "favours_wrong", "against_evidence",
        "tracer_wrong", "hand_ons", "tracer_hand_ons_right")
# Summed over the wrong stretches: columns x the distance from the truth that their names add, in track widths
# per curve: how far off the wrong columns are, which a count of them does not weigh.
EXCESS = "excess_track_width_columns"


def misfits(traces: list[np.ndarray], truths: list[np.ndarray], start: int, stop: int) -> dict[tuple[int, ...], float]:
    """Per assignment of traces to curves, how far its traces are from the curves' truths in columns
    [start, stop): the mean distance per curve, in track widths, summed over the curves."""
    fits = {}
    for option in itertools.permutations(range(len(truths))):
        misfit = 0.0
        for curve, trace in enumerate(option):
            distance = np.abs(traces[trace][start:stop] - truths[curve][start:stop])
            distance = distance[np.isfinite(distance)]
            misfit += float(distance.mean()) if distance.size else 0.0
        fits[option] = misfit
    return fits


def best_assignment(fits: dict[tuple[int, ...], float]) -> tuple[tuple[int, ...], float]:
    """(the assignment that fits the truth best among `misfits`, how much worse the next best fits, in track
    widths summed over the curves)."""
    ranked = sorted(fits.items(), key=lambda fit: fit[1])
    margin = ranked[1][1] - ranked[0][1] if len(ranked) > 1 else 0.0
    return ranked[0][0], margin


def judge(traces: list[np.ndarray], truths: list[np.ndarray], bounds: list[tuple[int, int]],
          evidence: list[np.ndarray], path: list[tuple[int, ...]]) -> dict[str, float]:
    """The counts of KEYS for one track: its traces as handed to the naming (unwrapped fractions per column),
    its curves' truths, the naming's stretches, the evidence per stretch (curves x traces) and the chosen
    assignment per stretch."""
    counts: dict[str, float] = dict.fromkeys((*KEYS, EXCESS), 0)
    n = len(truths)
    tracer = tuple(range(n))
    best: list[tuple[int, ...] | None] = []
    for (start, stop), said, chosen in zip(bounds, evidence, path, strict=True):
        fits = misfits(traces, truths, start, stop)
        right, margin = best_assignment(fits)
        if margin < UNJUDGED * n:
            counts["unjudged_columns"] += stop - start
            best.append(None)
            continue
        best.append(right)
        counts["judged_columns"] += stop - start
        if chosen == right:
            continue
        counts["wrong"] += stop - start
        counts[EXCESS] += (stop - start) * (fits[chosen] - fits[right]) / n
        counts["tracer_wrong"] += (stop - start) * (tracer != right)
        chosen_score, right_score = identity._score(said, chosen), identity._score(said, right)
        kind = ("no_evidence" if abs(chosen_score - right_score) < 1e-9
                else "favours_wrong" if chosen_score > right_score else "against_evidence")
        counts[kind] += stop - start
    for before, after in zip(best[:-1], best[1:], strict=True):
        if before is None or after is None:
            continue
        # curve c is trace before[c] before the cut and trace after[c] after it: so trace before[c] hands on to
        # trace after[c], and the tracer hands each trace on to itself
        counts["hand_ons"] += 1
        counts["tracer_hand_ons_right"] += all(before[c] == after[c] for c in range(n))
    return counts


@contextmanager
def watched() -> Iterator[list[dict[str, Any]]]:
    """While open, every `identity.name_traces` call's traces, stretches, last `_best_path` evidence and path."""
    seen: list[dict[str, Any]] = []
    name_traces, stretches, best_path = identity.name_traces, identity.stretches, identity._best_path

    def watch_name_traces(traces: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append({"traces": [t.u.copy() for t in traces]})
        return name_traces(traces, *args, **kwargs)

    def watch_stretches(near: np.ndarray) -> list[tuple[int, int]]:
        bounds = stretches(near)
        seen[-1]["bounds"] = bounds
        return bounds

    def watch_best_path(evidence: list[np.ndarray], *args: Any) -> Any:
        path = best_path(evidence, *args)
        seen[-1]["evidence"], seen[-1]["path"] = [e.copy() for e in evidence], path
        return path

    modules = [identity, *[m for m in (sys.modules.get("veernet_core.digitise.rescale"),
                                      sys.modules.get("veernet_core.digitise.curves")) if m is not None]]
    saved = [(m, m.name_traces) for m in modules]  # type: ignore[attr-defined]
    identity.stretches, identity._best_path = watch_stretches, watch_best_path  # type: ignore[assignment]
    for module in modules:
        module.name_traces = watch_name_traces  # type: ignore[attr-defined]
    try:
        yield seen
    finally:
        identity.stretches, identity._best_path = stretches, best_path
        for module, original in saved:
            module.name_traces = original  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    args = digitise_eval._parser().parse_args(argv)
    if args.jobs != 1:
        raise SystemExit("--jobs: this script watches the naming in its own process; leave it out")
    data, _ = digitise_eval.read_checkpoint(args.checkpoint or digitise_eval.bundled_model_path())
    state = digitise_eval.deserialize(data)
    model, _ = digitise_eval.load_model(data)
    scale = args.scale or float(state["train_config"]["data"]["scale"])
    totals: dict[str, float] = dict.fromkeys((*KEYS, EXCESS), 0)
    tracks = 0
    for index in range(args.logs):
        log = digitise_eval.render_log(args, index, scale, 2)
        if len(log.curves) < 2:
            continue
        with watched() as seen:
            digitise_eval.read_log(args, model, log, 2)
        named = [call for call in seen if "path" in call and len(call["traces"]) == len(log.curves)]
        if not named:  # named by the tracer (the model's scale): no stretch was named
            continue
        call = named[-1]
        truths = [curve.unwrapped_fraction(log.track) for curve in log.curves]
        counts = judge(call["traces"], truths, call["bounds"], call["evidence"], call["path"])
        totals = {key: totals[key] + counts[key] for key in totals}
        tracks += 1
    excess = totals.pop(EXCESS)
    judged = totals["judged_columns"]
    print(json.dumps({"renderer": args.renderer, "seed": args.seed, "logs": args.logs, "scale": scale,
                      "tracks_named": tracks, **{key: int(value) for key, value in totals.items()},
                      "naming_excess_pct": round(100 * excess / judged, 3) if judged else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
