"""Probe jobs for the planner: the API process never probes; it queues a probe job for a worker.

A plan that needs a measurement the fleet lacks (api.plan decides when) asks for a probe of the model
config on a device class (None: any worker, on a fleet that has measured nothing of this model):

- a probe job of the same model config and target that is queued or running is reused, whoever
  queued it: one probe at a time per (model config, target), never a flood;
- one that finished within ``PROBE_COOLDOWN_S`` is not repeated: if it failed the plan says why, and
  if it ran on another class than the one asked for, the plan says that (probe jobs go to the next
  free training worker, whatever its class: in a mixed fleet one may measure another class);
- otherwise a probe job is created for the caller's tenant within its submission limits
  (api.limits.check_submission; a refusal leaves the plan without a probe and says why), committed,
  then sent by task name (api.queue), as POST /jobs does.

Two plans at once never queue two probes: a lock in this process and, on Postgres, a transaction-
scoped advisory lock on the probe's key around the look-up and the insert.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from api import jobs
from api.auth import Principal
from api.db import session_scope
from api.limits import LimitExceeded, check_submission
from api.models import FINISHED, Job, JobKind, JobStatus, utcnow
from api.queue import send_job_id
from api.settings import Settings
from veernet_core.config import TrainConfig

PROBE_COOLDOWN_S = 600.0  # a finished probe of the same key is not repeated sooner
PROBES_SCANNED = 200  # newest probe jobs looked through for one of the same key
_lock = threading.Lock()


@dataclass(frozen=True)
class ProbeStatus:
    """What became of a plan's request for a probe."""

    status: str  # "pending" (queued or running), "not_queued", "failed", "ran_elsewhere", "measured"
    job_id: int | None
    message: str


def probe_key(config: TrainConfig, target: str | None) -> str:
    """What makes two probes the same: the model config (the rate per padded pixel depends on it) and the target."""
    return json.dumps({"model": config.to_dict()["model"], "target": target}, sort_keys=True)


def request_probe(config: TrainConfig, target: str | None, principal: Principal, settings: Settings) -> ProbeStatus:
    """The pending probe for ``config`` on ``target``, a new one, or why there is none (module docstring)."""
    key = probe_key(config, target)
    with _lock, session_scope() as session:
        _advisory_lock(session, key)
        probes = _probes(session, key)
        active = next((job for job in probes if job.status not in FINISHED), None)
        if active is not None:
            return _pending(active.id, active.status, target)
        cutoff = utcnow() - timedelta(seconds=PROBE_COOLDOWN_S)
        recent = next((job for job in probes if job.finished_at and job.finished_at > cutoff), None)
        if recent is not None:
            return _finished(recent, target)
        try:
            check_submission(session, principal, settings)
        except LimitExceeded as exc:
            return ProbeStatus("not_queued", None, f"no probe job was queued: {exc}")
        job_id = jobs.create_job(session, JobKind.PROBE, {"train": config.to_dict(), "target_class": target,
                                                           "probe_key": key}, principal.tenant).id
    send_job_id(job_id, JobKind.PROBE)  # after the commit; a failed send leaves it queued for the reaper
    return _pending(job_id, JobStatus.QUEUED, target)


def _probes(session: Session, key: str) -> list[Job]:
    rows = session.scalars(select(Job).where(Job.kind == JobKind.PROBE).order_by(Job.id.desc())
                           .limit(PROBES_SCANNED)).all()
    return [job for job in rows if (job.config or {}).get("probe_key") == key]


def _advisory_lock(session: Session, key: str) -> None:
    """On Postgres, hold a lock on ``key`` until the transaction ends (SQLite serialises writers itself)."""
    if session.get_bind().dialect.name == "postgresql":
        lock_id = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)
        session.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": lock_id})


def _where(target: str | None) -> str:
    return f"on {target}" if target else "on the next free training worker"


def _pending(job_id: int, status: str, target: str | None) -> ProbeStatus:
    return ProbeStatus("pending", job_id, f"probe job {job_id} ({status}) measures this model config "
                       f"{_where(target)}; plan again when it has finished (GET /jobs/{job_id})")


def _finished(job: Job, target: str | None) -> ProbeStatus:
    retry = f"no new probe before {PROBE_COOLDOWN_S / 60:g} minutes after it"
    if job.status != JobStatus.SUCCEEDED:
        return ProbeStatus("failed", job.id, f"probe job {job.id} {job.status}: {job.error or 'no error recorded'}; "
                           f"{retry}; submit a training job of this config to measure it instead")
    if target is not None and job.device_class != target:
        return ProbeStatus("ran_elsewhere", job.id, f"probe job {job.id} ran on {job.device_class}, not {target} "
                           f"(a probe goes to the next free training worker, whatever its device); {retry}")
    return ProbeStatus("measured", job.id, f"probe job {job.id} measured this model config on {job.device_class}")
