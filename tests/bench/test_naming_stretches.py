"""bench/naming_stretches.py: each named stretch judged against the truth, and the tracer's hand-ons."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import naming_stretches  # noqa: E402

from veernet_core.digitise import identity  # noqa: E402


def test_each_stretch_is_judged_by_the_assignment_that_fits_the_truth_best() -> None:
    """Two curves at 0.2 and 0.8 of the track. The tracer hands its traces over swapped from column 30 on
    (a hand-on gone wrong at the cut between stretches 1 and 2), and the curves run together over stretch 3.
    The naming keeps the tracer's assignment in stretch 1 on no evidence (wrong there), swaps it in stretch 2
    where the evidence favours the swap (right), and takes the wrong names against the evidence in stretch 0.
    Kept instead of swapped, stretch 2 is wrong on evidence that favours the tracer's wrong names."""
    columns = 60
    low, high = np.full(columns, 0.2), np.full(columns, 0.8)
    first, second = low.copy(), high.copy()
    first[30:50], second[30:50] = high[30:50], low[30:50]  # handed over swapped from column 30
    low[50:], high[50:] = 0.5, 0.505  # together: any assignment fits within 2 % per curve
    first[50:], second[50:] = 0.5, 0.505
    bounds = [(0, 10), (10, 30), (30, 50), (50, 60)]
    keep, swap = (0, 1), (1, 0)
    evidence = [np.eye(2), np.zeros((2, 2)), np.array([[0.0, 1.0], [1.0, 0.0]]), np.zeros((2, 2))]
    path = [swap, swap, swap, swap]
    counts = naming_stretches.judge([first, second], [low, high], bounds, evidence, path)
    assert counts["judged_columns"] == 50 and counts["unjudged_columns"] == 10
    assert counts["wrong"] == 30  # stretches 0 and 1
    assert counts["against_evidence"] == 10 and counts["no_evidence"] == 20 and counts["favours_wrong"] == 0
    assert counts["tracer_wrong"] == 0  # the tracer's names are right where the naming's are wrong, and not in 2
    assert counts["hand_ons"] == 2 and counts["tracer_hand_ons_right"] == 1  # cuts 0|1 and 1|2 are judged
    # 30 wrong columns, each curve read 0.6 of the track off its truth there
    assert counts[naming_stretches.EXCESS] == pytest.approx(30 * 0.6)
    favoured = naming_stretches.judge([first, second], [low, high], bounds[:1], [np.eye(2)], [keep])
    assert favoured["wrong"] == 0
    misled = naming_stretches.judge([first, second], [low, high], bounds[2:3], [np.eye(2)], [keep])
    assert misled["wrong"] == misled["favours_wrong"] == misled["tracer_wrong"] == 20


def test_a_reduced_scan_is_judged_and_the_naming_is_left_as_it_was(capsys: pytest.CaptureFixture[str]) -> None:
    originals = (identity.name_traces, identity.stretches, identity._best_path)
    assert naming_stretches.main(["--renderer", "paper", "--logs", "2", "--scale", "0.5", "--seed", "7777",
                                  "--source", "truth-reduced"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["tracks_named"] >= 1 and result["judged_columns"] > 0
    assert result["wrong"] == result["no_evidence"] + result["favours_wrong"] + result["against_evidence"]
    assert result["tracer_wrong"] <= result["wrong"] and result["tracer_hand_ons_right"] <= result["hand_ons"]
    assert (result["naming_excess_pct"] > 0) == (result["wrong"] > 0)
    assert (identity.name_traces, identity.stretches, identity._best_path) == originals
