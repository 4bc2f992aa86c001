"""Planning a run against the fleet: its measurements, a probe job where one is missing, veernet_core.plan's arithmetic.

The API process never probes: a plan answers at once from what the fleet has measured, and where a
measurement is missing it queues a probe job for a worker (api.plan_probes) and says it is pending.

- **Device class.** Workers record theirs at claim (``jobs.device_class``, with the device's memory).
  A request names one of them; or a GPU of the known-GPU table (veernet_core.plan_gpus), by any of
  its names ('A100 80GB', 'cuda:NVIDIA H100 PCIe'); or a GPU memory size (a reported GPU class of
  that size, else the table's card of that size); or nothing: the class with the most completed
  jobs. Anything else is a 422 that lists what is known.
- **Throughput and memory model**: api.plan_sources, best first: the class's completed jobs, its
  probe jobs, the GPU table's labelled estimate; memory models recorded by workers. With no
  throughput at all the plan has no times (``time`` is null) and ``measurement`` says why.
- **Measurement.** A probe job is queued when the target is a reported class with no throughput of
  this model config, or when no worker has recorded a memory model of it anywhere (and the config
  does not fix its pixel budget). ``measurement.status`` says what the throughput is ("measured",
  "estimated" or "none") and ``measurement.probe`` what became of the probe.
- **Resume tax and interruptions**: api.plan_reliability, from the class's job timelines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.auth import Principal
from api.errors import FieldErrors
from api.limits import train_config
from api.models import Job, JobStatus
from api.plan_fleet import ManifestSizes, dataset_sizes
from api.plan_probes import ProbeStatus, request_probe
from api.plan_reliability import reliability
from api.plan_schemas import PlanBody
from api.plan_sources import GPU_PREFIX, choose_memory, measured_speed, table_estimate
from api.settings import Settings
from veernet_core.config import TrainConfig
from veernet_core.plan import Plan, Throughput, Tier, make_plan
from veernet_core.plan_gpus import KNOWN_GPUS, KnownGpu, find_gpu, gpu_for_memory

GIB = 2**30
SAME_SIZE = 0.1  # a reported GPU class stands for a named memory size within this share of it


class PlanError(FieldErrors):
    """The request cannot be planned; ``errors`` maps a field to what to fix (422, or 409 for probe=false)."""

    def __init__(self, errors: dict[str, str], status: int = 422) -> None:
        super().__init__(errors, status)


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


@dataclass(frozen=True)
class Target:
    """What the plan is for: a class workers reported, a table GPU, or (a fresh fleet) nothing known yet."""

    name: str  # as the plan names it
    reported: str | None = None  # the workers' device class, when they reported it
    gpu: KnownGpu | None = None  # the table's card, when the target is one
    memory_bytes: float | None = None


@dataclass(frozen=True)
class Outcome:
    """A plan and what its throughput is: measured, estimated, or missing (and the probe asked for)."""

    plan: Plan
    measurement: dict[str, Any]


def fleet_classes(session: Session) -> dict[str, int]:
    """{device class: succeeded jobs}, for every class a worker has reported."""
    rows = session.execute(select(Job.device_class, func.count()).where(Job.device_class.is_not(None))
                           .group_by(Job.device_class)).all()
    done = dict(session.execute(select(Job.device_class, func.count()).where(
        Job.device_class.is_not(None), Job.status == JobStatus.SUCCEEDED).group_by(Job.device_class)).all())
    return {str(name): int(done.get(name, 0)) for name, _ in rows}


def plan_run(session: Session, request: PlanRequest, settings: Settings, principal: Principal) -> Outcome:
    """The plan for ``request`` from the fleet's measurements; a probe job queued where one is missing."""
    config, classes = request.config, fleet_classes(session)
    target = resolve_target(session, request, classes)
    memory = choose_memory(session, target.reported, target.name, config)
    speed, skipped = (measured_speed(session, target.reported, config, settings, memory.model, target.memory_bytes)
                      if target.reported else (None, []))
    measured = speed is not None
    if speed is None and target.gpu is not None and config.amp != "off":
        speed = table_estimate(session, target.gpu, config, classes, settings)
    rates = reliability(session, request.interruptions, request.failure_rate_per_hour, target.reported, speed,
                        settings)
    sizes = _sizes(config, settings)
    session.rollback()  # read-only: end the transaction before queueing a probe in a session of its own
    probe = _probe(request, target, memory.model is None, measured, principal, settings)
    if speed is None and not request.probe:
        raise PlanError({"probe": f"nothing measures or estimates this model config on {target.name}; set "
                         "probe=true to have a worker measure it (a probe job), or name a GPU of the table"}, 409)
    plan = make_plan(config, sizes, device_class=target.name, memory=memory.model, memory_bytes=target.memory_bytes,
                     memory_source=memory.source, speed=speed, reliability=rates,
                     window_s=request.window_hours * 3600.0, utilisation=request.utilisation, tiers=request.tiers,
                     memory_measured_on=memory.measured_on, memory_extrapolated=memory.extrapolated)
    status = _measurement(speed, probe, target, config, skipped)
    _warn(plan, status, sizes)
    return Outcome(plan, status)


def _warn(plan: Plan, measurement: dict[str, Any], sizes: Any) -> None:
    """A throughput that is not a measurement heads the warnings; sizes a manifest does not list close them."""
    if measurement["status"] != "measured":
        plan.warnings.insert(0, measurement["message"])
    if isinstance(sizes, ManifestSizes) and sizes.stood_in:
        plan.warnings.append(f"{sizes.stood_in} images of the manifest list no size: they stand in with the sizes "
                             f"of {sizes.sampled} image headers read; list height and width for an exact plan")


def resolve_target(session: Session, request: PlanRequest, classes: dict[str, int]) -> Target:
    """The device class (or table GPU, or size) the plan is for; PlanError (422) for one nothing knows."""
    if request.device_class:
        return _named_target(session, request, classes)
    if request.gpu_memory_gb:
        return _sized_target(session, request.gpu_memory_gb, classes)
    if classes:
        return _reported(session, max(classes, key=lambda c: (classes[c], c)), None)
    return Target("no device yet: no worker of this fleet has run a job")


def _reported(session: Session, name: str, gpu_memory_gb: float | None) -> Target:
    """A class workers reported: the named GPU size, else the memory its workers last recorded, else the table's."""
    gpu = find_gpu(name)
    recorded = session.scalar(select(Job.device_memory_bytes).where(
        Job.device_class == name, Job.device_memory_bytes.is_not(None)).order_by(Job.id.desc()).limit(1))
    memory = gpu_memory_gb * GIB if gpu_memory_gb else float(recorded) if recorded else None
    if memory is None and gpu is not None:
        memory = gpu.memory_gb * GIB
    return Target(name, name, gpu, memory)


def _named_target(session: Session, request: PlanRequest, classes: dict[str, int]) -> Target:
    name = str(request.device_class)
    if name in classes:
        return _reported(session, name, request.gpu_memory_gb)
    gpu = find_gpu(name)
    if gpu is None:
        raise PlanError({"device_class": (
            f"no worker has reported {name!r} and it is no GPU this service knows. Known classes: "
            f"{', '.join(sorted(classes)) or 'none yet'}; known GPUs: {', '.join(g.name for g in KNOWN_GPUS)}. "
            "Name one of them, give gpu_memory_gb, or run a job on that device so that its worker reports it")})
    same = [c for c in classes if find_gpu(c) == gpu]  # 'A10G' typed, 'cuda:NVIDIA A10G' reported
    if same:
        return _reported(session, max(same, key=lambda c: (classes[c], c)), request.gpu_memory_gb)
    return Target(gpu.name, None, gpu, (request.gpu_memory_gb or gpu.memory_gb) * GIB)


def _sized_target(session: Session, size_gb: float, classes: dict[str, int]) -> Target:
    """A reported GPU class of about that memory, else the table's card of that size."""
    memories = session.execute(select(Job.device_class, func.max(Job.device_memory_bytes)).where(
        Job.device_class.startswith(GPU_PREFIX), Job.device_memory_bytes.is_not(None))
        .group_by(Job.device_class)).all()
    sized = [str(c) for c, size in memories if size and abs(size / GIB - size_gb) <= SAME_SIZE * size_gb]
    if sized:
        return _reported(session, max(sized, key=lambda c: (classes.get(c, 0), c)), size_gb)
    gpu = gpu_for_memory(size_gb)
    if gpu is None:
        largest = max(KNOWN_GPUS, key=lambda g: g.memory_gb)
        raise PlanError({"gpu_memory_gb": (
            f"no GPU this service knows has {size_gb:g} GiB (the largest is the {largest.name}, "
            f"{largest.memory_gb:g} GB); name the device_class of a worker that has, or a smaller size")})
    return Target(f"a GPU of {size_gb:g} GiB, planned as the {gpu.name}", None, gpu, size_gb * GIB)


def _sizes(config: TrainConfig, settings: Settings) -> Any:
    try:
        return dataset_sizes(config, settings)
    except Exception as exc:  # a missing manifest, an unreachable store: the user's dataset cannot be read
        raise PlanError({"config.data.manifest_url": (
            f"the dataset's manifest could not be read ({exc.__class__.__name__}: {str(exc)[:300]}); check the "
            "dataset name and that its manifest.json is in place")}) from exc


def _probe(request: PlanRequest, target: Target, no_memory: bool, measured: bool, principal: Principal,
           settings: Settings) -> ProbeStatus | None:
    """Queue (or find) the probe job a missing measurement needs; None when none is needed or asked for."""
    if not request.probe:
        return None
    if target.reported is not None and not measured:
        return request_probe(request.config, target.reported, principal, settings)
    if no_memory and not request.config.pixel_budget:
        return request_probe(request.config, target.reported, principal, settings)
    return None


def _measurement(speed: Throughput | None, probe: ProbeStatus | None, target: Target, config: TrainConfig,
                 skipped: list[str]) -> dict[str, Any]:
    """What the plan's throughput is, in one status and one sentence, and the probe job asked for."""
    if speed is not None and speed.source != "gpu_table_estimate":
        status, message = "measured", f"throughput measured: {speed.detail}"
    elif speed is not None:
        status = "estimated"
        message = f"throughput is an ESTIMATE, not a measurement: {speed.detail}"
    else:
        status = "none"
        why = ("amp is off and the GPU table holds 16-bit tensor figures" if target.gpu and config.amp == "off"
               else "no job or probe has measured this model config there, and it is no GPU of the table")
        message = f"no throughput for {target.name}: {why}; the plan has no times"
    if probe is not None:
        message += f". {probe.message}"
    elif status == "none":
        message += ". Set probe=true to have a worker measure it, or name a GPU of the table"
    if skipped and speed is None:
        message += f" ({'; '.join(skipped)})"
    probe_out = None if probe is None else {"status": probe.status, "job_id": probe.job_id, "message": probe.message}
    return {"status": status, "source": None if speed is None else speed.source, "message": message,
            "probe": probe_out}


def plan_body(body: PlanBody, session: Session, settings: Settings, principal: Principal) -> dict[str, Any]:
    """POST /plan's answer to ``body``, as JSON (PlanError or FieldErrors say what to fix)."""
    request = PlanRequest(
        config=train_config(body.config, settings, principal.tenant), device_class=body.device_class,
        gpu_memory_gb=body.gpu_memory_gb, window_hours=body.window_hours, interruptions=body.interruptions,
        failure_rate_per_hour=body.failure_rate_per_hour, utilisation=body.utilisation,
        tiers=tuple(Tier(t.name, t.eur_per_month) for t in body.tiers), probe=body.probe)
    return plan_json(plan_run(session, request, settings, principal), body.start_at)


def plan_json(outcome: Outcome, start_at: datetime | None) -> dict[str, Any]:
    data = outcome.plan.to_dict()
    data["measurement"] = outcome.measurement
    finish_s = outcome.plan.finish_s
    data["start_at"] = start_at.isoformat() if start_at else None
    data["finish_at"] = (start_at + timedelta(seconds=finish_s)).isoformat() if start_at and finish_s else None
    return cast("dict[str, Any]", json.loads(json.dumps(data, allow_nan=False)))
