"""bench/leave-one-out/: the training configs of the leave-one-out comparison are valid, and each differs
from the reference run (all.json) in the levels it excludes and nothing else, so the figures compare
like with like."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from veernet_core.config import TrainConfig, validate
from veernet_core.synth_factors import EXCLUDABLE

FOLDER = Path(__file__).resolve().parents[2] / "bench" / "leave-one-out"
LEFT_OUT = sorted(p.name for p in FOLDER.glob("no-*.json"))


def _config(name: str) -> dict:
    return json.loads((FOLDER / name).read_text())


def test_the_reference_run_excludes_nothing_and_is_valid() -> None:
    reference = _config("all.json")
    assert reference["data"].get("exclude", []) == []
    assert validate(TrainConfig.from_dict(reference)) == {}


@pytest.mark.parametrize("name", LEFT_OUT)
def test_a_left_out_run_differs_from_the_reference_only_in_what_it_excludes(name: str) -> None:
    config, reference = _config(name), _config("all.json")
    excluded = config["data"]["exclude"]
    assert excluded and set(excluded) <= set(EXCLUDABLE)
    assert name == "no-" + "-".join(excluded) + ".json", "the file names the level it leaves out"
    assert validate(TrainConfig.from_dict(config)) == {}
    config["data"]["exclude"] = []
    assert config == {**reference, "data": {**reference["data"], "exclude": []}}


def test_there_is_a_left_out_run() -> None:
    assert LEFT_OUT
