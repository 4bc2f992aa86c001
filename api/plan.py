"""Planning a run against the fleet: calibration from completed jobs, then veernet_core.plan's arithmetic.

Where each input comes from (and what the plan says about it):

- **Device class.** Workers record theirs at claim (``jobs.device_class``, with the device's memory).
  A request names one of them, or a GPU memory size, or neither: then the class with the most
  completed jobs, or this machine's on a fresh fleet.
- **Memory model.** The device class's own, as its workers measured it for this model config at a
  job's start (see api.plan_fleet); else this machine's probe: the device's own when the target is
  this machine's class, otherwise extrapolated from this machine (float32, unscaled), which the plan
  states (``memory.extrapolated``, ``memory.measured_on``) and warns about.
- **Throughput.** The median over the class's last ``HISTORY_JOBS`` succeeded jobs of the same model
  config, synthetic or manifest data alike (their layout is recomputed from their config and their
  dataset's image sizes; see api.plan_fleet): padded pixels per step over their measured step time
  (the worker's moving average), validation pixels over their validation time, their checkpoint
  time, and start-up as what their wall-clock leaves over. A class with no such jobs falls back to
  a probe on this machine (``probe=false`` refuses instead).
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
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.errors import FieldErrors
from api.limits import train_config
from api.models import Job, JobEvent, JobStatus
from api.plan_fleet import (
    HISTORY_JOBS,
    RecordedMemory,
    calibrated,
    calibration_rows,
    dataset_sizes,
    manifest_dataset,
    recorded_memory,
)
from api.plan_schemas import PlanBody
from api.settings import Settings
from veernet_core.config import ModelConfig, TrainConfig
from veernet_core.memory import MemoryModel
from veernet_core.plan import Plan, Reliability, Throughput, Tier, make_plan
from veernet_core.plan_probe import PROBE_STEP_PIXELS, device_class, device_memory_bytes, measure_here

GIB = 2**30
_probe_lock = threading.Lock()  # one probe at a time: two would only slow each other down
PROBE_QUEUE_S = 5.0  # a request waits this long for another's probe before it is told to come back
PROBE_RETRY_S = 30


class PlanError(FieldErrors):
    """The request cannot be planned; ``errors`` maps a field to what to fix. A 429 says when to retry."""

    def __init__(self, errors: dict[str, str], status: int = 422) -> None:
        super().__init__(errors, status, {"Retry-After": str(PROBE_RETRY_S)} if status == 429 else None)


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
    memory_bytes = _target_memory_bytes(session, request, target)
    recorded = recorded_memory(session, target, config) if target else None
    history = calibration_rows(session, target) if target else []
    taxes = resume_taxes(session, target) if target else []
    rate = request.failure_rate_per_hour
    if rate is None and request.interruptions is None and target:
        rate = _measured_failure_rate(session, target)
    session.rollback()  # read-only: end the transaction before probing
    check_probe_cost(config, settings)
    if not _probe_lock.acquire(timeout=PROBE_QUEUE_S):
        raise PlanError({"probe": f"another plan is probing this host; retry in {PROBE_RETRY_S} s"}, 429)
    try:
        dataset = manifest_dataset(config, settings) if config.data.kind == "manifest" else None
        measured = measure_here(config, "cpu", dataset, throughput=False)
        memory = _memory_model(request, target, here, recorded, measured.memory)
        calibration = calibrated(history, target or "", config, memory.model, memory_bytes,
                                 lambda cfg: dataset_sizes(cfg, settings))
        speed = calibration.speed
        if speed is None:
            if not request.probe:
                raise PlanError({"probe": f"no succeeded jobs of {target or 'this GPU size'} with this model config "
                                 "to calibrate from; set probe=true to measure on this machine"}, 409)
            on_s3 = config.data.manifest_url.startswith("s3://")  # a fresh process has no S3 client: probe here
            speed = replace(_probed_speed(config, dataset if on_s3 else None), notes=tuple(calibration.skipped))
    finally:
        _probe_lock.release()
    name = target or f"GPU with {request.gpu_memory_gb:g} GiB"
    reliability = _reliability(request, target, taxes, rate, speed, settings)
    return make_plan(config, measured.sizes, device_class=name, memory=memory.model, memory_bytes=memory_bytes,
                     memory_source=memory.source, speed=speed, reliability=reliability,
                     window_s=request.window_hours * 3600.0, utilisation=request.utilisation,
                     tiers=request.tiers, memory_measured_on=memory.measured_on,
                     memory_extrapolated=memory.extrapolated)


@dataclass(frozen=True)
class ChosenMemory:
    model: MemoryModel
    source: str
    measured_on: str  # the device class whose probe the model is
    extrapolated: bool  # True: it stands for another device than the one it was measured on


def _memory_model(request: PlanRequest, target: str | None, here: str, recorded: RecordedMemory | None,
                  probed: MemoryModel) -> ChosenMemory:
    """The target's own measured memory model if a worker recorded one for this model config, else this host's."""
    if recorded is not None and target is not None:
        return ChosenMemory(recorded.model, f"measured on {target} by the worker of job {recorded.job_id} "
                            "(the training loop's own probe there)", target, False)
    if target == here and not request.gpu_memory_gb:
        return ChosenMemory(probed, f"probe on {here}: this machine, the training loop's own memory model", here, False)
    stands_for = f"a {request.gpu_memory_gb:g} GiB GPU" if request.gpu_memory_gb else str(target)
    why = "" if request.gpu_memory_gb and not target else (
        f"; no job of this model config on {target} has recorded its memory model yet")
    return ChosenMemory(probed, f"extrapolated from the probe on {here}, standing for {stands_for} (float32 "
                        f"activations, unscaled: AMP would peak lower){why}", here, True)


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


def _probed_speed(config: TrainConfig, dataset: Any = None) -> Throughput:
    """The throughput probe, once per config (as far as the probe depends on it) in this process."""
    key_fields = {k: v for k, v in config.to_dict().items() if k not in NOT_PROBED}
    key_fields["data"] = {k: v for k, v in key_fields["data"].items() if k not in ("dataset_size", "val_fraction")}
    key = json.dumps(key_fields, sort_keys=True)
    if key not in _PROBED:
        speed = measure_here(config, "cpu", dataset).speed
        assert speed is not None  # a throughput probe was asked for
        if len(_PROBED) >= 32:
            _PROBED.pop(next(iter(_PROBED)))
        _PROBED[key] = speed
    return _PROBED[key]


def _default_class(classes: dict[str, int], here: str) -> str:
    return max(classes, key=lambda c: (classes[c], c)) if any(classes.values()) else here


def _target_memory_bytes(session: Session, request: PlanRequest, target: str | None) -> float:
    """The named GPU size, else the memory the target's workers last recorded, else this machine's."""
    if request.gpu_memory_gb:
        return request.gpu_memory_gb * GIB
    recorded = session.scalar(select(Job.device_memory_bytes).where(
        Job.device_class == target, Job.device_memory_bytes.is_not(None)).order_by(Job.id.desc()).limit(1))
    return float(recorded) if recorded else float(device_memory_bytes("cpu"))


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
    rows = cast("Sequence[tuple[int, datetime, datetime]]", session.execute(  # the query excludes NULL times
        select(Job.infra_failures, Job.started_at, Job.finished_at).where(
            Job.device_class == target, Job.finished_at.is_not(None), Job.started_at.is_not(None))
        .order_by(Job.id.desc()).limit(HISTORY_JOBS * 5)).all())
    hours = sum((end - start).total_seconds() for _, start, end in rows) / 3600.0
    return sum(lost for lost, _, _ in rows) / hours if hours > 0 else None


def plan_body(body: PlanBody, session: Session, settings: Settings, tenant: str) -> dict[str, Any]:
    """POST /plan's answer to ``body``, as JSON (PlanError or FieldErrors say what to fix)."""
    request = PlanRequest(
        config=train_config(body.config, settings, tenant), device_class=body.device_class,
        gpu_memory_gb=body.gpu_memory_gb, window_hours=body.window_hours, interruptions=body.interruptions,
        failure_rate_per_hour=body.failure_rate_per_hour, utilisation=body.utilisation,
        tiers=tuple(Tier(t.name, t.eur_per_month) for t in body.tiers), probe=body.probe)
    return plan_json(plan_run(session, request, settings), body.start_at)


def plan_json(plan: Plan, start_at: datetime | None) -> dict[str, Any]:
    data = plan.to_dict()
    data["start_at"] = start_at.isoformat() if start_at else None
    if start_at is not None:
        from datetime import timedelta

        data["finish_at"] = (start_at + timedelta(seconds=plan.finish_s)).isoformat()
    else:
        data["finish_at"] = None
    return json.loads(json.dumps(data, allow_nan=False))
