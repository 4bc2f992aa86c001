"""Where the digitisation error lies: one JSON line splitting the mean error of bench/digitise_eval.py's
logs by what is wrong with each sample.

    python bench/error_split.py [bench/digitise_eval.py's options: --renderer, --seed, --scale, --logs, ...]

Per on-scale sample (as `mae_pct` scores them: the curve inked there, on its own scale, both readings
present), the trace's error against its own true curve is split into:
- `named_pct`: how much nearer the trace lies to another true curve of its log than to its own (the error a
  right name would take off, column by column);
- of the error against the nearest true curve: `slip_pct` (off its own curve by a whole number of track
  widths, within OFF_BY, as `scale_slip` counts it, with no true curve within half a track: the right curve
  on the wrong scale),
  `off_pct` (more than OFF_BY off otherwise) and `small_pct` (within OFF_BY);
so that `mae_pct` = named + slip + off + small, each in % of the track range over all scored samples. Then
`named_by_told_apart_pct` splits `named_pct` by what the hints tell a curve apart by and whether the
result flagged it ambiguous; `untraced_inside` and `untraced_at_edge` are the shares of the true curves'
scored samples in tracks of two or more curves with no trace within OFF_BY of them (another trace doubles a
curve), inside the track and within EDGE of an edge, and `untraced_by_look` the inside share per line style
and whether another curve of the track is declared alike (style and ink: "twin", `told_apart_by` none) or
not ("own look"); `edge_samples` and `edge_error` are the share of the scored samples within EDGE of an edge
and their share of the error. `wrapped` splits the wrapped samples (the curve inked past an edge, on a
backup scale; both readings present), by the track (a curve alone or two or more) and the wrap the curve
declares, into the shares read right (within OFF_BY of the truth), a whole scale off (`scale_slips`) and
elsewhere. `worst_curves`
lists the WORST_CURVES curves that carry the most of the mean error, each with its log's index, what the log
says of it and its own split: the logs to look at first.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import digitise_eval  # noqa: E402
from digitise_figures import OFF_BY, Row, scale_slips, scored  # noqa: E402

EDGE = 0.05  # of the track: a sample this near an edge is "at the edge"
WORST_CURVES = 10
CURVE_FIELDS = ("position", "curves_in_log", "style", "ink_class", "weight", "stroke_px", "wrap", "told_apart_by",
                "identity")


def split(rows: list[Row]) -> dict[str, Any]:
    """The figures of the module from bench/digitise_eval.py's rows (each log's curves in order)."""
    parts = {"named": 0.0, "slip": 0.0, "off": 0.0, "small": 0.0}
    named_by: dict[str, float] = defaultdict(float)
    scored_count = 0
    edge_count, edge_error, total_error = 0, 0.0, 0.0
    untraced = {"inside": 0, "at_edge": 0}
    by_look: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # untraced inside, inside: per style and twin
    shared_samples = 0
    curves: list[tuple[float, dict[str, Any]]] = []  # (error summed over its samples, what `worst_curves` says)
    for index, log_rows in enumerate(digitise_eval.per_log(rows)):
        truths = np.stack([r["truth"] for r in log_rows])
        preds = np.stack([r["pred"] for r in log_rows])
        for row in log_rows:
            cols = scored(row)
            own = np.abs(row["pred"] - row["truth"])[cols]
            with np.errstate(invalid="ignore"):
                apart = np.abs(row["pred"][cols][None, :] - truths[:, cols])
            nearest = np.nanmin(np.where(np.isfinite(apart), apart, np.inf), axis=0)
            nearest = np.minimum(nearest, own)
            slip = (nearest > 0.5) & scale_slips(own)
            mine = {"named": float((own - nearest).sum()), "slip": float(nearest[slip].sum()),
                    "off": float(nearest[~slip & (nearest > OFF_BY)].sum()),
                    "small": float(nearest[nearest <= OFF_BY].sum())}
            for name, value in mine.items():
                parts[name] += value
            curves.append((float(own.sum()), {"log": index, **{k: row.get(k) for k in CURVE_FIELDS}, **mine}))
            named_by[f"{row['told_apart_by']}/{row['identity']}"] += mine["named"]
            scored_count += int(cols.sum())
            at_edge = (row["truth"][cols] < EDGE) | (row["truth"][cols] > 1 - EDGE)
            edge_count += int(at_edge.sum())
            edge_error += float(own[at_edge].sum())
            total_error += float(own.sum())
            if len(log_rows) > 1:
                with np.errstate(invalid="ignore"):
                    gap = np.abs(preds - row["truth"][None, :])
                gap = np.where(np.isfinite(gap), gap, np.inf).min(axis=0)[cols]
                shared_samples += int(cols.sum())
                missing = gap > OFF_BY
                untraced["at_edge"] += int((missing & at_edge).sum())
                untraced["inside"] += int((missing & ~at_edge).sum())
                look = by_look[f"{row.get('style')}/{'twin' if row['told_apart_by'] == 'none' else 'own look'}"]
                look[0] += int((missing & ~at_edge).sum())
                look[1] += int((~at_edge).sum())

    def pct(value: float) -> float | None:
        return round(100 * value / scored_count, 3) if scored_count else None

    return {"scored_samples": scored_count, "mae_pct": pct(total_error),
            **{f"{name}_pct": pct(value) for name, value in parts.items()},
            "named_by_told_apart_pct": {key: pct(value) for key, value in sorted(named_by.items(),
                                                                                 key=lambda kv: -kv[1])},
            "untraced_inside": round(untraced["inside"] / shared_samples, 4) if shared_samples else None,
            "untraced_at_edge": round(untraced["at_edge"] / shared_samples, 4) if shared_samples else None,
            "untraced_by_look": {key: {"samples": inside, "untraced": round(missed / inside, 4)}
                                 for key, (missed, inside) in sorted(by_look.items()) if inside},
            "edge_samples": round(edge_count / scored_count, 4) if scored_count else None,
            "edge_error": round(edge_error / total_error, 4) if total_error else None,
            "wrapped": wrapped_split(rows),
            "worst_curves": [{**{k: v for k, v in said.items() if k not in parts}, "mae_pct": pct(error),
                              **{f"{name}_pct": pct(said[name]) for name in parts}}
                             for error, said in sorted(curves, key=lambda c: -c[0])[:WORST_CURVES]]}


def wrapped_split(rows: list[Row]) -> dict[str, dict[str, Any]]:
    """`split`'s `wrapped`: per "alone" or "shared" track and declared wrap, the wrapped samples and the shares
    of them read right, a whole scale off and elsewhere."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for row in rows:
        has_value = row.get("has_value", np.ones(row["truth"].size, dtype=bool))
        cols = row["wrapped"] & row["inked"] & has_value & np.isfinite(row["pred"]) & np.isfinite(row["truth"])
        if not cols.any():
            continue
        off = row["pred"][cols] - row["truth"][cols]
        right = np.abs(off) <= OFF_BY
        slipped = scale_slips(off)
        key = f"{'alone' if row['curves_in_log'] == 1 else 'shared'}/{row.get('wrap', 'none')}"
        tally = counts[key]
        tally[0] += int(right.sum())
        tally[1] += int(slipped.sum())
        tally[2] += int((~right & ~slipped).sum())
    return {key: {"samples": sum(tally), "right": round(tally[0] / sum(tally), 4),
                  "a_scale_off": round(tally[1] / sum(tally), 4), "elsewhere": round(tally[2] / sum(tally), 4)}
            for key, tally in sorted(counts.items())}


def main(argv: list[str] | None = None) -> int:
    args = digitise_eval._parser().parse_args(argv)
    model, _, _, scale, classes = digitise_eval.prepared(args)
    started = time.monotonic()
    rows: list[Row] = []
    for _, log_rows, *_ in digitise_eval._each_log(args, model, scale, classes):
        rows += log_rows
    result = {"renderer": args.renderer, "seed": args.seed, "logs": args.logs, "scale": scale, **split(rows),
              "seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
