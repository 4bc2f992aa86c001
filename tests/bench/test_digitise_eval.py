"""bench/digitise_eval.py on both renderers: figures per curve position and per factor, worst first."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import digitise_eval  # noqa: E402


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
    for factor in ("style", "ink", "stroke_px", "curves_in_log", "bilevel", "jpeg", "low_res"):
        levels = result["by_factor"][factor]
        assert sum(level["curves"] for level in levels.values()) == result["curves"]
    ranked = [w["mae_pct"] for w in result["worst"]]
    assert ranked == sorted(ranked, reverse=True, key=lambda v: float("inf") if v is None else v)
    assert result["calibration_hints"] in ("read", "ignored")
    assert result["identity_blind_mae_pct"] <= result["mae_pct"] + 1e-9


def test_the_training_seed_is_refused_for_the_generator_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="training data seed"):
        digitise_eval.main(["--renderer", "synth", "--seed", "0", "--logs", "1"])
    assert digitise_eval.main(["--renderer", "paper", "--seed", "0", "--logs", "1", "--source", "truth"]) == 0
    with pytest.raises(SystemExit, match="binary masks only"):
        digitise_eval.main(["--renderer", "paper", "--classes", "3", "--logs", "1"])
