"""The ETA a run reports: the training time still to come from pixels left, and validations before the
first one has been timed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import veernet_core.train as train_module
from veernet_core.checkpoint import LocalStore
from veernet_core.config import TrainConfig
from veernet_core.data import split_indices
from veernet_core.progress import (
    EMA_WEIGHT,
    FORWARD_SHARE,
    WARMUP_STEPS_EXCLUDED,
    Progress,
    StepTimer,
    TrainCallbacks,
    expected_validation_s,
    seconds_left,
)
from veernet_core.sampler import Step
from veernet_core.train import train
from veernet_core.trainer import Trainer

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


@pytest.mark.usefixtures("one_intra_op_thread")
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
        assert p.eta_s == seconds_left(left, p.step_time_s, 2, expected, 2, p.checkpoint_time_s)
    second_epoch = [p for p in recorder.seen if p.phase == "train" and p.epoch == 1]
    measured = {p.validate_time_s for p in second_epoch}
    assert len(measured) == 1 and measured != {first_epoch[-1].validate_time_s}, "the measured pass replaces it"


@pytest.mark.parametrize("fixed", [0.0, 0.15])
def test_the_step_timer_predicts_remaining_time_from_pixels_not_from_the_last_steps(fixed: float) -> None:
    timer, average = StepTimer(), 0.0
    for k, pixels in enumerate([1_000, 4_000, 2_000] * 7):  # three buckets in turn: time follows pixels
        seconds = fixed + 2e-6 * pixels
        timer.add(seconds, pixels)
        if k >= WARMUP_STEPS_EXCLUDED:  # the plain moving average of step times, as the timer once kept
            average = seconds if average == 0 else (1 - EMA_WEIGHT) * average + EMA_WEIGHT * seconds
    left = [4_000, 4_000, 4_000]  # the rest of the run is all wide steps
    expected = len(left) * fixed + 2e-6 * sum(left)
    assert timer.step_time(sum(left), len(left), 2_500) * len(left) == pytest.approx(expected)
    assert abs(average * len(left) - expected) > 0.02 * expected  # what a plain moving average is off
    assert timer.step_time(0, 0, 2_500) == pytest.approx(fixed + 2e-6 * 2_500)  # none left: a typical step
    untimed = StepTimer()
    untimed.add(1.0, 100)
    assert untimed.step_time(100, 1, 100) == 0.0  # still in its warm-up


def test_steps_all_of_one_size_give_time_per_pixel() -> None:
    timer = StepTimer()
    for _ in range(10):
        timer.add(0.5, 1_000)
    assert timer.line() == (0.0, pytest.approx(0.5 / 1_000))  # no spread of sizes: no line to fit
    assert timer.step_time(6_000, 3, 1_000) == pytest.approx(1.0)


class _PixelClock:
    """time.monotonic for veernet_core.train that moves only while a step trains, by its padded pixels."""

    SECONDS_PER_PIXEL = 1e-6

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


@pytest.mark.usefixtures("one_intra_op_thread")
def test_a_runs_reported_eta_for_training_is_the_training_time_it_then_takes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps of different sizes (bucketed, pixel budget), over epochs: every report after the warm-up
    predicts the training time still to come exactly, when time is proportional to padded pixels."""
    clock = _PixelClock()
    monkeypatch.setattr(train_module, "time", clock)
    train_step = Trainer.train_step

    samplers = []

    def timed_step(self: Trainer, step: Step, batches: list[dict[str, torch.Tensor]]) -> None:
        samplers.append(self.sampler)
        train_step(self, step, batches)
        clock.now += _PixelClock.SECONDS_PER_PIXEL * self.sampler.padded_pixels(step)

    monkeypatch.setattr(Trainer, "train_step", timed_step)
    seen: list[tuple[Progress, float]] = []

    class AtTheClock(TrainCallbacks):
        def on_progress(self, progress: Progress) -> None:
            seen.append((progress, clock.now))

    config = TrainConfig.from_dict({**CONFIG, "epochs": 3, "pixel_budget": 60_000})
    assert train(config, LocalStore(tmp_path), AtTheClock()).status == "completed"
    reports = [(p, at) for p, at in seen if p.phase == "train" and p.step_time_s > 0]
    step_seconds = {p.step_time_s for p, _ in reports if p.global_step < p.total_steps}
    assert len(step_seconds) > 2, "the steps differ in size, so the time of a step to come does too"
    # The epoch being trained is planned step by step; each later one is taken to be its size (the same
    # images, bucketed anew: equal to 5 digits at full scale, not in so small a set). So the prediction
    # is off by exactly what the later epochs differ from it, and nothing else.
    sampler = samplers[0]
    epoch_pixels = [sum(sampler.padded_pixels(s) for s in sampler.epoch_steps(e)) for e in range(config.epochs)]
    for p, at in reports:
        current = p.epoch if p.step else p.epoch - 1  # a report after an epoch's end still holds its plan
        later = range(current + 1, config.epochs)
        off = _PixelClock.SECONDS_PER_PIXEL * sum(epoch_pixels[current] - epoch_pixels[e] for e in later)
        predicted = p.step_time_s * (p.total_steps - p.global_step)
        assert predicted == pytest.approx(clock.now - at + off, rel=1e-6, abs=1e-9), (p.epoch, p.step)
    assert any(epoch_pixels[e] != epoch_pixels[0] for e in range(config.epochs)), "then the test shows less"
