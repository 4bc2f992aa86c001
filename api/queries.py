"""Read side of the API: jobs as users see them, with their live ETA, last checkpoint and timeline.

Every read takes the caller's tenant (None: the admin, who sees all); another tenant's job is
reported exactly like a missing one (JobNotFound), so its existence does not leak.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from api import changes
from api.checkpoints import last_checkpoint
from api.db import read_one
from api.errors import JobNotFound
from api.eta import live_eta_seconds, queued_estimate
from api.jobs import get_job
from api.models import Job, JobEvent, JobStatus, utcnow
from api.schemas import Eta, JobDetail, JobSummary
from api.settings import Settings

RECENT_EVENTS = 20


def list_jobs(session: Session, status: str | None = None, limit: int = 50,
              offset: int = 0, tenant: str | None = None) -> tuple[list[Job], int]:
    """A page of ``tenant``'s jobs (None: everyone's), newest first, and the total matching ``status``."""
    where = [] if status is None else [Job.status == status]
    where += [] if tenant is None else [Job.tenant == tenant]
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


def full_eta(session: Session, job: Job, now: datetime | None = None) -> Eta:
    """As :func:`stored_eta`, and for a queued job its expected start from the queue ahead of it."""
    now = now or utcnow()
    if job.status != JobStatus.QUEUED:
        return stored_eta(job, now)
    start, finish = queued_estimate(session, job, now)
    return Eta(seconds=finish, at=None if finish is None else now + timedelta(seconds=finish),
               expected_start_seconds=start,
               expected_start_at=None if start is None else now + timedelta(seconds=start))


def require_owner(session: Session, job_id: int, tenant: str | None) -> None:
    """JobNotFound unless the job exists and belongs to ``tenant`` (None: any tenant)."""
    owner = session.scalar(select(Job.tenant).where(Job.id == job_id))
    if owner is None or (tenant is not None and owner != tenant):
        raise JobNotFound(job_id)


def job_summary(job: Job) -> JobSummary:
    return JobSummary(**JobSummary.fields_of(job, stored_eta(job)))


def job_detail(session: Session, job_id: int, settings: Settings, tenant: str | None = None) -> JobDetail:
    """Everything about one of ``tenant``'s jobs; raises JobNotFound.

    Polling is the main load on the API, so a job's detail is kept per process and reused while
    Postgres has not notified a change to the job since it was read (api.changes), or else while the
    job's version (its row's updated_at, status and newest event) is unchanged: no query, or one indexed
    query instead of four, and never stale, since every write notifies and bumps one of them. Queued
    jobs are always rebuilt: their expected start depends on the whole queue.
    """
    key = (settings.database_url, job_id)
    cached = _DETAIL_CACHE.get(key)
    keep = settings.status_cache_seconds > 0
    if cached is not None and keep and changes.vouches(settings.database_url, job_id, cached.token):
        if tenant is not None and cached.detail.tenant != tenant:
            raise JobNotFound(job_id)
        return _with_live_eta(cached.detail)
    token = changes.token(settings.database_url, job_id) if keep else None  # before the read it vouches for
    version = _job_version(job_id, settings)
    if version is None or (tenant is not None and version[-1] != tenant):
        raise JobNotFound(job_id)
    if cached is not None and cached.version == version:
        _DETAIL_CACHE[key] = _Cached(version, cached.detail, token)
        return _with_live_eta(cached.detail)
    job = get_job(session, job_id)
    detail = JobDetail.of(job, full_eta(session, job), last_checkpoint(session, job_id),
                          recent_events(session, job_id))
    if job.status != JobStatus.QUEUED:
        if len(_DETAIL_CACHE) >= DETAIL_CACHE_SIZE:
            _DETAIL_CACHE.clear()
        _DETAIL_CACHE[key] = _Cached(version, detail, token)
    return detail


def peek_detail_json(job_id: int, settings: Settings, tenant: str | None = None) -> tuple[bytes | None, bool]:
    """What a poll of the job by ``tenant`` (None: the admin) can be answered with now, without I/O (safe
    on the event loop), and whether the job should be read again in the background.

    Served: the bytes of the last read within STATUS_CACHE_SECONDS; the kept detail with its live ETA
    while the change feed vouches for it; and the last bytes while the job's first change since they
    were read is younger than STATUS_CACHE_SECONDS. Read again in the background: a job the feed heard
    change, and one it cannot vouch for (queued, or no feed) past half its window. (None, False): the
    poll must wait for a read.
    """
    key = (settings.database_url, job_id)
    cached = _JSON_CACHE.get(key)
    if cached is None or tenant not in (None, cached[2]):
        return None, False
    now, window = time.monotonic(), settings.status_cache_seconds
    age = now - cached[0]
    kept = _DETAIL_CACHE.get(key)
    token = None if kept is None else kept.token
    if kept is not None and changes.vouches(settings.database_url, job_id, token):
        if age < window or kept.detail.status != JobStatus.RUNNING:  # only a running job's ETA moves
            return cached[1], False
        data = _with_live_eta(kept.detail).model_dump_json().encode()
        _JSON_CACHE[key] = (now, data, cached[2])
        return data, False
    changed = changes.changed_for(settings.database_url, job_id, token)
    if changed is not None:
        return (cached[1], True) if min(changed, age) < window else (None, False)
    if age < window:
        return cached[1], age > window / 2
    return None, False


def job_detail_json_and_tenant(session: Session, job_id: int, settings: Settings) -> tuple[bytes, str]:
    """:func:`job_detail` as JSON, and the job's tenant; kept for :func:`peek_detail_json` to serve again
    to its tenant or the admin."""
    key, now = (settings.database_url, job_id), time.monotonic()
    forgotten = _FORGOTTEN.get(key)
    detail = job_detail(session, job_id, settings)
    data = detail.model_dump_json().encode()
    if settings.status_cache_seconds > 0 and _FORGOTTEN.get(key) == forgotten:  # no forget_detail meanwhile
        if len(_JSON_CACHE) >= DETAIL_CACHE_SIZE:
            _JSON_CACHE.clear()
        _JSON_CACHE[key] = (now, data, detail.tenant)
    return data, detail.tenant


def forget_detail(settings: Settings, job_id: int) -> None:
    """Drop a job's cached detail after this process changed it, so its user reads the change."""
    key = (settings.database_url, job_id)
    _FORGOTTEN[key] = _FORGOTTEN.get(key, 0) + 1  # a read under way must not keep what it read before
    _DETAIL_CACHE.pop(key, None)
    _JSON_CACHE.pop(key, None)


_VERSION_QUERY = select(Job.updated_at, Job.status, select(func.max(JobEvent.id)).where(
    JobEvent.job_id == bindparam("job_id")).scalar_subquery(), Job.tenant).where(Job.id == bindparam("job_id"))


def _job_version(job_id: int, settings: Settings) -> tuple[object, ...] | None:
    """(updated_at, status, newest event id, tenant): one autocommit round trip, no BEGIN/ROLLBACK."""
    row = read_one(settings.database_url, _VERSION_QUERY, {"job_id": job_id})
    return None if row is None else tuple(row)


class _Cached(NamedTuple):
    version: tuple[object, ...]
    detail: JobDetail
    token: changes.Token | None  # taken before the read: the change feed's vouching


DETAIL_CACHE_SIZE = 10_000
_DETAIL_CACHE: dict[tuple[str, int], _Cached] = {}
_JSON_CACHE: dict[tuple[str, int], tuple[float, bytes, str]] = {}  # (read at, JSON, the job's tenant)
_FORGOTTEN: dict[tuple[str, int], int] = {}  # how often forget_detail dropped each job


def _with_live_eta(detail: JobDetail) -> JobDetail:
    """A running job's ETA counts down between progress writes."""
    if detail.status != JobStatus.RUNNING or detail.eta.at is None:
        return detail
    seconds = max((detail.eta.at - utcnow()).total_seconds(), 0.0)
    return detail.model_copy(update={"eta": Eta(seconds=seconds, at=detail.eta.at)})
