"""A job's whole timeline and its training curves, FastAPI-free (the dashboard's job page reads both).

The curves come from the job's own timeline: each epoch-end 'checkpoint' event carries the epoch's
record (train loss, validation IoU and Dice), written by the worker in the same transaction that
commits the checkpoint (worker.callbacks). Events are never pruned, unlike checkpoints (retention
keeps the last few), so the whole history survives; and since only committed epochs are recorded,
an epoch that a lost attempt trained but never committed is not plotted twice.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.models import JobEvent
from api.queries import require_owner


def job_events(session: Session, job_id: int, tenant: str | None, limit: int,
               offset: int) -> tuple[list[JobEvent], int]:
    """A page of the job's timeline, oldest first, and its length; JobNotFound unless ``tenant`` owns the job."""
    require_owner(session, job_id, tenant)
    total = session.scalar(select(func.count()).select_from(JobEvent).where(JobEvent.job_id == job_id)) or 0
    stmt = select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id).limit(limit).offset(offset)
    return list(session.scalars(stmt).all()), total


def epoch_history(session: Session, job_id: int, tenant: str | None) -> list[dict[str, Any]]:
    """One record per committed epoch, in epoch order: epoch (epochs done), global step, attempt, time,
    train loss and the validation metrics. A re-committed epoch (a resumed attempt) keeps its newest record."""
    require_owner(session, job_id, tenant)
    stmt = (select(JobEvent).where(JobEvent.job_id == job_id, JobEvent.kind == "checkpoint")
            .order_by(JobEvent.id))
    by_epoch: dict[int, dict[str, Any]] = {}
    for event in session.scalars(stmt):
        record = (event.data or {}).get("history")
        if not isinstance(record, dict) or not isinstance(record.get("epoch"), int):
            continue
        metrics = {name: value for name, value in record.items()
                   if name not in ("epoch", "train_loss") and isinstance(value, int | float)}
        by_epoch[record["epoch"]] = {
            "epoch": record["epoch"], "global_step": (event.data or {}).get("global_step"),
            "attempt": event.attempt, "at": event.created_at, "train_loss": record.get("train_loss"),
            "metrics": metrics,
        }
    return [by_epoch[epoch] for epoch in sorted(by_epoch)]
