"""Run one training job in a worker process: claim, train under a heartbeat, report, finish.

The job row decides who owns the job (DESIGN.md, "Who owns a job"). The claim returns this
worker's attempt, the fencing token; every write afterwards is conditioned on it. A heartbeat
thread renews the lease; when a renewal is refused the job belongs to someone else, and the
training loop stops at its next step without writing anything more.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from api import jobs
from api.db import session_scope
from api.logs import bind_attempt, bind_job, job_context
from api.models import Job
from api.queue import send_job_id
from api.registry import DbCheckpointRegistry, LeaseLost
from api.settings import Settings, get_settings
from api.storage import get_store, is_s3

if TYPE_CHECKING:
    from veernet_core.checkpoint import CheckpointRef

log = logging.getLogger(__name__)
T = TypeVar("T")
PROGRESS_INTERVAL_S = 1.0  # at most one progress row update a second per job: cheap, still live


def worker_name() -> str:
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "cpu") or "cpu"
    return f"{socket.gethostname()}:{os.getpid()}:gpu={gpu}"


def with_db_retry(action: Callable[[], T], what: str, give_up_after_s: float) -> T:
    """Run a short transaction, retrying while the database is unreachable (a restart, a failover)."""
    deadline, delay = time.monotonic() + give_up_after_s, 0.2
    while True:
        try:
            return action()
        except DBAPIError as exc:
            # Only a lost or refused connection is worth waiting out; a bad query fails at once.
            transient = isinstance(exc, OperationalError | InterfaceError) or exc.connection_invalidated
            if not transient or time.monotonic() > deadline:
                raise
            log.warning("%s: database unavailable (%s); retrying in %.1f s", what, exc.__class__.__name__, delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


class Heartbeat(threading.Thread):
    """Renews the lease every HEARTBEAT_SECONDS and watches for a cancel request."""

    def __init__(self, job_id: int, attempt: int, settings: Settings) -> None:
        super().__init__(name=f"heartbeat-{job_id}", daemon=True)
        self.job_id, self.attempt, self.settings = job_id, attempt, settings
        self.lost = threading.Event()
        self.cancel_requested = threading.Event()
        self._stop_event = threading.Event()

    def beat(self) -> None:
        with session_scope() as session:
            alive = jobs.heartbeat(session, self.job_id, self.attempt, self.settings.lease_seconds)
            cancel = alive and jobs.is_cancel_requested(session, self.job_id)
        if not alive:
            log.warning("job %s attempt %s: lease lost; stopping without further writes", self.job_id, self.attempt)
            self.lost.set()
        if cancel:
            self.cancel_requested.set()

    def run(self) -> None:
        bind_job(self.job_id, self.attempt)  # a thread starts with a context of its own: log lines name the job
        while not self._stop_event.wait(self.settings.heartbeat_seconds) and not self.lost.is_set():
            try:
                self.beat()
            except Exception as exc:  # the database is down: keep trying; the lease decides, not us
                log.warning("job %s: heartbeat failed (%s); retrying", self.job_id, exc)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=self.settings.heartbeat_seconds + 5)


class RetryingRegistry(DbCheckpointRegistry):
    """Checkpoint rows written and read like every other worker write: retried through a database
    restart, so an outage during a checkpoint is not counted as a failure of the job."""

    def __init__(self, job_id: int, attempt: int, settings: Settings,
                 annotate: Callable[[CheckpointRef], dict[str, Any]] | None = None) -> None:
        super().__init__(job_id, attempt, annotate=annotate)
        self.give_up_after_s = settings.lease_seconds

    def commit(self, ref: CheckpointRef) -> bool:
        return with_db_retry(lambda: DbCheckpointRegistry.commit(self, ref), f"job {self.job_id}: commit {ref.key}",
                             self.give_up_after_s)

    def committed(self) -> list[CheckpointRef]:
        return with_db_retry(lambda: DbCheckpointRegistry.committed(self), f"job {self.job_id}: list checkpoints",
                             self.give_up_after_s)

    def forget(self, ref: CheckpointRef) -> None:
        with_db_retry(lambda: DbCheckpointRegistry.forget(self, ref), f"job {self.job_id}: forget {ref.key}",
                      self.give_up_after_s)


def claim(job_id: int, settings: Settings) -> tuple[int, Job] | None:
    def attempt() -> tuple[int, Job] | None:
        with session_scope() as session:
            token = jobs.claim(session, job_id, worker_name(), settings.lease_seconds)
            return None if token is None else (token, jobs.get_job(session, job_id))
    return with_db_retry(attempt, f"claim job {job_id}", settings.lease_seconds)


def fenced(job_id: int, settings: Settings, write: Callable[[Any], T], what: str) -> T:
    """One fenced write in its own transaction, retried through database outages."""
    def action() -> T:
        with session_scope() as session:
            return write(session)
    return with_db_retry(action, f"job {job_id}: {what}", settings.lease_seconds)


def start_job(job_id: int, settings: Settings) -> tuple[int, Job, Heartbeat] | None:
    """Claim the job and start its heartbeat; None for a duplicate delivery or a finished job."""
    claimed = claim(job_id, settings)
    if claimed is None:
        log.info("job %s: not claimable (a duplicate delivery, or finished); ignoring", job_id)
        return None
    attempt, job = claimed
    bind_attempt(attempt)  # from here on every log line of this job carries its fencing token
    log.info("%s job %s: claimed as attempt %s by %s", job.kind, job_id, attempt, worker_name())
    heartbeat = Heartbeat(job_id, attempt, settings)
    heartbeat.start()
    return attempt, job, heartbeat


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
    from veernet_core.train import train
    from worker.callbacks import ServiceCallbacks, TimedStore

    try:
        config = TrainConfig.from_dict(job.config)
        device = _record_device(job_id, attempt, settings, config.device)
        store = get_store()
        timed = TimedStore(store)
        callbacks = ServiceCallbacks(job_id, attempt, settings, heartbeat, timed, device)
        registry = RetryingRegistry(job_id, attempt, settings, annotate=callbacks.checkpoint_event_data)
        result = train(config, timed, callbacks, registry=registry, key_prefix=job_prefix(job_id, attempt),
                       s3_client=store.client if is_s3(store) else None)
    except LeaseLost:
        return "lease lost"
    except ConfigError as exc:
        return job_failed(job_id, attempt, "train", settings, f"invalid config: {exc}")
    except Exception as exc:  # the job's own failure (NaN loss, bad data): counted against its cap
        log.exception("job %s attempt %s failed", job_id, attempt)
        return job_failed(job_id, attempt, "train", settings, f"{exc.__class__.__name__}: {exc}")
    finally:
        heartbeat.stop()
    return _settle(job_id, attempt, settings, result)


def _record_device(job_id: int, attempt: int, settings: Settings, device_name: str) -> str:
    """The device class this attempt trains on, for the planner's calibration by device class; returned."""
    from veernet_core.plan_probe import device_class, device_memory_bytes
    from veernet_core.train import resolve_device

    device = resolve_device(device_name)
    name, memory = device_class(device), device_memory_bytes(device)
    fenced(job_id, settings, lambda s: jobs.record_device(s, job_id, attempt, name, memory), "device")
    return name


def _settle(job_id: int, attempt: int, settings: Settings, result: Any) -> str:
    if result.status == "completed":
        summary = {"best_metric": result.best_metric, "history": result.history,
                   "last_checkpoint": result.last_checkpoint.key if result.last_checkpoint else None}
        fenced(job_id, settings, lambda s: jobs.finish(s, job_id, attempt, "succeeded", result=summary), "finish")
        return "succeeded"
    if result.reason == "cancelled":
        fenced(job_id, settings, lambda s: jobs.finish(s, job_id, attempt, "cancelled"), "cancel")
        return "cancelled"
    if result.reason == "sigterm":
        released = fenced(job_id, settings, lambda s: jobs.release(s, job_id, attempt, "SIGTERM"), "release")
        if released:
            send_job_id(job_id, "train")
        return "released"
    return "lease lost"


def job_failed(job_id: int, attempt: int, kind: str, settings: Settings, error: str) -> str:
    """Count a failure of the job itself; send it again if it is under its cap."""
    outcome = fenced(job_id, settings, lambda s: jobs.record_job_failure(s, job_id, attempt, error), "failure")
    if outcome == "queued":
        send_job_id(job_id, kind)
    return f"failed ({outcome})"
