"""The compute planner: does a training run finish inside the window, on this device, at what cost?

A plan is arithmetic over three measured inputs, each gathered elsewhere and stated in the plan:

- the **memory model** (``veernet_core.memory``: peak bytes = fixed + per-pixel x padded pixels,
  fitted from a probe of two sizes), which gives the pixel budget exactly as the training loop
  computes it (``memory_fraction`` of the device's memory), unless the config fixes one;
- the **layout** of the data: the run's own split and the sampler's own micro-batches (epoch plans
  are pure functions of the seeds, so steps, accumulation and padding are computed, not estimated);
- the **throughput** of the device class in *padded* pixels per second (training steps with data
  loading, validation passes), seconds per checkpoint save, and seconds of start-up per (re)start.
  Padded pixels are what the network computes on, so a rate measured on one data size carries over
  to another of the same model config.

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
from dataclasses import asdict, dataclass, field
from typing import Any

from veernet_core.config import TrainConfig
from veernet_core.data import align, padded_pixels, split_indices
from veernet_core.memory import MemoryModel
from veernet_core.sampler import BucketBatchSampler
from veernet_core.trainer import validation_batches

HOURS_PER_MONTH = 365.25 * 24 / 12  # 730.5: a month's rent covers this many hours
EXACT_PLAN_IMAGES = 20_000  # above this many images over all epochs, two epochs' plans stand for all
SAMPLED_EPOCHS = 2
WIDTH_BUCKETS = 8  # size buckets of the report: equal ranges of aligned width (depth) over the dataset
MIB = 2**20


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
    source: str  # where the figures come from: completed jobs of the class, or a probe
    jobs: int = 0  # completed jobs the figures are the median of (0 for a probe)
    step_warmup_s: float = 0.0  # once per (re)start: the first step's time beyond the steady rate
    validation_warmup_s: float = 0.0  # once per (re)start: the first validation's time beyond the steady rate
    notes: tuple[str, ...] = ()  # what the figures leave out, e.g. completed jobs that could not be counted

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
class Bucket:
    width_from: int  # the bucket's range of aligned widths starts here, px
    width_to: int  # the widest aligned width in it
    height_max: int
    images: int
    physical_batch: int  # images of the bucket's largest size that fit the pixel budget in one pass
    accumulation_steps: int  # passes per optimiser step at that physical batch
    peak_mb: float | None  # predicted peak at that physical batch


@dataclass(frozen=True)
class Layout:
    """What the config's data and the sampler make of one run: no speed involved."""

    train_images: int
    val_images: int
    steps_per_epoch: int
    micro_batches: int  # over the whole run
    train_padded_px: int  # over the whole run
    train_real_px: int
    val_padded_px: int  # one validation pass
    largest_micro_batch_px: int
    micro_batch_extents: frozenset[tuple[tuple[int, int], ...]]  # each distinct micro-batch's aligned sizes, in order
    accumulation_mean: float
    accumulation_max: int
    widest: tuple[int, int]  # (height, width) of the widest log, as it is
    exact: bool  # every epoch's plan was computed (else two epochs stand for all)

    @property
    def padding_waste(self) -> float:
        return 1.0 - self.train_real_px / self.train_padded_px if self.train_padded_px else 0.0


def pixel_budget(config: TrainConfig, memory: MemoryModel | None, memory_bytes: float) -> int:
    """The training loop's rule: the config's budget, else the memory model's for memory_fraction."""
    if config.pixel_budget or memory is None:
        return config.pixel_budget
    return memory.pixel_budget(memory_bytes * config.memory_fraction)


def layout(config: TrainConfig, sizes: list[tuple[int, int]], budget: int) -> Layout:
    """The run's steps, micro-batches and padded pixels, from the same split and sampler as train()."""
    train_idx, val_idx = split_indices(len(sizes), config.data.val_fraction, config.data.seed)
    sampler = BucketBatchSampler({i: sizes[i] for i in train_idx}, config.effective_batch, budget,
                                 config.max_physical_batch, config.seed)
    exact = config.epochs * len(train_idx) <= EXACT_PLAN_IMAGES
    epochs = range(config.epochs if exact else min(SAMPLED_EPOCHS, config.epochs))
    micro = [mb for e in epochs for step in sampler.epoch_steps(e) for mb in step.micro_batches]
    per_step = [len(step.micro_batches) for e in epochs for step in sampler.epoch_steps(e)]
    factor = 1.0 if exact else config.epochs / len(epochs)
    padded = [padded_pixels(sizes, mb) for mb in micro]
    real = sum(sizes[i][0] * sizes[i][1] for mb in micro for i in mb)
    val = validation_batches(val_idx, sizes, budget, config.max_physical_batch)
    val_padded = sum(padded_pixels(sizes, b) for b in val)
    widest = max(sizes, key=lambda hw: (hw[1], hw[0]))
    extents = frozenset(tuple((align(sizes[i][0]), align(sizes[i][1])) for i in mb) for mb in micro)
    return Layout(len(train_idx), len(val_idx), sampler.steps_per_epoch, round(len(micro) * factor),
                  round(sum(padded) * factor), round(real * factor), val_padded, max(padded), extents,
                  sum(per_step) / len(per_step), max(per_step), widest, exact)


def buckets(config: TrainConfig, sizes: list[tuple[int, int]], budget: int,
            memory: MemoryModel | None) -> list[Bucket]:
    """Equal ranges of aligned width over the dataset, each with the physical batch its largest size allows."""
    aligned = [(align(h), align(w)) for h, w in sizes]
    low, high = min(w for _, w in aligned), max(w for _, w in aligned)
    step = max(32, align(-(-(high - low) // WIDTH_BUCKETS)))
    found = []
    for start in range(low, high + 1, step):
        inside = [(h, w) for h, w in aligned if start <= w < start + step]
        if not inside:
            continue
        height, width = max(h for h, _ in inside), max(w for _, w in inside)
        cap = min(config.max_physical_batch, config.effective_batch)
        batch = cap if not budget else max(0, min(cap, budget // (height * width)))
        accumulation = math.ceil(config.effective_batch / batch) if batch else 0
        peak = memory.peak_bytes(max(batch, 1) * height * width) / MIB if memory else None
        found.append(Bucket(start, width, height, len(inside), batch, accumulation, peak))
    return found


@dataclass(frozen=True)
class Plan:
    device_class: str
    window_s: float
    memory: dict[str, Any]
    data: dict[str, Any]
    time: dict[str, Any]
    interruptions: dict[str, Any]
    checkpointing: dict[str, Any]
    costs: list[dict[str, Any]]
    throughput: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    @property
    def finish_s(self) -> float:
        return float(self.interruptions["finish_s"])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def memory_section(config: TrainConfig, sizes: list[tuple[int, int]], lay: Layout, budget: int,
                   memory: MemoryModel | None, memory_bytes: float, source: str,
                   measured_on: str | None = None, extrapolated: bool = False) -> dict[str, Any]:
    available = memory_bytes * config.memory_fraction
    widest_px = align(lay.widest[0]) * align(lay.widest[1])
    section: dict[str, Any] = {
        "source": source, "measured_on": measured_on, "extrapolated": extrapolated,
        "device_memory_mb": memory_bytes / MIB, "memory_fraction": config.memory_fraction,
        "available_mb": available / MIB, "pixel_budget": budget,
        "pixel_budget_from": "config.pixel_budget" if config.pixel_budget else "memory model",
        "fixed_mb": None, "bytes_per_pixel": None, "probe_pixels": None, "probe_peaks_mb": None,
        "widest_log": {"height": lay.widest[0], "width": lay.widest[1], "padded_pixels": widest_px,
                       "peak_mb": None, "fits": None},
        "largest_micro_batch_pixels": lay.largest_micro_batch_px, "predicted_peak_mb": None,
        "masked_bytes_per_pixel": None, "peak_micro_batch": None,
        "buckets": [asdict(b) for b in buckets(config, sizes, budget, memory)],
    }
    if memory is not None:
        widest_peak = memory.peak_bytes(widest_px)
        peak_batch = peak_micro_batch(lay, memory)
        section.update(fixed_mb=memory.fixed_bytes / MIB, bytes_per_pixel=memory.bytes_per_pixel,
                       masked_bytes_per_pixel=memory.masked_bytes_per_pixel,
                       probe_pixels=list(memory.probe_pixels), probe_peaks_mb=[p / MIB for p in memory.probe_peaks],
                       predicted_peak_mb=memory.batch_peak_bytes(list(peak_batch)) / MIB,
                       peak_micro_batch=[list(hw) for hw in peak_batch])
        section["widest_log"].update(peak_mb=widest_peak / MIB, fits=widest_peak <= available)
    return section


def peak_micro_batch(lay: Layout, memory: MemoryModel) -> tuple[tuple[int, int], ...]:
    """The run's micro-batch (aligned sizes, in order) with the highest predicted peak: its path counts too."""
    return max(sorted(lay.micro_batch_extents), key=lambda extents: memory.batch_peak_bytes(list(extents)))


def checkpoint_interval_s(config: TrainConfig, epoch_s: float, step_s: float) -> float:
    """Work between two saves: an epoch, or fewer steps or minutes when the config asks for it."""
    interval = epoch_s
    if config.checkpoint_every_steps:
        interval = min(interval, config.checkpoint_every_steps * step_s)
    if config.checkpoint_every_minutes:
        interval = min(interval, config.checkpoint_every_minutes * 60.0)
    return interval


def young_interval_s(checkpoint_s: float, failures_per_s: float) -> float | None:
    """The checkpoint interval that minimises write time plus expected recompute: sqrt(2 C / λ)."""
    if failures_per_s <= 0:
        return None
    return math.sqrt(2.0 * checkpoint_s / failures_per_s)


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
    if config.checkpoint_every_minutes:
        mid = max(mid, math.ceil(epoch_s / (config.checkpoint_every_minutes * 60.0)) - 1)
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


def make_plan(config: TrainConfig, sizes: list[tuple[int, int]], *, device_class: str, memory: MemoryModel | None,
              memory_bytes: float, memory_source: str, speed: Throughput, reliability: Reliability,
              window_s: float, utilisation: float, tiers: tuple[Tier, ...] = (), memory_measured_on: str | None = None,
              memory_extrapolated: bool = False) -> Plan:
    """The whole plan for `config` on one device class, costed for the engagement's tiers and `tiers`.

    ``memory_measured_on`` names the device class the memory model was measured on; ``memory_extrapolated``
    says it stands for another device (the plan warns that its memory figures are extrapolated).
    """
    budget = pixel_budget(config, memory, memory_bytes)
    lay = layout(config, sizes, budget)
    mem = memory_section(config, sizes, lay, budget, memory, memory_bytes, memory_source, memory_measured_on,
                         memory_extrapolated)
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
    data = {"train_images": lay.train_images, "val_images": lay.val_images, "steps_per_epoch": lay.steps_per_epoch,
            "epochs": config.epochs, "effective_batch": config.effective_batch,
            "accumulation_steps_mean": lay.accumulation_mean, "accumulation_steps_max": lay.accumulation_max,
            "micro_batches": lay.micro_batches, "padding_waste": lay.padding_waste,
            "train_padded_pixels": lay.train_padded_px, "val_padded_pixels": lay.val_padded_px,
            "every_epoch_planned": lay.exact}
    return Plan(device_class, window_s, mem, data, times, interruptions, checkpointing, costs, asdict(speed),
                _warnings(mem, lay, finish, window_s) + list(speed.notes))


def _warnings(mem: dict[str, Any], lay: Layout, finish_s: float, window_s: float) -> list[str]:
    found = []
    if mem["extrapolated"] and mem["bytes_per_pixel"] is not None:
        found.append(f"the memory model is extrapolated from a probe on {mem['measured_on']}, not measured on the "
                     "target device: its peak and batch figures are estimates (a job of this model config on the "
                     "target records the device's own)")
    if mem["widest_log"]["fits"] is False:
        found.append(f"the widest log ({lay.widest[0]}x{lay.widest[1]} px) alone needs "
                     f"{mem['widest_log']['peak_mb']:.0f} MB, more than the {mem['available_mb']:.0f} MB planned "
                     "for: enable model.grad_checkpointing, or use a device with more memory")
    if finish_s > window_s:
        found.append(f"the run needs {finish_s / 3600:.2f} h with the expected interruptions, more than the "
                     f"{window_s / 3600:.2f} h window")
    if mem["bytes_per_pixel"] is None:
        found.append("no memory model: memory figures are missing and the pixel budget is the config's")
    return found
