"""Run one training job in a worker process: claim, train under a heartbeat, report, finish.

The attempt (claim, heartbeat, fenced writes, checkpoint registry) is worker.attempt's; this module
runs the training loop inside it and settles the job by how the loop ended.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from api import jobs
from api.logs import job_context
from api.queue import send_job_id
from api.settings import Settings, get_settings
from api.storage import get_store, is_s3
from worker.attempt import CheckpointRegistry, LeaseLost, fenced, job_failed, start_job

if TYPE_CHECKING:
    from veernet_core.train import TrainResult

log = logging.getLogger(__name__)


def run_training_job(job_id: int) -> str:
    """Claim and run a training job; returns what happened (for logs and tests). Log lines name the
    job and, once claimed, its attempt; neither outlives the call."""
    with job_context(job_id):
        return _run_training_job(job_id)


def _run_training_job(job_id: int) -> str:
    settings = get_settings()
    started = start_job(job_id, settings)  # first: a duplicate delivery costs one query, not a torch import
    if started is None:
        return "ignored"
    attempt, job, heartbeat = started
    from veernet_core.checkpoint import job_prefix
    from veernet_core.config import ConfigError, TrainConfig
    from veernet_core.progress import StopReason
    from veernet_core.train import train
    from worker.callbacks import ServiceCallbacks, TimedStore

    try:
        config = TrainConfig.from_dict(job.config)
        device = _record_device(job_id, attempt, settings, config.device)
        store = get_store()
        timed = TimedStore(store)
        callbacks = ServiceCallbacks(job_id, attempt, settings, heartbeat, timed, device)
        registry = CheckpointRegistry(job_id, attempt, settings, annotate=callbacks.checkpoint_event_data)
        allow_loader_workers()
        result = train(config, timed, callbacks, registry=registry, key_prefix=job_prefix(job_id, attempt),
                       s3_client=store.client if is_s3(store) else None)
    except LeaseLost:
        return StopReason.LEASE_LOST.value
    except ConfigError as exc:
        return job_failed(job_id, attempt, "train", settings, f"invalid config: {exc}", heartbeat)
    except Exception as exc:  # the job's own failure (NaN loss, bad data): counted against its cap
        log.exception("job %s attempt %s failed", job_id, attempt)
        return job_failed(job_id, attempt, "train", settings, f"{exc.__class__.__name__}: {exc}", heartbeat)
    finally:
        heartbeat.stop()
    return _settle(job_id, attempt, settings, result)


def allow_loader_workers() -> None:
    """Let this process start the DataLoader's workers. Celery's prefork pool runs each job in a daemonic
    child, and a daemonic process may not start processes ("daemonic processes are not allowed to have
    children"), so a run with ``num_workers`` (auto on CUDA) failed at its first epoch. The flag is this
    process's own view: the pool still ends the child as before, the child runs one job
    (worker_max_tasks_per_child 1), and the DataLoader ends its workers itself."""
    import multiprocessing

    process = multiprocessing.current_process()
    if process.daemon:
        process.daemon = False


def _record_device(job_id: int, attempt: int, settings: Settings, device_name: str) -> str:
    """The device class this attempt trains on, for the planner's calibration by device class; returned."""
    from veernet_core.plan_probe import device_class, device_memory_bytes
    from veernet_core.train import resolve_device

    device = resolve_device(device_name)
    name, memory = device_class(device), device_memory_bytes(device)
    fenced(job_id, settings, lambda s: jobs.record_device(s, job_id, attempt, name, memory), "device")
    return name


def _settle(job_id: int, attempt: int, settings: Settings, result: TrainResult) -> str:
    from veernet_core.progress import StopReason

    if result.status == "completed":
        summary = {"best_metric": result.best_metric, "history": result.history,
                   "last_checkpoint": result.last_checkpoint.key if result.last_checkpoint else None}
        fenced(job_id, settings, lambda s: jobs.finish(s, job_id, attempt, "succeeded", result=summary), "finish")
        return "succeeded"
    if result.reason == StopReason.CANCELLED:
        fenced(job_id, settings, lambda s: jobs.finish(s, job_id, attempt, "cancelled"), "cancel")
        return "cancelled"
    if result.reason == StopReason.SIGTERM:
        released = fenced(job_id, settings, lambda s: jobs.release(s, job_id, attempt, "SIGTERM"), "release")
        if released:
            send_job_id(job_id, "train")
        return "released"
    return StopReason.LEASE_LOST.value
