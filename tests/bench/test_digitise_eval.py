"""bench/digitise_eval.py on both renderers: figures per curve position and per factor, worst first."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import digitise_eval  # noqa: E402
import digitise_figures  # noqa: E402


@pytest.mark.parametrize("renderer", ["synth", "paper"])
def test_figures_per_position_and_factor_with_a_perfect_segmenter(renderer: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert digitise_eval.main(["--renderer", renderer, "--logs", "6", "--source", "truth", "--classes", "2",
                               "--seed", "31337"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["renderer"] == renderer and result["iou"]["curve"] == 1.0
    positions = result["by_position"]
    assert positions["1"]["curves"] == 6  # every log has a first curve, and only it counts there
    assert sum(p["curves"] for p in positions.values()) == result["curves"] > 6
    for factor in ("style", "ink", "stroke_px", "curves_in_log", "bilevel", "jpeg", "low_res", "identity",
                   "told_apart_by"):
        levels = result["by_factor"][factor]
        assert sum(level["curves"] for level in levels.values()) == result["curves"]
    verdicts = result["by_factor"]["identity"]
    assert set(verdicts) <= {"single", "anchored", "hinted", "ambiguous", "refused"}
    def count(levels: dict, level: str) -> int:
        return int(levels.get(level, {"curves": 0})["curves"])

    assert count(verdicts, "single") == count(result["by_factor"]["curves_in_log"], "1")
    assert count(result["by_factor"]["told_apart_by"], "single") == count(verdicts, "single")
    assert count(verdicts, "ambiguous") == result["identity"]["flagged_ambiguous"]
    # Curves held at an edge: a level of the generator's logs, which say which; the independent renderer's do not.
    held = result["by_factor"].get("held")
    assert (held is not None) == (renderer == "synth")
    if held is not None:
        assert count(held, "yes") + count(held, "no") == result["curves"]
    ranked = [w["mae_pct"] for w in result["worst"]]
    assert ranked == sorted(ranked, reverse=True, key=lambda v: float("inf") if v is None else v)
    assert result["calibration_hints"] in ("read", "ignored")
    assert result["identity_blind_mae_pct"] <= result["stretch_named_mae_pct"] + 1e-9
    assert result["stretch_named_mae_pct"] <= result["mae_pct"] + 1e-9
    for figs in positions.values():  # the same split per curve position (re-matching minimises a log's
        assert figs["stretch_named_mae_pct"] >= 0.0 and figs["identity_blind_mae_pct"] >= 0.0  # sum, not each)
    # A perfect segmenter has the curve's ink under every inked column; the paper renderer's mask keeps the
    # pixels a pen covers by a quarter or more, so a faint column of a thin pen may have none.
    assert result["ink_found"] >= (1.0 if renderer == "synth" else 0.995)


def test_a_curve_is_told_apart_by_what_its_hints_have_that_no_other_curve_of_its_track_has() -> None:
    told = digitise_figures.told_apart
    assert told([("solid", "dark")], 0) == "single"
    pair = [("solid", "dark"), ("dashed", "dark")]
    assert [told(pair, k) for k in range(2)] == ["style", "style"]
    assert told([("solid", "dark"), ("solid", "light")], 1) == "ink"
    assert told([("solid", "dark"), ("dashed", "light")], 0) == "style+ink"
    alike = [("solid", "dark"), ("solid", "dark"), ("dashed", "light")]
    assert [told(alike, k) for k in range(3)] == ["none", "none", "style+ink"]
    # From the first by its ink, from the second by its style: no one hint names it.
    assert told([("solid", "dark"), ("solid", "light"), ("dashed", "dark")], 0) == "partly"
    assert told([("solid", "red"), ("solid", "blue")], 0) == "ink"  # a colour is an ink


def test_ink_found_is_the_share_of_inked_columns_with_ink_within_a_pixel() -> None:
    row = np.array([5.0, 5.4, 5.6, np.nan, 9.0, 2.0])
    inked = np.array([True, True, True, True, False, True])
    ink = np.zeros((12, 6), dtype=bool)
    ink[6, 0] = ink[4, 1] = True  # within a pixel of rows 5 and 5.4 (rounded 5)
    ink[8, 2] = True  # two pixels from row 5.6 (rounded 6): not this curve's ink
    ink[9, 4] = True  # under the curve where it is not inked: not counted
    found = digitise_eval.ink_found(ink, row, inked)
    assert found is not None and found.tolist() == [True, True, False, False]  # columns 0, 1, 2, 5
    assert digitise_eval.ink_found(None, row, inked) is None


def test_a_reading_on_the_curves_line_but_another_scale_is_a_scale_slip() -> None:
    truth = np.array([0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 1.2, 1.3, -0.2, 1.1])  # the last four drawn on a backup scale
    pred = np.array([0.2, 1.32, -0.58, 0.9, 0.6, np.nan, 0.2, 1.31, 0.8, 1.6])
    wrapped = np.arange(10) >= 6
    row = {"truth": truth, "pred": pred, "inked": np.ones(10, dtype=bool), "wrapped": wrapped,
           "has_value": np.ones(10, dtype=bool)}
    figs = digitise_figures.figures([row])
    assert figs is not None and figs["columns_scored"] == 5  # columns 0-4: drawn on the primary scale, read
    # 1: a wrap read where there is none (1.02 off); 2: one read the other way (0.98 off); 3: 0.4 off, not a
    # whole scale; 0 and 4 right.
    assert figs["scale_slip"] == 0.4
    # 6: a wrap missed (read on the primary scale); 8: a wrap past the left edge read as on-scale; 7 right;
    # 9: half a track off.
    assert figs["scale_slip_wrapped"] == 0.5
    assert figs["mae_pct_wrapped"] == pytest.approx(100 * (1.0 + 0.01 + 1.0 + 0.5) / 4, abs=1e-3)
    # Every sample with both readings, on-scale (columns 0-4) and wrapped (6-9) alike: 9 of them.
    assert figs["mae_pct_all"] == pytest.approx(100 * (1.02 + 0.98 + 0.4 + 1.0 + 0.01 + 1.0 + 0.5) / 9, abs=1e-3)
    assert digitise_figures.scale_slips(np.array([0.0, 0.04, 0.06, 0.96, 1.0, -2.03, 0.5])).tolist() == [
        False, False, False, True, True, True, False]


def test_a_warning_against_a_right_hint_is_counted_as_false() -> None:
    """The evaluation's hints are the renderer's own, so a warning that the scan contradicts one is false:
    read off the digitiser's result per curve, and given as a share of curves."""
    from veernet_core.digitise.calibration import Calibration
    from veernet_core.digitise.curves import digitise
    from veernet_core.digitise.ink import ScanPixels
    from veernet_core.synth import generate

    # Its first curve is drawn solid. Without held curves: with them, its second (dashed) curve runs along
    # the border line over stretches, and the wrong hint below goes unwarned (bench/README.md, 2026-11-29).
    log = generate(31337, 6, 0.1, 2, exclude=("held",))
    assert log.curves[0].style == "solid"
    probabilities = digitise_eval.truth_probabilities(log, 2)
    scan = ScanPixels(log.image, log.colour)
    right = digitise(probabilities, Calibration.from_dict(log.calibration(0), *log.image.shape), scan=scan)
    assert digitise_eval.evaluate_log(log, right, True)[0]["hint_warnings"] == ()
    data = log.calibration(0)
    data["curves"][0]["style"] = "dotted"
    wrong = digitise(probabilities, Calibration.from_dict(data, *log.image.shape), scan=scan)
    assert digitise_eval.evaluate_log(log, wrong, True)[0]["hint_warnings"] == ("style",)
    assert digitise_eval.evaluate_log(log, None, True)[0]["hint_warnings"] == ()  # a refused log says nothing

    def row(warned: tuple[str, ...]) -> dict:
        return {"truth": np.full(4, 0.5), "pred": np.full(4, 0.5), "inked": np.ones(4, dtype=bool),
                "wrapped": np.zeros(4, dtype=bool), "has_value": np.ones(4, dtype=bool), "hint_warnings": warned}

    figs = digitise_figures.figures([row(("style",)), row(("style", "ink")), row(()), row(())])
    assert figs is not None and (figs["style_warned"], figs["ink_warned"]) == (0.5, 0.25)
    assert figs["style_unconfirmed"] == 0.0


def _read_from_its_truth() -> tuple[Any, Any]:
    """Log 6 of the generator's seed 31337 at scale 0.1 and the digitiser's result for it from perfect
    probabilities, its own calibration and its scan."""
    from veernet_core.digitise.calibration import Calibration
    from veernet_core.digitise.curves import digitise
    from veernet_core.digitise.ink import ScanPixels
    from veernet_core.synth import generate

    log = generate(31337, 6, 0.1, 2)
    calibration = Calibration.from_dict(log.calibration(0), *log.image.shape)
    return log, digitise(digitise_eval.truth_probabilities(log, 2), calibration, scan=ScanPixels(log.image, log.colour))


def test_a_style_hint_not_borne_out_is_counted_apart_from_a_contradicted_one() -> None:
    """A note that the scan's two readings of a style disagree with its hint and with each other is not a
    warning that the scan contradicts the hint: counted as style_unconfirmed, not style_warned."""
    from dataclasses import replace

    log, result = _read_from_its_truth()
    name = result.curves[0].mnemonic
    noted = replace(result.curves[0], warnings=(
        f"declared style dashed, not borne out: the trace named {name} looks solid by its columns (ink in 90 % of "
        "them) and dotted by its marks (40 breaks in its ink along 900 stroke widths of its path)",))
    quiet = [replace(curve, warnings=()) for curve in result.curves[1:]]
    rows = digitise_eval.evaluate_log(log, replace(result, curves=[noted, *quiet]), True)
    assert (rows[0]["hint_warnings"], rows[0]["style_unconfirmed"]) == ((), True)
    assert not any(r["style_unconfirmed"] for r in rows[1:])
    figs = digitise_figures.figures(rows)
    assert figs is not None and figs["style_warned"] == 0.0 and figs["style_unconfirmed"] == round(1 / len(rows), 4)


def test_a_curve_is_scored_as_the_user_is_given_it() -> None:
    """A sample past an edge with no backup scale declared is scored where it is drawn, on the primary scale,
    as the result gives it (flagged wrap_unexpected), not left out; a note that a hint went unread is not a
    warning that the scan contradicts it."""
    from dataclasses import replace

    log, result = _read_from_its_truth()
    curve = result.curves[0]
    assert log.curves[0].wrap in ("none", "left")  # no backup scale past the right edge
    cols = np.flatnonzero(np.isfinite(curve.trace.u) & (curve.trace.level == 0))[:10]
    level = curve.trace.level.copy()
    u = curve.trace.u.copy()
    level[cols], u[cols] = 1, u[cols] + 1.0  # read past the right edge
    misread = replace(curve, trace=replace(curve.trace, u=u, level=level),
                      warnings=("declared ink light, but the scan is 1-bit (thresholded): ink tones cannot be read "
                                "on it, so they do not tell its curves apart",))
    row = digitise_eval.evaluate_log(log, replace(result, curves=[misread, *result.curves[1:]]), True)[0]
    np.testing.assert_allclose(row["pred"][cols], curve.trace.u[cols], atol=1e-12)
    assert row["hint_warnings"] == ()


def test_the_training_seed_is_refused_for_the_generator_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="training data seed"):
        digitise_eval.main(["--renderer", "synth", "--seed", "0", "--logs", "1"])
    assert digitise_eval.main(["--renderer", "paper", "--seed", "0", "--logs", "1", "--source", "truth"]) == 0
    with pytest.raises(SystemExit, match="binary masks only"):
        digitise_eval.main(["--renderer", "paper", "--classes", "3", "--logs", "1"])


def test_colour_logs_name_each_curves_colour_and_only_the_independent_renderer_prints_them(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`--colour`: the same logs printed in colour, each curve's colour in its hints and in the ink factor's
    levels (a black pen is `dark`), read from the colour scan; the generator draws gray only."""
    with pytest.raises(SystemExit, match="only the independent renderer"):
        digitise_eval.main(["--renderer", "synth", "--colour", "--logs", "1"])
    assert digitise_eval.main(["--renderer", "paper", "--colour", "--logs", "6", "--source", "truth",
                               "--seed", "31337"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["colour"] is True and result["calibration_hints"] == "read"
    inks = set(result["by_factor"]["ink"])
    assert inks - {"dark", "light"} and inks <= {"dark", "red", "blue", "green", "orange", "purple", "brown"}
    assert result["by_factor"]["bilevel"].keys() == {"no"}


def _two_curve_rows(first: np.ndarray, second: np.ndarray, identities: tuple[str, str]) -> list[dict]:
    truth_a, truth_b = np.full(8, 0.2), np.full(8, 0.7)
    return [{"position": k + 1, "curves_in_log": 2, "truth": truth, "pred": pred, "identity": identity}
            for k, (truth, pred, identity) in enumerate(zip((truth_a, truth_b), (first, second), identities,
                                                              strict=True))]


def test_identity_figures_count_right_wrong_and_flagged_names() -> None:
    a, b = np.full(8, 0.21), np.full(8, 0.69)
    right = digitise_eval.identity_figures(_two_curve_rows(a, b, ("hinted", "hinted")))
    assert right == {"curves": 2, "flagged_ambiguous": 0, "right_when_named": 1.0, "wrong_unflagged": 0}
    swapped = digitise_eval.identity_figures(_two_curve_rows(b, a, ("hinted", "anchored")))
    assert swapped["right_when_named"] == 0.0 and swapped["wrong_unflagged"] == 2
    flagged = digitise_eval.identity_figures(_two_curve_rows(b, a, ("ambiguous", "ambiguous")))
    assert flagged == {"curves": 2, "flagged_ambiguous": 2, "right_when_named": None, "wrong_unflagged": 0}
    half = b.copy()
    half[:5] = 0.21  # nearer its own curve in 5 of the 8 columns: right
    assert digitise_eval.identity_figures(_two_curve_rows(half, b, ("hinted", "hinted")))["right_when_named"] == 1.0


def _crossing_pair(width: int = 40) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Two true curves that cross at column 20, and traces that stay on their sides: each trace is its own
    curve up to the crossing and the other one after it."""
    x = np.arange(width, dtype=np.float64)
    rising, falling = 0.1 + 0.02 * x, 0.9 - 0.02 * x
    return [np.minimum(rising, falling), np.maximum(rising, falling)], [rising, falling]


def test_meeting_stretches_cut_where_traces_meet_trade_sides_or_stop() -> None:
    preds, _ = _crossing_pair()
    bounds = digitise_figures.meeting_stretches(preds)
    assert bounds[0][0] == 0 and bounds[-1][1] == 40 and len(bounds) == 2
    assert 17 <= bounds[0][1] <= 23  # cut in the run of columns where the two are within 5 % of the track
    gapped = [p.copy() for p in preds]
    gapped[0][30:33] = np.nan  # a trace that stops and starts again is cut where it does, twice
    assert len(digitise_figures.meeting_stretches(gapped)) == 4
    assert digitise_figures.meeting_stretches([preds[0]]) == [(0, 40)]  # one trace: one stretch


def test_per_stretch_matching_undoes_a_swap_where_traces_meet_and_nothing_else() -> None:
    preds, truths = _crossing_pair()
    matched = digitise_figures.nearest_per_stretch(preds, truths)
    for m, t in zip(matched, truths, strict=True):
        assert np.allclose(m, t)  # the traces swapped at the crossing: each stretch named right
    far = [preds[0].copy(), preds[1].copy()]
    far[0][5:10] += 0.3  # a trace off its curve away from any meeting: still off after matching
    matched = digitise_figures.nearest_per_stretch(far, truths)
    assert np.allclose(matched[0][5:10], truths[0][5:10] + 0.3)


def _rows(preds: list[np.ndarray], truths: list[np.ndarray]) -> list[dict]:
    inked = np.ones(truths[0].size, dtype=bool)
    return [{"pred": p, "truth": t, "inked": inked, "wrapped": ~inked, "has_value": inked, "ink_found": None,
             "position": k + 1, "curves_in_log": len(preds)}
            for k, (p, t) in enumerate(zip(preds, truths, strict=True))]


def test_stretch_named_error_lies_between_the_identity_blind_and_the_named_errors() -> None:
    preds, truths = _crossing_pair()
    rows = _rows(preds, truths)
    named = float(np.mean(np.concatenate([np.abs(p - t) for p, t in zip(preds, truths, strict=True)])))
    assert named > 0.1  # half of each curve read on the other one
    by_position = digitise_figures.per_position(rows)
    overall = digitise_eval.rematched_figures(rows, by_position)
    assert overall["stretch_named_mae_pct"] == 0.0 == overall["identity_blind_mae_pct"]
    far = [preds[0].copy(), preds[1].copy()]
    far[0][5:10] += 0.3
    far_rows = _rows(far, truths)
    far_figures = digitise_eval.rematched_figures(far_rows, digitise_figures.per_position(far_rows))
    assert far_figures["stretch_named_mae_pct"] > 0.0
    for position in ("1", "2"):  # each curve half on the other one as named; right when re-matched
        assert by_position[position]["mae_pct"] > 10.0
        assert by_position[position]["stretch_named_mae_pct"] == 0.0 == by_position[position]["identity_blind_mae_pct"]


def test_each_factor_level_reads_the_namings_share_of_its_own_error() -> None:
    # Two logs: one pair told apart by style, traced right but named swapped after the place where they
    # cross; one pair that nothing tells apart, named right, one trace off its curve over a stretch.
    preds, truths = _crossing_pair()
    off = [truths[0].copy(), truths[1].copy()]
    off[1][25:35] += 0.3
    rows = []
    for (traces, curves), told, styles in (((preds, truths), "style", ("solid", "dashed")),
                                           ((off, truths), "none", ("solid", "solid"))):
        for row, style in zip(_rows(traces, curves), styles, strict=True):
            rows.append({**row, "style": style, "ink_class": "dark", "stroke_px": 2, "wrap": "none",
                         "identity": "hinted", "told_apart_by": told, "factors": {}})
    by_position, by_factor = digitise_figures.grouped(rows)
    digitise_eval.rematched_figures(rows, by_position, by_factor)
    style, none = by_factor["told_apart_by"]["style"], by_factor["told_apart_by"]["none"]
    assert style["mae_pct"] > 10.0 and style["stretch_named_mae_pct"] == 0.0 == style["identity_blind_mae_pct"]
    assert none["mae_pct"] > 1.0  # the trace off its curve: tracing, not naming
    assert none["stretch_named_mae_pct"] == pytest.approx(none["mae_pct"])
    assert none["identity_blind_mae_pct"] == pytest.approx(none["mae_pct"])
    solid = by_factor["style"]["solid"]  # a level across both logs: each curve re-matched within its own log
    assert 0.0 < solid["stretch_named_mae_pct"] < solid["mae_pct"]


def test_reduced_truth_marks_every_reduced_pixel_a_curve_s_ink_falls_in() -> None:
    mask = np.zeros((100, 200), dtype=np.int64)
    mask[37, :] = 1  # a 1-px line: a tenth of each reduced pixel it crosses
    mask[80:82, 150:160] = 1
    log = type("Log", (), {"mask": mask})()
    probs = digitise_eval.reduced_truth(log, 2, (10, 20))
    assert probs.shape == (2, 10, 20) and np.array_equal(probs[0] + probs[1], np.ones((10, 20)))
    assert np.flatnonzero(probs[1][:, 0]).tolist() == [3]
    assert np.flatnonzero(probs[1][:, 15]).tolist() == [3, 8]
    assert int(probs[1].sum()) == 20 + 1


def test_truth_on_the_model_s_grid_is_the_truth_source_at_the_model_s_scale(
        capsys: pytest.CaptureFixture[str]) -> None:
    figures = {}
    for source in ("truth", "truth-reduced"):
        assert digitise_eval.main(["--renderer", "paper", "--logs", "4", "--source", source, "--seed", "31337"]) == 0
        result = json.loads(capsys.readouterr().out)
        figures[source] = {k: v for k, v in result.items() if k not in ("source", "seconds")}
    assert figures["truth"] == figures["truth-reduced"]  # the same grid: the same path


def test_truth_on_the_model_s_grid_reads_a_full_resolution_log_through_the_reduction(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert digitise_eval.main(["--renderer", "paper", "--logs", "2", "--source", "truth-reduced", "--seed", "31337",
                               "--scale", "1.0"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["resampled_logs"] == 2 and result["refused_logs"] == 0
    assert result["coverage"] > 0.9


def test_the_render_cache_draws_a_log_once_and_reads_it_back_as_drawn(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = []
    draw = digitise_eval.paper_render

    def counted(*args: Any, **kwargs: Any) -> Any:
        drawn.append(args)
        return draw(*args, **kwargs)

    monkeypatch.setattr(digitise_eval, "paper_render", counted)
    first = digitise_eval.cached_paper_log(tmp_path, 31337, 2, 0.1, False, True)
    again = digitise_eval.cached_paper_log(tmp_path, 31337, 2, 0.1, False, True)
    assert len(drawn) == 1 and len(list(tmp_path.rglob("*.pkl"))) == 1
    np.testing.assert_array_equal(first.image, again.image)
    np.testing.assert_array_equal(first.mask, again.mask)
    for a, b in zip(first.curves, again.curves, strict=True):
        np.testing.assert_array_equal(a.values, b.values)
        assert a.style == b.style and a.scale == b.scale
    assert first.calibration() == again.calibration()
    digitise_eval.cached_paper_log(tmp_path, 31337, 2, 0.1, False, False)  # the same log without its grid
    digitise_eval.cached_paper_log(tmp_path, 31337, 2, 0.1, True, True)  # in colour
    assert len(drawn) == 3
    monkeypatch.setattr(digitise_eval, "renderer_digest", lambda: "another-renderer")
    digitise_eval.cached_paper_log(tmp_path, 31337, 2, 0.1, False, True)
    assert len(drawn) == 4


def test_the_render_cache_key_follows_the_renderers_code(tmp_path: Path) -> None:
    source = tmp_path / "render.py"
    source.write_text("STROKE = 1\n")
    before = digitise_eval.renderer_digest((source,))
    assert digitise_eval.renderer_digest((source,)) == before
    source.write_text("STROKE = 2\n")
    assert digitise_eval.renderer_digest((source,)) != before
    assert digitise_eval.renderer_digest() == digitise_eval.renderer_digest(digitise_eval.PAPER_SOURCES)
    assert any(path.name == "raster.py" for path in digitise_eval.PAPER_SOURCES)


def test_an_evaluation_from_the_render_cache_is_the_evaluation_without_it(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--renderer", "paper", "--logs", "3", "--source", "truth", "--classes", "2", "--seed", "31337",
            "--scale", "0.1"]
    results = []
    for extra in ([], ["--render-cache", str(tmp_path)], ["--render-cache", str(tmp_path)]):
        assert digitise_eval.main([*argv, *extra]) == 0
        result = json.loads(capsys.readouterr().out)
        results.append({key: value for key, value in result.items() if "second" not in key})
    assert results[0] == results[1] == results[2]
    assert len(list(tmp_path.rglob("*.pkl"))) == 3


@pytest.mark.parametrize("renderer", ["synth", "paper"])
def test_an_evaluation_in_forked_processes_is_the_evaluation_in_one(renderer: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--renderer", renderer, "--logs", "4", "--source", "truth-reduced", "--seed", "31337", "--scale", "0.12"]
    results = []
    for jobs in ("1", "2"):
        assert digitise_eval.main([*argv, "--jobs", jobs]) == 0
        result = json.loads(capsys.readouterr().out)
        results.append({key: value for key, value in result.items() if key != "seconds"})
    assert results[0]["curves"] > 4
    assert results[0] == results[1]


def test_the_legends_weights_are_read_where_a_tracks_pens_differ_twofold() -> None:
    from veernet_core.synth import generate
    from veernet_core.synth_truth import legend_weights

    assert legend_weights([1, 2]) == ["thin", "thick"]
    assert legend_weights([4, 1, 2]) == ["thick", "thin", None]
    assert legend_weights([2, 3]) == [None, None] and legend_weights([3]) == [None]
    # A generated log whose pens differ twofold: its calibration carries them unless told not to.
    log = next(g for g in (generate(31337, i, 0.1, 2) for i in range(60))
               if len(g.curves) > 1 and max(c.stroke_px for c in g.curves) >= 2 * min(c.stroke_px for c in g.curves))
    calibration, read = digitise_eval.calibration_for(log)
    assert read and [c.weight for c in calibration.curves] == legend_weights([c.stroke_px for c in log.curves])
    plain, _ = digitise_eval.calibration_for(log, weights=False)
    assert all(c.weight is None for c in plain.curves)
