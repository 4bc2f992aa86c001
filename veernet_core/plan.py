"""The compute planner: does a training run finish inside the window, on this device, at what cost?

A plan is arithmetic over three measured inputs, each gathered elsewhere and stated in the plan:

- the **memory model** (``veernet_core.memory``: peak bytes = fixed + per-pixel x padded pixels,
  fitted from a probe of two sizes), which gives the pixel budget exactly as the training loop
  computes it (``memory_fraction`` of the device's memory), unless the config fixes one;
- the **layout** of the data: the run's own split and the sampler's own micro-batches (epoch plans
  are pure functions of the seeds, so steps, accumulation and padding are computed, not estimated;
  past a bounded amount of work, from a stated sample: ``veernet_core.plan_layout``);
- the **throughput** of the device class in *padded* pixels per second (training steps with data
  loading, validation passes), seconds per checkpoint save, and seconds of start-up per (re)start.
  Padded pixels are what the network computes on, so a rate measured on one data size carries over
  to another of the same model config. ``Throughput.source`` says where it comes from: completed
  jobs of the class, a probe, or (a GPU nothing has measured) an estimate from the GPU's datasheet
  (``veernet_core.plan_gpus``). With no throughput at all the plan has the memory and data sections
  and no times.

Choices, written down:

- Wall-clock = start-up + training + validations + checkpoint saves. A worker trains every job in a
  fresh process, so the first training step and the first validation pay a one-off warm-up
  (allocations, kernel selection) beyond the steady rate; training and validation time include it
  once per (re)start. Interruptions add, each, the
  measured resume tax (failure to resumed-from-checkpoint: detection, queueing, restart) plus half a
  checkpoint interval of redone work on average (failures are uniform within an interval).
- The checkpoint interval is the work between saves: an epoch (training and its validation), or
  fewer steps when ``checkpoint_every_steps`` / ``checkpoint_every_minutes`` say so.
- The interval that balances write time C against expected recompute at failure rate λ is Young's
  first-order optimum, sqrt(2 C / λ); a failure rate given as k interruptions over the run is
  λ = k / compute time.
- Cost of a rented tier: the monthly rent spread over the hours the box is actually used,
  ``eur_per_month / (730.5 h x utilisation)`` per hour, times the run's wall-clock.
- Epochs differ only in their grouping; when the run is large (more than ``EXACT_PLAN_IMAGES``
  images over all epochs) the first two epochs' plans stand for every epoch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from veernet_core.config import TrainConfig
from veernet_core.data import align
from veernet_core.memory import MemoryModel
from veernet_core.plan_layout import (
    EXACT_PLAN_IMAGES,
    MIB,
    Bucket,
    Layout,
    LazySizes,
    Size,
    buckets,
    layout,
    pixel_budget,
)

__all__ = ["EXACT_PLAN_IMAGES", "Bucket", "Layout", "Plan", "Reliability", "Throughput", "Tier", "buckets",
           "layout", "make_plan", "pixel_budget"]
HOURS_PER_MONTH = 365.25 * 24 / 12  # 730.5: a month's rent covers this many hours
SOURCE_JOBS = "completed_jobs"  # the median of the class's succeeded jobs of the model config
SOURCE_PROBE = "probe"  # a few real training steps measured on the device (a probe job on a worker, or here)
SOURCE_GPU_TABLE = "gpu_table_estimate"  # the GPU's datasheet FLOP/s times a stated efficiency: an estimate


@dataclass(frozen=True)
class Tier:
    name: str
    eur_per_month: float


ENGAGEMENT_TIERS = (Tier("rented 750 EUR/month", 750.0), Tier("rented 1,800 EUR/month", 1800.0))


@dataclass(frozen=True)
class Throughput:
    """A device class's measured speed for one model config."""

    train_px_per_s: float  # padded pixels per second of training steps, data loading included
    val_px_per_s: float  # padded pixels per second of validation passes
    checkpoint_s: float  # one checkpoint save (serialise, upload, commit)
    startup_s: float  # once per (re)start, before the first step: dataset sizes, memory probe, model build
    source: str  # SOURCE_JOBS, SOURCE_PROBE or SOURCE_GPU_TABLE
    detail: str = ""  # which jobs, which probe on which device, or the estimate's assumptions in a sentence
    jobs: int = 0  # completed jobs the figures are the median of (0 for a probe or an estimate)
    step_warmup_s: float = 0.0  # once per (re)start: the first step's time beyond the steady rate
    validation_warmup_s: float = 0.0  # once per (re)start: the first validation's time beyond the steady rate
    notes: tuple[str, ...] = ()  # what the figures leave out, e.g. completed jobs that could not be counted
    estimate: dict[str, Any] | None = None  # SOURCE_GPU_TABLE: the GPU, its datasheet figures, the efficiency

    @property
    def restart_s(self) -> float:
        """What every (re)start costs before training runs at its steady rate again."""
        return self.startup_s + self.step_warmup_s


@dataclass(frozen=True)
class Reliability:
    interruptions: float | None  # k expected during the run; None: failure rate x compute time
    resume_tax_s: float  # failure to resumed-from-checkpoint, per interruption
    resume_tax_source: str
    failure_rate_per_h: float | None = None  # None: k over the compute time (0 if k is None too)


@dataclass(frozen=True)
class Plan:
    device_class: str
    window_s: float
    memory: dict[str, Any]
    data: dict[str, Any]
    time: dict[str, Any] | None  # None, as the next three: no throughput to time the run with
    interruptions: dict[str, Any] | None
    checkpointing: dict[str, Any] | None
    costs: list[dict[str, Any]]
    throughput: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)

    @property
    def finish_s(self) -> float | None:
        return None if self.interruptions is None else float(self.interruptions["finish_s"])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def memory_section(config: TrainConfig, lay: Layout, budget: int,
                   memory: MemoryModel | None, memory_bytes: float | None, source: str,
                   measured_on: str | None = None, extrapolated: bool = False) -> dict[str, Any]:
    available = None if memory_bytes is None else memory_bytes * config.memory_fraction
    widest_px = align(lay.widest[0]) * align(lay.widest[1])
    section: dict[str, Any] = {
        "source": source, "measured_on": measured_on, "extrapolated": extrapolated,
        "device_memory_mb": None if memory_bytes is None else memory_bytes / MIB,
        "memory_fraction": config.memory_fraction,
        "available_mb": None if available is None else available / MIB, "pixel_budget": budget,
        "pixel_budget_from": "config.pixel_budget" if config.pixel_budget else "memory model",
        "fixed_mb": None, "bytes_per_pixel": None, "probe_pixels": None, "probe_peaks_mb": None,
        "widest_log": {"height": lay.widest[0], "width": lay.widest[1], "padded_pixels": widest_px,
                       "peak_mb": None, "fits": None},
        "largest_micro_batch_pixels": lay.largest_micro_batch_px, "predicted_peak_mb": None,
        "masked_bytes_per_pixel": None, "peak_micro_batch": None,
        "buckets": [asdict(b) for b in buckets(config, lay.sizes_read, budget, memory,
                                               lay.train_images + lay.val_images)],
    }
    if memory is not None:
        widest_peak = memory.peak_bytes(widest_px)
        peak_batch = peak_micro_batch(lay, memory)
        section.update(fixed_mb=memory.fixed_bytes / MIB, bytes_per_pixel=memory.bytes_per_pixel,
                       masked_bytes_per_pixel=memory.masked_bytes_per_pixel,
                       probe_pixels=list(memory.probe_pixels), probe_peaks_mb=[p / MIB for p in memory.probe_peaks],
                       predicted_peak_mb=memory.batch_peak_bytes(list(peak_batch)) / MIB,
                       peak_micro_batch=[list(hw) for hw in peak_batch])
        section["widest_log"].update(peak_mb=widest_peak / MIB,
                                     fits=None if available is None else widest_peak <= available)
    return section


def peak_micro_batch(lay: Layout, memory: MemoryModel) -> tuple[tuple[int, int], ...]:
    """The run's micro-batch (aligned sizes, in order) with the highest predicted peak: its path counts too."""
    return max(sorted(lay.micro_batch_extents), key=lambda extents: memory.batch_peak_bytes(list(extents)))


def checkpoint_interval_s(config: TrainConfig, epoch_s: float, step_s: float) -> float:
    """Work between two saves: an epoch, or fewer steps or minutes when the config asks for it."""
    interval = epoch_s
    if config.checkpoint_every_steps:
        interval = min(interval, config.checkpoint_every_steps * step_s)
    if config.checkpoint_every_minutes:  # the loop saves between steps: never more often than every step
        interval = min(interval, max(config.checkpoint_every_minutes * 60.0, step_s))
    return interval


def young_interval_s(checkpoint_s: float, failures_per_s: float) -> float | None:
    """The checkpoint interval that minimises write time plus expected recompute: sqrt(2 C / λ)."""
    interval = math.sqrt(2.0 * checkpoint_s / failures_per_s) if failures_per_s > 0 else math.inf
    return interval if math.isfinite(interval) else None  # no failures (or too few to tell): none


def expected_interruptions(reliability: Reliability, compute_s: float) -> tuple[float, float]:
    """(k, failures per second): either given, the other derived over the compute time."""
    rate_h, k = reliability.failure_rate_per_h, reliability.interruptions
    if k is None:
        k = (rate_h or 0.0) * compute_s / 3600.0
    return k, (rate_h / 3600.0 if rate_h is not None else k / compute_s)


def finish_with_interruptions(compute_s: float, k: float, resume_tax_s: float, interval_s: float) -> float:
    """Each interruption costs the resume tax plus, on average, half an interval of redone work."""
    return compute_s + k * (resume_tax_s + interval_s / 2.0)


def hourly_rate(eur_per_month: float, utilisation: float) -> float:
    """A month's rent over the hours the box does paid work."""
    if not 0 < utilisation <= 1:
        raise ValueError(f"utilisation must be in (0, 1], got {utilisation}")
    return eur_per_month / (HOURS_PER_MONTH * utilisation)


def saves_per_run(config: TrainConfig, steps_per_epoch: int, epoch_s: float) -> int:
    """Checkpoint saves: one per epoch end, plus mid-epoch ones by steps or minutes."""
    mid = 0
    if config.checkpoint_every_steps:
        mid = max(mid, (steps_per_epoch - 1) // config.checkpoint_every_steps)
    if config.checkpoint_every_minutes:  # the loop saves between steps: at most one mid-epoch save a step
        by_minutes = epoch_s / (config.checkpoint_every_minutes * 60.0)
        mid = max(mid, steps_per_epoch - 1 if by_minutes >= steps_per_epoch else math.ceil(by_minutes) - 1)
    return config.epochs * (1 + mid)


def time_section(config: TrainConfig, lay: Layout, speed: Throughput) -> dict[str, Any]:
    """Each part from the measured rate of the same thing, plus the one-off warm-up a fresh process pays for it."""
    train_s = lay.train_padded_px / speed.train_px_per_s + speed.step_warmup_s
    validations = sum(1 for e in range(config.epochs)
                      if (e + 1) % config.validate_every_epochs == 0 or e + 1 == config.epochs)
    val_s = 0.0
    if lay.val_images and validations:
        val_s = validations * lay.val_padded_px / speed.val_px_per_s + speed.validation_warmup_s
    total_steps = lay.steps_per_epoch * config.epochs
    step_s = train_s / total_steps
    epoch_s = (train_s + val_s) / config.epochs
    saves = saves_per_run(config, lay.steps_per_epoch, epoch_s)
    checkpoint_s = saves * speed.checkpoint_s
    compute_s = speed.startup_s + train_s + val_s + checkpoint_s
    return {"startup_s": speed.startup_s, "train_s": train_s, "validation_s": val_s, "validations": validations,
            "checkpoint_s": checkpoint_s, "checkpoints": saves, "compute_s": compute_s, "step_s": step_s,
            "epoch_s": epoch_s, "images_per_s": config.effective_batch / step_s, "total_steps": total_steps}


def make_plan(config: TrainConfig, sizes: Sequence[Size] | LazySizes, *, device_class: str,
              memory: MemoryModel | None, memory_bytes: float | None, memory_source: str, speed: Throughput | None,
              reliability: Reliability, window_s: float, utilisation: float, tiers: tuple[Tier, ...] = (),
              memory_measured_on: str | None = None, memory_extrapolated: bool = False) -> Plan:
    """The whole plan for `config` on one device class, costed for the engagement's tiers and `tiers`.

    ``memory_measured_on`` names the device class the memory model was measured on; ``memory_extrapolated``
    says it stands for another device (the plan warns that its memory figures are extrapolated). With no
    ``speed`` the plan has its memory and data sections only: nothing times the run. With no ``memory_bytes``
    (a device nothing reported) the memory section has no device figures and the budget is the config's.
    """
    budget = pixel_budget(config, memory, memory_bytes)
    lay = layout(config, sizes, budget)
    mem = memory_section(config, lay, budget, memory, memory_bytes, memory_source, memory_measured_on,
                         memory_extrapolated)
    data = data_section(config, lay)
    if speed is None:
        return Plan(device_class, window_s, mem, data, None, None, None, [], None,
                    _warnings(mem, lay, None, window_s))
    times = time_section(config, lay, speed)
    interval = checkpoint_interval_s(config, times["epoch_s"], times["step_s"])
    k, rate_per_s = expected_interruptions(reliability, times["compute_s"])
    finish = finish_with_interruptions(times["compute_s"], k, reliability.resume_tax_s, interval)
    best = young_interval_s(speed.checkpoint_s, rate_per_s)
    checkpointing = {
        "checkpoint_write_s": speed.checkpoint_s, "interval_s": interval, "failure_rate_per_h": rate_per_s * 3600,
        "optimal_interval_s": best,
        "optimal_every_steps": None if best is None else max(1, round(best / times["step_s"])),
        "optimal_is_epoch_end": best is not None and best >= times["epoch_s"],
    }
    interruptions = {"k": k, "resume_tax_s": reliability.resume_tax_s,
                     "resume_tax_source": reliability.resume_tax_source,
                     "redone_work_s_each": interval / 2.0, "lost_s": finish - times["compute_s"], "finish_s": finish,
                     "fits_window": finish <= window_s, "compute_fits_window": times["compute_s"] <= window_s}
    costs = [{"tier": t.name, "eur_per_month": t.eur_per_month, "utilisation": utilisation,
              "eur_per_hour": hourly_rate(t.eur_per_month, utilisation),
              "eur": hourly_rate(t.eur_per_month, utilisation) * finish / 3600.0} for t in (*ENGAGEMENT_TIERS, *tiers)]
    return Plan(device_class, window_s, mem, data, times, interruptions, checkpointing, costs, asdict(speed),
                _warnings(mem, lay, finish, window_s) + list(speed.notes))


def data_section(config: TrainConfig, lay: Layout) -> dict[str, Any]:
    """Steps, accumulation and padding of the run, and how much of it was sampled (see plan_layout)."""
    return {"train_images": lay.train_images, "val_images": lay.val_images, "steps_per_epoch": lay.steps_per_epoch,
            "epochs": config.epochs, "effective_batch": config.effective_batch,
            "accumulation_steps_mean": lay.accumulation_mean, "accumulation_steps_max": lay.accumulation_max,
            "micro_batches": lay.micro_batches, "padding_waste": lay.padding_waste,
            "train_padded_pixels": lay.train_padded_px, "val_padded_pixels": lay.val_padded_px,
            "every_epoch_planned": lay.exact, "sampled_steps": lay.sampled_steps,
            "sampled_sizes": lay.sampled_sizes}


def _warnings(mem: dict[str, Any], lay: Layout, finish_s: float | None, window_s: float) -> list[str]:
    found = []
    if mem["extrapolated"] and mem["bytes_per_pixel"] is not None:
        found.append(f"the memory model is extrapolated from a probe on {mem['measured_on']}, not measured on the "
                     "target device: its peak and batch figures are estimates (a job of this model config on the "
                     "target records the device's own)")
    if mem["widest_log"]["fits"] is False:
        found.append(f"the widest log ({lay.widest[0]}x{lay.widest[1]} px) alone needs "
                     f"{mem['widest_log']['peak_mb']:.0f} MB, more than the {mem['available_mb']:.0f} MB planned "
                     "for: enable model.grad_checkpointing, or use a device with more memory")
    if finish_s is not None and finish_s > window_s:
        found.append(f"the run needs {finish_s / 3600:.2f} h with the expected interruptions, more than the "
                     f"{window_s / 3600:.2f} h window")
    if mem["bytes_per_pixel"] is None:
        found.append("no memory model: memory figures are missing and the pixel budget is the config's")
    return found
