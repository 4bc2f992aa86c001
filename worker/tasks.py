"""Celery tasks: thin wrappers that take a job id and call plain functions.

Nothing heavy is imported by this module itself. Training and inference workers preload torch and
veernet_core in their parent process (``VEERNET_PRELOAD=1``, set by ``veernet worker``), so the
fresh per-job child forked from it starts at once; the reaper's worker never loads them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from typing import Any

from celery import signals

import worker.handoff  # noqa: F401  (its signal handlers: the handoff watchdog)
from api.logs import job_context
from worker.celery_app import PROBE_TASK, REAP_TASK, SEGMENT_TASK, TRAIN_TASK, get_celery

log = logging.getLogger(__name__)
app = get_celery()


@app.task(name=TRAIN_TASK)
def train_job(job_id: int) -> str:
    """Claim and train job `job_id`; a duplicate delivery of a running job is ignored, not failed."""
    from worker.runner import run_training_job

    with job_context(int(job_id)):
        return run_training_job(int(job_id))


@app.task(name=SEGMENT_TASK)
def segment_job(job_id: int) -> str:
    """Claim and digitise segment job `job_id`."""
    from worker.segment_runner import run_segment_job

    with job_context(int(job_id)):
        return run_segment_job(int(job_id))


@app.task(name=PROBE_TASK)
def probe_job(job_id: int) -> str:
    """Claim probe job `job_id` and measure its model config on this worker's device, for the planner."""
    from worker.probe_runner import run_probe_job

    with job_context(int(job_id)):
        return run_probe_job(int(job_id))


@app.task(name=REAP_TASK)
def reap(chase: bool = True) -> dict[str, list[int]]:
    """Requeue expired leases and re-send queued jobs nobody claimed.

    Beat runs this every REAPER_INTERVAL_SECONDS (``chase`` true); when a lease runs out before the
    next tick, one extra pass is scheduled for that moment. Those extra passes schedule none
    themselves, so there is never more than one per tick.
    """
    from api.reaper import next_pass_s, reap_once
    from api.settings import get_settings

    report = reap_once()
    interval_s = get_settings().reaper_interval_seconds
    if chase and (wait_s := next_pass_s(interval_s)) < interval_s:
        reap.apply_async(kwargs={"chase": False}, countdown=wait_s, expires=wait_s + interval_s)
    return {"requeued": report.requeued, "resent": report.resent, "send_failed": report.send_failed}


PRELOAD_ENV = "VEERNET_PRELOAD"  # set by `veernet worker`: "1" for training workers, "segment" for inference ones


@signals.worker_init.connect
def _preload(**_: Any) -> None:
    """Import torch and veernet_core once, in the worker's parent process, before its pool forks.

    Each job runs in a fresh child (a fresh CUDA context on a GPU); forked from a parent that has
    already imported them, it starts training seconds sooner after a recovery. Beside the imports, an
    inference worker's parent loads numba's compiled column tracer (running it once on a tiny map); a
    training worker never traces, so it does not. Neither runs a torch operator nor touches CUDA, so
    forking stays safe (as for DataLoader workers).
    """
    preload = os.environ.get(PRELOAD_ENV)
    if preload not in ("1", "segment"):
        return
    import veernet_core.digitise.pipeline  # noqa: F401
    import veernet_core.train  # noqa: F401
    import worker.callbacks  # noqa: F401
    import worker.probe_runner  # noqa: F401
    import worker.runner  # noqa: F401
    import worker.segment_runner  # noqa: F401

    if preload == "segment":
        from veernet_core.digitise.tracer import compile_loops

        compile_loops()  # numba's compiled tracer, loaded (or compiled) once for every child the pool forks
    log.info("preloaded torch and veernet_core in the worker's parent process")


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
