"""docs/reference.md is the code's own reference: every TrainConfig and calibration field, described."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from veernet_core.config import DataConfig, ModelConfig, TrainConfig
from veernet_core.digitise.calibration import Calibration
from veernet_core.digitise.calibration_fields import CALIBRATION_FIELDS, allowed_names
from veernet_core.reference import config_descriptions, reference_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_docs_reference_is_the_codes_output() -> None:
    assert (ROOT / "docs" / "reference.md").read_text() == reference_markdown(), (
        "regenerate it: python -m veernet_core.reference > docs/reference.md")


def test_every_train_config_field_is_described_and_none_is_stale() -> None:
    fields = {f"{prefix}{f.name}" for prefix, cls in (("", TrainConfig), ("model.", ModelConfig), ("data.", DataConfig))
              for f in dataclasses.fields(cls) if f.name not in ("model", "data") or prefix}
    descriptions = config_descriptions()
    assert set(descriptions) == fields
    assert not [name for name, text in descriptions.items() if not text], "a field without a comment beside it"
    text = reference_markdown()
    assert all(f"| `{name}` |" in text for name in fields)


def test_every_calibration_field_the_parser_takes_is_documented_and_no_other() -> None:
    data = {"depth": {"top": 100.0, "bottom": 200.0, "unit": "m"},
            "curves": [{"mnemonic": "GR", "left": 0, "right": 150, "anchors": [{"depth": 150.0, "value": 75.0}]}],
            "track_top": 2, "track_bottom": 60, "step": 0.5}
    written = Calibration.from_dict(data, 64, 400).to_dict()  # every field, as the service stores it
    assert set(written) == set(allowed_names(""))
    assert set(written["curves"][0]) == set(allowed_names("curves[]"))
    assert set(written["curves"][0]["anchors"][0]) == set(allowed_names("curves[].anchors[]"))
    assert set(allowed_names("depth")) == {"unit", "top", "bottom", "ticks"} and "ticks" in written["depth"]
    assert all(f.description.endswith(".") for f in CALIBRATION_FIELDS)
    assert all(not f.required or not f.default for f in CALIBRATION_FIELDS), "a required field has no default"
