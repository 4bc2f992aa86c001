"""Planning a run against the fleet: calibration from completed jobs, then veernet_core.plan's arithmetic.

Where each input comes from (and what the plan says about it):

- **Device class.** Workers record theirs at claim (``jobs.device_class``, with the device's memory).
  A request names one of them, or a GPU memory size, or neither: then the class with the most
  completed jobs, or this machine's on a fresh fleet.
- **Memory model.** The training loop's probe, run here once per model config. It is the device's
  own when the target is this machine's class; for any other class, or a named GPU size, it stands
  for that device under the assumption stated in veernet_core.plan_probe (float32, unscaled).
- **Throughput.** The median over the class's last ``HISTORY_JOBS`` succeeded jobs of the same model
  config (synthetic data: their layout is recomputed from their config): padded pixels per step
  over their measured step time (the worker's moving average), validation pixels over their
  validation time, their checkpoint time, and start-up as what their wall-clock leaves over. A class
  with no such jobs falls back to a probe on this machine (``probe=false`` refuses instead).
- **Resume tax.** From each job's timeline: a ``recovered`` event carries the job's cumulative
  recovery time; the part after the new attempt ``resumed`` (or was ``claimed``, if it started
  over) is redone work, the rest is the tax: noticing the loss, queueing, restarting. With none
  measured: one lease, one reaper pass and the start-up, stated as an estimate.
- **Interruptions.** k as given, else the failure rate given, else the class's measured rate:
  attempts lost to infrastructure per hour of its jobs' wall-clock.
"""

from __future__ import annotations

import json
import statistics
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.errors import ServiceError
from api.models import Job, JobEvent, JobKind, JobStatus
from api.settings import Settings
from veernet_core.config import ConfigError, ModelConfig, TrainConfig
from veernet_core.memory import MemoryModel
from veernet_core.plan import (
    Plan,
    Reliability,
    Throughput,
    Tier,
    layout,
    make_plan,
    pixel_budget,
)
from veernet_core.plan_probe import PROBE_STEP_PIXELS, device_class, device_memory_bytes, measure_here
from veernet_core.synth import log_size

HISTORY_JOBS = 10  # recent completed jobs of a class that calibrate it
GIB = 2**30
_probe_lock = threading.Lock()  # one probe at a time: two would only slow each other down
PROBE_QUEUE_S = 5.0  # a request waits this long for another's probe before it is told to come back
PROBE_RETRY_S = 30


class PlanError(ServiceError):
    """The request cannot be planned; ``errors`` maps a field to what to fix; ``status`` is the HTTP answer."""

    def __init__(self, errors: dict[str, str], status: int = 422) -> None:
        self.errors, self.status = errors, status
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))


@dataclass(frozen=True)
class PlanRequest:
    config: TrainConfig
    device_class: str | None = None
    gpu_memory_gb: float | None = None
    window_hours: float = 12.0
    interruptions: float | None = None
    failure_rate_per_hour: float | None = None
    utilisation: float = 0.5
    tiers: tuple[Tier, ...] = ()
    probe: bool = True


def fleet_classes(session: Session) -> dict[str, int]:
    """{device class: succeeded training jobs}, for every class a worker has reported."""
    rows = session.execute(select(Job.device_class, func.count()).where(Job.device_class.is_not(None))
                           .group_by(Job.device_class)).all()
    done = dict(session.execute(select(Job.device_class, func.count()).where(
        Job.device_class.is_not(None), Job.status == JobStatus.SUCCEEDED).group_by(Job.device_class)).all())
    return {str(name): int(done.get(name, 0)) for name, _ in rows}


def plan_run(session: Session, request: PlanRequest, settings: Settings) -> Plan:
    """The plan for ``request``, from the fleet's measurements where there are any, else probes here.

    Every database read comes first and its transaction ends before any probe: a probe takes seconds,
    and Postgres ends sessions idle in a transaction for that long.
    """
    config, here = request.config, device_class("cpu")
    classes = fleet_classes(session)
    target = request.device_class or (None if request.gpu_memory_gb else _default_class(classes, here))
    if target is not None and target not in classes and target != here:
        known = ", ".join(sorted({*classes, here}))
        raise PlanError({"device_class": f"no worker has reported {target!r}; known classes: {known}"})
    memory_bytes, memory_source = _target_memory(session, request, target, here)
    history = _calibration_rows(session, target) if target else []
    taxes = resume_taxes(session, target) if target else []
    rate = request.failure_rate_per_hour
    if rate is None and request.interruptions is None and target:
        rate = _measured_failure_rate(session, target)
    session.rollback()  # read-only: end the transaction before probing
    check_probe_cost(config, settings)
    if not _probe_lock.acquire(timeout=PROBE_QUEUE_S):
        raise PlanError({"probe": f"another plan is probing this host; retry in {PROBE_RETRY_S} s"}, 429)
    try:
        measured = measure_here(config, "cpu", throughput=False)
        speed = _calibrated(history, target or "", config, measured.memory, memory_bytes)
        if speed is None:
            if not request.probe:
                raise PlanError({"probe": f"no succeeded jobs of {target or 'this GPU size'} with this model config "
                                 "to calibrate from; set probe=true to measure on this machine"}, 409)
            speed = _probed_speed(config)
    finally:
        _probe_lock.release()
    name = target or f"GPU with {request.gpu_memory_gb:g} GiB"
    reliability = _reliability(request, target, taxes, rate, speed, settings)
    return make_plan(config, measured.sizes, device_class=name, memory=measured.memory, memory_bytes=memory_bytes,
                     memory_source=memory_source, speed=speed, reliability=reliability,
                     window_s=request.window_hours * 3600.0, utilisation=request.utilisation,
                     tiers=request.tiers)


def check_probe_cost(config: TrainConfig, settings: Settings) -> None:
    """Refuse (422) a model whose probe step would cost more than PLAN_MAX_PROBE_GFLOPS on this host."""
    gflops = probe_step_gflops(config.model)
    if gflops > settings.plan_max_probe_gflops:
        raise PlanError({"config.model": (
            f"a probe step of this model costs {gflops:,.0f} GFLOP; this service probes at most "
            f"{settings.plan_max_probe_gflops:,.0f} (PLAN_MAX_PROBE_GFLOPS). Plan it with `veernet plan` "
            "on a worker's host, or choose a smaller model")})


@lru_cache(maxsize=256)
def probe_step_gflops(model: ModelConfig) -> float:
    """Forward and backward FLOPs of one probe step of ``model``, counted on the meta device (no memory, ~0.1 s)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from veernet_core.model import build_model

    height, width = 256, 1024  # FLOPs grow with pixels; scaled to the probe's step below
    with torch.device("meta"):
        network = build_model(model)
        with FlopCounterMode(display=False) as counter:
            network(torch.zeros(1, 1, height, width)).sum().backward()
    return float(counter.get_total_flops()) / 1e9 * PROBE_STEP_PIXELS / (height * width)


_PROBED: dict[str, Throughput] = {}  # this machine's probes, by what they depend on
NOT_PROBED = ("epochs", "checkpoint_every_steps", "checkpoint_every_minutes", "keep_last", "validate_every_epochs")


def _probed_speed(config: TrainConfig) -> Throughput:
    """The throughput probe, once per config (as far as the probe depends on it) in this process."""
    key_fields = {k: v for k, v in config.to_dict().items() if k not in NOT_PROBED}
    key_fields["data"] = {k: v for k, v in key_fields["data"].items() if k not in ("dataset_size", "val_fraction")}
    key = json.dumps(key_fields, sort_keys=True)
    if key not in _PROBED:
        speed = measure_here(config, "cpu").speed
        assert speed is not None  # a throughput probe was asked for
        if len(_PROBED) >= 32:
            _PROBED.pop(next(iter(_PROBED)))
        _PROBED[key] = speed
    return _PROBED[key]


def _default_class(classes: dict[str, int], here: str) -> str:
    return max(classes, key=lambda c: (classes[c], c)) if any(classes.values()) else here


def _target_memory(session: Session, request: PlanRequest, target: str | None, here: str) -> tuple[float, str]:
    if request.gpu_memory_gb:
        return request.gpu_memory_gb * GIB, (f"probe on {here}, standing for a {request.gpu_memory_gb:g} GiB GPU "
                                             "(float32 activations, unscaled: AMP would peak lower)")
    recorded = session.scalar(select(Job.device_memory_bytes).where(
        Job.device_class == target, Job.device_memory_bytes.is_not(None)).order_by(Job.id.desc()).limit(1))
    memory = float(recorded) if recorded else float(device_memory_bytes("cpu"))
    if target == here:
        return memory, f"probe on {here}: this machine, the training loop's own memory model"
    return memory, f"probe on {here}, standing for {target} (float32 activations, unscaled)"


@lru_cache(maxsize=16)
def _synth_sizes(size: int, scale: float, seed: int) -> tuple[tuple[int, int], ...]:
    return tuple(log_size(seed, i, scale) for i in range(size))


@dataclass(frozen=True)
class JobRecord:
    """What calibration reads of a succeeded job, detached from the session."""

    config: dict[str, Any]
    step_time_s: float
    validation_time_s: float | None
    checkpoint_time_s: float | None
    device_memory_bytes: int | None
    wall_s: float | None  # started to finished, time lost to recoveries excluded


def _calibration_rows(session: Session, target: str) -> list[JobRecord]:
    jobs = session.scalars(select(Job).where(
        Job.device_class == target, Job.kind == JobKind.TRAIN, Job.status == JobStatus.SUCCEEDED,
        Job.step_time_s.is_not(None)).order_by(Job.id.desc()).limit(HISTORY_JOBS)).all()
    return [JobRecord(dict(j.config), float(j.step_time_s or 0.0), j.validation_time_s, j.checkpoint_time_s,
                      j.device_memory_bytes,
                      (j.finished_at - j.started_at).total_seconds() - j.recovery_seconds
                      if j.started_at and j.finished_at else None) for j in jobs]


def _job_rates(job: JobRecord, config: TrainConfig, memory: MemoryModel,
               memory_bytes: float) -> dict[str, float] | None:
    """One completed job's measured rates, normalised by its own layout; None if it cannot be replayed."""
    try:
        cfg = TrainConfig.from_dict(job.config)
    except ConfigError:
        return None
    if cfg.model != config.model or cfg.data.kind != "synth" or not job.step_time_s:
        return None
    sizes = list(_synth_sizes(cfg.data.dataset_size, cfg.data.scale, cfg.data.seed))
    lay = layout(cfg, sizes, pixel_budget(cfg, memory, job.device_memory_bytes or memory_bytes))
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


def _calibrated(history: list[JobRecord], target: str, config: TrainConfig, memory: MemoryModel,
                memory_bytes: float) -> Throughput | None:
    """Median rates of the class's recent succeeded training jobs of the same model config."""
    found = [r for r in (_job_rates(job, config, memory, memory_bytes) for job in history) if r is not None]
    if not found:
        return None

    def median(name: str, default: float) -> float:
        values = [r[name] for r in found if name in r]
        return statistics.median(values) if values else default

    train = median("train", 0.0)
    return Throughput(train, median("val", train), median("checkpoint", 0.0), median("startup", 0.0),
                      f"median of {len(found)} succeeded jobs on {target}", len(found))


def resume_taxes(session: Session, target: str) -> list[float]:
    """Seconds from each measured interruption to the new attempt resuming, from the jobs' timelines."""
    job_ids = session.scalars(select(Job.id).where(Job.device_class == target, Job.infra_failures > 0)
                              .order_by(Job.id.desc()).limit(HISTORY_JOBS)).all()
    taxes: list[float] = []
    for job_id in job_ids:
        events = session.scalars(select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id)).all()
        taxes += timeline_taxes(events)
    return taxes


def timeline_taxes(events: Sequence[JobEvent]) -> list[float]:
    """Resume tax per interruption in one job's timeline (see the module docstring)."""
    taxes, previous_total, claims, first_window = [], 0.0, 0, True
    started: dict[int, datetime] = {}
    for event in events:
        if event.kind == "claimed":
            claims += 1
            started[event.attempt] = event.created_at
        elif event.kind == "resumed":
            started[event.attempt] = event.created_at
        elif event.kind == "recovered" and event.attempt in started:
            total = float((event.data or {}).get("recovery_seconds", previous_total))
            redone = (event.created_at - started[event.attempt]).total_seconds()
            lost = claims - (1 if first_window else 0)
            if lost > 0:
                tax = max(0.0, total - previous_total - redone) / lost
                taxes += [tax] * lost
            previous_total, claims, first_window = total, 0, False
    return taxes


def _reliability(request: PlanRequest, target: str | None, taxes: list[float], rate: float | None,
                 speed: Throughput, settings: Settings) -> Reliability:
    if taxes:
        tax, source = statistics.median(taxes), f"median of {len(taxes)} measured recoveries on {target}"
    else:
        tax = settings.lease_seconds + settings.reaper_interval_seconds + speed.restart_s
        source = "estimate, none measured: one lease to notice the loss, one reaper pass, and a fresh start-up"
    return Reliability(request.interruptions, tax, source, rate)


def _measured_failure_rate(session: Session, target: str) -> float | None:
    """Attempts lost to infrastructure per hour of wall-clock, over the class's recent finished jobs."""
    rows = session.execute(select(Job.infra_failures, Job.started_at, Job.finished_at).where(
        Job.device_class == target, Job.finished_at.is_not(None), Job.started_at.is_not(None))
        .order_by(Job.id.desc()).limit(HISTORY_JOBS * 5)).all()
    hours = sum((end - start).total_seconds() for _, start, end in rows) / 3600.0
    return sum(lost for lost, _, _ in rows) / hours if hours > 0 else None


def plan_json(plan: Plan, start_at: datetime | None) -> dict[str, Any]:
    data = plan.to_dict()
    data["start_at"] = start_at.isoformat() if start_at else None
    if start_at is not None:
        from datetime import timedelta

        data["finish_at"] = (start_at + timedelta(seconds=plan.finish_s)).isoformat()
    else:
        data["finish_at"] = None
    return json.loads(json.dumps(data, allow_nan=False))
