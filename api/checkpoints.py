"""Checkpoint rows: registration (the commit of a checkpoint, fenced by attempt), listing, retention.

The upload completes first; only then is the row written, and only if the writer's attempt still
holds the job. A row therefore always names a complete object with its size and sha256.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from api.errors import CheckpointNotFound, JobNotFound
from api.fencing import add_event, locked_running, refuse_write
from api.models import Checkpoint, Job, utcnow

if TYPE_CHECKING:  # veernet_core imports torch; this module must stay importable without it
    from veernet_core.checkpoint import CheckpointRef


def register_checkpoint(session: Session, job_id: int, attempt: int, ref: CheckpointRef, *,
                        now: datetime | None = None, event_data: dict[str, Any] | None = None) -> bool:
    """Commit an uploaded checkpoint under ``attempt``; False (and an event) if the attempt lost the job.

    ``event_data`` joins the 'checkpoint' event, in the same transaction: the worker's upload time and,
    at an epoch's end, that epoch's training record (api.history plots it, api.metrics counts it)."""
    now = now or utcnow()
    if locked_running(session, job_id, attempt) is None:
        refuse_write(session, job_id, attempt, "checkpoint registration", {"key": ref.key})
        return False
    row = session.scalars(select(Checkpoint).where(Checkpoint.storage_key == ref.key)).one_or_none()
    if row is not None and row.job_id != job_id:
        raise ValueError(f"storage key {ref.key!r} already belongs to job {row.job_id}")
    if ref.is_best:  # one best per job: the newest best-flagged checkpoint
        session.execute(update(Checkpoint).where(Checkpoint.job_id == job_id, Checkpoint.is_best.is_(True))
                        .values(is_best=False))
    row = row or Checkpoint(job_id=job_id, storage_key=ref.key)  # a re-save at the same step replaces
    row.attempt, row.epoch, row.step, row.global_step = attempt, ref.epoch, ref.step, ref.global_step
    row.size, row.sha256, row.metrics, row.is_best, row.created_at = (
        ref.size, ref.sha256, dict(ref.metrics), ref.is_best, now)
    session.add(row)
    data = {**(event_data or {}), "key": ref.key, "size": ref.size, "sha256": ref.sha256,
            "global_step": ref.global_step}
    message = f"epoch {ref.epoch} step {ref.step} committed"
    add_event(session, job_id, attempt, "checkpoint", message, data, now=now)
    return True


def list_checkpoints(session: Session, job_id: int, tenant: str | None = None) -> list[Checkpoint]:
    """A job's committed checkpoints, oldest first (the order resume and retention walk).

    ``tenant``: the caller's; another tenant's job is JobNotFound, like a missing one. None: any job.
    """
    job = session.get(Job, job_id)
    if job is None or (tenant is not None and job.tenant != tenant):
        raise JobNotFound(job_id)
    stmt = (select(Checkpoint).where(Checkpoint.job_id == job_id)
            .order_by(Checkpoint.global_step, Checkpoint.id))
    return list(session.scalars(stmt).all())


def query_checkpoints(session: Session, job_id: int | None = None, limit: int = 100,
                      offset: int = 0, tenant: str | None = None) -> tuple[list[Checkpoint], int]:
    """A page of ``tenant``'s checkpoints (None: everyone's), newest first, optionally of one job;
    and the total count."""
    where = [] if job_id is None else [Checkpoint.job_id == job_id]
    if tenant is not None:
        where.append(Checkpoint.job_id.in_(select(Job.id).where(Job.tenant == tenant)))
    total = session.scalar(select(func.count()).select_from(Checkpoint).where(*where)) or 0
    stmt = select(Checkpoint).where(*where).order_by(Checkpoint.id.desc()).limit(limit).offset(offset)
    return list(session.scalars(stmt).all()), total


def get_checkpoint(session: Session, checkpoint_id: int, tenant: str | None = None) -> Checkpoint:
    """A checkpoint of ``tenant``'s jobs (None: of any job); CheckpointNotFound otherwise."""
    row = session.get(Checkpoint, checkpoint_id)
    if row is None or (tenant is not None and row.job.tenant != tenant):
        raise CheckpointNotFound(checkpoint_id)
    return row


def last_checkpoint(session: Session, job_id: int) -> Checkpoint | None:
    stmt = (select(Checkpoint).where(Checkpoint.job_id == job_id)
            .order_by(Checkpoint.global_step.desc(), Checkpoint.id.desc()).limit(1))
    return session.scalars(stmt).first()


def forget_checkpoint(session: Session, job_id: int, attempt: int, checkpoint: int | str, *,
                      now: datetime | None = None) -> bool:
    """Retention: delete a checkpoint row (by id or storage key) under ``attempt``; delete the object after.

    Fenced like every worker write, so a zombie cannot prune what the live attempt resumes from.
    """
    now = now or utcnow()
    if locked_running(session, job_id, attempt) is None:
        refuse_write(session, job_id, attempt, "checkpoint deletion", {"checkpoint": checkpoint})
        return False
    column = Checkpoint.id if isinstance(checkpoint, int) else Checkpoint.storage_key
    session.execute(delete(Checkpoint).where(Checkpoint.job_id == job_id, column == checkpoint))
    return True
