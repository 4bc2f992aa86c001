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

from sqlalchemy import select

from api.db import session_scope
from api.jobs import reap_expired, stale_queued
from api.models import Job, utcnow
from api.queue import send_job_id
from api.settings import Settings, get_settings

log = logging.getLogger(__name__)


@dataclass
class ReapReport:
    requeued: list[int] = field(default_factory=list)  # lease expired: back on the queue
    resent: list[int] = field(default_factory=list)  # queued but unclaimed: message sent again
    send_failed: list[int] = field(default_factory=list)  # left queued; retried next time


def reap_once(now: datetime | None = None, settings: Settings | None = None) -> ReapReport:
    """One pass: commit the requeues first, then send their messages (a failed send is retried later)."""
    now, settings = now or utcnow(), settings or get_settings()
    with session_scope() as session:
        requeued = reap_expired(session, now, settings=settings)
        resent = stale_queued(session, now, settings.queued_resend_seconds)
        ids = requeued + resent
        kinds = {job_id: kind for job_id, kind in session.execute(select(Job.id, Job.kind).where(Job.id.in_(ids)))}
    report = ReapReport(requeued, resent)
    report.send_failed = [job_id for job_id in ids if not send_job_id(job_id, kinds[job_id])]
    if ids:
        log.info("reaper: requeued %s, re-sent %s, send failed for %s", requeued, resent, report.send_failed)
    return report


class ReaperThread(threading.Thread):
    """Runs :func:`reap_once` every REAPER_INTERVAL_SECONDS until :meth:`stop` (the embedded default)."""

    def __init__(self, interval_s: float | None = None) -> None:
        super().__init__(name="veernet-reaper", daemon=True)
        self.interval_s = interval_s or get_settings().reaper_interval_seconds
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.interval_s):
            try:
                reap_once()
            except Exception:  # a database blip must not end the reaper; the next pass retries
                log.exception("reaper pass failed; retrying in %.0f s", self.interval_s)

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopped.set()
        self.join(timeout_s)
