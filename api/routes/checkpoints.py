"""/checkpoints: list, describe and download committed checkpoints of your tenant's jobs (the admin: all)."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import RedirectResponse, Response, StreamingResponse

from api.checkpoints import get_checkpoint, query_checkpoints
from api.deps import (
    COMMON_ERRORS,
    CheckpointId,
    Offset,
    PrincipalDep,
    SessionDep,
    SettingsDep,
    StoreDep,
    get_principal,
)
from api.models import MAX_ID
from api.schemas import CheckpointOut, CheckpointPage, ErrorBody
from api.storage import is_s3, open_blob

router = APIRouter(prefix="/checkpoints", tags=["checkpoints"], dependencies=[Depends(get_principal)],
                   responses=COMMON_ERRORS)
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody, "description": "No such checkpoint"}}


@router.get("", response_model=CheckpointPage)
def list_checkpoints(session: SessionDep, principal: PrincipalDep,
                     job_id: int | None = Query(None, ge=1, le=MAX_ID), limit: int = Query(100, ge=1, le=1000),
                     offset: Offset = 0) -> CheckpointPage:
    """List committed checkpoints, newest first, optionally of one job."""
    rows, total = query_checkpoints(session, job_id, limit, offset, principal.scope)
    return CheckpointPage(items=[CheckpointOut.of(r) for r in rows], total=total, limit=limit, offset=offset)


@router.get("/{checkpoint_id}", response_model=CheckpointOut, responses=NOT_FOUND)
def describe_checkpoint(checkpoint_id: CheckpointId, session: SessionDep, principal: PrincipalDep) -> CheckpointOut:
    """One checkpoint: job, attempt, position, size, sha256, metrics."""
    return CheckpointOut.of(get_checkpoint(session, checkpoint_id, principal.scope))


@router.get("/{checkpoint_id}/download", response_class=Response, responses={
    **NOT_FOUND, 200: {"content": {"application/octet-stream": {}}, "description": "The checkpoint file"},
    307: {"description": "Redirect to a short-lived presigned S3 URL (S3_PRESIGN=true)"}})
def download_checkpoint(checkpoint_id: CheckpointId, session: SessionDep, settings: SettingsDep, store: StoreDep,
                        principal: PrincipalDep) -> Response:
    """The checkpoint file, with Content-Length and X-Checksum-Sha256, or a presigned redirect."""
    row = get_checkpoint(session, checkpoint_id, principal.scope)
    session.close()  # release the connection before a long stream
    if settings.s3_presign and is_s3(store):
        return RedirectResponse(store.presign(row.storage_key, settings.presign_seconds), status_code=307)
    blob = open_blob(store, row.storage_key, expected_size=row.size)
    name = f"job-{row.job_id}-{PurePosixPath(row.storage_key).name}"
    headers = {"Content-Length": str(blob.size), "X-Checksum-Sha256": row.sha256,
               "Content-Disposition": f'attachment; filename="{name}"'}
    return StreamingResponse(blob.chunks, media_type="application/octet-stream", headers=headers)
