"""Digitisation accuracy on held-out synthetic logs: one JSON line of figures.

    python bench/digitise_eval.py [--checkpoint PATH] [--logs 60] [--seed 424242] [--source model|truth]
                                  [--classes 2|3]

Logs come from a data seed the training never used (training used data.seed, recorded in the
checkpoint; the script refuses that seed). Each log goes through the real path: tiled inference,
curve extraction, calibration with the log's own depth, track and curve scales.

Figures:
  iou            per class, from pixel counts summed over all logs (argmax labels vs the generator's mask)
  iou_curve_min  the worst curve class
  mae_pct        mean |traced - true| position as % of the track width (the track range: value units
                 for linear scales, decades for log ones), over columns where the true curve is inked
                 and not wrapped; `mae_pct_wrapped` is the same over wrapped columns, read on the backup
  coverage       share of columns where the true curve has a value (ink, dash gaps, wraps) in which
                 the digitiser gives one
  mae_pct_position  the same with traces re-matched to true curves in every column: position error
                 alone, with identity swaps between crossing curves set aside
  r2             coefficient of determination of traced vs true position per curve, averaged over curves
A binary model carries every curve in one channel and nothing on the page tells same-looking curves
apart, so traces are matched to true curves per log by the assignment with the least error. The same
figures are also given for the logs with one curve and with two (crossings: identity can swap).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from veernet_core.checkpoint import deserialize  # noqa: E402
from veernet_core.digitise.calibration import Calibration  # noqa: E402
from veernet_core.digitise.curves import Digitised, digitise  # noqa: E402
from veernet_core.digitise.pipeline import predict_scan  # noqa: E402
from veernet_core.digitise.predict import bundled_model_path, load_model, read_checkpoint, training_scale  # noqa: E402
from veernet_core.digitise.rescale import scan_curves  # noqa: E402
from veernet_core.synth import SynthLog, generate  # noqa: E402


def calibration_for(log: SynthLog) -> Calibration:
    """The calibration a person would read off this log (see SynthLog.calibration), checked."""
    return Calibration.from_dict(log.calibration(), *log.image.shape)


def true_position(log: SynthLog, k: int) -> np.ndarray:
    """Unwrapped fraction of curve k per column (NaN where it has no value), as the digitiser reports it."""
    curve = log.curves[k]
    fraction = (curve.row - log.track[0]) / (log.track[1] - log.track[0])
    direction = 0 if curve.backup_scale is None else (1 if curve.backup_scale.left == curve.scale.right else -1)
    return fraction + np.where(curve.wrapped, direction, 0)


def truth_probabilities(log: SynthLog, classes: int) -> np.ndarray:
    """The generator's mask as probabilities: what a perfect segmenter would give (to test extraction alone)."""
    probs = np.zeros((classes, *log.mask.shape), dtype=np.float32)
    for c in range(classes):
        probs[c] = log.mask == c
    return probs


Row = dict[str, Any]


def evaluate_log(log: SynthLog, probs: np.ndarray, digitised: Digitised | None = None) -> list[Row]:
    """Per true curve: its truth and the matched trace, over all columns (`digitised`: the curves read
    from `probs` already, as the service reads them; else read here)."""
    digitised = digitised or digitise(probs, calibration_for(log))
    traces = [c.trace for c in digitised.curves]
    truths = [true_position(log, k) for k in range(len(log.curves))]
    order = list(range(len(traces)))
    if probs.shape[0] == 2 and len(traces) > 1:  # one channel for all curves: match by least error
        def error(perm: tuple[int, ...]) -> float:
            return sum(float(np.nansum(np.abs(traces[p].u - truths[k]))) for k, p in enumerate(perm))
        order = list(min(itertools.permutations(range(len(traces))), key=lambda p: error(tuple(p))))
    wraps = [c.wrap_levels for c in calibration_for(log).curves]
    preds = []
    for k in range(len(log.curves)):
        trace = traces[order[k]]
        readable = np.isfinite(trace.u) & ((trace.level == 0) | np.isin(trace.level, wraps[k]))
        preds.append(np.where(readable, trace.u, np.nan))
    nearest = _nearest_per_column(preds, truths)
    return [{"truth": truths[k], "pred": preds[k], "nearest": nearest[k], "inked": curve.inked,
             "curves_in_log": len(log.curves),
             "wrapped": curve.wrapped, "has_value": np.isfinite(curve.values), "flagged": traces[order[k]].wrapped}
            for k, curve in enumerate(log.curves)]


def _nearest_per_column(preds: list[np.ndarray], truths: list[np.ndarray]) -> list[np.ndarray]:
    """Traces re-matched to true curves column by column: position error with identity set aside."""
    if len(preds) < 2:
        return preds
    out = [p.copy() for p in preds]
    for perm in itertools.permutations(range(len(preds))):
        if list(perm) == sorted(perm):
            continue
        kept = sum(np.nan_to_num(np.abs(preds[k] - truths[k]), nan=9.0) for k in range(len(preds)))
        swapped = sum(np.nan_to_num(np.abs(preds[p] - truths[k]), nan=9.0) for k, p in enumerate(perm))
        better = swapped < kept
        for k, p in enumerate(perm):
            out[k] = np.where(better, preds[p], out[k])
    return out


def pixel_counts(labels: np.ndarray, mask: np.ndarray, classes: int) -> np.ndarray:
    counts = np.zeros((classes, 3), dtype=np.int64)  # tp, fp, fn
    for c in range(classes):
        p, t = labels == c, mask == c
        counts[c] = (np.count_nonzero(p & t), np.count_nonzero(p & ~t), np.count_nonzero(~p & t))
    return counts


def summarise(curves: list[Row]) -> dict[str, Any]:
    errors, wrapped_errors, position_errors, r2s = [], [], [], []
    covered = has_value = flagged = wrapped_ink = 0
    for c in curves:
        both = np.isfinite(c["pred"]) & np.isfinite(c["truth"])
        plain = both & c["inked"] & ~c["wrapped"]
        errors.append(np.abs(c["pred"] - c["truth"])[plain])
        position_errors.append(np.abs(c["nearest"] - c["truth"])[np.isfinite(c["nearest"]) & plain])
        wrapped_errors.append(np.abs(c["pred"] - c["truth"])[both & c["inked"] & c["wrapped"]])
        truth, pred = c["truth"][plain], c["pred"][plain]
        if truth.size > 2 and truth.var() > 0:
            r2s.append(1.0 - float(((pred - truth) ** 2).mean() / truth.var()))
        covered += int(np.count_nonzero(c["has_value"] & np.isfinite(c["pred"])))
        has_value += int(np.count_nonzero(c["has_value"]))
        flagged += int(np.count_nonzero(c["wrapped"] & c["inked"] & c["flagged"]))
        wrapped_ink += int(np.count_nonzero(c["wrapped"] & c["inked"]))
    all_errors, all_wrapped = np.concatenate(errors), np.concatenate(wrapped_errors)
    return {
        "mae_pct": round(100 * float(all_errors.mean()), 4),
        "mae_pct_median": round(100 * float(np.median(all_errors)), 4),
        "mae_pct_position": round(100 * float(np.concatenate(position_errors).mean()), 4),
        "mae_pct_wrapped": round(100 * float(all_wrapped.mean()), 4) if all_wrapped.size else None,
        "coverage": round(covered / has_value, 5),
        "r2": round(float(np.mean(r2s)), 5),
        "wrap_flag_recall": round(flagged / wrapped_ink, 4) if wrapped_ink else None,
        "curves": len(curves),
        "columns_scored": int(all_errors.size),
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    data, sha256 = read_checkpoint(args.checkpoint or bundled_model_path())
    state = deserialize(data)
    train_data = state["train_config"]["data"]
    if args.seed == train_data["seed"]:
        raise SystemExit(f"--seed {args.seed} is the training data seed; pick a held-out one")
    model, config = load_model(data)
    if args.as_is:  # read every scan at its own pixel scale, whatever the model was trained at
        model.trained_scale = None
    scale = args.scale or float(train_data["scale"])
    classes = args.classes or config.num_classes
    if args.source == "model" and classes != config.num_classes:
        raise SystemExit(f"--classes {classes}: the model has {config.num_classes}; only --source truth may differ")
    counts = np.zeros((classes, 3), dtype=np.int64)
    curves: list[Row] = []
    resampled = 0
    started = time.monotonic()
    for index in range(args.logs):
        log = generate(args.seed, index, scale, classes)
        if args.source == "truth":
            probs, digitised = truth_probabilities(log, classes), None
        else:  # the service's stages (veernet_core.digitise.pipeline): at the model's own scale when the log's differs
            probs, resampling = predict_scan(model, log.image, args.scan_scale)
            digitised = scan_curves(probs, calibration_for(log), resampling)
            resampled += resampling.resampled
        if probs.shape[1:] == log.mask.shape:  # pixel IoU only where the model read the log's own grid
            counts += pixel_counts(probs.argmax(axis=0), log.mask, classes)
        curves += evaluate_log(log, probs, digitised)
    names = ["background", "curve"] if classes == 2 else ["background"] + [f"curve{i}" for i in range(1, classes)]
    iou = {n: round(float(tp / (tp + fp + fn)), 4) if tp + fp + fn else None
           for n, (tp, fp, fn) in zip(names, counts, strict=True)}
    result: dict[str, Any] = {"logs": args.logs, "seed": args.seed, "scale": scale, "classes": classes,
                              "source": args.source, "resampled_logs": resampled,
                              "model_scale": training_scale(state),
                              "iou": iou, "iou_curve_min": min(list(iou.values())[1:], key=lambda v: v or 0.0)}
    result.update(summarise(curves))
    for n, name in ((1, "one_curve_logs"), (2, "two_curve_logs")):  # two: identity through crossings matters
        group = [c for c in curves if c["curves_in_log"] == n]
        if group:
            result[name] = {k: v for k, v in summarise(group).items() if k != "mae_pct_median"}
    result.update({"model_sha256": sha256, "train_data_seed": train_data["seed"],
                   "seconds": round(time.monotonic() - started, 1)})
    print(json.dumps(result))
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", help="checkpoint file (default: the bundled model)")
    p.add_argument("--logs", type=int, default=60)
    p.add_argument("--seed", type=int, default=424242, help="held-out data seed (never the training seed)")
    p.add_argument("--scale", type=float, help="log scale (default: the checkpoint's training scale)")
    p.add_argument("--scan-scale", type=float, help="the scale the service is told the scans are at (default: "
                   "estimated from each scan's height, as the service does)")
    p.add_argument("--as-is", action="store_true", help="never bring a scan to the model's scale (for comparison)")
    p.add_argument("--source", choices=("model", "truth"), default="model",
                   help="'truth' feeds the generator's mask as probabilities: extraction alone")
    p.add_argument("--classes", type=int, choices=(2, 3),
                   help="mask kind (default: the checkpoint's); with --source truth, 3 reads each curve from its "
                        "own class channel, as a multiclass model would")
    return p


if __name__ == "__main__":
    sys.exit(main())
