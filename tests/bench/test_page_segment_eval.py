"""bench/page_segment_eval.py's naming figures: a shared track's curves judged as bench/digitise_eval.py
judges them, on a generated page read with perfect probabilities, and with two of its traces swapped."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import numpy as np  # noqa: E402
import page_segment_eval  # noqa: E402

from veernet_core.digitise.layout.analyse import analyse_image  # noqa: E402
from veernet_core.digitise.layout.proposal import to_proposal  # noqa: E402
from veernet_core.digitise.predict import bundled_model_path, load_model  # noqa: E402
from veernet_core.digitise.section import read_section, upright_page  # noqa: E402
from veernet_core.digitise.section_calibration import SectionCalibration  # noqa: E402
from veernet_core.page_synth import PageOptions, generate_page  # noqa: E402
from veernet_core.page_truth import (  # noqa: E402
    complete_proposal,
    matched_tracks,
    read_fractions,
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
