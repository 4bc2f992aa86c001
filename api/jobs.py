"""The job state machine: every job write, FastAPI-free, in one place.

Postgres (or SQLite) owns a job, not the broker. A worker *claims* a job with one atomic UPDATE
that bumps ``attempt``; that attempt is its fencing token, and every later write of the worker
(heartbeat, progress, checkpoint, finish) is conditioned on it, so a worker that lost its lease
changes nothing. Functions flush but never commit: the caller's ``session_scope`` does.
See DESIGN.md, "Who owns a job".
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from api.errors import InvalidTransition, JobNotFound
from api.eta import running_eta
from api.fencing import add_event, locked, locked_running, refuse_write
from api.models import FINISHED, LOCAL_TENANT, Job, JobKind, JobStatus, utcnow
from api.settings import Settings, get_settings

log = logging.getLogger(__name__)

PROGRESS_FIELDS = frozenset({
    "epoch", "step", "steps_per_epoch", "total_steps", "global_step", "images_per_s", "step_time_s",
    "validation_time_s", "checkpoint_time_s", "loss", "metrics",
})


def create_job(session: Session, kind: str, config: dict[str, Any], tenant: str = LOCAL_TENANT) -> Job:
    """Insert a queued job of ``tenant`` and its 'queued' event. The caller commits, then sends the message."""
    now = utcnow()
    job = Job(tenant=tenant, kind=JobKind(kind).value, config=config, status=JobStatus.QUEUED, queued_at=now,
              created_at=now, updated_at=now)
    session.add(job)
    session.flush()
    add_event(session, job.id, 0, "queued", f"{kind} job queued", now=now)
    return job


def get_job(session: Session, job_id: int) -> Job:
    job = session.get(Job, job_id, populate_existing=True)
    if job is None:
        raise JobNotFound(job_id)
    return job


def claim(session: Session, job_id: int, owner: str, lease_s: float, *, now: datetime | None = None,
          settings: Settings | None = None) -> int | None:
    """Take the job for ``owner``; returns the new attempt (the fencing token), None if not ours.

    None means a duplicate delivery (another worker holds a live lease, or the job finished), or
    that the job was cancelled or failed here because it reached a failure cap.
    """
    now, caps = now or utcnow(), settings or get_settings()
    attempt = _claim_queued(session, job_id, owner, lease_s, now, caps)
    if attempt is None:
        attempt = _take_over_expired(session, job_id, owner, lease_s, now, caps)
    if attempt is None:
        _settle_unclaimable(session, job_id, now, caps)
        return None
    add_event(session, job_id, attempt, "claimed", f"claimed by {owner}", {"owner": owner}, now=now)
    return attempt


def _claim_update(job_id: int, owner: str, lease_s: float, now: datetime, caps: Settings) -> Any:
    """The claim's UPDATE: running under a new attempt and lease, if not cancelled or over the job cap."""
    return update(Job).returning(Job.attempt).where(
        Job.id == job_id, Job.cancel_requested.is_(False), Job.job_failures < caps.max_job_failures,
    ).values(
        status=JobStatus.RUNNING, attempt=Job.attempt + 1, lease_owner=owner,
        lease_expires_at=now + timedelta(seconds=lease_s), progress_at=now,
        started_at=func.coalesce(Job.started_at, now), updated_at=now,
    )


def _claim_queued(session: Session, job_id: int, owner: str, lease_s: float, now: datetime,
                  caps: Settings) -> int | None:
    stmt = _claim_update(job_id, owner, lease_s, now, caps).where(
        Job.status == JobStatus.QUEUED, Job.infra_failures < caps.max_infra_attempts)
    return session.execute(stmt).scalar_one_or_none()


def _take_over_expired(session: Session, job_id: int, owner: str, lease_s: float, now: datetime,
                       caps: Settings) -> int | None:
    """Claim a running job whose lease ran out: its holder's attempt is lost to infrastructure."""
    stmt = _claim_update(job_id, owner, lease_s, now, caps).where(
        Job.status == JobStatus.RUNNING, Job.lease_expires_at < now,
        Job.infra_failures + 1 < caps.max_infra_attempts,
    ).values(
        infra_failures=Job.infra_failures + 1,
        recovering_since=func.coalesce(Job.recovering_since, Job.progress_at, now),
        recovering_from_step=func.coalesce(Job.recovering_from_step, Job.global_step, 0),
    )
    attempt = session.execute(stmt).scalar_one_or_none()
    if attempt is not None:
        add_event(session, job_id, attempt - 1, "lease_lost", "lease expired; taken over by a new claim",
                  now=now)
    return attempt


def _settle_unclaimable(session: Session, job_id: int, now: datetime, caps: Settings) -> None:
    """A claim matched nothing: finish the job if it is claimable but cancelled or over a cap."""
    job = locked(session, job_id)
    if job is None:
        log.warning("claim for job %s, which does not exist", job_id)
        return
    lease_end = job.lease_expires_at
    expired = job.status == JobStatus.RUNNING and lease_end is not None and lease_end < now
    if job.status != JobStatus.QUEUED and not expired:
        return  # a duplicate delivery: someone holds a live lease, or the job is finished
    if expired:
        job.infra_failures += 1
        add_event(session, job_id, job.attempt, "lease_lost", "lease expired", now=now)
    if job.cancel_requested:
        _finish(session, job, JobStatus.CANCELLED, now, message="cancelled before it could resume")
    elif job.infra_failures >= caps.max_infra_attempts:
        _finish(session, job, JobStatus.FAILED, now, error=_infra_cap_error(job, caps))
    elif job.job_failures >= caps.max_job_failures:
        _finish(session, job, JobStatus.FAILED, now, error=_job_cap_error(job, caps, job.error or "unknown"))


def heartbeat(session: Session, job_id: int, attempt: int, lease_s: float, *,
              now: datetime | None = None) -> bool:
    """Extend the lease of ``attempt``. False: the job is no longer ours; stop and write nothing."""
    now = now or utcnow()
    result = session.execute(
        update(Job).where(Job.id == job_id, Job.attempt == attempt, Job.status == JobStatus.RUNNING)
        .values(lease_expires_at=now + timedelta(seconds=lease_s), updated_at=now)
    )
    if result.rowcount == 1:  # type: ignore[attr-defined]
        return True
    refuse_write(session, job_id, attempt, "heartbeat")
    return False


def record_progress(session: Session, job_id: int, attempt: int, *, now: datetime | None = None,
                    **fields: Any) -> bool:
    """Write progress fields (see PROGRESS_FIELDS) and the ETA derived from them, under ``attempt``."""
    unknown = set(fields) - PROGRESS_FIELDS
    if unknown:
        raise ValueError(f"unknown progress fields {sorted(unknown)}; allowed: {sorted(PROGRESS_FIELDS)}")
    now = now or utcnow()
    job = locked_running(session, job_id, attempt)
    if job is None:
        refuse_write(session, job_id, attempt, "progress")
        return False
    for name, value in fields.items():
        setattr(job, name, value)
    job.progress_at = job.updated_at = now
    if job.recovering_since is not None and (job.global_step or 0) >= (job.recovering_from_step or 0):
        job.recovery_seconds += max(0.0, (now - job.recovering_since).total_seconds())
        job.recovering_since = job.recovering_from_step = None
        add_event(session, job_id, attempt, "recovered", "back at the step where the lost attempt was",
                  {"recovery_seconds": round(job.recovery_seconds, 3)}, now=now)
    job.eta_seconds = running_eta(job)
    job.eta_at = None if job.eta_seconds is None else now + timedelta(seconds=job.eta_seconds)
    return True


def finish(session: Session, job_id: int, attempt: int, status: str, error: str | None = None,
           result: dict[str, Any] | None = None, *, now: datetime | None = None) -> bool:
    """End ``attempt``'s job as succeeded, failed or cancelled; False if the attempt lost the job."""
    if status not in FINISHED:
        raise ValueError(f"finish() takes one of {[s.value for s in FINISHED]}, got {status!r}")
    now = now or utcnow()
    job = locked_running(session, job_id, attempt)
    if job is None:
        refuse_write(session, job_id, attempt, f"finish as {status}")
        return False
    _finish(session, job, JobStatus(status), now, error=error, result=result)
    return True


def record_job_failure(session: Session, job_id: int, attempt: int, error: str, *,
                       now: datetime | None = None, settings: Settings | None = None) -> str:
    """Count a failure of the job itself; returns 'queued' (send it again), 'failed' or 'refused'."""
    now, caps = now or utcnow(), settings or get_settings()
    job = locked_running(session, job_id, attempt)
    if job is None:
        refuse_write(session, job_id, attempt, "failure report")
        return "refused"
    job.job_failures += 1
    if job.job_failures >= caps.max_job_failures:
        _finish(session, job, JobStatus.FAILED, now, error=_job_cap_error(job, caps, error))
        return JobStatus.FAILED.value
    job.error = error
    _requeue(session, job, now, f"job failure {job.job_failures} of {caps.max_job_failures}: {error}")
    return JobStatus.QUEUED.value


def release(session: Session, job_id: int, attempt: int, reason: str, *, now: datetime | None = None) -> bool:
    """Give the job back at once (SIGTERM): queued now, not after the lease; the caller re-sends it."""
    now = now or utcnow()
    job = locked_running(session, job_id, attempt)
    if job is None:
        refuse_write(session, job_id, attempt, "release")
        return False
    if job.cancel_requested:
        _finish(session, job, JobStatus.CANCELLED, now, message=f"cancelled; stopped on {reason}")
    else:
        _requeue(session, job, now, f"released: {reason}")
    return True


def request_cancel(session: Session, job_id: int, *, now: datetime | None = None) -> Job:
    """Queued: cancelled at once. Running: flagged; the worker stops at its next step, keeping checkpoints."""
    now = now or utcnow()
    job = locked(session, job_id)
    if job is None:
        raise JobNotFound(job_id)
    if job.status in FINISHED:
        raise InvalidTransition(
            f"job {job_id} already {job.status}; only queued or running jobs can be cancelled")
    if job.status == JobStatus.QUEUED:
        _finish(session, job, JobStatus.CANCELLED, now, message="cancelled while queued")
    elif not job.cancel_requested:
        job.cancel_requested, job.updated_at = True, now
        add_event(session, job_id, job.attempt, "cancel_requested", "the worker stops at its next step",
                  now=now)
    return job


def is_cancel_requested(session: Session, job_id: int) -> bool:
    flag = session.scalar(select(Job.cancel_requested).where(Job.id == job_id))
    if flag is None:
        raise JobNotFound(job_id)
    return bool(flag)


def reap_expired(session: Session, now: datetime, *, settings: Settings | None = None) -> list[int]:
    """Requeue running jobs whose lease expired; returns the ids to send again.

    Each expiry costs one infrastructure attempt; at MAX_INFRA_ATTEMPTS the job fails instead.
    """
    caps = settings or get_settings()
    expired = session.scalars(
        select(Job).where(Job.status == JobStatus.RUNNING, Job.lease_expires_at < now).order_by(Job.id)
        .with_for_update(skip_locked=True).execution_options(populate_existing=True)
    ).all()
    requeued = []
    for job in expired:
        lost = f"lease of {job.lease_owner} expired at {job.lease_expires_at:%Y-%m-%d %H:%M:%S} UTC"
        if _lose_attempt(session, job, now, caps, "lease_lost", lost, "cancelled; its worker was lost"):
            requeued.append(job.id)
    return requeued


def give_up_stalled(session: Session, job_id: int, attempt: int, message: str, data: dict[str, Any] | None = None,
                    *, now: datetime | None = None, settings: Settings | None = None) -> str:
    """``attempt`` made no progress for too long (a hung device call or data read; its heartbeat thread still
    beat) and its process ends itself: the attempt is lost to infrastructure, as a lapsed lease would be,
    without waiting for the lease. Returns 'queued' (send it again), 'failed', 'cancelled' or 'refused'."""
    now, caps = now or utcnow(), settings or get_settings()
    job = locked_running(session, job_id, attempt)
    if job is None:
        refuse_write(session, job_id, attempt, "stall report")
        return "refused"
    _lose_attempt(session, job, now, caps, "stalled", message, "cancelled; its attempt stalled", data)
    return str(job.status)


def _lose_attempt(session: Session, job: Job, now: datetime, caps: Settings, event: str, message: str,
                  cancelled: str, data: dict[str, Any] | None = None) -> bool:
    """One attempt lost to infrastructure: counted, then the job is cancelled (if asked), failed at the cap,
    or requeued; True when requeued (the caller sends it again)."""
    job.infra_failures += 1
    add_event(session, job.id, job.attempt, event, message, data, now=now)
    if job.cancel_requested:
        _finish(session, job, JobStatus.CANCELLED, now, message=cancelled)
    elif job.infra_failures >= caps.max_infra_attempts:
        _finish(session, job, JobStatus.FAILED, now, error=_infra_cap_error(job, caps))
    else:
        _requeue(session, job, now, f"infrastructure recovery {job.infra_failures} of {caps.max_infra_attempts}")
        return True
    return False


def unclaimed_kinds(session: Session, now: datetime, older_than_s: float) -> set[str]:
    """The kinds of the queued jobs nobody claimed for ``older_than_s``: whose queues to look into."""
    cutoff = now - timedelta(seconds=older_than_s)
    return set(session.scalars(select(Job.kind).where(Job.status == JobStatus.QUEUED, Job.queued_at < cutoff)
                               .distinct()).all())


def stale_queued(session: Session, now: datetime, older_than_s: float, in_broker: Collection[int] = ()) -> list[int]:
    """Queued jobs nobody claimed for ``older_than_s`` whose message is not ``in_broker`` (it was lost):
    bump queued_at; re-send these. A job still waiting in the broker for a free worker is left alone."""
    cutoff = now - timedelta(seconds=older_than_s)
    waiting = [Job.id.notin_(sorted(in_broker))] if in_broker else []
    ids = list(session.scalars(
        update(Job).where(Job.status == JobStatus.QUEUED, Job.queued_at < cutoff, *waiting)
        .values(queued_at=now, updated_at=now).returning(Job.id)
    ).all())
    for job_id in sorted(ids):
        message = f"unclaimed for over {older_than_s:g} s; message sent again"
        add_event(session, job_id, 0, "resent", message, now=now)
    return sorted(ids)


def _requeue(session: Session, job: Job, now: datetime, message: str) -> None:
    """Back to queued; the time until a new attempt is back at this step counts as recovery time."""
    job.recovering_since = job.recovering_since or job.progress_at or now
    job.recovering_from_step = max(job.recovering_from_step or 0, job.global_step or 0)
    job.status, job.queued_at, job.updated_at = JobStatus.QUEUED, now, now
    job.lease_owner = job.lease_expires_at = job.eta_seconds = job.eta_at = None
    add_event(session, job.id, job.attempt, "requeued", message, now=now)


def _finish(session: Session, job: Job, status: JobStatus, now: datetime, *, error: str | None = None,
            result: dict[str, Any] | None = None, message: str = "") -> None:
    job.status, job.finished_at, job.updated_at = status, now, now
    job.lease_owner = job.lease_expires_at = None
    job.error = error if status != JobStatus.SUCCEEDED else None
    job.result = result
    job.eta_seconds, job.eta_at = (0.0, now) if status == JobStatus.SUCCEEDED else (None, None)
    add_event(session, job.id, job.attempt, status.value, error or message or f"job {status.value}", now=now)


def _infra_cap_error(job: Job, caps: Settings) -> str:
    return (f"lost {job.infra_failures} attempts to infrastructure (lease expiry, worker loss, a stalled "
            f"attempt), reaching MAX_INFRA_ATTEMPTS={caps.max_infra_attempts}; check the workers' logs and health, "
            "then resubmit")


def _job_cap_error(job: Job, caps: Settings, last_error: str) -> str:
    return (f"failed {job.job_failures} times, reaching MAX_JOB_FAILURES={caps.max_job_failures}; "
            f"last error: {last_error}")


def record_event(session: Session, job_id: int, attempt: int, kind: str, message: str = "",
                 data: dict[str, Any] | None = None, *, now: datetime | None = None) -> bool:
    """A worker's timeline entry (e.g. 'resumed', 'checkpoint_skipped'), fenced like its other writes."""
    now = now or utcnow()
    if locked_running(session, job_id, attempt) is None:
        refuse_write(session, job_id, attempt, f"event {kind!r}")
        return False
    add_event(session, job_id, attempt, kind, message, data, now=now)
    return True


def record_device(session: Session, job_id: int, attempt: int, device_class: str, memory_bytes: int, *,
                  now: datetime | None = None) -> bool:
    """The device ``attempt`` trains on (see veernet_core.plan_probe.device_class), fenced like its other writes."""
    now = now or utcnow()
    job = locked_running(session, job_id, attempt)
    if job is None:
        refuse_write(session, job_id, attempt, "device record")
        return False
    job.device_class, job.device_memory_bytes, job.updated_at = device_class[:200], memory_bytes, now
    return True
