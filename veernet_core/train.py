"""The VeerNet training loop: bucketed, padded, accumulated to the effective batch, always resumable.

``train(config, store, callbacks)`` first looks for the newest committed checkpoint and resumes
from it; data order is a pure function of (seed, epoch), so on CPU an interrupted and resumed run
ends with the same bits as an uninterrupted one.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from veernet_core.checkpoint import (
    BlobStore,
    CheckpointRef,
    CheckpointRegistry,
    SidecarRegistry,
    load_latest,
)
from veernet_core.config import TrainConfig
from veernet_core.data import pad_collate, split_indices
from veernet_core.losses import LossWeights
from veernet_core.memory import MemoryModel
from veernet_core.memory_probe import available_bytes, probe_memory
from veernet_core.progress import Progress, StepTimer, StopReason, TrainCallbacks, expected_validation_s, seconds_left
from veernet_core.sampler import BucketBatchSampler
from veernet_core.trainer import Trainer, amp_dtype


@dataclass
class TrainResult:
    status: str  # "completed" or "stopped"
    reason: StopReason | None
    epoch: int
    step: int
    global_step: int
    history: list[dict[str, float]] = field(default_factory=list)
    last_checkpoint: CheckpointRef | None = None
    best_metric: float | None = None


def resolve_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but no CUDA device is visible; use 'cpu' or 'auto'")
    return torch.device("cuda" if name == "auto" and torch.cuda.is_available() else ("cpu" if name == "auto" else name))


def build_dataset(config: TrainConfig, s3_client: Any = None) -> Dataset[dict[str, Any]]:
    data = config.data
    if data.kind == "manifest":
        from veernet_core.manifest_dataset import ManifestDataset
        return ManifestDataset(data.manifest_url, s3_client=s3_client, classes=data.classes)
    from veernet_core.synth_dataset import SynthDataset
    pages = data.page_items
    logs = SynthDataset(data.dataset_size - pages, scale=data.scale, classes=data.classes, seed=data.seed,
                        exclude=data.exclude)
    if not pages:
        return logs
    from veernet_core.page_dataset import LogsAndPages, PageCropDataset
    return LogsAndPages(logs, PageCropDataset(pages, data.scale, data.seed))


class _SigtermFlag:
    """Turns SIGTERM into a flag checked between steps (only possible on the main thread)."""

    def __init__(self) -> None:
        self.raised = False
        self._previous: Any = None

    def __enter__(self) -> _SigtermFlag:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.raised = True

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


AUTO_WORKERS_MAX = 4  # one H100 trains 8.5 full-scale logs/s in bf16 and a core renders 2.8/s: 3 keep it fed
LOADER_BYTES_PER_PIXEL = 16  # a collated micro-batch in shared memory: float32 image and validity, int64 target
SHM_SHARE = 0.25  # of /dev/shm one training process's loader workers may fill: a box's GPU workers share it


def shared_memory_bytes() -> int | None:
    """The size of /dev/shm, where DataLoader workers hand their batches over (None where there is none)."""
    try:
        stat = os.statvfs("/dev/shm")
    except OSError:
        return None
    return stat.f_frsize * stat.f_blocks


def loader_workers(config: TrainConfig, device: torch.device, pixel_budget: int = 0) -> int:
    """The DataLoader's worker processes: the config's, or for -1 (auto) none on the CPU (they would take
    the training's cores) and on CUDA min(4, CPUs - 1), fewer where their batches in flight (prefetch_factor
    micro-batches of up to ``pixel_budget`` padded pixels each) would fill more than a quarter of /dev/shm,
    which a box's GPU workers share: a full /dev/shm kills a worker with a bus error. Workers render the
    same logs in the same order, so they never change what the model learns."""
    if config.num_workers >= 0:
        return config.num_workers
    if device.type != "cuda":
        return 0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    workers = min(AUTO_WORKERS_MAX, cpus - 1)
    shm = shared_memory_bytes()
    if shm is not None and pixel_budget > 0:
        in_flight = config.prefetch_factor * pixel_budget * LOADER_BYTES_PER_PIXEL
        workers = min(workers, int(SHM_SHARE * shm // in_flight))
    return max(0, workers)


def batch_loader(dataset: Dataset[dict[str, Any]], batches: list[list[int]], config: TrainConfig,
                 device: torch.device, pixel_budget: int = 0) -> Iterator[dict[str, torch.Tensor]]:
    """The training loop's batches: ``batches`` of dataset indices rendered (by ``loader_workers`` workers
    for micro-batches of up to ``pixel_budget`` padded pixels) and padded together."""
    workers = loader_workers(config, device, pixel_budget)
    loader = DataLoader(dataset, batch_sampler=batches, collate_fn=pad_collate, num_workers=workers,
                        pin_memory=config.pin_memory and device.type == "cuda",
                        prefetch_factor=config.prefetch_factor if workers else None,
                        persistent_workers=False)
    return iter(loader)


def pixel_budget_for(config: TrainConfig, device: torch.device, saved: int | None) -> int:
    """The configured budget, else the measured one; a resumed run keeps its old budget if it still fits,
    so that its micro-batches (and, on the same device, its bits) do not change."""
    return budget_and_memory(config, device, saved)[0]


def budget_and_memory(config: TrainConfig, device: torch.device,
                      saved: int | None) -> tuple[int, MemoryModel | None]:
    """``pixel_budget_for``'s budget, and the memory model measured for it (None if the config fixes it)."""
    if config.pixel_budget:
        return config.pixel_budget, None
    with torch.random.fork_rng(devices=[]):  # under the run's own autocast: bf16 peaked 3.7 % above fp32's model
        model = probe_memory(config.model, device, amp_dtype(config, device))
    measured = model.pixel_budget(available_bytes(device) * config.memory_fraction)
    return (saved if saved and saved <= measured else measured), model


def train(config: TrainConfig, store: BlobStore, callbacks: TrainCallbacks | None = None, *,
          registry: CheckpointRegistry | None = None, key_prefix: str = "",
          dataset: Dataset[dict[str, Any]] | None = None, s3_client: Any = None) -> TrainResult:
    """Train to `config.epochs`, resuming from the newest valid committed checkpoint in `store`."""
    callbacks = callbacks or TrainCallbacks()
    registry = registry or SidecarRegistry(store, key_prefix)
    device = resolve_device(config.device)
    dataset = dataset if dataset is not None else build_dataset(config, s3_client)
    sizes_all = dataset.sizes()  # type: ignore[attr-defined]
    train_idx, val_idx = split_indices(len(sizes_all), config.data.val_fraction, config.data.seed)
    skipped: list[tuple[CheckpointRef, str]] = []
    latest = load_latest(store, registry, on_skip=lambda ref, why: skipped.append((ref, why)))
    saved_budget = int(latest[1]["pixel_budget"]) if latest and "pixel_budget" in latest[1] else None
    budget, memory = budget_and_memory(config, device, saved_budget)
    callbacks.on_budget(budget, memory)
    sampler = BucketBatchSampler({i: sizes_all[i] for i in train_idx}, config.effective_batch, budget,
                                 config.max_physical_batch, config.seed)
    trainer = Trainer(config, device, sampler, budget, LossWeights(
        config.tversky_alpha, config.tversky_beta, config.pixel_loss_weight))
    if latest is not None:
        trainer.load_state_dict(latest[1])
        callbacks.on_resume(latest[0], skipped)
    return _run(trainer, dataset, val_idx, sizes_all, store, registry, key_prefix, callbacks)


def _run(trainer: Trainer, dataset: Dataset[dict[str, Any]], val_idx: list[int],
         sizes_all: list[tuple[int, int]], store: BlobStore, registry: CheckpointRegistry,
         key_prefix: str, callbacks: TrainCallbacks) -> TrainResult:
    config, sampler = trainer.config, trainer.sampler
    steps_per_epoch = sampler.steps_per_epoch
    total_steps = steps_per_epoch * config.epochs
    timer, started = StepTimer(), time.monotonic()
    last_save = time.monotonic()
    last_ref: CheckpointRef | None = None
    train_rate = 0.0  # images/s of the last training step: what a validation or a save reports meanwhile

    step_pixels: list[int] = []  # padded pixels of each step of the epoch being trained (or the last one)

    def report(phase: str, loss: float, images_per_s: float | None = None) -> None:
        nonlocal train_rate
        train_rate = train_rate if images_per_s is None else images_per_s
        remaining = total_steps - trainer.global_step
        epochs_left = config.epochs - trainer.epoch
        # This epoch's steps still to come, and every later epoch like this one (they shuffle the same images).
        remaining_px = sum(step_pixels[trainer.step:]) + max(epochs_left - 1, 0) * sum(step_pixels)
        step_time = timer.step_time(remaining_px, remaining, sum(step_pixels) / max(len(step_pixels), 1))
        validations = math.ceil(epochs_left / config.validate_every_epochs)
        # Before the first validation its cost is expected from the step time, not taken as zero.
        validate_s = trainer.validate_time_s or expected_validation_s(len(val_idx), step_time,
                                                                       config.effective_batch)
        callbacks.on_progress(Progress(
            phase, trainer.epoch, config.epochs, trainer.step, steps_per_epoch, trainer.global_step,
            total_steps, loss, trainer.current_lr(), train_rate, step_time,
            validate_s, trainer.checkpoint_time_s, time.monotonic() - started,
            seconds_left(remaining, step_time, validations, validate_s, epochs_left, trainer.checkpoint_time_s),
            trainer.history[-1] if trainer.history else {}))

    def save(metrics: dict[str, float] | None = None) -> bool:
        nonlocal last_save, last_ref
        report("checkpoint", trainer.last_loss)
        ref = trainer.save(store, registry, key_prefix, metrics)
        last_save = time.monotonic()
        if ref is None:
            return False
        last_ref = ref
        callbacks.on_checkpoint(ref)
        return True

    def result(status: str, reason: StopReason | None) -> TrainResult:
        return TrainResult(status, reason, trainer.epoch, trainer.step, trainer.global_step,
                           trainer.history, last_ref, trainer.best_metric)

    with _SigtermFlag() as sigterm:
        while trainer.epoch < config.epochs:
            steps = sampler.epoch_steps(trainer.epoch)
            step_pixels = [sampler.padded_pixels(s) for s in steps]
            steps_left = steps[trainer.step:]
            batches = batch_loader(dataset, [mb for s in steps_left for mb in s.micro_batches], config,
                                   trainer.device, trainer.pixel_budget)
            for step, pixels in zip(steps_left, step_pixels[trainer.step:], strict=True):
                t0 = time.monotonic()
                trainer.train_step(step, [next(batches) for _ in step.micro_batches])
                elapsed = time.monotonic() - t0
                timer.add(elapsed, pixels)
                report("train", trainer.last_loss, step.group_images / max(elapsed, 1e-9))
                if sigterm.raised:
                    return result("stopped", StopReason.SIGTERM if save() else StopReason.LEASE_LOST)
                reason = callbacks.should_stop()
                if reason:
                    return result("stopped", reason)
                every_n = config.checkpoint_every_steps and trainer.step % config.checkpoint_every_steps == 0
                every_m = (config.checkpoint_every_minutes
                           and time.monotonic() - last_save >= 60 * config.checkpoint_every_minutes)
                if (every_n or every_m) and trainer.step < steps_per_epoch and not save():
                    return result("stopped", StopReason.LEASE_LOST)
            metrics = None
            if (trainer.epoch + 1) % config.validate_every_epochs == 0 or trainer.epoch + 1 == config.epochs:
                report("validate", trainer.last_loss)
                metrics = trainer.validate(dataset, val_idx, sizes_all)
            trainer.end_epoch(metrics)
            if not save(metrics):
                return result("stopped", StopReason.LEASE_LOST)
            report("train", trainer.last_loss)
    return result("completed", None)
