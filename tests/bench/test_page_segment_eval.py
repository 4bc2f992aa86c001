"""bench/page_segment_eval.py's naming figures: a shared track's curves judged as bench/digitise_eval.py
judges them, on a generated page read with perfect probabilities, and with two of its traces swapped; and the
pages it reads: a thresholded page of its independent renderer whose track reads as dithered on its own."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import numpy as np  # noqa: E402
import page_segment_eval  # noqa: E402
from paper.sheet import render_page  # noqa: E402

from veernet_core.digitise.bilevel import one_bit_kind  # noqa: E402
from veernet_core.digitise.layout.analyse import analyse_image  # noqa: E402
from veernet_core.digitise.layout.proposal import to_proposal  # noqa: E402
from veernet_core.digitise.predict import bundled_model_path, load_model  # noqa: E402
from veernet_core.digitise.section import read_section, turned_crop, upright_page  # noqa: E402
from veernet_core.digitise.section_calibration import SectionCalibration  # noqa: E402
from veernet_core.page_synth import PageOptions, SynthPage, generate_page  # noqa: E402
from veernet_core.page_truth import (  # noqa: E402
    complete_proposal,
    matched_tracks,
    read_fractions,
    score_section,
    truth_probabilities,
)


def test_a_shared_tracks_curves_are_named_right_and_two_swapped_traces_are_named_wrong() -> None:
    page = generate_page(4040, 1, PageOptions(dpi=200, turn=90, bitonal=False, sections=1,
                                              first_section_in=(4.0, 5.0)))  # tests/core/test_section.py's
    proposal = to_proposal(analyse_image(page.image, float(page.spec.dpi)))
    calibration = SectionCalibration.from_dict(complete_proposal(proposal, page, 0), *page.image.shape)
    matched = matched_tracks(proposal, page, 0)
    upright = upright_page(page.image, calibration.turn, calibration.skew_deg)
    section = read_section(upright, None, calibration, load_model(bundled_model_path())[0],
                           probabilities=truth_probabilities(page, calibration, matched))
    verdicts = page_segment_eval.names_right(page, section, matched)
    shared = [j for j, track in enumerate(calibration.tracks) if len(track.curves) > 1]
    assert shared, "the page has a track two or more curves share"
    assert set(verdicts) == {(j, c.mnemonic) for j in shared for c in calibration.tracks[j].curves}
    assert all(verdicts.values()), "perfect probabilities: every trace is its own curve's"
    j = shared[0]
    first, second = [k for k, t in enumerate(section.track_of) if t == j][:2]
    scales = {c.mnemonic: c for c in calibration.tracks[j].curves}
    curves = list(section.curves)

    def read_as(k: int, other: int) -> np.ndarray:  # curve k's values where curve `other`'s trace lies
        fractions = read_fractions(curves[other].values, scales[curves[other].mnemonic])
        return np.asarray(scales[curves[k].mnemonic].to_value(fractions), dtype=np.float64)

    curves[first], curves[second] = (replace(curves[first], values=read_as(first, second)),
                                     replace(curves[second], values=read_as(second, first)))
    swapped = page_segment_eval.names_right(page, replace(section, curves=curves), matched)
    assert not swapped[(j, curves[first].mnemonic)] and not swapped[(j, curves[second].mnemonic)]
    assert all(v for key, v in swapped.items() if key[0] != j)
    # With names set aside, the swap costs nothing: each curve still has a trace on it at every depth.
    aside = page_segment_eval.names_set_aside(page, section, matched)
    aside_swapped = page_segment_eval.names_set_aside(page, replace(section, curves=curves), matched)
    named = {(score.track, score.mnemonic): score for score in score_section(page, section, matched)}
    named_swapped = {(s.track, s.mnemonic): s for s in score_section(page, replace(section, curves=curves), matched)}
    for mnemonic in (curves[first].mnemonic, curves[second].mnemonic):
        np.testing.assert_allclose(aside_swapped[(j, mnemonic)], aside[(j, mnemonic)])
        assert float(np.mean(aside[(j, mnemonic)])) <= float(np.mean(named[(j, mnemonic)].errors)) + 1e-9
        assert float(np.mean(named_swapped[(j, mnemonic)].errors)) > 5 * float(np.mean(aside[(j, mnemonic)]))


def test_a_curves_backup_scale_is_told_by_where_its_pen_runs_from_its_first_drawn_row() -> None:
    nan = np.nan
    kind = page_segment_eval.wrap_kind
    assert kind(False, np.array([0.5, 1.3])) == "none"
    assert kind(True, np.array([nan, 0.2, 0.99, 1.0])) == "declared, on scale"
    assert kind(True, np.array([nan, 0.8, 1.2, 0.7])) == "declared, wraps"
    # rows above the section's first drawn one are NaN: the pen starts past the edge where it is first drawn
    assert kind(True, np.array([nan, nan, 1.1, 0.9])) == "declared, starts past"


def test_a_dashed_light_curve_that_never_leaves_its_track_is_read_on_its_own_scale_beside_its_declared_backup() -> None:
    # The independent renderer's page (seed 1, page 2): a dashed light CALI declared with a backup scale past
    # the right edge, which it never needs, runs along the left edge and shares its track with a dark GR; the
    # model marks the printed border on the right here and there. Through CALI's dash gaps the joint tracer's
    # path stepped through the edge onto that border ink and read CALI on its backup scale for most of the
    # section, 84 % of the range off, until a page track's border rows were paper to the paths
    # (`TraceOptions.border_bins_paper`, `section.PAGE_TRACE`; bench/README.md, 2026-12-07).
    from paper.sheet import render_page

    from veernet_core.page_synth import SynthPage

    drawn = render_page(1, 2)
    page = SynthPage(drawn.image, drawn.spec, drawn.curve_fractions)
    track = page.spec.sections[0].tracks[0]
    assert [c.mnemonic for c in track.curves] == ["GR", "CALI"] and drawn.wraps[(0, 1)]
    assert np.nanmax(page.curve_fractions[0][1]) < 1  # CALI never goes past its track's edge
    proposal = to_proposal(analyse_image(page.image, float(page.spec.dpi)))
    model = load_model(bundled_model_path())[0]
    done, _ = page_segment_eval.digitise_page(page, proposal, model, "model", "legend", drawn.wraps)
    scores = {(s, score.track, score.mnemonic): score for s, scores, *_ in done for score in scores}
    cali = scores[(0, 0, "CALI")]
    assert cali.coverage > 0.95
    assert float(np.mean(cali.errors)) < 0.1


def test_a_thresholded_pages_track_is_read_as_its_page_though_its_own_dots_read_as_a_dither() -> None:
    """The independent renderer's tuning page 1/18, thresholded: its second track (a broken light grid and specks
    of dirt) reads as dithered on its own. `section.read_section` reads every track with the page's 1-bit kind,
    so that track's tone hints change nothing but the note a thresholded scan gets, as on the page's first
    track; read with the crop's own kind, the track got no note and its tones were read as a gray scan's."""
    drawn = render_page(1, 18)
    page = SynthPage(drawn.image, drawn.spec, drawn.curve_fractions)
    proposal = to_proposal(analyse_image(page.image, float(page.spec.dpi)))
    calibration = SectionCalibration.from_dict(complete_proposal(proposal, page, 0), *page.image.shape)
    upright = upright_page(page.image, calibration.turn, calibration.skew_deg)
    assert one_bit_kind(upright) == "threshold"
    kinds = [one_bit_kind(turned_crop(upright, calibration.crop(j))) for j in range(len(calibration.tracks))]
    assert kinds == ["threshold", "dither"], "a crop must misread its page's kind for the test to mean anything"
    section = read_section(upright, None, calibration, load_model(bundled_model_path())[0])
    note = "the scan is 1-bit (thresholded): ink tones cannot be read"
    inks = {c.mnemonic: c.ink for track in calibration.tracks for c in track.curves}
    assert all(inks.values()), "every curve declares its ink"
    for curve, j in zip(section.curves, section.track_of, strict=True):
        assert any(note in w for w in curve.warnings), (j, curve.mnemonic, curve.warnings)
        assert not any("looks dark" in w or "looks light" in w for w in curve.warnings), curve.warnings


def test_a_track_whose_legend_weighs_a_dotted_curve_against_lines_names_none_wrong_without_a_flag() -> None:
    """The independent renderer's tuning page 2/17: a log-scale track of a thin solid LN, a dashed SN and a thick
    dotted LL8, jagged and mostly on one another. A dotted curve's weight is not held against a line's pen
    (`identity.DOT_STYLES`); without it the looks and the tracer named LN and SN the same wrong way. Read with the
    dots' widths as pens they are named otherwise, so none of the three is vouched for."""
    drawn = render_page(2, 17)
    page = SynthPage(drawn.image, drawn.spec, drawn.curve_fractions)
    proposal = to_proposal(analyse_image(page.image, float(page.spec.dpi)))
    model = load_model(bundled_model_path())[0]
    done, _ = page_segment_eval.digitise_page(page, proposal, model, "model", "legend", drawn.wraps)
    section, _, calibration, identity, _, right, _ = next(read for read in done if read[0] == 0)
    curves = calibration.tracks[1].curves
    assert [(c.style, c.weight) for c in curves] == [("solid", "thin"), ("dashed", None), ("dotted", "thick")]
    for curve in curves:
        assert identity[curve.mnemonic] == "ambiguous" or right[(1, curve.mnemonic)], curve.mnemonic
