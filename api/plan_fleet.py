"""What the planner reads of the fleet's completed work: calibration rates and measured memory models.

- **Calibration.** A succeeded training job of the same model config gives its measured rates,
  normalised by its own layout (padded pixels per step over its step time, and so on), which is
  recomputed from its config and its dataset's image sizes: the synthetic generator's, or the
  sizes its manifest lists (or its images' headers). A job whose sizes cannot be read any more (a
  deleted dataset, an unreachable store) is not counted, and the plan's throughput notes say which
  and why. The job's layout uses the pixel budget its worker recorded, else the memory model's.
- **Memory models.** Every (re)start of a training job fits the memory model on its own device (the
  training loop's probe), and the worker records it with the pixel budget as a ``memory_measured``
  event of the attempt, with the device class; a probe job records the same. A plan for that class
  and model config uses the newest of them; otherwise the newest of this model config on another
  class, which the plan says is extrapolated; otherwise none (a probe job is queued for one).
- **Probe measurements.** A probe job (worker.probe_runner) records its throughput as a
  ``throughput_measured`` event with its device class and model config: a class with no completed
  job of the model config is planned from its newest probe.
- **Sizes and layouts** are bounded work (veernet_core.plan_layout): a synthetic set's sizes are read
  lazily, a manifest's are cached for ``MANIFEST_TTL_S``, and a layout is cached by what it depends on.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from api.models import MEMORY_EVENT, PROBE_EVENT, Job, JobEvent, JobKind, JobStatus
from api.settings import Settings
from veernet_core.config import ConfigError, ModelConfig, TrainConfig
from veernet_core.manifest import listed_sizes
from veernet_core.memory import MemoryModel
from veernet_core.plan import SOURCE_JOBS, Layout, Throughput, layout, pixel_budget
from veernet_core.plan_layout import LazySizes, Size, synth_sizes

HISTORY_JOBS = 10  # recent completed jobs of a class that calibrate it
MEMORY_EVENTS_SCANNED = 50  # newest such events of a class searched for the model config
MANIFEST_TTL_S = 60.0  # a manifest's sizes are read again after this (a dataset can be replaced)
LAYOUTS_CACHED = 64
SizesOf = Callable[[TrainConfig], "Sequence[Size] | LazySizes"]


@dataclass(frozen=True)
class JobRecord:
    """What calibration reads of a succeeded job, detached from the session."""

    job_id: int
    config: dict[str, Any]
    step_time_s: float
    validation_time_s: float | None
    checkpoint_time_s: float | None
    device_memory_bytes: int | None
    wall_s: float | None  # started to finished, time lost to recoveries excluded
    pixel_budget: int | None = None  # as its worker recorded it, if it did


@dataclass(frozen=True)
class RecordedMemory:
    model: MemoryModel
    job_id: int
    device_class: str


@dataclass
class Calibration:
    """Median rates of the counted jobs, and why the others were not counted."""

    speed: Throughput | None
    skipped: list[str] = field(default_factory=list)


def calibration_rows(session: Session, target: str) -> list[JobRecord]:
    jobs = session.scalars(select(Job).where(
        Job.device_class == target, Job.kind == JobKind.TRAIN, Job.status == JobStatus.SUCCEEDED,
        Job.step_time_s.is_not(None)).order_by(Job.id.desc()).limit(HISTORY_JOBS)).all()
    budgets = _recorded_budgets(session, [j.id for j in jobs])
    return [JobRecord(j.id, dict(j.config), float(j.step_time_s or 0.0), j.validation_time_s, j.checkpoint_time_s,
                      j.device_memory_bytes,
                      (j.finished_at - j.started_at).total_seconds() - j.recovery_seconds
                      if j.started_at and j.finished_at else None, budgets.get(j.id)) for j in jobs]


def _recorded_budgets(session: Session, job_ids: list[int]) -> dict[int, int]:
    """Each job's pixel budget from its newest memory event (the last attempt's)."""
    rows = session.execute(select(JobEvent.job_id, JobEvent.data).where(
        JobEvent.job_id.in_(job_ids), JobEvent.kind == MEMORY_EVENT).order_by(JobEvent.id)).all()
    return {job_id: int(data["pixel_budget"]) for job_id, data in rows if data and data.get("pixel_budget")}


def recorded_memory(session: Session, target: str | None, config: TrainConfig,
                    prefer: str = "") -> RecordedMemory | None:
    """The newest memory model a worker of class ``target`` (None: any class, those starting with ``prefer``
    first) measured for this model config."""
    query = (select(JobEvent.job_id, JobEvent.data, Job.config).join(Job, Job.id == JobEvent.job_id)
             .where(JobEvent.kind == MEMORY_EVENT).order_by(JobEvent.id.desc()).limit(MEMORY_EVENTS_SCANNED))
    if target is not None:
        query = query.where(Job.device_class == target)
    found = []
    for job_id, data, job_config in session.execute(query).all():
        fitted, measured_on = (data or {}).get("memory_model"), (data or {}).get("device_class")
        if not fitted or not measured_on or (target is not None and measured_on != target):
            continue
        if _model_of(job_config) == config.model:
            found.append(RecordedMemory(memory_from_dict(fitted), job_id, str(measured_on)))
    preferred = [r for r in found if prefer and r.device_class.startswith(prefer)]
    return next(iter(preferred or found), None)


def probed_speed(session: Session, target: str, config: TrainConfig) -> tuple[Throughput, int] | None:
    """The newest throughput a probe job measured for this model config on class ``target``, and the job's id."""
    rows = session.execute(select(JobEvent.job_id, JobEvent.data).join(Job, Job.id == JobEvent.job_id).where(
        Job.device_class == target, JobEvent.kind == PROBE_EVENT).order_by(JobEvent.id.desc())
        .limit(MEMORY_EVENTS_SCANNED)).all()
    for job_id, data in rows:
        if (data or {}).get("device_class") != target or _model_config(data.get("model")) != config.model:
            continue
        fields = dict(data["throughput"])
        return Throughput(**{**fields, "notes": tuple(fields.get("notes", ()))}), job_id
    return None


def memory_from_dict(data: dict[str, Any]) -> MemoryModel:
    """A MemoryModel as ``MemoryModel.to_dict`` wrote it (JSON turns its tuples into lists)."""
    return MemoryModel(str(data["device"]), float(data["fixed_bytes"]), float(data["bytes_per_pixel"]),
                       (int(data["probe_pixels"][0]), int(data["probe_pixels"][1])),
                       (int(data["probe_peaks"][0]), int(data["probe_peaks"][1])),
                       None if data.get("masked_bytes_per_pixel") is None else float(data["masked_bytes_per_pixel"]))


def _model_of(config: dict[str, Any] | None) -> object:
    """The model config of a job's config: a training job's, or a probe job's (under "train")."""
    try:
        return TrainConfig.from_dict((config or {}).get("train", config)).model
    except (ConfigError, AttributeError, TypeError):
        return None


def _model_config(data: Any) -> ModelConfig | None:
    """A ModelConfig as ``TrainConfig.to_dict`` wrote it, or None."""
    try:
        return ModelConfig(**{**data, "widths": tuple(data["widths"])})
    except (TypeError, KeyError):
        return None


MANIFEST_HEADER_READS = 32  # images whose header a plan reads at most, of a manifest that lists no sizes


class ManifestSizes(list[Size]):
    """A manifest's sizes, and how many of them stand in for sizes the manifest does not list."""

    stood_in: int = 0
    sampled: int = 0


_manifests: dict[str, tuple[float, ManifestSizes]] = {}
_manifests_lock = threading.Lock()


def dataset_sizes(config: TrainConfig, settings: Settings) -> Sequence[Size] | LazySizes:
    """(height, width) of every image of the config's dataset: the generator's (read lazily), or the manifest's
    (as listed; at most MANIFEST_HEADER_READS image headers read where it lists none), cached a while."""
    if config.data.kind == "synth":
        return synth_sizes(config)
    url, now = config.data.manifest_url, time.monotonic()
    with _manifests_lock:
        cached = _manifests.get(url)
    if cached is not None and now - cached[0] < MANIFEST_TTL_S:
        return cached[1]
    listed = listed_sizes(url, _s3_client(url, settings), MANIFEST_HEADER_READS, config.data.seed)
    sizes = ManifestSizes(listed.sizes)
    sizes.stood_in, sizes.sampled = listed.stood_in, listed.sampled
    with _manifests_lock:
        if len(_manifests) >= LAYOUTS_CACHED:
            _manifests.pop(next(iter(_manifests)))
        _manifests[url] = (now, sizes)
    return sizes


def _s3_client(url: str, settings: Settings) -> Any:
    if not url.startswith("s3://"):
        return None
    from api.storage import make_s3_client

    return make_s3_client(settings)


_layouts: OrderedDict[str, Layout] = OrderedDict()
_layouts_lock = threading.Lock()
LAYOUT_FIELDS = ("effective_batch", "max_physical_batch", "seed", "epochs")


def cached_layout(config: TrainConfig, sizes: Sequence[Size] | LazySizes, budget: int) -> Layout:
    """``layout``, remembered by what it depends on: the split, the sampler's settings, the sizes and the budget."""
    sizes_key: object = sizes if isinstance(sizes, LazySizes) else (len(sizes), hash(tuple(sizes)))
    fields = {name: getattr(config, name) for name in LAYOUT_FIELDS}
    key = json.dumps([fields, config.data.val_fraction, config.data.seed, repr(sizes_key), budget])
    with _layouts_lock:
        if key in _layouts:
            _layouts.move_to_end(key)
            return _layouts[key]
    found = layout(config, sizes, budget)
    with _layouts_lock:
        _layouts[key] = found
        while len(_layouts) > LAYOUTS_CACHED:
            _layouts.popitem(last=False)
    return found


def job_rates(job: JobRecord, cfg: TrainConfig, sizes: Sequence[Size] | LazySizes, memory: MemoryModel | None,
              memory_bytes: float | None) -> dict[str, float]:
    """One completed job's measured rates, normalised by its own layout."""
    device_bytes = job.device_memory_bytes or memory_bytes
    budget = job.pixel_budget or (pixel_budget(cfg, memory, device_bytes) if device_bytes else cfg.pixel_budget)
    lay = cached_layout(cfg, sizes, budget)
    steps = lay.steps_per_epoch * cfg.epochs
    rates = {"train": lay.train_padded_px / steps / job.step_time_s}
    train_s = lay.train_padded_px / rates["train"]
    val_s = cfg.epochs * (job.validation_time_s or 0.0) / cfg.validate_every_epochs
    if job.validation_time_s and lay.val_padded_px:
        rates["val"] = lay.val_padded_px / job.validation_time_s
    if job.checkpoint_time_s:
        rates["checkpoint"] = job.checkpoint_time_s
    if job.wall_s is not None:
        rates["startup"] = max(0.0, job.wall_s - train_s - val_s - cfg.epochs * (job.checkpoint_time_s or 0.0))
    return rates


def calibrated(history: list[JobRecord], target: str, config: TrainConfig, memory: MemoryModel | None,
               memory_bytes: float | None, sizes_of: SizesOf) -> Calibration:
    """Median rates of the class's recent succeeded training jobs of the same model config."""
    found, skipped = [], []
    for job in history:
        try:
            cfg = TrainConfig.from_dict(job.config)
        except ConfigError:
            continue
        if cfg.model != config.model or not job.step_time_s:
            continue
        try:
            sizes = sizes_of(cfg)
        except Exception as exc:  # a deleted dataset, an unreachable store: that job cannot be replayed
            skipped.append(f"job {job.job_id} not counted: the image sizes of its dataset "
                           f"{cfg.data.manifest_url or cfg.data.kind} could not be read "
                           f"({exc.__class__.__name__}: {str(exc)[:200]})")
            continue
        found.append(job_rates(job, cfg, sizes, memory, memory_bytes))
    if not found:
        return Calibration(None, skipped)

    def median(name: str, default: float) -> float:
        values = [r[name] for r in found if name in r]
        return statistics.median(values) if values else default

    train = median("train", 0.0)
    speed = Throughput(train, median("val", train), median("checkpoint", 0.0), median("startup", 0.0), SOURCE_JOBS,
                       f"median of {len(found)} succeeded jobs on {target}", len(found), notes=tuple(skipped))
    return Calibration(speed, skipped)
