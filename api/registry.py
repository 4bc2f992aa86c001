"""The service's CheckpointRegistry: a worker's attempt commits checkpoints as fenced database rows.

veernet_core's training loop takes a registry (see ``veernet_core.checkpoint``); this one writes
``checkpoints`` rows through ``api.checkpoints``, so a worker that lost its lease can neither commit
nor prune. Each call runs in its own short transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy.orm import Session

from api.checkpoints import forget_checkpoint, list_checkpoints, register_checkpoint
from api.db import session_scope
from api.errors import ServiceError
from api.models import Checkpoint
from veernet_core.checkpoint import CheckpointRef


class LeaseLost(ServiceError):
    """The writer's attempt no longer holds the job: stop at once and write nothing more."""


class DbCheckpointRegistry:
    """Checkpoints of one job, written under one attempt; read across all of the job's attempts."""

    def __init__(self, job_id: int, attempt: int,
                 scope: Callable[[], AbstractContextManager[Session]] = session_scope,
                 annotate: Callable[[CheckpointRef], dict[str, Any]] | None = None) -> None:
        self.job_id, self.attempt, self.scope = job_id, attempt, scope
        self.annotate = annotate  # what the worker adds to the checkpoint's event (upload time, epoch record)

    def commit(self, ref: CheckpointRef) -> bool:
        extra = self.annotate(ref) if self.annotate else None
        with self.scope() as session:
            return register_checkpoint(session, self.job_id, self.attempt, ref, event_data=extra)

    def committed(self) -> list[CheckpointRef]:
        with self.scope() as session:
            return [to_ref(row) for row in list_checkpoints(session, self.job_id)]

    def forget(self, ref: CheckpointRef) -> None:
        """Drop the row; raises LeaseLost so a zombie's retention never deletes the object after it."""
        with self.scope() as session:
            forgotten = forget_checkpoint(session, self.job_id, self.attempt, ref.key)
        if not forgotten:  # raised after the scope, so the refusal event is committed
            raise LeaseLost(f"job {self.job_id}: attempt {self.attempt} lost the job; not pruning {ref.key}")


def to_ref(row: Checkpoint) -> CheckpointRef:
    return CheckpointRef(key=row.storage_key, epoch=row.epoch, step=row.step, size=row.size,
                         sha256=row.sha256, metrics=dict(row.metrics or {}), is_best=row.is_best,
                         global_step=row.global_step)
