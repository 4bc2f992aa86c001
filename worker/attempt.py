"""A worker's attempt at a job: the claim, the heartbeat, fenced writes and the checkpoint registry.

The job row decides who owns the job (DESIGN.md, "Who owns a job"). The claim returns this worker's
attempt, the fencing token; every write afterwards is conditioned on it. A heartbeat thread renews
the lease; when a renewal is refused the job belongs to someone else, and the worker stops at once
without writing anything more. Every write is its own short transaction, retried through a database
restart so an outage is never counted as a failure of the job.
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
from api.checkpoints import forget_checkpoint, list_checkpoints, register_checkpoint
from api.db import session_scope
from api.errors import ServiceError
from api.logs import bind_attempt, bind_job
from api.models import Checkpoint, Job
from api.queue import send_job_id
from api.settings import Settings

if TYPE_CHECKING:  # veernet_core imports torch: a duplicate delivery costs one query, not a torch import
    from veernet_core.checkpoint import CheckpointRef

log = logging.getLogger(__name__)
T = TypeVar("T")


class LeaseLost(ServiceError):
    """The writer's attempt no longer holds the job: stop at once and write nothing more."""


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


def fenced(job_id: int, settings: Settings, write: Callable[[Any], T], what: str) -> T:
    """One fenced write in its own transaction, retried through database outages."""
    def action() -> T:
        with session_scope() as session:
            return write(session)
    return with_db_retry(action, f"job {job_id}: {what}", settings.lease_seconds)


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


def claim(job_id: int, settings: Settings) -> tuple[int, Job] | None:
    def attempt() -> tuple[int, Job] | None:
        with session_scope() as session:
            token = jobs.claim(session, job_id, worker_name(), settings.lease_seconds)
            return None if token is None else (token, jobs.get_job(session, job_id))
    return with_db_retry(attempt, f"claim job {job_id}", settings.lease_seconds)


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


def job_failed(job_id: int, attempt: int, kind: str, settings: Settings, error: str, heartbeat: Heartbeat) -> str:
    """Count a failure of the job itself; send it again if it is under its cap. The attempt's heartbeat
    stops first: a beat after the failure is written would renew a lease this attempt no longer holds, and
    be refused (a `stale_write_refused` event on a job that failed cleanly)."""
    heartbeat.stop()
    outcome = fenced(job_id, settings, lambda s: jobs.record_job_failure(s, job_id, attempt, error), "failure")
    if outcome == "queued":
        send_job_id(job_id, kind)
    return f"failed ({outcome})"


class CheckpointRegistry:
    """veernet_core's checkpoint registry for one job under one attempt: ``checkpoints`` rows written
    under the fence (a worker that lost its lease can neither commit nor prune), read across all of
    the job's attempts, each call retried through a database restart like every other worker write."""

    def __init__(self, job_id: int, attempt: int, settings: Settings,
                 annotate: Callable[[CheckpointRef], dict[str, Any]] | None = None) -> None:
        self.job_id, self.attempt = job_id, attempt
        self.annotate = annotate  # what the worker adds to the checkpoint's event (upload time, epoch record)
        self.give_up_after_s = settings.lease_seconds

    def commit(self, ref: CheckpointRef) -> bool:
        extra = self.annotate(ref) if self.annotate else None

        def write() -> bool:
            with session_scope() as session:
                return register_checkpoint(session, self.job_id, self.attempt, ref, event_data=extra)
        return with_db_retry(write, f"job {self.job_id}: commit {ref.key}", self.give_up_after_s)

    def committed(self) -> list[CheckpointRef]:
        def read() -> list[CheckpointRef]:
            with session_scope() as session:
                return [to_ref(row) for row in list_checkpoints(session, self.job_id)]
        return with_db_retry(read, f"job {self.job_id}: list checkpoints", self.give_up_after_s)

    def forget(self, ref: CheckpointRef) -> None:
        """Drop the row; raises LeaseLost so a zombie's retention never deletes the object after it."""
        def write() -> bool:
            with session_scope() as session:
                return forget_checkpoint(session, self.job_id, self.attempt, ref.key)
        if not with_db_retry(write, f"job {self.job_id}: forget {ref.key}", self.give_up_after_s):
            # raised after the transaction, so the refusal event is committed
            raise LeaseLost(f"job {self.job_id}: attempt {self.attempt} lost the job; not pruning {ref.key}")


def to_ref(row: Checkpoint) -> CheckpointRef:
    from veernet_core.checkpoint import CheckpointRef

    return CheckpointRef(key=row.storage_key, epoch=row.epoch, step=row.step, size=row.size,
                         sha256=row.sha256, metrics=dict(row.metrics or {}), is_best=row.is_best,
                         global_step=row.global_step)
