"""/jobs: submit, list, inspect and cancel jobs; each caller sees only its tenant's (the admin all)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Response, status
from fastapi.responses import JSONResponse

from api import jobs, limits, plan, queries, status_reads
from api.checkpoints import list_checkpoints
from api.deps import (
    COMMON_ERRORS,
    SUBMISSION_ERRORS,
    JobId,
    Offset,
    PrincipalDep,
    SessionDep,
    SettingsDep,
    get_principal,
)
from api.models import JobStatus
from api.plan_schemas import PlanBody, PlanOut
from api.queue import send_job
from api.schemas import CheckpointOut, ErrorBody, JobCreate, JobDetail, JobPage

router = APIRouter(prefix="/jobs", tags=["jobs"], dependencies=[Depends(get_principal)], responses=COMMON_ERRORS)
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody, "description": "No such job"}}


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=JobDetail, responses={
    **SUBMISSION_ERRORS, 422: {"model": ErrorBody, "description": "Invalid config, one entry per bad field"},
    200: {"model": PlanOut, "description": "dry_run=true: the plan of the run (POST /plan's defaults); no job"}})
def submit_job(body: JobCreate, session: SessionDep, settings: SettingsDep, principal: PrincipalDep,
               response: Response, dry_run: bool = False) -> Any:
    """Validate a training config, queue the job, and send it to a worker (dry_run=true: only plan it)."""
    if dry_run:
        return JSONResponse(plan.plan_body(PlanBody(config=body.config), session, settings, principal))
    limits.check_submission(session, principal, settings)
    config = limits.train_config(body.config, settings, principal.tenant)
    job = jobs.create_job(session, body.kind, config.to_dict(), principal.tenant)
    session.commit()  # the row exists before any worker can receive its id
    send_job(job)
    response.headers["Location"] = f"/jobs/{job.id}"
    return queries.job_detail(session, job.id, settings)


@router.get("", response_model=JobPage)
def list_jobs(session: SessionDep, principal: PrincipalDep, status: JobStatus | None = None,
              limit: int = Query(50, ge=1, le=500), offset: Offset = 0) -> JobPage:
    """List your jobs (the admin: everyone's), newest first, optionally of one status."""
    items, total = queries.list_jobs(session, status, limit, offset, principal.scope)
    return JobPage(items=[queries.job_summary(j) for j in items], total=total, limit=limit, offset=offset)


@router.get("/{job_id}", response_model=JobDetail, responses=NOT_FOUND)
async def get_job(job_id: JobId, settings: SettingsDep, principal: PrincipalDep) -> Response:
    """Status, attempt, recoveries, progress, metrics, ETA, last checkpoint and recent events."""
    data = await status_reads.detail_json(job_id, settings, principal.scope)
    return Response(data, media_type="application/json")


@router.post("/{job_id}/cancel", response_model=JobDetail,
             responses={**NOT_FOUND, 202: {"model": JobDetail, "description": "Running: it stops at its next step"},
                        409: {"model": ErrorBody, "description": "The job already finished"}})
def cancel_job(job_id: JobId, session: SessionDep, settings: SettingsDep, principal: PrincipalDep,
               response: Response) -> JobDetail:
    """Cancel: a queued job at once (200); a running one stops at its next step, checkpoints kept (202)."""
    queries.require_owner(session, job_id, principal.scope)
    job = jobs.request_cancel(session, job_id)
    session.commit()
    queries.forget_detail(settings, job_id)
    if job.status == JobStatus.RUNNING:
        response.status_code = status.HTTP_202_ACCEPTED
    return queries.job_detail(session, job_id, settings)


@router.get("/{job_id}/checkpoints", response_model=list[CheckpointOut], responses=NOT_FOUND)
def job_checkpoints(job_id: JobId, session: SessionDep, principal: PrincipalDep) -> list[CheckpointOut]:
    """The job's committed checkpoints, oldest first."""
    return [CheckpointOut.of(row) for row in list_checkpoints(session, job_id, principal.scope)]
