"""/jobs/{id}/events and /jobs/{id}/history: a job's whole timeline and its per-epoch curves (api.history)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from api.deps import COMMON_ERRORS, JobId, Offset, PrincipalDep, SessionDep, get_principal
from api.history import epoch_history, job_events
from api.schemas import EpochRecord, ErrorBody, EventOut, EventPage

router = APIRouter(prefix="/jobs", tags=["jobs"], dependencies=[Depends(get_principal)], responses=COMMON_ERRORS)
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody, "description": "No such job"}}


@router.get("/{job_id}/events", response_model=EventPage, responses=NOT_FOUND)
def list_events(job_id: JobId, session: SessionDep, principal: PrincipalDep,
                limit: int = Query(500, ge=1, le=5000), offset: Offset = 0) -> EventPage:
    """The job's timeline, oldest first: claims, checkpoints, lost leases, requeues, recoveries, the end."""
    rows, total = job_events(session, job_id, principal.scope, limit, offset)
    return EventPage(items=[EventOut.model_validate(row) for row in rows], total=total, limit=limit, offset=offset)


@router.get("/{job_id}/history", response_model=list[EpochRecord], responses=NOT_FOUND)
def training_history(job_id: JobId, session: SessionDep, principal: PrincipalDep) -> list[EpochRecord]:
    """Per committed epoch: train loss and validation IoU/Dice, oldest first (empty for a segment job)."""
    return [EpochRecord(**record) for record in epoch_history(session, job_id, principal.scope)]
