from __future__ import annotations

import pytest

from veernet_core.config import ConfigError, TrainConfig


def test_round_trip_through_a_dict() -> None:
    config = TrainConfig.from_dict({"epochs": 3, "data": {"scale": 0.1, "dataset_size": 40}})
    assert TrainConfig.from_dict(config.to_dict()) == config


def test_every_bad_field_is_named_with_its_range() -> None:
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_dict({"epochs": 0, "lr": "fast", "bogus": 1, "data": {"scale": 5},
                               "device": "tpu", "model": {"widths": [8, 8]}})
    errors = caught.value.errors
    assert errors["epochs"] == "must be from 1 to 1000, got 0"
    assert "type float" in errors["lr"]
    assert "unknown field" in errors["bogus"]
    assert errors["data.scale"] == "must be from 0.01 to 1, got 5.0"
    assert "cpu" in errors["device"]
    assert "6 channel counts" in errors["model.widths"]
    assert "epochs" in str(caught.value)


@pytest.mark.parametrize("epochs", [-1, 500])
def test_a_cap_lowers_the_maximum_and_names_where_it_comes_from(epochs: int) -> None:
    """A service's limit and the config's own minimum make one range, whichever end is crossed."""
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_dict({"epochs": epochs}, caps={"epochs": (200, "MAX_EPOCHS")})
    assert caught.value.errors == {"epochs": f"must be from 1 to 200 (MAX_EPOCHS), got {epochs}"}
    assert TrainConfig.from_dict({"epochs": 200}, caps={"epochs": (200, "MAX_EPOCHS")}).epochs == 200


def test_a_cap_above_the_config_s_own_maximum_changes_nothing() -> None:
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_dict({"epochs": 1001}, caps={"epochs": (5000, "MAX_EPOCHS")})
    assert caught.value.errors == {"epochs": "must be from 1 to 1000, got 1001"}


def test_booleans_are_not_numbers_and_classes_must_agree() -> None:
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_dict({"epochs": True, "data": {"classes": 2}})
    assert set(caught.value.errors) == {"epochs", "model.num_classes"}


def test_dataset_must_fill_one_effective_batch() -> None:
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_dict({"data": {"dataset_size": 10}})
    assert "effective_batch" in caught.value.errors["data.dataset_size"]


def test_lr_scales_with_the_effective_batch() -> None:
    assert TrainConfig.from_dict({"effective_batch": 32, "lr": 0.001}).scaled_lr == pytest.approx(0.002)


def test_a_huge_out_of_range_fraction_is_named_not_an_overflow() -> None:
    """Found by the schemathesis run: the training-images rule rounded size x -1e304 before the range check."""
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_dict({"data": {"val_fraction": -1.1984620899082107e+304}})
    assert set(caught.value.errors) == {"data.val_fraction"}


def test_a_run_may_start_from_the_bundled_model_only_with_its_network() -> None:
    import json
    from pathlib import Path

    import torch

    from veernet_core.checkpoint import deserialize
    from veernet_core.digitise.predict import bundled_model_path
    from veernet_core.trainer import build_for_training

    recipe = json.loads((Path(bundled_model_path()).parent / "bundled-config.json").read_text())
    config = TrainConfig.from_dict({**recipe, "init": "bundled", "device": "cpu"})
    model = build_for_training(config.model, config.seed, torch.device("cpu"), config.init)
    shipped = deserialize(bundled_model_path().read_bytes())["model"]
    assert all(torch.equal(value, shipped[name]) for name, value in model.state_dict().items())
    fresh = build_for_training(config.model, config.seed, torch.device("cpu"))
    assert not all(torch.equal(value, shipped[name]) for name, value in fresh.state_dict().items())
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_dict({**recipe, "init": "bundled", "model": {**recipe["model"], "transformer_ff": 256}})
    assert caught.value.errors == {
        "model.transformer_ff": "must be the bundled model's 128 with init 'bundled', got 256"}
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_dict({"init": "imagenet"})
    assert caught.value.errors["init"] == "must be one of random, bundled, got 'imagenet'"
