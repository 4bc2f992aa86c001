"""Sending jobs to workers, by task name only (the API never imports ``worker.tasks``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from worker.celery_app import TASK_FOR_KIND, get_celery

if TYPE_CHECKING:
    from api.models import Job

log = logging.getLogger(__name__)
BROKER_CHECK_TIMEOUT_S = 3.0


def send_job(job: Job) -> bool:
    """Send the job's id to its queue. A failure is logged, not raised: the row stays queued and
    the reaper re-sends it after QUEUED_RESEND_SECONDS."""
    return send_job_id(job.id, job.kind)


def send_job_id(job_id: int, kind: str) -> bool:
    task, queue = TASK_FOR_KIND[kind]
    try:
        get_celery().send_task(task, args=[job_id], queue=queue)
    except Exception:  # kombu raises many types for a down broker
        log.exception("could not send job %s to queue %r; it stays queued and the reaper will re-send it",
                      job_id, queue)
        return False
    return True


def check_broker(timeout_s: float = BROKER_CHECK_TIMEOUT_S) -> None:
    """Raise unless a connection to the broker can be opened."""
    with get_celery().connection_for_write() as connection:
        connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout_s)
