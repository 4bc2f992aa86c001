"""The fence under every worker write: lock the job row only if the writer's attempt still holds it.

Postgres locks the row with ``SELECT ... FOR UPDATE`` until commit; SQLite has taken the database
write lock already (every transaction starts ``BEGIN IMMEDIATE``, see ``api.db``). Either way no
claim can bump the attempt between the check and the write.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from api.models import Job, JobEvent, JobStatus, utcnow

log = logging.getLogger(__name__)


def add_event(session: Session, job_id: int, attempt: int, kind: str, message: str = "",
              data: dict[str, Any] | None = None, *, now: datetime | None = None) -> None:
    """Append to the job's timeline (unfenced: callers have checked what they need)."""
    session.add(JobEvent(job_id=job_id, attempt=attempt, kind=kind, message=message, data=data,
                         created_at=now or utcnow()))


def locked(session: Session, job_id: int) -> Job | None:
    """The job row, locked until commit, whatever its state."""
    stmt = select(Job).where(Job.id == job_id).with_for_update().execution_options(populate_existing=True)
    return session.scalars(stmt).one_or_none()


def locked_running(session: Session, job_id: int, attempt: int) -> Job | None:
    """The job row locked until commit, if it is running under ``attempt``; else None."""
    stmt = (select(Job).where(Job.id == job_id, Job.attempt == attempt, Job.status == JobStatus.RUNNING)
            .with_for_update().execution_options(populate_existing=True))
    return session.scalars(stmt).one_or_none()


def refuse_write(session: Session, job_id: int, attempt: int, what: str,
                 data: dict[str, Any] | None = None) -> None:
    """Record a write refused by the fence: the writer lost the job to a newer attempt or an end.

    The refusal is stamped when it is refused, not with the writer's own time: a writer frozen between taking
    its time and writing (SIGSTOP, a long pause) would otherwise put its refusal before the loss it follows."""
    current = session.execute(select(Job.attempt, Job.status).where(Job.id == job_id)).one_or_none()
    if current is None:
        log.warning("refused %s for job %s: no such job", what, job_id)
        return
    message = (f"refused {what} from attempt {attempt}: "
               f"the job is {current.status} under attempt {current.attempt}")
    log.warning("job %s: %s", job_id, message)
    add_event(session, job_id, attempt, "stale_write_refused", message, data)
