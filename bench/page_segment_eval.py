"""Whole sections of full pages digitised against their truth: POST /segment's page path.

    python bench/page_segment_eval.py [--renderer synth|paper] [--pages 20] [--seed 5150]
                                      [--source model|truth] [--checkpoint PATH] [--hints legend|read|none]

`--renderer paper` reads the independent page renderer's pages (bench/paper/sheet.py: its own fonts, legends,
grid, curves drawn from its own tool readings, two in five linear curves wrapping onto a backup scale past the
right edge, which the completed calibration declares; with the legend's hints or none, and the model).

Pages come from `veernet_core.page_synth` with every option left to chance (150-400 dpi, gray or 1-bit,
skewed, dirty, stored turned in 3 of 7, one or two sections, 1-3 curves a track, each in a line style,
pen width and ink of its own). Each page is analysed as POST /scans/analyse does it, the proposal
completed from the page's truth as a person would (`page_truth.complete_proposal`: curve names, units,
scale ends, log, and the legend's hints: line style, ink, weight; depth ticks where the analysis fitted
none), and every section digitised as POST /segment does it (`section.digitise_section`) on one thread.
`--hints read` keeps the hints the analysis read off each curve's line sample instead of the legend's (a
user who types none: style, ink and weight where read, else no hint); `--hints none` gives no hints at all.
`--source truth` replaces the model by perfect probabilities on each track's crop: what the cropping,
tracing, naming and merging give alone.

A section is skipped (and counted) where the analysis did not find each of its true tracks once: that is
the analysis's figure (bench/analyse_eval.py), and a person would correct the extents first.

Figures (one JSON line):
  pages, sections, curves      digitised; `sections_skipped` as above
  coverage                     share of the depths where a curve is drawn that got a value
  mean_error_pct, median_error_pct  |read - true| in per cent of the track's range, over every such depth
  by_track_position            the same per track, left to right (0 = the track left of the depth column)
  by_curve_position            per curve's place in its track's header (0 = the first)
  by_curves_in_track           per number of curves sharing the track: where two or more share it, the
                               tracer's traces may swap at a crossing (curve identity)
  names_set_aside_mean_error_pct  the error were every trace named right at every depth: at each depth where a
                               curve is drawn, the nearest of its track's traces (`names_set_aside`); overall and
                               `names_set_aside_by_curves_in_track`. Against the mean error, it is what the names
                               cost, stretch by stretch
  by_identity                  per verdict the result gives a curve's name (single, hinted, anchored,
                               ambiguous): how far a user may trust a name the service vouches for
  by_style, by_ink             per line style and ink (dark, light) the curve is drawn and declared in
  by_wrap                      per backup scale (`wrap_kind`): none; declared, and the pen stays on the track;
                               declared, and the pen goes past the edge and back; declared, and the section
                               starts with the pen past the edge (no mark on the scan tells that from a curve on
                               its own scale: the worst case a user meets, reported on its own, never left out)
  identity                     naming, over the curves of tracks two or more share, as bench/digitise_eval.py
                               judges it (`digitise_figures.named_right`): flagged ambiguous, the share named
                               right among the rest (`right_when_named`), and those named wrong without a flag
                               (`wrong_unflagged`, each page, section, track and mnemonic in `named_wrong`)
  worst                        the curve with the largest mean error: page, section, track, mnemonic
  seconds_per_page             mean time to digitise every section of a page (decode, upright, model or
                               truth, trace, name, files), the analysis not included; `analyse_seconds_per_page`
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"  # one core; before numpy is imported

import argparse  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchio import log, stdout_to_stderr  # noqa: E402
from digitise_figures import named_right  # noqa: E402
from paper.sheet import render_page  # noqa: E402

from veernet_core.checkpoint import deserialize  # noqa: E402
from veernet_core.digitise.calibration import CalibrationError  # noqa: E402
from veernet_core.digitise.layout.analyse import analyse_image  # noqa: E402
from veernet_core.digitise.layout.proposal import to_proposal  # noqa: E402
from veernet_core.digitise.pipeline import ScanOptions  # noqa: E402
from veernet_core.digitise.predict import bundled_model_path, load_model, read_checkpoint  # noqa: E402
from veernet_core.digitise.section import digitise_section, read_section, upright_page  # noqa: E402
from veernet_core.digitise.section_calibration import SectionCalibration  # noqa: E402
from veernet_core.digitise.section_export import SectionDigitised  # noqa: E402
from veernet_core.model import VeerNet  # noqa: E402
from veernet_core.page_synth import SynthPage, generate_page  # noqa: E402
from veernet_core.page_truth import (  # noqa: E402
    CurveScore,
    complete_proposal,
    matched_tracks,
    read_fractions,
    score_section,
    true_fractions,
    truth_probabilities,
)

# The largest pages (400 dpi, two long sections) pass the service's default 32.8 Mpx: raised, as
# MAX_IMAGE_PIXELS would be for such an archive.
OPTIONS = ScanOptions(max_pixels=80_000_000)


@dataclass(frozen=True)
class Scored:
    page: int
    section: int
    score: CurveScore
    position: int  # the curve's place in its track's header
    sharing: int  # curves in the track
    identity: str  # the result's verdict on its name: single, hinted, anchored or ambiguous
    style: str  # as drawn and declared
    ink: str  # dark or light, as drawn and declared
    wrap: str  # its backup scale and what the pen does with it (`wrap_kind`)
    named_right: bool | None = None  # its trace is its own curve's (None: alone in its track)
    set_aside: np.ndarray | None = None  # its errors with names set aside (`names_set_aside`)


def wrap_kind(declared: bool, drawn: np.ndarray) -> str:
    """A curve's backup scale: "none" declared; "declared, on scale" where the pen never leaves the track;
    "declared, wraps" where it goes past the edge and comes back on the backup scale; "declared, starts past"
    where the section's first drawn row is already on it. Nothing on the scan tells that last one from a curve
    on its own scale (the pen has not crossed the edge yet in this section): only an anchor read off the log
    can, and the completed calibration gives none."""
    if not declared:
        return "none"
    values = drawn[np.isfinite(drawn)]
    if values.size == 0 or values.max() <= 1:
        return "declared, on scale"
    return "declared, starts past" if values[0] > 1 else "declared, wraps"


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


Read = tuple[int, list[CurveScore], SectionCalibration, dict[str, str], list[int], dict[tuple[int, str], bool],
             dict[tuple[int, str], np.ndarray]]


def names_right(page: SynthPage, section: SectionDigitised, matched: list[int]) -> dict[tuple[int, str], bool]:
    """Per curve of a track it shares with others, by (track, mnemonic): whether its trace is its own true
    curve's rather than another's of the track (`digitise_figures.named_right`)."""
    calibration = section.calibration
    rows = calibration.depth.column_of(section.depth)
    read = {(j, curve.mnemonic): curve.values for curve, j in zip(section.curves, section.track_of, strict=True)}
    verdicts: dict[tuple[int, str], bool] = {}
    for j, track in enumerate(calibration.tracks):
        if len(track.curves) < 2:
            continue
        truths = np.stack(true_fractions(page, calibration.index, matched[j], rows))
        reads = [read_fractions(read[(j, scale.mnemonic)], scale) for scale in track.curves]
        for scale, right in zip(track.curves, named_right(truths, reads), strict=True):
            verdicts[(j, scale.mnemonic)] = right
    return verdicts


def names_set_aside(page: SynthPage, section: SectionDigitised,
                    matched: list[int]) -> dict[tuple[int, str], np.ndarray]:
    """Per curve, by (track, mnemonic): |read - true| in track widths at each output depth where it is drawn and a
    trace of its track has a value, from the nearest of the track's traces, whatever its name: the error were
    every trace named right at every depth. Against the named error, it tells which trace carries which name
    from where the traces run."""
    calibration = section.calibration
    rows = calibration.depth.column_of(section.depth)
    read = {(j, curve.mnemonic): curve.values for curve, j in zip(section.curves, section.track_of, strict=True)}
    errors: dict[tuple[int, str], np.ndarray] = {}
    for j, track in enumerate(calibration.tracks):
        reads = np.stack([read_fractions(read[(j, scale.mnemonic)], scale) for scale in track.curves])
        truths = true_fractions(page, calibration.index, matched[j], rows)
        for scale, truth in zip(track.curves, truths, strict=True):
            off = np.abs(reads - truth[None, :])
            drawn = np.isfinite(truth) & np.isfinite(off).any(axis=0)
            errors[(j, scale.mnemonic)] = np.nanmin(off[:, drawn], axis=0) if drawn.any() else np.zeros(0)
    return errors


def digitise_page(page: SynthPage, proposal: dict[str, Any], model: VeerNet, source: str,
                  hints: str = "legend", wraps: dict[tuple[int, int], bool] | None = None) -> tuple[list[Read], int]:
    """Every section of the page whose tracks the analysis found: (section, scores, calibration, each curve's
    identity verdict by name, the true track of each calibrated one); and how many were skipped. `wraps`: per
    (true track, curve), a backup scale past the right edge, which the completed calibration then declares as its
    header would (`wrap: right`)."""
    done, skipped, scan = [], 0, _png(page.image)
    for s in range(min(len(proposal["sections"]), len(page.spec.sections))):
        matched = matched_tracks(proposal, page, s)
        if sorted(matched) != list(range(len(page.spec.sections[s].tracks))):
            skipped += 1
            continue
        completed = complete_proposal(proposal, page, s, hints)
        for track, j in zip(completed["sections"][s]["tracks"], matched, strict=True):
            for k, curve in enumerate(track["curves"]):
                if (wraps or {}).get((j, k)):
                    curve["wrap"] = {"value": "right", "confidence": 1.0, "evidence": "the page's header"}
        try:
            calibration = SectionCalibration.from_dict(completed, *page.image.shape)
        except CalibrationError as exc:
            log(f"  section {s} skipped: {exc}")
            skipped += 1
            continue
        if source == "truth":
            upright = upright_page(page.image, calibration.turn, calibration.skew_deg)
            section = read_section(upright, None, calibration, model,
                                   probabilities=truth_probabilities(page, calibration, matched))
        else:
            section = digitise_section(scan, completed, lambda: (model, "bundled"), "bundled", OPTIONS).section
        identity = {curve.mnemonic: curve.identity for curve in section.curves}
        done.append((s, score_section(page, section, matched), calibration, identity, matched,
                     names_right(page, section, matched), names_set_aside(page, section, matched)))
    return done, skipped + max(0, len(page.spec.sections) - len(proposal["sections"]))


def _figures(items: list[CurveScore]) -> dict[str, Any]:
    errors = np.concatenate([c.errors for c in items]) if items else np.zeros(0)
    drawn = sum(c.errors.size / max(c.coverage, 1e-9) for c in items if c.coverage > 0)
    return {"curves": len(items), "coverage": round(errors.size / drawn, 4) if drawn else 0.0,
            "mean_error_pct": round(100 * float(errors.mean()), 3) if errors.size else None,
            "median_error_pct": round(100 * float(np.median(errors)), 3) if errors.size else None}


def summarise(scored: list[Scored]) -> dict[str, Any]:
    groups: dict[str, dict[Any, list[CurveScore]]] = defaultdict(lambda: defaultdict(list))
    for item in scored:
        score = item.score
        groups["by_track_position"][score.track].append(score)
        groups["by_curve_position"][item.position].append(score)
        groups["by_curves_in_track"][item.sharing].append(score)
        groups["by_identity"][item.identity].append(score)
        groups["by_style"][item.style].append(score)
        groups["by_ink"][item.ink].append(score)
        groups["by_wrap"][item.wrap].append(score)
    worst = max(scored, key=lambda s: float(s.score.errors.mean()) if s.score.errors.size else 1.0)
    shared = [s for s in scored if s.named_right is not None]
    named = [s for s in shared if s.identity != "ambiguous"]
    wrong = [s for s in named if not s.named_right]
    identity = {"curves": len(shared), "flagged_ambiguous": len(shared) - len(named),
                "right_when_named": round(1 - len(wrong) / len(named), 4) if named else None,
                "wrong_unflagged": len(wrong),
                "named_wrong": [f"{s.page}/{s.section}/{s.score.track}/{s.score.mnemonic}" for s in wrong]}
    def set_aside(items: list[Scored]) -> float | None:
        errors = np.concatenate([s.set_aside for s in items if s.set_aside is not None] or [np.zeros(0)])
        return round(100 * float(errors.mean()), 3) if errors.size else None
    sharing: dict[int, list[Scored]] = defaultdict(list)
    for item in scored:
        sharing[item.sharing].append(item)
    return {**_figures([s.score for s in scored]),
            "names_set_aside_mean_error_pct": set_aside(scored),
            "names_set_aside_by_curves_in_track": {str(n): set_aside(items) for n, items in sorted(sharing.items())},
            **{name: {str(k): _figures(v) for k, v in sorted(group.items())} for name, group in groups.items()},
            "worst": {"page": worst.page, "section": worst.section, "track": worst.score.track,
                      "mnemonic": worst.score.mnemonic, "curves_in_track": worst.sharing, "identity": worst.identity,
                      **_figures([worst.score])},
            "identity": identity}


def evaluate(pages: int, seed: int, source: str, checkpoint: str | None = None,
             hints: str = "legend", renderer: str = "synth") -> dict[str, Any]:
    data, sha256 = read_checkpoint(checkpoint or bundled_model_path())
    trained = deserialize(data)["train_config"]["data"]
    if trained.get("page_share") and int(trained["seed"]) == seed:
        raise SystemExit(f"--seed {seed}: the model trained on this seed's pages; pick a held-out one")
    model = load_model(data)[0]
    scored: list[Scored] = []
    seconds, analyse_seconds, sections, skipped = [], [], 0, 0
    for index in range(pages):
        wraps = None
        if renderer == "paper":
            drawn = render_page(seed, index)
            page, wraps = SynthPage(drawn.image, drawn.spec, drawn.curve_fractions), drawn.wraps
        else:
            page = generate_page(seed, index)
        started = time.perf_counter()
        proposal = to_proposal(analyse_image(page.image, float(page.spec.dpi)))
        analyse_seconds.append(time.perf_counter() - started)
        started = time.perf_counter()
        done, missed = digitise_page(page, proposal, model, source, hints, wraps)
        seconds.append(time.perf_counter() - started)
        sections, skipped = sections + len(done), skipped + missed
        for s, scores, calibration, identity, matched, right, aside in done:
            for score in scores:
                names = [c.mnemonic for c in calibration.tracks[score.track].curves]
                position = names.index(score.mnemonic)
                j = matched[score.track]
                tracks = page.spec.sections[s].tracks
                true = tracks[j].curves[position]
                pen = page.curve_fractions[s][sum(len(t.curves) for t in tracks[:j]) + position]
                wrap = wrap_kind(bool((wraps or {}).get((j, position))), pen)
                scored.append(Scored(index, s, score, position, len(names), identity[score.mnemonic], true.style,
                                     true.tone, wrap, right.get((score.track, score.mnemonic)),
                                     aside[(score.track, score.mnemonic)]))
        log(f"page {index}: {page.image.shape[1]}x{page.image.shape[0]} px, {len(done)} sections "
            f"({missed} skipped), {seconds[-1]:.2f} s")
    return {"pages": pages, "seed": seed, "renderer": renderer, "source": source, "hints": hints, "sections": sections,
            "sections_skipped": skipped,
            **summarise(scored), "seconds_per_page": round(float(np.mean(seconds)), 3),
            "analyse_seconds_per_page": round(float(np.mean(analyse_seconds)), 3), "model_sha256": sha256}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--renderer", choices=("synth", "paper"), default="synth",
                        help="synth: the project's page generator; paper: the independent page renderer "
                             "(bench/paper/sheet.py)")
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--seed", type=int, default=5150, help="held out: the tests use 4040")
    parser.add_argument("--source", choices=("model", "truth"), default="model")
    parser.add_argument("--checkpoint", help="a checkpoint file to read with (default: the bundled model)")
    parser.add_argument("--hints", choices=("legend", "read", "none"), default="legend",
                        help="the curves' style, ink and weight hints: as the legend gives them, as the analysis "
                             "read them, or none")
    args = parser.parse_args()
    if args.renderer == "paper" and (args.hints == "read" or args.source == "truth"):
        raise SystemExit("--renderer paper: hints from the legend or none, and the model's probabilities (the read "
                         "hints and the perfect probabilities follow the generator's own drawing)")
    with stdout_to_stderr():
        figures = evaluate(args.pages, args.seed, args.source, args.checkpoint, args.hints, args.renderer)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
