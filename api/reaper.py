"""The reaper: requeue jobs whose lease expired and re-send queued jobs nobody claimed.

``reap_once`` is the whole of it; Celery beat runs it as ``veernet.reap`` on the real stack, and
:class:`ReaperThread` runs it in-process for the embedded default. Postgres is the truth, so an
emptied broker loses no job: every queued row is sent again within QUEUED_RESEND_SECONDS.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select

from api.db import session_scope
from api.jobs import reap_expired, stale_queued, unclaimed_kinds
from api.models import Job, JobStatus, utcnow
from api.queue import jobs_in_broker, send_job_id
from api.settings import Settings, get_settings

log = logging.getLogger(__name__)
EXPIRY_MARGIN_S = 0.02  # a pass just after a lease's end finds it expired (the check is strictly later)


@dataclass
class ReapReport:
    requeued: list[int] = field(default_factory=list)  # lease expired: back on the queue
    resent: list[int] = field(default_factory=list)  # queued but unclaimed: message sent again
    send_failed: list[int] = field(default_factory=list)  # left queued; retried next time


def reap_once(now: datetime | None = None, settings: Settings | None = None) -> ReapReport:
    """One pass: commit the requeues first, then send their messages (a failed send is retried later)."""
    now, settings = now or utcnow(), settings or get_settings()
    with session_scope() as session:
        kinds = unclaimed_kinds(session, now, settings.queued_resend_seconds)
    in_broker: set[int] = set()
    for kind in sorted(kinds):  # read outside any transaction: the broker may be slow or down
        in_broker |= jobs_in_broker(str(kind), settings.queued_resend_seconds) or set()
    with session_scope() as session:
        requeued = reap_expired(session, now, settings=settings)
        resent = stale_queued(session, now, settings.queued_resend_seconds, in_broker)
        ids = requeued + resent
        kind_of = {job_id: kind for job_id, kind in session.execute(select(Job.id, Job.kind).where(Job.id.in_(ids)))}
    report = ReapReport(requeued, resent)
    report.send_failed = [job_id for job_id in ids if not send_job_id(job_id, kind_of[job_id])]
    if ids:
        log.info("reaper: requeued %s, re-sent %s, send failed for %s", requeued, resent, report.send_failed)
    return report


def next_pass_s(interval_s: float) -> float:
    """Until the next pass: the interval, or less if a lease runs out sooner, so that a lost worker
    is noticed when its lease ends rather than up to one interval later."""
    with session_scope() as session:
        expiry = session.scalar(select(func.min(Job.lease_expires_at)).where(Job.status == JobStatus.RUNNING))
    if expiry is None:
        return interval_s
    return min(interval_s, max(EXPIRY_MARGIN_S, (expiry - utcnow()).total_seconds() + EXPIRY_MARGIN_S))


class ReaperThread(threading.Thread):
    """Runs :func:`reap_once` every REAPER_INTERVAL_SECONDS, and at the end of the next lease to run out,
    until :meth:`stop` (the embedded default and ``veernet api --reaper``)."""

    def __init__(self, interval_s: float | None = None) -> None:
        super().__init__(name="veernet-reaper", daemon=True)
        self.interval_s = interval_s or get_settings().reaper_interval_seconds
        self._stopped = threading.Event()

    def run(self) -> None:
        wait_s = self.interval_s
        while not self._stopped.wait(wait_s):
            try:
                reap_once()
                wait_s = self.next_wait_s()
            except Exception:  # a database blip must not end the reaper; the next pass retries
                log.exception("reaper pass failed; retrying in %.0f s", self.interval_s)
                wait_s = self.interval_s

    def next_wait_s(self) -> float:
        return next_pass_s(self.interval_s)

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopped.set()
        self.join(timeout_s)
