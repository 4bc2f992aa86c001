"""A worker's attempt at a job: the claim, the heartbeat, fenced writes and the checkpoint registry.

The job row decides who owns the job (DESIGN.md, "Who owns a job"). The claim returns this worker's
attempt, the fencing token; every write afterwards is conditioned on it. A heartbeat thread renews
the lease; when a renewal is refused the job belongs to someone else, and the worker stops at once
without writing anything more. Every write is its own short transaction, retried through a database
restart so an outage is never counted as a failure of the job.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from api import jobs
from api.checkpoints import forget_checkpoint, list_checkpoints, register_checkpoint
from api.db import session_scope
from api.errors import ServiceError
from api.logs import bind_attempt, bind_job, flush_before_exit
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


# A phase may run this many times its expected length (the run's own measure of a step, a validation or a
# checkpoint) before it counts as stalled; never less than STALL_SECONDS.
STALL_FACTOR = 3.0
STALLED_EXIT = 75  # EX_TEMPFAIL: the process ended itself; its job went back on the queue
STACK_FRAMES = 12  # of the stuck thread's stack, kept in the stall's event


class Heartbeat(threading.Thread):
    """Renews the lease every HEARTBEAT_SECONDS and watches for a cancel request, and for a stall.

    The lease says the process is alive, not that its job moves: a training thread stuck in a hung device
    call or data read would keep its lease for ever while this thread beats. So the job thread marks each
    step of progress (``progressed``), and a job that, since its first, made none for STALL_SECONDS, or for
    STALL_FACTOR times what the phase it is in is expected to take, has stalled: its process records where it
    was stuck, hands the job back (one attempt lost to infrastructure, so a device that always hangs ends in a
    failed job at MAX_INFRA_ATTEMPTS) and ends itself; the job resumes from its last checkpoint in a fresh
    process. Segment and probe jobs report no progress, and are not watched."""

    def __init__(self, job_id: int, attempt: int, settings: Settings, kind: str) -> None:
        super().__init__(name=f"heartbeat-{job_id}", daemon=True)
        self.job_id, self.attempt, self.settings, self.kind = job_id, attempt, settings, kind
        self.lost = threading.Event()
        self.cancel_requested = threading.Event()
        self.stalled = threading.Event()
        self._stop_event = threading.Event()
        self._job_thread = threading.get_ident()  # the thread that runs the job: whose stack a stall shows
        self._end_process: Callable[[], None] = end_stalled_process  # what ends the process (tests record it)
        # When the job last moved, into which phase, and that phase's expected seconds. None until its first
        # report: a job's setup (opening a dataset of 100,000 images, reading each one's size off S3; downloading
        # its checkpoint) reports nothing and may take long, so the watch starts at the first report.
        self._progress: tuple[float, str, float] | None = None

    def progressed(self, phase: str, expected_s: float = 0.0) -> None:
        """The job moved on, into ``phase`` (a training step, a validation, a checkpoint, ...), which it
        expects to take about ``expected_s`` seconds."""
        self._progress = (time.monotonic(), phase, max(0.0, expected_s or 0.0))

    def beat(self) -> None:
        with session_scope() as session:
            alive = jobs.heartbeat(session, self.job_id, self.attempt, self.settings.lease_seconds)
            cancel = alive and jobs.is_cancel_requested(session, self.job_id)
        if not alive:
            log.warning("job %s attempt %s: lease lost; stopping without further writes", self.job_id, self.attempt)
            self.lost.set()
        if cancel:
            self.cancel_requested.set()

    def check_stall(self) -> bool:
        """True if the job has stalled; it is then handed back and this process ends."""
        if not self.settings.stall_seconds or self._progress is None:
            return False
        at, phase, expected = self._progress
        idle = time.monotonic() - at
        allowed = max(self.settings.stall_seconds, STALL_FACTOR * expected)
        if idle < allowed:
            return False
        self.stalled.set()
        stack = self._job_stack()
        why = (f"{STALL_FACTOR:g}x the phase's measured {expected:.1f} s" if allowed > self.settings.stall_seconds
               else "STALL_SECONDS")
        message = (f"no progress for {idle:.0f} s in phase {phase!r} (allowed {allowed:.0f} s: {why}); a hung "
                   "device call or data read? Ending this attempt's process; the job resumes from its last checkpoint")
        log.error("job %s attempt %s: %s. Stuck in:\n%s", self.job_id, self.attempt, message, "".join(stack))
        data = {"phase": phase, "idle_seconds": round(idle, 1), "allowed_seconds": round(allowed, 1),
                "expected_seconds": round(expected, 3), "stack": stack}
        try:
            outcome = fenced(self.job_id, self.settings, lambda s: jobs.give_up_stalled(
                s, self.job_id, self.attempt, message, data, settings=self.settings), "stall")
            if outcome == "queued":
                send_job_id(self.job_id, self.kind)
            log.error("job %s attempt %s: stalled; the job is %s", self.job_id, self.attempt, outcome)
        except Exception:  # the database or broker is down too: the lease runs out and the reaper requeues it
            log.exception("job %s attempt %s: the stall could not be recorded", self.job_id, self.attempt)
        self.lost.set()
        self._end_process()
        return True

    def _job_stack(self) -> list[str]:
        frame = sys._current_frames().get(self._job_thread)
        return traceback.format_stack(frame)[-STACK_FRAMES:] if frame is not None else []

    def run(self) -> None:
        bind_job(self.job_id, self.attempt)  # a thread starts with a context of its own: log lines name the job
        while not self._stop_event.wait(self.settings.heartbeat_seconds) and not self.lost.is_set():
            try:
                self.beat()
            except Exception as exc:  # the database is down: keep trying; the lease decides, not us
                log.warning("job %s: heartbeat failed (%s); retrying", self.job_id, exc)
                continue
            # After the beat: a process frozen whole (SIGSTOP, a paused VM) wakes to a lost lease and stops
            # there; only one that still holds its job is asked whether the job moves.
            if not self.lost.is_set() and self.check_stall():
                return

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=self.settings.heartbeat_seconds + 5)


def end_stalled_process() -> None:
    """End this process at once: its job thread is stuck where no exception reaches it. Its own children
    (the DataLoader's workers, a hung one among them) are killed first; the logs are flushed."""
    for child in multiprocessing.active_children():
        child.kill()
    flush_before_exit()
    os._exit(STALLED_EXIT)


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
    heartbeat = Heartbeat(job_id, attempt, settings, job.kind)
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
