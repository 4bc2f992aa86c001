"""The ETA a run reports counts its validations before the first one has been timed."""

from __future__ import annotations

from pathlib import Path

from veernet_core.checkpoint import LocalStore
from veernet_core.config import TrainConfig
from veernet_core.data import split_indices
from veernet_core.progress import FORWARD_SHARE, Progress, TrainCallbacks, estimate_eta, expected_validation_s
from veernet_core.train import train

CONFIG = {
    "model": {"widths": [8, 8, 16, 16, 32, 32], "transformer_heads": 2, "transformer_ff": 64},
    "data": {"dataset_size": 24, "scale": 0.1, "seed": 3},
    "epochs": 2, "effective_batch": 4, "warmup_steps": 2, "device": "cpu", "pixel_budget": 200_000,
}


class Recorder(TrainCallbacks):
    def __init__(self) -> None:
        self.seen: list[Progress] = []

    def on_progress(self, progress: Progress) -> None:
        self.seen.append(progress)


def test_expected_validation_is_a_forward_pass_over_the_validation_images() -> None:
    assert expected_validation_s(val_images=8, step_time_s=0.6, images_per_step=4) == 2 * 0.6 * FORWARD_SHARE
    assert expected_validation_s(val_images=8, step_time_s=0.0, images_per_step=4) == 0.0


def test_progress_before_the_first_validation_expects_one_and_after_it_reports_the_measured_one(
        tmp_path: Path) -> None:
    config = TrainConfig.from_dict(CONFIG)
    recorder = Recorder()
    result = train(config, LocalStore(tmp_path), recorder)
    assert result.status == "completed"
    _, val_idx = split_indices(config.data.dataset_size, config.data.val_fraction, config.data.seed)
    first_epoch = [p for p in recorder.seen if p.phase == "train" and p.epoch == 0 and p.step_time_s > 0]
    assert first_epoch, "steps past the warm-up report a step time"
    for p in first_epoch:
        expected = expected_validation_s(len(val_idx), p.step_time_s, config.effective_batch)
        assert p.validate_time_s == expected > 0
        left = p.total_steps - p.global_step
        assert p.eta_s == estimate_eta(left, p.step_time_s, 2, expected, 2, p.checkpoint_time_s)
    second_epoch = [p for p in recorder.seen if p.phase == "train" and p.epoch == 1]
    measured = {p.validate_time_s for p in second_epoch}
    assert len(measured) == 1 and measured != {first_epoch[-1].validate_time_s}, "the measured pass replaces it"
