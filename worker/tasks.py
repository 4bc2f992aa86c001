"""Celery tasks: thin wrappers that take a job id and call plain functions.

Nothing heavy is imported here: the Celery parent process never loads torch. Each task imports
its runner inside the (fresh, per-job) child process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from typing import Any

from celery import signals

from worker.celery_app import REAP_TASK, SEGMENT_TASK, TRAIN_TASK, get_celery

log = logging.getLogger(__name__)
app = get_celery()


@app.task(name=TRAIN_TASK)
def train_job(job_id: int) -> str:
    """Claim and train job `job_id`; a duplicate delivery of a running job is ignored, not failed."""
    from worker.runner import run_training_job

    return run_training_job(int(job_id))


@app.task(name=SEGMENT_TASK)
def segment_job(job_id: int) -> str:
    """Claim and digitise segment job `job_id`."""
    from worker.segment_runner import run_segment_job

    return run_segment_job(int(job_id))


@app.task(name=REAP_TASK)
def reap() -> dict[str, list[int]]:
    """Requeue expired leases and re-send queued jobs nobody claimed."""
    from api.reaper import reap_once

    report = reap_once()
    return {"requeued": report.requeued, "resent": report.resent, "send_failed": report.send_failed}


@signals.worker_shutting_down.connect
def _forward_shutdown(sig: str = "", how: str = "", exitcode: int = 0, **_: Any) -> None:
    """Planned stop (SIGTERM, e.g. a spot-preemption notice): tell the process running a job at once,
    so it checkpoints, releases its job and the queue hands it to another worker now rather than
    after a whole lease. Idle pool processes are left to Celery's own shutdown."""
    from celery.worker import state

    for pid in {request.worker_pid for request in state.active_requests if request.worker_pid}:
        log.info("shutdown (%s): asking job process %s to checkpoint and release its job", how, pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
