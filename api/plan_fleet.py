"""What the planner reads of the fleet's completed work: calibration rates and measured memory models.

- **Calibration.** A succeeded training job of the same model config gives its measured rates,
  normalised by its own layout (padded pixels per step over its step time, and so on), which is
  recomputed from its config and its dataset's image sizes: the synthetic generator's, or the
  sizes its manifest lists (or its images' headers). A job whose sizes cannot be read any more (a
  deleted dataset, an unreachable store) is not counted, and the plan's throughput notes say which
  and why. The job's layout uses the pixel budget its worker recorded, else the memory model's.
- **Memory models.** Every (re)start of a training job fits the memory model on its own device (the
  training loop's probe), and the worker records it with the pixel budget as a ``memory_measured``
  event of the attempt, with the device class. A plan for that class and model config uses the
  newest of them; otherwise the memory model is this host's probe, and the plan says it is
  extrapolated from this host's device.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from api.models import MEMORY_EVENT, Job, JobEvent, JobKind, JobStatus
from api.settings import Settings
from veernet_core.config import ConfigError, TrainConfig
from veernet_core.memory import MemoryModel
from veernet_core.plan import Throughput, layout, pixel_budget
from veernet_core.synth import log_size

HISTORY_JOBS = 10  # recent completed jobs of a class that calibrate it
MEMORY_EVENTS_SCANNED = 50  # newest such events of a class searched for the model config


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


def recorded_memory(session: Session, target: str, config: TrainConfig) -> RecordedMemory | None:
    """The newest memory model a worker of class ``target`` measured for this model config."""
    rows = session.execute(select(JobEvent.job_id, JobEvent.data, Job.config).join(Job, Job.id == JobEvent.job_id)
                           .where(Job.device_class == target, JobEvent.kind == MEMORY_EVENT)
                           .order_by(JobEvent.id.desc()).limit(MEMORY_EVENTS_SCANNED)).all()
    for job_id, data, job_config in rows:
        fitted = (data or {}).get("memory_model")
        if not fitted or data.get("device_class") != target or _model_of(job_config) != config.model:
            continue
        return RecordedMemory(memory_from_dict(fitted), job_id)
    return None


def memory_from_dict(data: dict[str, Any]) -> MemoryModel:
    """A MemoryModel as ``MemoryModel.to_dict`` wrote it (JSON turns its tuples into lists)."""
    return MemoryModel(str(data["device"]), float(data["fixed_bytes"]), float(data["bytes_per_pixel"]),
                       (int(data["probe_pixels"][0]), int(data["probe_pixels"][1])),
                       (int(data["probe_peaks"][0]), int(data["probe_peaks"][1])),
                       None if data.get("masked_bytes_per_pixel") is None else float(data["masked_bytes_per_pixel"]))


def _model_of(config: dict[str, Any]) -> object:
    try:
        return TrainConfig.from_dict(config).model
    except ConfigError:
        return None


@lru_cache(maxsize=16)
def _synth_sizes(size: int, scale: float, seed: int) -> tuple[tuple[int, int], ...]:
    return tuple(log_size(seed, i, scale) for i in range(size))


def dataset_sizes(config: TrainConfig, settings: Settings) -> list[tuple[int, int]]:
    """(height, width) of every image of the config's dataset: the generator's, or the manifest's."""
    if config.data.kind == "synth":
        return list(_synth_sizes(config.data.dataset_size, config.data.scale, config.data.seed))
    return manifest_dataset(config, settings).sizes()


def manifest_dataset(config: TrainConfig, settings: Settings) -> Any:
    """The config's manifest dataset, read with the service's S3 client when it is on S3."""
    from veernet_core.manifest import ManifestDataset

    url = config.data.manifest_url
    client = None
    if url.startswith("s3://"):
        from api.storage import make_s3_client

        client = make_s3_client(settings)
    return ManifestDataset(url, s3_client=client, classes=config.data.classes)


def job_rates(job: JobRecord, cfg: TrainConfig, sizes: list[tuple[int, int]], memory: MemoryModel,
              memory_bytes: float) -> dict[str, float]:
    """One completed job's measured rates, normalised by its own layout."""
    budget = job.pixel_budget or pixel_budget(cfg, memory, job.device_memory_bytes or memory_bytes)
    lay = layout(cfg, sizes, budget)
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


def calibrated(history: list[JobRecord], target: str, config: TrainConfig, memory: MemoryModel,
               memory_bytes: float, sizes_of: Callable[[TrainConfig], list[tuple[int, int]]]) -> Calibration:
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
    speed = Throughput(train, median("val", train), median("checkpoint", 0.0), median("startup", 0.0),
                       f"median of {len(found)} succeeded jobs on {target}", len(found), notes=tuple(skipped))
    return Calibration(speed, skipped)
