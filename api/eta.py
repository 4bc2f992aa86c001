"""ETA arithmetic. The pure functions take numbers; the two job helpers only gather them.

A running job: the step time the worker reports (the mean of the steps still to come) times the
remaining steps, plus the validations and checkpoints still to come at their measured cost. A
queued job: when a worker frees up for it, given the jobs running and queued ahead of it.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from statistics import mean
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.models import Checkpoint, Job, JobStatus, utcnow

HISTORY_JOBS = 20  # recent successful jobs whose durations estimate a job that never ran


def eta_from_progress(*, step_time_s: float | None, global_step: int | None, total_steps: int | None,
                 steps_per_epoch: int | None = None, validation_s: float | None = None,
                 checkpoint_s: float | None = None, validate_every_epochs: int = 1,
                 checkpoint_every_steps: int = 0, epochs_ended: int | None = None) -> float | None:
    """Seconds left: remaining steps at ``step_time_s``, plus each validation and checkpoint to come.

    ``epochs_ended``: epochs whose validation and save are behind the job (its progress's ``epoch``); by
    default those whose steps are, which counts an epoch as ended between its last step and its save."""
    if step_time_s is None or total_steps is None:
        return None
    done = min(max(global_step or 0, 0), total_steps)
    seconds = step_time_s * (total_steps - done)
    if steps_per_epoch:
        epochs_done = done // steps_per_epoch if epochs_ended is None else min(epochs_ended, done // steps_per_epoch)
        epochs_total = math.ceil(total_steps / steps_per_epoch)
        every = max(validate_every_epochs, 1)
        validations = epochs_total // every - epochs_done // every
        saves = epochs_total - epochs_done
        if checkpoint_every_steps > 0:
            saves += total_steps // checkpoint_every_steps - done // checkpoint_every_steps
        seconds += validations * (validation_s or 0.0) + saves * (checkpoint_s or 0.0)
    return seconds


def estimate_queue_start(running_left_s: Sequence[float | None], ahead_s: Sequence[float | None],
                         workers: int) -> float | None:
    """Seconds until a worker is free for a queued job; None when a needed duration is unknown.

    ``running_left_s``: time left of each running job; ``ahead_s``: duration of each queued job
    ahead, in queue order. Each job goes to the worker that frees up first.
    """
    free = [0.0] * max(workers - len(running_left_s), 0)
    for left in running_left_s:
        if left is None:
            return None
        free.append(max(left, 0.0))
    heapq.heapify(free)
    for duration in ahead_s:
        if duration is None:
            return None
        heapq.heappush(free, heapq.heappop(free) + max(duration, 0.0))
    return free[0]


def running_eta(job: Job, from_step: int | None = None) -> float | None:
    """Seconds left for a job from the fields its worker reports, at ``from_step`` (default: now)."""
    config: dict[str, Any] = job.config or {}
    return eta_from_progress(
        step_time_s=job.step_time_s, global_step=job.global_step if from_step is None else from_step,
        total_steps=job.total_steps, steps_per_epoch=job.steps_per_epoch, validation_s=job.validation_time_s,
        checkpoint_s=job.checkpoint_time_s, validate_every_epochs=int(config.get("validate_every_epochs", 1)),
        checkpoint_every_steps=int(config.get("checkpoint_every_steps", 0)),
        epochs_ended=job.epoch if from_step is None else None)  # a checkpoint's step: its epoch's end is behind it


def live_eta_seconds(job: Job, now: datetime | None = None) -> float | None:
    """A running job's ETA counted down from its last progress write."""
    if job.eta_at is None:
        return None
    return max((job.eta_at - (now or utcnow())).total_seconds(), 0.0)


def queued_estimate(session: Session, job: Job, now: datetime | None = None) -> tuple[float | None, float | None]:
    """(seconds until it starts, seconds until it finishes) for a queued job; None if unknown.

    The workers of its queue are the jobs of its kind running now: a job stays queued only while every
    worker of its queue is busy (an idle one claims it within moments), so however many GPUs a box has,
    or boxes share the queue, nobody has to count them. (Briefly wrong: a job sent a moment ago, and a
    dead worker's job until its lease expires.) A requeued job resumes from its last checkpoint, so its
    own duration counts only the steps after it: time lost to recoveries is in the ETA.
    """
    now = now or utcnow()
    same_kind = (Job.kind == job.kind,)
    running = session.scalars(select(Job).where(*same_kind, Job.status == JobStatus.RUNNING)).all()
    ahead_where = (*same_kind, Job.status == JobStatus.QUEUED, Job.id < job.id)
    # Jobs that never ran take the typical duration: count them rather than load them.
    fresh_ahead = session.scalar(select(func.count()).select_from(Job).where(
        *ahead_where, Job.step_time_s.is_(None))) or 0
    resumed_ahead = session.scalars(select(Job).where(*ahead_where, Job.step_time_s.is_not(None))).all()
    typical = _typical_duration(session, job.kind)
    start = estimate_queue_start([_time_left(r, typical, now) for r in running],
                                 [typical] * fresh_ahead + [_duration(session, a, typical) for a in resumed_ahead],
                                 workers=max(len(running), 1))
    own = _duration(session, job, typical)
    return start, None if start is None or own is None else start + own


def _time_left(job: Job, typical: float | None, now: datetime) -> float | None:
    """A running job's time left; before its first progress write, the typical run minus time spent."""
    left = live_eta_seconds(job, now)
    if left is None and typical is not None and job.started_at is not None:
        left = max(typical - job.recovery_seconds - (now - job.started_at).total_seconds(), 0.0)
    return left


def _duration(session: Session, job: Job, typical: float | None) -> float | None:
    """A queued job's run time: from its last checkpoint if it ran before, else the typical run."""
    if job.step_time_s is None or job.total_steps is None:
        return typical
    resume_at = session.scalar(select(Checkpoint.global_step).where(Checkpoint.job_id == job.id)
                               .order_by(Checkpoint.global_step.desc()).limit(1))
    return running_eta(job, from_step=resume_at or 0)


def _typical_duration(session: Session, kind: str) -> float | None:
    """Mean run time of recent successful jobs of this kind, time lost to recoveries excluded."""
    rows = session.execute(
        select(Job.started_at, Job.finished_at, Job.recovery_seconds)
        .where(Job.kind == kind, Job.status == JobStatus.SUCCEEDED, Job.started_at.is_not(None))
        .order_by(Job.id.desc()).limit(HISTORY_JOBS)
    ).all()
    durations = [(end - start - timedelta(seconds=lost)).total_seconds()
                 for start, end, lost in rows if start is not None and end is not None]
    return mean(durations) if durations else None
