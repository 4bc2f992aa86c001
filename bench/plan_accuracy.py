"""The planner against a real run on this machine; prints one JSON line on stdout.

1. Plan a small synthetic run (the default VeerNet, scale-0.05 logs) the way a fresh fleet does:
   dataset sizes, the training loop's memory probe, and a throughput probe of a few real steps.
2. Run it: ``veernet_core.train.train`` into a temporary directory, timed from the call to the
   return (start-up, every step, validations and checkpoint saves included).
3. Peak memory: the plan predicts the peak of its largest micro-batch from the memory model. The
   actual peak is measured on that same micro-batch in a real ``Trainer.train_step`` (after one
   warm-up step, so the optimiser state exists): the weights' and optimiser state's bytes plus the
   peak of the tensor allocations the profiler records during the step (the memory model's own
   quantity on CPU, where the allocator keeps no statistics).

Targets: ``ratio`` (predicted / actual time) and ``memory_ratio`` each within 0.8 to 1.25.
Run: ``.venv/bin/python bench/plan_accuracy.py`` (1-3 minutes; wall-clock figures: a loaded machine
shifts both sides, but load that changes during the run shifts only one).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from veernet_core.checkpoint import LocalStore
from veernet_core.config import TrainConfig
from veernet_core.data import align, pad_collate, split_indices
from veernet_core.losses import LossWeights
from veernet_core.plan import Reliability, make_plan, pixel_budget
from veernet_core.plan_probe import measure_here
from veernet_core.sampler import BucketBatchSampler, Step
from veernet_core.synth import SynthDataset
from veernet_core.train import train
from veernet_core.trainer import Trainer

CONFIG = {"epochs": 3, "effective_batch": 8, "device": "cpu", "data": {"dataset_size": 60, "scale": 0.05}}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def profiled_peak(action: Callable[[], None]) -> int:
    """Peak bytes of the tensor allocations made during `action` (CPU profiler's memory events)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        action()
    events = prof.profiler.kineto_results.events() if prof.profiler else []
    current = peak = 0
    for _, nbytes in sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]"):
        current += nbytes
        peak = max(peak, current)
    return peak


def largest_step(config: TrainConfig, sizes: list[tuple[int, int]], budget: int) -> Step:
    """The run's step holding its largest micro-batch (in padded pixels)."""
    train_idx, _ = split_indices(len(sizes), config.data.val_fraction, config.data.seed)
    sampler = BucketBatchSampler({i: sizes[i] for i in train_idx}, config.effective_batch, budget,
                                 config.max_physical_batch, config.seed)

    def padded(mb: list[int]) -> int:
        return len(mb) * align(max(sizes[i][0] for i in mb)) * align(max(sizes[i][1] for i in mb))

    steps = [s for e in range(config.epochs) for s in sampler.plan(e)]
    return max(steps, key=lambda s: max(padded(mb) for mb in s.micro_batches))


def actual_peak(config: TrainConfig, sizes: list[tuple[int, int]], budget: int) -> int:
    dataset = SynthDataset(config.data.dataset_size, config.data.scale, config.data.classes, config.data.seed)
    step = largest_step(config, sizes, budget)
    sampler = BucketBatchSampler(dict(enumerate(sizes)), config.effective_batch, budget,
                                 config.max_physical_batch, config.seed)
    trainer = Trainer(config, torch.device("cpu"), sampler, budget,
                      LossWeights(config.tversky_alpha, config.tversky_beta, config.pixel_loss_weight))
    batches = [pad_collate([dataset[i] for i in mb]) for mb in step.micro_batches]
    trainer.train_step(step, batches)  # warm-up: the optimiser state now exists, as in the run
    largest = max(batches, key=lambda b: b["image"].numel())
    single = Step([[0] * int(largest["image"].shape[0])], step.group_images, step.group_pixels)
    state = sum(t.numel() * t.element_size() for t in trainer.model.parameters())
    state += sum(v.numel() * v.element_size() for s in trainer.optimizer.state.values()
                 for v in s.values() if torch.is_tensor(v))
    return state + profiled_peak(lambda: trainer.train_step(single, [largest]))


def main() -> None:
    with stdout_to_stderr():
        load_before = os.getloadavg()[0]
        config = TrainConfig.from_dict(CONFIG)
        t0 = time.perf_counter()
        measured = measure_here(config, "cpu")
        assert measured.speed is not None
        plan = make_plan(config, measured.sizes, device_class=measured.device_class, memory=measured.memory,
                         memory_bytes=measured.memory_bytes, memory_source="probe here", speed=measured.speed,
                         reliability=Reliability(0.0, 0.0, "no interruptions in this run"), window_s=3600.0,
                         utilisation=1.0)
        planning_s = time.perf_counter() - t0
        log(f"planned in {planning_s:.1f} s: {plan.time['compute_s']:.1f} s predicted")
        with tempfile.TemporaryDirectory(prefix="veernet-plan-bench-") as root:
            t0 = time.perf_counter()
            result = train(config, LocalStore(root))
            actual_s = time.perf_counter() - t0
        log(f"ran in {actual_s:.1f} s ({result.status}, {result.global_step} steps)")
        budget = pixel_budget(config, measured.memory, measured.memory_bytes)
        peak = actual_peak(config, measured.sizes, budget)
        figures: dict[str, Any] = {
            "predicted_s": plan.time["compute_s"], "actual_s": actual_s, "ratio": plan.time["compute_s"] / actual_s,
            "predicted_peak_mb": plan.memory["predicted_peak_mb"], "actual_peak_mb": peak / 2**20,
            "memory_ratio": plan.memory["predicted_peak_mb"] / (peak / 2**20),
            "predicted_steps": plan.time["total_steps"], "actual_steps": result.global_step,
            "predicted_train_s": plan.time["train_s"], "predicted_startup_s": plan.time["startup_s"],
            "predicted_validation_s": plan.time["validation_s"], "predicted_checkpoint_s": plan.time["checkpoint_s"],
            "padding_waste": plan.data["padding_waste"],
            "largest_micro_batch_px": plan.memory["largest_micro_batch_pixels"],
            "planning_s": planning_s, "device_class": measured.device_class,
            "loadavg_1min_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        }
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}))


if __name__ == "__main__":
    main()
