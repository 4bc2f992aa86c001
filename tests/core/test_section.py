"""One section of a generated full page digitised from the analysis's proposal, completed from the page's
truth: every curve of every track named, its values against the truth, one LAS with every curve; and the
page calibration's refusals, each naming the field to fix."""

from __future__ import annotations

import copy
import io
from functools import cache
from typing import Any

import lasio
import numpy as np
import pytest
from PIL import Image

from veernet_core.digitise.calibration import CalibrationError
from veernet_core.digitise.layout.analyse import analyse_image
from veernet_core.digitise.layout.proposal import to_proposal
from veernet_core.digitise.predict import bundled_model_path, load_model
from veernet_core.digitise.section import digitise_section, read_section, upright_page
from veernet_core.digitise.section_calibration import SectionCalibration, default_step
from veernet_core.page_synth import PageOptions, SynthPage, generate_page
from veernet_core.page_truth import complete_proposal, matched_tracks, score_section, truth_probabilities
from veernet_core.synth_truth import legend_weights

SEED = 4040  # held out: bench/page_segment_eval.py uses other seeds
# Small pages (150-200 dpi, one short section) turned each way, gray and 1-bit.
PAGES = [PageOptions(dpi=dpi, turn=turn, bitonal=bitonal, sections=1, first_section_in=(4.0, 5.0))
         for dpi, turn, bitonal in [(150, 0, True), (200, 90, False), (150, 180, False)]]


@cache
def _page(k: int) -> tuple[SynthPage, dict[str, Any]]:
    page = generate_page(SEED, k, PAGES[k])
    return page, to_proposal(analyse_image(page.image, float(page.spec.dpi)))


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


@cache
def _model() -> Any:
    return load_model(bundled_model_path())[0]


@pytest.mark.parametrize("k", range(len(PAGES)))
def test_with_perfect_probabilities_every_curve_comes_back_on_the_truth(k: int) -> None:
    """The cropping, turning, depth fit, tracing, naming and merging alone (no model): a binary model's
    perfect probabilities on each track's crop."""
    page, proposal = _page(k)
    done = complete_proposal(proposal, page, 0)
    calibration = SectionCalibration.from_dict(done, *page.image.shape)
    matched = matched_tracks(proposal, page, 0)
    for proposed, t in zip(done["sections"][0]["tracks"], matched, strict=True):  # the legend's hints, as printed
        true = page.spec.sections[0].tracks[t].curves
        assert [c["ink"]["value"] for c in proposed["curves"]] == [c.tone for c in true]
        assert [c["style"]["value"] for c in proposed["curves"]] == [c.style for c in true]
        assert [c["weight"]["value"] for c in proposed["curves"]] == legend_weights(
            [c.stroke_px(page.spec.dpi) for c in true])
    upright = upright_page(page.image, calibration.turn, calibration.skew_deg)
    section = read_section(upright, None, calibration, _model(),
                           probabilities=truth_probabilities(page, calibration, matched))
    scores = score_section(page, section, matched)
    assert len(scores) == sum(len(page.spec.sections[0].tracks[t].curves) for t in matched)
    # Measured on these pages (each curve in a line style, pen and ink of its own): every curve read at 0.95-1.0
    # of its depths; a curve alone in its track to a median 0.07-0.08 % and a mean 0.11-0.33 % of the track's
    # range; curves sharing a track and named by their hints to a median 0.09-0.19 %. Curves the result flags
    # ambiguous (two dotted curves on a 1-bit page, whose light and dark inks it cannot tell) to a median of
    # 0.26-4.4 %: swapped at crossings, as the flag says they may be.
    identity = {curve.mnemonic: curve.identity for curve in section.curves}
    for score in scores:
        assert score.coverage > 0.9, f"{score.mnemonic}: {score.coverage:.2f} of its depths read"
        if identity[score.mnemonic] != "ambiguous":
            assert float(np.median(score.errors)) < 0.04, f"{score.mnemonic}: median error too large"
        if len(calibration.tracks[score.track].curves) == 1:
            assert float(np.mean(score.errors)) < 0.01, f"{score.mnemonic}: mean error too large"
    assert any(curve.identity == "hinted" for curve in section.curves)
    pooled = np.concatenate([score.errors for score in scores])
    assert float(np.median(pooled)) < 0.005


def test_a_proposal_completed_with_the_hints_the_analysis_read_keeps_them_and_no_others() -> None:
    """`complete_proposal(..., hints="read")` (bench/page_segment_eval.py --hints read): names and scales from
    the page's truth, the hints only as the analysis read them off each line sample; "none" drops them all."""
    kept = 0
    for k in range(len(PAGES)):
        page, proposal = _page(k)
        read_back = complete_proposal(proposal, page, 0, "read")
        bare = complete_proposal(proposal, page, 0, "none")
        legend = complete_proposal(proposal, page, 0)
        for track, found, plain, full in zip(read_back["sections"][0]["tracks"], proposal["sections"][0]["tracks"],
                                             bare["sections"][0]["tracks"], legend["sections"][0]["tracks"],
                                             strict=True):
            assert [c["mnemonic"] for c in track["curves"]] == [c["mnemonic"] for c in full["curves"]]
            assert all(c[name]["value"] is None for c in plain["curves"] for name in ("style", "ink", "weight"))
            for name in ("style", "ink", "weight"):
                proposed = sorted(str(c[name]["value"]) for c in found["curves"] if c[name]["value"] is not None)
                completed = sorted(str(c[name]["value"]) for c in track["curves"] if c[name]["value"] is not None)
                assert completed == proposed, (name, completed, proposed)  # each read hint kept, none added
                kept += len(completed)
    assert kept >= 3
    with pytest.raises(ValueError, match="legend, read or none"):
        complete_proposal(proposal, page, 0, "typed")


def _constant_curves(page: SynthPage, matched: list[int]) -> set[tuple[int, str]]:
    """(calibrated track, mnemonic) of the section's curves that the page holds at one value or a few in steps
    (`SynthPage.constant`: a bit size)."""
    tracks = page.spec.sections[0].tracks
    held = set()
    for j, true_track in enumerate(matched):
        before = sum(len(t.curves) for t in tracks[:true_track])
        for k, curve in enumerate(tracks[true_track].curves):
            if page.constant[0][before + k]:
                held.add((j, curve.mnemonic))
    return held


@pytest.mark.xfail(strict=True, reason="the bundled model never saw a curve held at one value inside its track (a "
                   "bit size): the page generator and the training generator draw them since 2026-12-07, after it "
                   "was trained, and page 1's LLS, alone in its track, reads 30 % of the track off at the median "
                   "(bench/README.md, 2026-12-07)")
def test_a_bit_size_alone_in_its_track_reads_within_three_percent() -> None:
    page, proposal = _page(1)
    done = complete_proposal(proposal, page, 0)
    model = _model()
    result = digitise_section(_png(page.image), done, lambda: (model, "sha"), "bundled/veernet-small")
    matched = matched_tracks(proposal, page, 0)
    constant = _constant_curves(page, matched)
    alone = [s for s in score_section(page, result.section, matched) if (s.track, s.mnemonic) in constant
             and len(result.section.calibration.tracks[s.track].curves) == 1]
    assert alone, "page 1 holds a bit size alone in its track"
    for score in alone:
        assert float(np.median(score.errors)) < 0.03, f"{score.mnemonic}: median error too large"


def test_the_bundled_model_reads_a_whole_section_into_one_las() -> None:
    page, proposal = _page(1)
    done = complete_proposal(proposal, page, 0)
    model = _model()
    result = digitise_section(_png(page.image), done, lambda: (model, "sha"), "bundled/veernet-small")
    names = [c.mnemonic for c in result.section.curves]
    expected = [c["mnemonic"]["value"] for t in done["sections"][0]["tracks"] for c in t["curves"]]
    assert names == expected, "every curve of every track, in track order, named as the calibration says"
    las = lasio.read(result.files["las"].decode())
    assert [c.mnemonic for c in las.curves] == ["DEPT", *names]
    assert las.params["SECTION"].value == 0 and las.well["NULL"].value == -999.25
    assert len(las.index) == result.section.depth.size > 100
    csv = result.files["csv"].decode().splitlines()
    assert len(csv) == len(las.index) + 1 and csv[0].split(",")[1::4] == [
        f"{c.mnemonic} [{c.unit}]" for c in result.section.curves]
    matched = matched_tracks(proposal, page, 0)
    # Measured on the three test pages: a curve alone in its track to a median 0.5-1.9 % of the track's range
    # (read at 0.99 of its depths); curves sharing a track, which this small model's traces swap at
    # crossings, to a median 1-19 % (read at 0.68-1.0): bench/page_segment_eval.py reports both.
    scores = score_section(page, result.section, matched)
    assert any(len(result.section.calibration.tracks[s.track].curves) == 1 for s in scores)
    # A curve held at a bit size's value (page 1's LLS) is one the bundled model never saw: its own xfail below.
    constant = _constant_curves(page, matched)
    for score in scores:
        assert score.coverage > 0.6, f"{score.mnemonic}: {score.coverage:.2f} of its depths read"
        if len(result.section.calibration.tracks[score.track].curves) == 1 and (score.track, score.mnemonic) \
                not in constant:
            assert score.coverage > 0.95, f"{score.mnemonic}: {score.coverage:.2f} of its depths read"
            assert float(np.median(score.errors)) < 0.03, f"{score.mnemonic}: median error too large"
    rows = result.section.calibration.section_rows
    for name in ("mask", "overlay"):
        picture = Image.open(io.BytesIO(result.files[name]))
        assert picture.size[1] == rows[1] - rows[0] + 1, "the section as it stands on the page: depth down"


def _plain(done: dict[str, Any]) -> dict[str, Any]:
    """A completed proposal written by hand: every triple replaced by its value, the analysis's notes left out."""
    def value(x: Any) -> Any:
        return x["value"] if isinstance(x, dict) and "value" in x else x
    section = done["sections"][0]
    return {"orientation": {k: value(v) for k, v in done["orientation"].items()},
            "sections": [{"rows": value(section["rows"]),
                          "depth": {"unit": value(section["depth"]["unit"]), "ticks": value(section["depth"]["ticks"])},
                          "tracks": [{"extent": value(t["extent"]),
                                      "curves": [{k: value(v) for k, v in c.items()} for c in t["curves"]]}
                                     for t in section["tracks"]]}]}


def test_a_hand_written_calibration_reads_as_the_completed_proposal() -> None:
    page, proposal = _page(1)
    done = complete_proposal(proposal, page, 0)
    from_proposal = SectionCalibration.from_dict(done, *page.image.shape)
    by_hand = SectionCalibration.from_dict(_plain(done), *page.image.shape)
    assert by_hand.tracks == from_proposal.tracks and by_hand.depth == from_proposal.depth
    assert (by_hand.turn, by_hand.skew_deg, by_hand.rows) == (from_proposal.turn, from_proposal.skew_deg,
                                                               from_proposal.rows)
    again = SectionCalibration.from_dict(from_proposal.to_dict(), *page.image.shape)
    assert again == from_proposal, "the plain form the service stores reads back the same"


def _errors(data: Any, shape: tuple[int, int]) -> dict[str, str]:
    with pytest.raises(CalibrationError) as caught:
        SectionCalibration.from_dict(data, *shape)
    return caught.value.errors


def test_a_proposal_left_incomplete_names_each_value_to_fill_in() -> None:
    page, proposal = _page(0)
    done = complete_proposal(proposal, page, 0)
    done["sections"][0]["tracks"][0]["curves"][0]["right"]["value"] = None
    done["sections"][0]["tracks"][-1]["curves"][0]["mnemonic"]["value"] = None
    done["sections"][0]["depth"]["ticks"]["value"] = None
    done["sections"][0]["tracks"][0]["curves"][0]["style"]["value"] = None  # no hint: not an error
    errors = _errors(done, page.image.shape)
    last = len(done["sections"][0]["tracks"]) - 1
    assert set(errors) == {"sections[0].tracks[0].curves[0].right", f"sections[0].tracks[{last}].curves[0].mnemonic",
                           "sections[0].depth.ticks"}
    assert all("not filled in" in message for message in errors.values())
    assert "right border" in errors["sections[0].tracks[0].curves[0].right"]


def test_bad_fields_are_each_named_with_what_to_fix() -> None:
    page, proposal = _page(0)
    done = complete_proposal(proposal, page, 0)
    bad = copy.deepcopy(done)
    bad["colour"] = "red"
    bad["sections"][0]["tracks"][0]["curves"][0]["right"] = {"value": "lots", "confidence": 1, "evidence": ""}
    bad["sections"][0]["tracks"][0]["curves"][0]["shade"] = "dark"
    bad["sections"][0]["tracks"][0]["extent"]["value"]["right"] = 10 ** 6
    errors = _errors(bad, page.image.shape)
    assert "unknown field" in errors["colour"]
    assert "finite number" in errors["sections[0].tracks[0].curves[0].right"]
    assert "unknown field" in errors["sections[0].tracks[0].curves[0].shade"]
    assert "inside the page" in errors["sections[0].tracks[0].extent.right"]
    bad["orientation"]["turn"]["value"] = 45  # the section is read on the upright page: not read without a turn
    assert "0, 90, 180 or 270" in _errors(bad, page.image.shape)["orientation.turn"]
    other = _errors(done, (page.image.shape[0] + 1, page.image.shape[1]))
    assert "another scan" in other["image.height"]


def test_a_mnemonic_used_twice_in_a_section_is_refused() -> None:
    page, proposal = _page(0)
    done = complete_proposal(proposal, page, 0)
    tracks = done["sections"][0]["tracks"]
    tracks[-1]["curves"][0]["mnemonic"]["value"] = tracks[0]["curves"][0]["mnemonic"]["value"].lower()
    errors = _errors(done, page.image.shape)
    assert list(errors) == [f"sections[0].tracks[{len(tracks) - 1}].curves[0].mnemonic"]
    assert "sections[0].tracks[0].curves[0]" in errors[f"sections[0].tracks[{len(tracks) - 1}].curves[0].mnemonic"]


def test_a_page_of_two_sections_needs_the_section_named() -> None:
    page = generate_page(SEED, 9, PageOptions(dpi=150, sections=2, first_section_in=(4.0, 5.0),
                                              second_section_in=(2.5, 3.0)))
    proposal = complete_proposal(to_proposal(analyse_image(page.image, 150.0)), page, 1)
    del proposal["section"]
    assert "give the index" in _errors(proposal, page.image.shape)["section"]
    proposal["section"] = 2
    assert "0 to 1" in _errors(proposal, page.image.shape)["section"]
    proposal["section"] = 1  # section 0 is left as the analysis proposed it, nulls and all: not read
    assert SectionCalibration.from_dict(proposal, *page.image.shape).index == 1


@pytest.mark.parametrize(("per_row", "step"), [(0.333, 0.5), (0.0667, 0.1), (1.0, 1.0), (0.0254, 0.05), (3.1, 5.0)])
def test_the_default_step_is_the_least_round_step_at_or_above_a_row(per_row: float, step: float) -> None:
    assert default_step(per_row) == step
