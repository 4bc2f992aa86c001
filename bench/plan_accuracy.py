"""The planner against a real run on this machine; prints one JSON line on stdout.

1. Plan a small synthetic run (the default VeerNet, scale-0.05 logs) the way a fresh fleet does:
   dataset sizes, the training loop's memory probe, and a throughput probe of a few real steps.
2. Run it: ``veernet_core.train.train`` into a temporary directory, timed from the call to the
   return (start-up, every step, validations and checkpoint saves included).
3. Peak memory: the plan predicts the run's peak as that of its micro-batch with the highest
   predicted peak (memory model, the path the batch takes). The actual peak is measured on that
   same micro-batch in a real ``Trainer.train_step`` (after one warm-up step, so the optimiser
   state exists): the weights' and optimiser state's bytes plus the peak of the tensor allocations
   the profiler records during the step (the memory model's own quantity on CPU, where the
   allocator keeps no statistics).

Targets: ``ratio`` (predicted / actual time) and ``memory_ratio`` each within 0.8 to 1.25.
Run: ``.venv/bin/python bench/plan_accuracy.py`` (1-3 minutes; wall-clock figures: a loaded machine
shifts both sides, but load that changes during the run shifts only one).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import torch
from benchio import log, stdout_to_stderr
from torch.profiler import ProfilerActivity, profile

from veernet_core.checkpoint import LocalStore
from veernet_core.config import TrainConfig
from veernet_core.data import align, pad_collate, split_indices
from veernet_core.losses import LossWeights
from veernet_core.plan import Reliability, make_plan, pixel_budget
from veernet_core.plan_probe import measure_here
from veernet_core.progress import Progress, TrainCallbacks
from veernet_core.sampler import BucketBatchSampler, Step
from veernet_core.synth_dataset import SynthDataset
from veernet_core.train import train
from veernet_core.trainer import Trainer

CONFIG = {"epochs": 3, "effective_batch": 8, "device": "cpu", "data": {"dataset_size": 60, "scale": 0.05}}


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


class PhaseClock(TrainCallbacks):
    """Where the real run's seconds go, from the loop's own reports (each a timestamp on this clock).

    The loop reports after every step (``train``, the global step one further, with the step's images/s,
    hence its duration), before a validation (``validate``), before a checkpoint save (``checkpoint``) and
    after it (``train`` again, at the same global step).
    Start-up is the call to the start of the first step; a step is the time between the reports around it
    (loading its batches included, as the plan's rate is); validation and checkpoint the time between theirs.
    """

    def __init__(self, started: float, images_per_step: int) -> None:
        self.started, self.images_per_step = started, images_per_step
        self.reports: list[tuple[float, str, float, int]] = []

    def on_progress(self, progress: Progress) -> None:
        self.reports.append((time.perf_counter(), progress.phase, progress.images_per_s, progress.global_step))

    def phases(self, finished: float) -> dict[str, Any]:
        parts = {"startup_s": 0.0, "validation_s": 0.0, "checkpoint_s": 0.0}
        steps_s: list[float] = []
        previous: tuple[float, str, int] | None = None
        for at, phase, images_per_s, step in self.reports:
            if previous is None:  # the first step: its own duration from its rate, the rest is start-up
                steps_s.append(self.images_per_step / images_per_s)
                parts["startup_s"] = at - steps_s[0] - self.started
            elif phase == "train" and step > previous[2]:
                steps_s.append(at - previous[0])
            elif previous[1] == "validate":
                parts["validation_s"] += at - previous[0]
            elif previous[1] == "checkpoint":
                parts["checkpoint_s"] += at - previous[0]
            previous = (at, phase, step)
        return {**parts, "train_s": sum(steps_s), "steps_s": steps_s, "tail_s": finished - self.reports[-1][0]}


def micro_batch_step(config: TrainConfig, sizes: list[tuple[int, int]], budget: int,
                     extents: list[tuple[int, int]]) -> tuple[Step, list[int]]:
    """The run's first step holding a micro-batch of these aligned sizes (the plan's peak micro-batch), and it."""
    train_idx, _ = split_indices(len(sizes), config.data.val_fraction, config.data.seed)
    sampler = BucketBatchSampler({i: sizes[i] for i in train_idx}, config.effective_batch, budget,
                                 config.max_physical_batch, config.seed)
    for step in (s for e in range(config.epochs) for s in sampler.epoch_steps(e)):
        for mb in step.micro_batches:
            if [(align(sizes[i][0]), align(sizes[i][1])) for i in mb] == extents:
                return step, mb
    raise LookupError(f"no micro-batch of sizes {extents} in the run")


def actual_peak(config: TrainConfig, sizes: list[tuple[int, int]], budget: int, extents: list[tuple[int, int]]) -> int:
    dataset = SynthDataset(config.data.dataset_size, config.data.scale, config.data.classes, config.data.seed)
    step, micro_batch = micro_batch_step(config, sizes, budget, extents)
    sampler = BucketBatchSampler(dict(enumerate(sizes)), config.effective_batch, budget,
                                 config.max_physical_batch, config.seed)
    trainer = Trainer(config, torch.device("cpu"), sampler, budget,
                      LossWeights(config.tversky_alpha, config.tversky_beta, config.pixel_loss_weight))
    batches = [pad_collate([dataset[i] for i in mb]) for mb in step.micro_batches]
    trainer.train_step(step, batches)  # warm-up: the optimiser state now exists, as in the run
    batch = pad_collate([dataset[i] for i in micro_batch])
    single = Step([list(micro_batch)], step.group_images, step.group_pixels)
    state = sum(t.numel() * t.element_size() for t in trainer.model.parameters())
    state += sum(v.numel() * v.element_size() for s in trainer.optimizer.state.values()
                 for v in s.values() if torch.is_tensor(v))
    return state + profiled_peak(lambda: trainer.train_step(single, [batch]))


def timed_run(config_dict: dict[str, Any]) -> dict[str, Any]:
    """Train in this (fresh) process, as a worker's child does: imports done, the clock starts at train()."""
    config = TrainConfig.from_dict(config_dict)
    with tempfile.TemporaryDirectory(prefix="veernet-plan-bench-") as root:
        t0 = time.perf_counter()
        clock = PhaseClock(t0, config.effective_batch)
        result = train(config, LocalStore(root), clock)
        actual_s = time.perf_counter() - t0
    return {"actual_s": actual_s, "status": result.status, "global_step": result.global_step,
            **clock.phases(t0 + actual_s)}


def run_in_fresh_process(config_dict: dict[str, Any]) -> dict[str, Any]:
    """Workers train every job in a fresh child (worker_max_tasks_per_child=1) with torch imported: so here."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(timed_run, config_dict).result()


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
        load_run = os.getloadavg()[0]
        run = run_in_fresh_process(config.to_dict())
        actual_s = run["actual_s"]
        log(f"ran in {actual_s:.1f} s ({run['status']}, {run['global_step']} steps)")
        load_after_run = os.getloadavg()[0]
        budget = pixel_budget(config, measured.memory, measured.memory_bytes)
        peak = actual_peak(config, measured.sizes, budget, [tuple(hw) for hw in plan.memory["peak_micro_batch"]])
        t = plan.time
        figures: dict[str, Any] = {
            "predicted_s": t["compute_s"], "actual_s": actual_s, "ratio": t["compute_s"] / actual_s,
            "predicted_peak_mb": plan.memory["predicted_peak_mb"], "actual_peak_mb": peak / 2**20,
            "memory_ratio": plan.memory["predicted_peak_mb"] / (peak / 2**20),
            "predicted_steps": t["total_steps"], "actual_steps": run["global_step"],
            **{f"{part}_ratio": t[f"{part}_s"] / run[f"{part}_s"]
               for part in ("startup", "train", "validation", "checkpoint")},
            **{f"predicted_{part}_s": t[f"{part}_s"] for part in ("startup", "train", "validation", "checkpoint")},
            **{f"actual_{part}_s": run[f"{part}_s"] for part in ("startup", "train", "validation", "checkpoint")},
            "predicted_step_warmup_s": measured.speed.step_warmup_s,
            "predicted_validation_warmup_s": measured.speed.validation_warmup_s,
            "probe_train_px_per_s": measured.speed.train_px_per_s,
            "actual_train_px_per_s": plan.data["train_padded_pixels"] / run["train_s"],
            "actual_tail_s": run["tail_s"], "actual_steps_s": [round(x, 3) for x in run["steps_s"]],
            "padding_waste": plan.data["padding_waste"],
            "largest_micro_batch_px": plan.memory["largest_micro_batch_pixels"],
            "peak_micro_batch": plan.memory["peak_micro_batch"],
            "planning_s": planning_s, "device_class": measured.device_class,
            "loadavg_1min_plan_run_end": [round(x, 2) for x in (load_before, load_run, load_after_run)],
        }
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}))


if __name__ == "__main__":
    main()
