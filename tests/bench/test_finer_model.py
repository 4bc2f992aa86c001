"""bench/models/: the scale-0.4 model kept for comparison with the bundled one (bench/README.md, 2026-11-28)
is what its config says it is, and that config is the bundled recipe at another scale: the same network,
data seed, split and optimiser, with the pixel budget grown with the pixels of a log (so that
micro-batches keep their images) and a shorter schedule (what one lease allowed)."""

from __future__ import annotations

import json
from pathlib import Path

from veernet_core.checkpoint import deserialize
from veernet_core.config import TrainConfig, validate
from veernet_core.digitise.predict import bundled_model_path, read_checkpoint, training_scale

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "bench" / "models"
BUNDLED_RECIPE = ROOT / "veernet_core" / "assets" / "bundled-config.json"


def test_the_finer_model_was_trained_with_its_config() -> None:
    config = json.loads((FOLDER / "scale04-config.json").read_text())
    assert validate(TrainConfig.from_dict(config)) == {}
    state = deserialize(read_checkpoint(str(FOLDER / "veernet-scale04.pt"))[0])
    trained = state["train_config"]
    assert training_scale(state) == config["data"]["scale"] == 0.4
    for section in ("model", "data"):
        assert {k: trained[section][k] for k in config[section]} == {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in config[section].items()}
    assert {k: trained[k] for k in config if k not in ("model", "data")} == {
        k: v for k, v in config.items() if k not in ("model", "data")}


def test_the_finer_models_config_is_the_bundled_recipe_at_another_scale() -> None:
    config = json.loads((FOLDER / "scale04-config.json").read_text())
    bundled = json.loads(BUNDLED_RECIPE.read_text())
    area = (config["data"]["scale"] / bundled["data"]["scale"]) ** 2
    assert config["pixel_budget"] == round(bundled["pixel_budget"] * area)
    assert config["epochs"] < bundled["epochs"]
    same = {k: v for k, v in config.items() if k not in ("data", "pixel_budget", "epochs", "num_workers")}
    assert same == {k: bundled[k] for k in same}
    assert {**config["data"], "scale": bundled["data"]["scale"]} == bundled["data"]
    bundled_state = deserialize(read_checkpoint(bundled_model_path())[0])
    assert training_scale(bundled_state) == bundled["data"]["scale"]
