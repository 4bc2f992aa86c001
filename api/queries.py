"""Read side of the API: jobs as users see them, with their live ETA, last checkpoint and timeline."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.checkpoints import last_checkpoint
from api.errors import JobNotFound
from api.eta import live_eta_seconds, queued_estimate
from api.jobs import get_job
from api.models import Job, JobEvent, JobStatus, utcnow
from api.schemas import Eta, JobDetail, JobSummary
from api.settings import Settings

RECENT_EVENTS = 20


def list_jobs(session: Session, status: str | None = None, limit: int = 50,
              offset: int = 0) -> tuple[list[Job], int]:
    """A page of jobs, newest first, and the total matching ``status``."""
    where = [] if status is None else [Job.status == status]
    total = session.scalar(select(func.count()).select_from(Job).where(*where)) or 0
    stmt = select(Job).where(*where).order_by(Job.id.desc()).limit(limit).offset(offset)
    return list(session.scalars(stmt).all()), total


def recent_events(session: Session, job_id: int, limit: int = RECENT_EVENTS) -> list[JobEvent]:
    """The job's last ``limit`` timeline entries, oldest first."""
    stmt = select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id.desc()).limit(limit)
    return list(reversed(session.scalars(stmt).all()))


def stored_eta(job: Job, now: datetime | None = None) -> Eta:
    """The ETA from the job row alone: counted down for a running job, zero once it succeeded."""
    now = now or utcnow()
    if job.status == JobStatus.SUCCEEDED:
        return Eta(seconds=0.0, at=job.finished_at)
    seconds = live_eta_seconds(job, now) if job.status == JobStatus.RUNNING else None
    return Eta(seconds=seconds, at=None if seconds is None else now + timedelta(seconds=seconds))


def full_eta(session: Session, job: Job, settings: Settings, now: datetime | None = None) -> Eta:
    """As :func:`stored_eta`, and for a queued job its expected start from the queue ahead of it."""
    now = now or utcnow()
    if job.status != JobStatus.QUEUED:
        return stored_eta(job, now)
    start, finish = queued_estimate(session, job, settings.expected_workers, now)
    return Eta(seconds=finish, at=None if finish is None else now + timedelta(seconds=finish),
               expected_start_seconds=start,
               expected_start_at=None if start is None else now + timedelta(seconds=start))


def job_summary(job: Job) -> JobSummary:
    return JobSummary(**JobSummary.fields_of(job, stored_eta(job)))


def job_detail(session: Session, job_id: int, settings: Settings) -> JobDetail:
    """Everything about one job; raises JobNotFound.

    Polling is the main load on the API, so a job's detail is kept per process and reused while
    the job's version (its row's updated_at, status, and newest event) is unchanged: one indexed
    query instead of four, and never stale, because every write bumps one of them. Queued jobs are
    always rebuilt: their expected start depends on the rest of the queue.
    """
    version = session.execute(select(Job.updated_at, Job.status, select(func.max(JobEvent.id)).where(
        JobEvent.job_id == job_id).scalar_subquery()).where(Job.id == job_id)).one_or_none()
    if version is None:
        raise JobNotFound(job_id)
    key = (settings.database_url, job_id)
    cached = _DETAIL_CACHE.get(key)
    if cached is not None and cached[0] == tuple(version):
        return _with_live_eta(cached[1])
    job = get_job(session, job_id)
    detail = JobDetail.of(job, full_eta(session, job, settings), last_checkpoint(session, job_id),
                          recent_events(session, job_id))
    if job.status != JobStatus.QUEUED:
        if len(_DETAIL_CACHE) >= DETAIL_CACHE_SIZE:
            _DETAIL_CACHE.clear()
        _DETAIL_CACHE[key] = (tuple(version), detail)
    return detail


DETAIL_CACHE_SIZE = 10_000
_DETAIL_CACHE: dict[tuple[str, int], tuple[tuple[object, ...], JobDetail]] = {}


def _with_live_eta(detail: JobDetail) -> JobDetail:
    """A running job's ETA counts down between progress writes."""
    if detail.status != JobStatus.RUNNING or detail.eta.at is None:
        return detail
    seconds = max((detail.eta.at - utcnow()).total_seconds(), 0.0)
    return detail.model_copy(update={"eta": Eta(seconds=seconds, at=detail.eta.at)})
