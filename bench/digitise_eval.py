"""Digitisation accuracy on held-out rendered logs: one JSON line of figures, per curve position and
per factor level, worst first.

    python bench/digitise_eval.py [--renderer synth|paper] [--checkpoint PATH] [--logs 60] [--seed 424242]
                                  [--source model|truth] [--classes 2|3] [--scale F] [--scan-scale F] [--colour]
                                  [--grid printed|none] [--keep-grid]

Renderers: `synth` is the training generator (veernet_core.synth) at a data seed the training never
used (the script refuses the checkpoint's data seed); `paper` is bench/paper/, whose drawing code is
independent of the generator's (its own curves, pens, grid, paper and scanner), so a figure on it is not
a figure on the training distribution; `--colour` has it print every pen in its own colour and scan in
colour (the same logs otherwise, never 1-bit), the calibration naming each curve's colour as its legend
would (`ink: red`, ...; a black curve `ink: dark`). Each log goes through the service's stages (resampling to the
model's scale, tiled inference, tracing, calibration) with the calibration a person would read off it,
the header's hints included (per curve `style`, `ink`, `wrap` sides, `weight` where the legend shows
one pen twice another's width, unless `--no-weights`, and with `--anchors N` that many points read off the
scan): the digitiser's own naming of the
curves is scored, curve k of the result against curve k of the log. Where the digitiser takes only the
older calibration format (integer wrap, no hints), the hints are dropped, a curve with backup scales on
both sides is passed as wrap 0, and `calibration_hints` says "ignored".

Figures (bench/digitise_figures.py): per curve position (1..4) and per factor level (style, ink class,
stroke, curves in the log, wrap sides, 1-bit scan, JPEG, low resolution, stains, skew, depth numbers in
the track, pairs of solid curves, what the hints tell a curve apart from the others of its track by:
`told_apart_by`; on the generator's logs, `held`: a curve held at an edge, and `constant`: one held at a
value inside the track), each with coverage, mean error as % of the track range (`mae_pct`), the share of
samples off by more than 5 % (`off_5pct`);
`worst` lists the worst groups first; `identity_blind` is the mean error with traces re-matched to true
curves column by column (what the error would be if every curve were named right); `stretch_named`
re-matches them only stretch by stretch between the places where traces meet (what it would be if the
naming were right everywhere and the tracer's continuity between meetings kept), so mae - stretch_named
is the naming's share of the error and stretch_named - identity_blind the share of traces that change
curves away from any meeting (both given overall, per position and per factor level: on a level such as
`told_apart_by=style` the naming's share is what the hints failed to name; each curve is re-matched within
its whole log, which minimises the log's error, not each curve's, so a level's may exceed its own `mae_pct`);
`iou` per class from pixel counts over all logs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import pickle
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from digitise_figures import (  # noqa: E402
    Row,
    figures,
    grouped,
    levels,
    named_right,
    nearest_per_column,
    nearest_per_stretch,
    per_position,
    told_apart,
    worst,
)
from paper import render as paper_render  # noqa: E402

from veernet_core.checkpoint import deserialize  # noqa: E402
from veernet_core.digitise.calibration import Calibration, CalibrationError  # noqa: E402
from veernet_core.digitise.curves import Digitised, digitise  # noqa: E402
from veernet_core.digitise.ink import ScanPixels  # noqa: E402
from veernet_core.digitise.pipeline import predict_scan, read_scan, readable_scan  # noqa: E402
from veernet_core.digitise.predict import bundled_model_path, load_model, read_checkpoint, training_scale  # noqa: E402
from veernet_core.digitise.rescale import resample_image, resampling_for, scan_curves  # noqa: E402
from veernet_core.synth import generate  # noqa: E402
from veernet_core.synth_truth import SynthLog, legend_weights, wrap_sides  # noqa: E402

LEGACY_WRAP = {"none": 0, "right": 1, "left": -1, "both": 0}  # the older format cannot say "both"


def calibration_for(log: SynthLog, anchors: int = 0, weights: bool = True) -> tuple[Calibration, bool]:
    """The calibration a person would read off this log (with `anchors` points per curve, and the legend's
    line weights unless `weights` is off), checked, and whether its hints were taken: the digitiser's own
    format when it reads the hints, else the older one (integer wrap, no hints)."""
    data = log.calibration(anchors, weights)
    try:
        return Calibration.from_dict(data, *log.image.shape), True
    except CalibrationError as error:
        if not error.field.endswith(".wrap"):
            raise
    legacy = {**data, "curves": [{k: v for k, v in c.items() if k not in ("style", "ink", "weight", "anchors")}
                                 | {"wrap": LEGACY_WRAP[c["wrap"]]} for c in data["curves"]]}
    return Calibration.from_dict(legacy, *log.image.shape), False


def truth_probabilities(log: SynthLog, classes: int) -> np.ndarray:
    """The renderer's mask as probabilities: what a perfect segmenter would give (extraction alone)."""
    return np.stack([(log.mask == c).astype(np.float32) for c in range(classes)])


def reduced_truth(log: SynthLog, classes: int, size: tuple[int, int]) -> np.ndarray:
    """The renderer's mask on the model's grid (`size`), as probabilities: each reduced pixel that any of a
    class's ink falls in is that class (the later class where two meet), else background. What a perfect
    segmenter reading the reduced scan would give: the service's path after the model, alone."""
    if size == log.mask.shape:
        return truth_probabilities(log, classes)
    labels = np.zeros(size, dtype=np.int64)
    for c in range(1, classes):
        cover = resample_image(np.where(log.mask == c, 255, 0).astype(np.uint8), size)  # area averages
        labels[cover > 0] = c
    return np.stack([(labels == c).astype(np.float32) for c in range(classes)])


def ink_found(ink: np.ndarray | None, row: np.ndarray, inked: np.ndarray) -> np.ndarray | None:
    """Per column where the curve is inked: whether the segmenter marked ink within a pixel of its drawn
    centre row (None where the probabilities are not on the log's own grid). What the model alone
    finds of this curve, whatever the tracer and the naming make of it."""
    if ink is None:
        return None
    cols = np.flatnonzero(inked & np.isfinite(row))
    centre = np.rint(row[cols]).astype(np.int64)
    found = np.zeros(cols.size, dtype=bool)
    for offset in (-1, 0, 1):
        found |= ink[np.clip(centre + offset, 0, ink.shape[0] - 1), cols]
    return found


def evaluate_log(log: SynthLog, digitised: Digitised | None, hints_read: bool,
                 ink: np.ndarray | None = None) -> list[Row]:
    """One row per true curve: its truth and the trace the digitiser named after it (None: the digitiser
    refused the log, so nothing was read); with `ink` (the segmenter's ink on the log's grid), where it
    found the curve's ink."""
    rows = []
    hints = [(curve.style, curve.colour or curve.ink_class) for curve in log.curves]
    weights = legend_weights([curve.stroke_px for curve in log.curves])  # as the legend shows them (read or not)
    for k, curve in enumerate(log.curves):
        truth = curve.unwrapped_fraction(log.track)
        pred = np.full(truth.shape, np.nan)
        if digitised is not None:
            trace = digitised.curves[k].trace
            sides = wrap_sides(curve.wrap) if hints_read else {"right": (1,), "left": (-1,)}.get(curve.wrap, ())
            # What the user is given (`curves._resample`): a sample on a declared backup scale is read there,
            # and one past an edge with no backup scale declared where it is drawn, on the primary scale
            # (flagged wrap_unexpected), never left out.
            declared = np.isin(trace.level, [0, *sides])
            pred = np.where(declared, trace.u, trace.u - trace.level)
        identity = digitised.curves[k].identity if digitised is not None else "refused"
        said = digitised.curves[k].warnings if digitised is not None else ()
        # Warnings that the scan contradicts a hint ("declared style dashed, but the trace named GR looks
        # solid ..."), not those that a hint went unread ("... but the scan is 1-bit ...").
        warned = tuple(hint for hint in ("style", "ink")
                       if any(w.startswith(f"declared {hint} ") and ", but the trace named " in w for w in said))
        # Notes that the scan's two readings of a style disagree with the hint and with each other.
        unconfirmed = any(w.startswith("declared style ") and ", not borne out: " in w for w in said)
        rows.append({"truth": truth, "pred": pred, "inked": curve.inked, "wrapped": curve.wrapped,
                     "has_value": np.isfinite(curve.values), "position": k + 1, "style": curve.style,
                     "ink_class": curve.colour or curve.ink_class, "stroke_px": curve.stroke_px, "wrap": curve.wrap,
                     "curves_in_log": len(log.curves), "told_apart_by": told_apart(hints, k), "factors": log.factors,
                     "weight": weights[k] or "none",
                     "ink_found": ink_found(ink, curve.row, curve.inked), "identity": identity,
                     "hint_warnings": warned, "style_unconfirmed": unconfirmed,
                     # The generator says which curves it held at an edge (`synth_factors.held_edge`); the
                     # independent renderer's truth does not (it squeezes every curve softly inside).
                     "held": ("yes" if curve.held else "no") if "held" in log.factors else None,
                     # and which it held at one value inside the track (`synth_curves.constant`).
                     "constant": ("yes" if curve.constant else "no") if "constant" in log.factors else None})
    return rows


def per_log(rows: list[Row]) -> Iterator[list[Row]]:
    """The rows of each log (its curves in order: position 1 starts a log's `curves_in_log` rows)."""
    for start, row in enumerate(rows):
        if row["position"] == 1:
            yield rows[start : start + row["curves_in_log"]]


Matcher = Callable[[list[np.ndarray], list[np.ndarray]], list[np.ndarray]]
# Each log's traces re-matched to its true curves column by column (names set aside) and stretch by stretch
# between the places where traces meet (the naming set right, the tracer's continuity kept).
REMATCHES: tuple[tuple[str, Matcher], ...] = (("identity_blind_mae_pct", nearest_per_column),
                                              ("stretch_named_mae_pct", nearest_per_stretch))


def rematched(rows: list[Row], match: Matcher) -> list[Row]:
    """The rows with each log's traces re-matched to its true curves by `match`."""
    out: list[Row] = []
    for log_rows in per_log(rows):
        matched = match([r["pred"] for r in log_rows], [r["truth"] for r in log_rows])
        out += [{**r, "pred": m} for m, r in zip(matched, log_rows, strict=True)]
    return out


def rematched_figures(rows: list[Row], by_position: dict[str, Any],
                      by_factor: dict[str, Any] | None = None) -> dict[str, float | None]:
    """The mean error with the traces re-matched by each of REMATCHES, over all curves (returned) and, in
    place, in each position's figures of `by_position` and, where given, each factor level's of `by_factor`
    (a curve's error re-matched within its whole log, then averaged over the level's curves, so that the
    naming's share of a level's error, mae - stretch_named, reads beside the level's own figures): each
    re-matching done once."""
    overall: dict[str, float | None] = {}
    for name, match in REMATCHES:
        matched = rematched(rows, match)
        overall[name] = (figures(matched) or {}).get("mae_pct")
        for position, figs in per_position(matched).items():
            if by_position.get(position) is not None:
                by_position[position][name] = figs["mae_pct"] if figs else None
        if by_factor is None:
            continue
        groups: dict[tuple[str, str], list[Row]] = {}
        for row in matched:
            for factor, level in levels(row).items():
                groups.setdefault((factor, level), []).append(row)
        for (factor, level), group in groups.items():
            if by_factor.get(factor, {}).get(level) is not None:
                by_factor[factor][level][name] = (figures(group) or {}).get("mae_pct")
    return overall


def identity_figures(rows: list[Row]) -> dict[str, Any]:
    """Naming, over the curves of tracks with two or more: a curve is named right when, in the columns
    where every curve of its log is more than 5 % of the track apart, its trace is nearer its own true
    curve than any other in most of them. `right_when_named`: share right among the curves not flagged
    ambiguous (the issue's target: >= 98 %); `wrong_unflagged`: curves named wrong without a flag."""
    named = flagged = right_named = wrong_unflagged = 0
    for log_rows in per_log(rows):
        if len(log_rows) < 2:
            continue
        verdicts = named_right(np.stack([r["truth"] for r in log_rows]), [r["pred"] for r in log_rows])
        for r, right in zip(log_rows, verdicts, strict=True):
            if r["identity"] == "ambiguous":
                flagged += 1
            else:
                named += 1
                right_named += right
                wrong_unflagged += not right
    return {"curves": named + flagged, "flagged_ambiguous": flagged,
            "right_when_named": round(right_named / named, 4) if named else None,
            "wrong_unflagged": wrong_unflagged}


def pixel_counts(labels: np.ndarray, mask: np.ndarray, classes: int) -> np.ndarray:
    counts = np.zeros((classes, 3), dtype=np.int64)  # tp, fp, fn
    for c in range(classes):
        p, t = labels == c, mask == c
        counts[c] = (np.count_nonzero(p & t), np.count_nonzero(p & ~t), np.count_nonzero(~p & t))
    return counts


def render_log(args: argparse.Namespace, index: int, scale: float, classes: int) -> SynthLog:
    """Log `index` of `args.renderer`; `--grid none`: the independent renderer's log printed without its
    grid and depth numbers. With `--render-cache DIR`, the independent renderer's logs are kept there once
    drawn (`cached_paper_log`)."""
    if args.renderer == "paper":
        grid = getattr(args, "grid", "printed") != "none"
        folder = getattr(args, "render_cache", None)
        if folder:
            return cached_paper_log(Path(folder), args.seed, index, scale, args.colour, grid)
        return paper_render(args.seed, index, scale, colour=args.colour, grid=grid)
    return generate(args.seed, index, scale, classes)


# What a drawn log of the independent renderer depends on: its own drawing code and the truth format.
PAPER_SOURCES = (*sorted((Path(__file__).resolve().parent / "paper").glob("*.py")),
                 Path(__file__).resolve().parents[1] / "veernet_core" / "synth_truth.py")


def renderer_digest(sources: tuple[Path, ...] = PAPER_SOURCES) -> str:
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:16]


def cached_paper_log(folder: Path, seed: int, index: int, scale: float, colour: bool, grid: bool) -> SynthLog:
    """The independent renderer's log, drawn once and then read back from `folder` (drawing is most of an
    evaluation's time on it): one pickle per log, under a digest of the renderer's code, so that a change
    to the drawing or the truth format draws the logs afresh."""
    path = folder / renderer_digest() / f"{seed}-{index}-{scale!r}-{'colour' if colour else 'gray'}-{int(grid)}.pkl"
    if path.is_file():
        log = pickle.loads(path.read_bytes())
        if isinstance(log, SynthLog):
            return log
    log = paper_render(seed, index, scale, colour=colour, grid=grid)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.part")
    partial.write_bytes(pickle.dumps(log, protocol=pickle.HIGHEST_PROTOCOL))
    partial.replace(path)  # whole or absent: two evaluations may draw the same log at once
    return log


def read_log(args: argparse.Namespace, model: Any, log: SynthLog, classes: int) -> tuple[np.ndarray, Digitised | None,
                                                                                          bool, int]:
    """(probabilities, the digitiser's curves or None where it refused the log, hints read, resampled)."""
    calibration, hints_read = calibration_for(log, args.anchors, not getattr(args, "no_weights", False))
    scan = ScanPixels(log.image, log.colour)  # the naming step reads each curve's style and ink on the scan
    if args.source == "truth":
        probs = truth_probabilities(log, classes)
        try:
            return probs, digitise(probs, calibration, scan=scan), hints_read, 0
        except CalibrationError:
            return probs, None, hints_read, 0
    keep_grid = getattr(args, "keep_grid", False)
    if args.source == "model" and not keep_grid:  # as the service reads it: a reduced scan without its grid
        scan, probs, resampling = read_scan(model, scan, calibration, args.scan_scale)
    elif args.source == "model":
        probs, resampling = predict_scan(model, scan.gray, args.scan_scale)
    else:  # truth-reduced: the service's path from here on, as for the model's probabilities
        resampling = resampling_for(log.image.shape, model.trained_scale, args.scan_scale)
        scan = scan if keep_grid else readable_scan(scan, calibration, resampling)
        probs = reduced_truth(log, classes, resampling.model_size)
    try:
        return probs, scan_curves(probs, calibration, resampling, scan=scan), hints_read, int(resampling.resampled)
    except CalibrationError:  # e.g. a multiclass model asked for more curves than it has classes
        return probs, None, hints_read, int(resampling.resampled)


# Torch threads per scoring process. With one thread or two, the same log's probabilities differ by up to 7e-4 (none
# crosses 0.5), and 16 of the independent renderer's 108 held-out curves read differently, by up to 7 % of the
# track range (bench/README.md, 2026-12-06): the figures are pinned to one count, whatever the machine's cores
# and `--jobs`.
THREADS = 1


def prepared(args: argparse.Namespace) -> tuple[Any, dict[str, Any], str, float, int]:
    """(the model, its checkpoint's state, the checkpoint's sha256, the logs' scale, the classes scored) for
    `args`, refusing options that do not go together (`bench/error_split.py` reads the same logs)."""
    data, sha256 = read_checkpoint(args.checkpoint or bundled_model_path())
    state = deserialize(data)
    train_data = state["train_config"]["data"]
    if args.renderer == "synth" and args.seed == train_data["seed"]:
        raise SystemExit(f"--seed {args.seed} is the training data seed; pick a held-out one")
    torch.set_num_threads(getattr(args, "threads", THREADS))
    model, config = load_model(data)
    if args.as_is:  # read every scan at its own pixel scale, whatever the model was trained at
        model.trained_scale = None
    scale = args.scale or float(train_data["scale"])
    classes = args.classes or (2 if args.renderer == "paper" else config.num_classes)
    if args.colour and args.renderer != "paper":
        raise SystemExit("--colour: only the independent renderer (--renderer paper) prints colour logs")
    if args.grid == "none" and args.renderer != "paper":
        raise SystemExit("--grid none: only the independent renderer (--renderer paper) prints logs without a grid")
    if args.renderer == "paper" and classes != 2:
        raise SystemExit("--renderer paper draws binary masks only (every curve's ink 1): leave out --classes")
    if args.source == "model" and classes != config.num_classes and args.renderer == "synth":
        raise SystemExit(f"--classes {classes}: the model has {config.num_classes}; only --source truth may differ")
    return model, state, sha256, scale, classes


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    model, state, sha256, scale, classes = prepared(args)
    train_data = state["train_config"]["data"]
    counts = np.zeros((classes, 3), dtype=np.int64)
    rows: list[Row] = []
    resampled = refused = hints = 0
    started = time.monotonic()
    for log_counts, log_rows, was_resampled, was_refused, hints_read in _each_log(args, model, scale, classes):
        counts += log_counts
        rows += log_rows
        resampled, refused, hints = resampled + was_resampled, refused + was_refused, hints + hints_read
    result = _result(args, scale, classes, counts, rows)
    by_position, by_factor = grouped(rows)
    result.update(rematched_figures(rows, by_position, by_factor))
    result.update({"resampled_logs": resampled, "refused_logs": refused, "model_scale": training_scale(state),
                   "calibration_hints": "read" if hints == args.logs else ("ignored" if not hints else "mixed"),
                   "by_position": by_position, "by_factor": by_factor, "worst": worst(by_position, by_factor),
                   "model_sha256": sha256, "train_data_seed": train_data["seed"],
                   "train_exclude": list(train_data.get("exclude", [])),
                   "seconds": round(time.monotonic() - started, 1)})
    print(json.dumps(result))
    return 0


LogFigures = tuple[np.ndarray, list[Row], int, int, bool]  # pixel counts, rows, resampled, refused, hints read


def score_log(args: argparse.Namespace, model: Any, scale: float, classes: int, index: int) -> LogFigures:
    """Log `index` drawn, read through the service's stages and scored."""
    log = render_log(args, index, scale, classes)
    probs, digitised, hints_read, was_resampled = read_log(args, model, log, classes)
    counts = np.zeros((classes, 3), dtype=np.int64)
    ink = None
    if probs.shape[1:] == log.mask.shape:  # pixel IoU only where the model read the log's own grid
        labels = probs.argmax(axis=0)
        ink = labels > 0
        if probs.shape[0] != classes:  # a multiclass model on a binary mask: any curve class is ink
            labels = ink.astype(np.int64)
        counts = pixel_counts(labels, log.mask, classes)
    return counts, evaluate_log(log, digitised, hints_read, ink), was_resampled, int(digitised is None), hints_read


_forked: tuple[argparse.Namespace, Any, float, int] | None = None  # what `--jobs` processes inherit


def _score_forked(index: int) -> LogFigures:
    assert _forked is not None
    return score_log(*_forked, index)


def _each_log(args: argparse.Namespace, model: Any, scale: float, classes: int) -> Iterator[LogFigures]:
    """Every log's figures in index order: in this process, or with `--jobs N` in N forked processes (each
    with `--threads` torch threads, as this one), which inherit the loaded model."""
    jobs = max(1, min(getattr(args, "jobs", 1), args.logs))
    threads = getattr(args, "threads", THREADS)
    if jobs == 1:
        for index in range(args.logs):
            yield score_log(args, model, scale, classes, index)
        return
    global _forked
    _forked = (args, model, scale, classes)
    try:
        with multiprocessing.get_context("fork").Pool(jobs, initializer=torch.set_num_threads,
                                                      initargs=(threads,)) as pool:
            yield from pool.imap(_score_forked, range(args.logs))
    finally:
        _forked = None


def _result(args: argparse.Namespace, scale: float, classes: int, counts: np.ndarray, rows: list[Row]) -> dict:
    names = ["background", "curve"] if classes == 2 else ["background"] + [f"curve{i}" for i in range(1, classes)]
    iou = {n: round(float(tp / (tp + fp + fn)), 4) if tp + fp + fn else None
           for n, (tp, fp, fn) in zip(names, counts, strict=True)}
    overall = figures(rows) or {}
    return {"renderer": args.renderer, "colour": args.colour, "logs": args.logs, "seed": args.seed, "scale": scale,
            "classes": classes, "source": args.source, "grid": args.grid, "threads": args.threads,
            "grid_removal": "off" if args.keep_grid else "service", "iou": iou, **overall,
            "identity": identity_figures(rows)}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--renderer", choices=("synth", "paper"), default="synth",
                   help="synth: the training generator at a held-out seed; paper: the independent renderer")
    p.add_argument("--colour", action="store_true",
                   help="with --renderer paper: colour prints scanned in colour, each curve's colour in its hints")
    p.add_argument("--checkpoint", help="checkpoint file (default: the bundled model)")
    p.add_argument("--logs", type=int, default=60)
    p.add_argument("--seed", type=int, default=424242, help="held-out data seed (never the training seed)")
    p.add_argument("--scale", type=float, help="log scale (default: the checkpoint's training scale)")
    p.add_argument("--scan-scale", type=float, help="the scale the service is told the scans are at (default: "
                   "estimated from each scan's height, as the service does)")
    p.add_argument("--as-is", action="store_true", help="never bring a scan to the model's scale (for comparison)")
    p.add_argument("--source", choices=("model", "truth", "truth-reduced"), default="model",
                   help="'truth' feeds the renderer's mask as probabilities on the log's own grid: extraction "
                        "alone; 'truth-reduced' feeds it on the grid the model reads the log at, through the "
                        "service's path (for full-resolution logs: the path after the model, alone)")
    p.add_argument("--grid", choices=("printed", "none"), default="printed",
                   help="none: the independent renderer prints the same logs without grid and depth numbers (the "
                        "most taking the grid off could give)")
    p.add_argument("--keep-grid", action="store_true",
                   help="read full-resolution scans with their grid (the service takes it off: "
                        "veernet_core/digitise/grid.py), for comparison")
    p.add_argument("--anchors", type=int, default=0,
                   help="points per curve a user read off the scan ({depth, value}), given in the calibration")
    p.add_argument("--no-weights", action="store_true",
                   help="leave the legend's line weights out of the calibrations (the figures before they were read)")
    p.add_argument("--jobs", type=int, default=1,
                   help="score the logs in this many forked processes (the figures are the same as in one)")
    p.add_argument("--threads", type=int, default=THREADS,
                   help="torch threads of the model's forward in each process (default 1): the forward's last bits "
                        "change with the thread count, and some of the tracer's near-ties with them, so the figures "
                        "are comparable only at one count")
    p.add_argument("--render-cache", metavar="DIR",
                   help="keep the independent renderer's logs in DIR once drawn, and read them back from there "
                        "(keyed by its code): a second evaluation of the same logs skips the drawing")
    p.add_argument("--classes", type=int, choices=(2, 3),
                   help="synth mask kind (default: the checkpoint's); with --source truth, 3 reads the first curve "
                        "from channel 1 and the others from channel 2, as the legacy multiclass model would")
    return p


if __name__ == "__main__":
    sys.exit(main())
