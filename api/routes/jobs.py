"""/jobs: submit, list, inspect and cancel jobs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Query, Response, status

from api import jobs, queries
from api.checkpoints import list_checkpoints
from api.deps import SessionDep, SettingsDep
from api.errors import InvalidTransition, JobNotFound
from api.models import JobStatus
from api.queue import send_job
from api.schemas import CheckpointOut, ErrorBody, JobCreate, JobDetail, JobPage
from veernet_core.config import ConfigError, TrainConfig

router = APIRouter(prefix="/jobs", tags=["jobs"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody, "description": "No such job"}}


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=JobDetail,
             responses={422: {"model": ErrorBody, "description": "Invalid config, one entry per bad field"}})
def submit_job(body: JobCreate, session: SessionDep, settings: SettingsDep, response: Response) -> JobDetail:
    """Validate a training config, queue the job, and send it to a worker."""
    try:
        config = TrainConfig.from_dict(body.config)
    except ConfigError as exc:
        detail = [{"field": f"config.{name}", "message": message} for name, message in exc.errors.items()]
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=detail) from exc
    job = jobs.create_job(session, body.kind, config.to_dict())
    session.commit()  # the row exists before any worker can receive its id
    send_job(job)
    response.headers["Location"] = f"/jobs/{job.id}"
    return queries.job_detail(session, job.id, settings)


@router.get("", response_model=JobPage)
def list_jobs(session: SessionDep, status: JobStatus | None = None, limit: int = Query(50, ge=1, le=500),
              offset: int = Query(0, ge=0)) -> JobPage:
    """List jobs, newest first, optionally of one status."""
    items, total = queries.list_jobs(session, status, limit, offset)
    return JobPage(items=[queries.job_summary(j) for j in items], total=total, limit=limit, offset=offset)


@router.get("/{job_id}", response_model=JobDetail, responses=NOT_FOUND)
def get_job(job_id: int, session: SessionDep, settings: SettingsDep) -> Response:
    """Status, attempt, recoveries, progress, metrics, ETA, last checkpoint and recent events."""
    try:  # pre-serialised: polling clients may get the same bytes for STATUS_CACHE_SECONDS
        return Response(queries.job_detail_json(session, job_id, settings), media_type="application/json")
    except JobNotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=str(exc)) from exc


@router.post("/{job_id}/cancel", response_model=JobDetail,
             responses={**NOT_FOUND, 409: {"model": ErrorBody, "description": "The job already finished"}})
def cancel_job(job_id: int, session: SessionDep, settings: SettingsDep, response: Response) -> JobDetail:
    """Cancel: a queued job at once (200); a running one stops at its next step, checkpoints kept (202)."""
    try:
        job = jobs.request_cancel(session, job_id)
    except JobNotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=str(exc)) from exc
    except InvalidTransition as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, detail=str(exc)) from exc
    session.commit()
    queries.forget_detail(settings, job_id)
    if job.status == JobStatus.RUNNING:
        response.status_code = status.HTTP_202_ACCEPTED
    return queries.job_detail(session, job_id, settings)


@router.get("/{job_id}/checkpoints", response_model=list[CheckpointOut], responses=NOT_FOUND)
def job_checkpoints(job_id: int, session: SessionDep) -> list[CheckpointOut]:
    """The job's committed checkpoints, oldest first."""
    try:
        return [CheckpointOut.of(row) for row in list_checkpoints(session, job_id)]
    except JobNotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=str(exc)) from exc
