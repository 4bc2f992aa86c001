"""/segment: digitise a scanned log; /jobs/{id}/result...: its curves, mask and overlay (your tenant's only)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, File, Form, Query, Response, UploadFile, status
from fastapi.responses import JSONResponse, StreamingResponse
from sqlalchemy.orm import Session

from api import limits, queries, segment
from api.db import session_scope
from api.deps import (
    COMMON_ERRORS,
    SUBMISSION_ERRORS,
    JobId,
    PrincipalDep,
    SessionDep,
    SettingsDep,
    StoreDep,
    get_principal,
)
from api.queue import send_job
from api.schemas import ErrorBody, JobDetail
from api.storage import open_blob
from veernet_core.checkpoint import LocalStore, S3Store
from veernet_core.digitise.export import RESULT_FILES

router = APIRouter(tags=["segment"], dependencies=[Depends(get_principal)], responses=COMMON_ERRORS)
ERRORS: dict[int | str, dict[str, Any]] = {
    **SUBMISSION_ERRORS,
    200: {"description": "wait=true and the job finished in time: its result, as GET /jobs/{id}/result",
          "content": {"application/json": {"schema": {"type": "object"}}}},
    404: {"model": ErrorBody, "description": "Unknown checkpoint or job"},
    413: {"model": ErrorBody, "description": "Too many bytes or pixels"},
    422: {"model": ErrorBody, "description": "Not an image, options that make no sense, or (wait=true) the "
          "job failed"},
}


@router.post("/segment", status_code=status.HTTP_202_ACCEPTED, response_model=JobDetail, responses=ERRORS)
def submit_segment(file: Annotated[UploadFile, File(description="PNG, TIFF or JPEG scan")],
                   session: SessionDep, settings: SettingsDep, store: StoreDep, principal: PrincipalDep,
                   response: Response,
                   options: Annotated[str | None, Form(description=segment.options_description())] = None,
                   wait: bool = False, timeout: float = Query(30.0, gt=0)) -> Any:
    """Queue a scan for digitising; with wait=true answer with the result if it is done in time."""
    limits.check_submission(session, principal, settings)
    data = file.file.read(settings.max_upload_bytes + 1)
    opts = segment.parse_options(options)
    scan = segment.check_scan(data, settings, bool(opts.get("rotate_portrait")))
    calibration = segment.check_calibration(opts, scan)
    model = segment.resolve_model(session, opts.get("model"), principal.scope)
    name = file.filename or "scan"
    job = segment.create_segment_job(session, opts, model, calibration, name, principal.tenant)
    store.put(segment.input_key(job.id), data)  # uploaded before the row commits: a worker always finds it
    session.commit()
    send_job(job)
    response.headers["Location"] = f"/jobs/{job.id}"
    if wait and _wait(job.id, min(timeout, settings.segment_wait_max_seconds)):
        return _result_response(job.id, store)
    return queries.job_detail(session, job.id, settings)


def _wait(job_id: int, timeout_s: float) -> bool:
    """Poll the job's row until it has finished: every 10 ms for the first second (a small scan takes about
    that long, and half the interval is added to its answer on average), then every 50 ms."""
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < timeout_s:
        with session_scope() as session:
            if segment.finished(segment.segment_job(session, job_id)):
                return True
        time.sleep(0.01 if elapsed < 1.0 else 0.05)
    return False


def _result_response(job_id: int, store: Any) -> Response:
    with session_scope() as session:
        job = segment.segment_job(session, job_id)
        state, error = job.status, job.error
    if state != "succeeded":
        return JSONResponse({"detail": f"segment job {job_id} {state}: {error}"}, status_code=422)
    blob = open_blob(store, segment.result_key(job_id, "result"))
    return Response(b"".join(blob.chunks), media_type=RESULT_FILES["result"].media_type,
                    headers={"Location": f"/jobs/{job_id}"})


def _result_file(job_id: int, name: str, session: Session, store: LocalStore | S3Store,
                 tenant: str | None) -> Response:
    segment.succeeded_job(session, job_id, tenant)
    session.close()
    blob = open_blob(store, segment.result_key(job_id, name))
    return StreamingResponse(blob.chunks, media_type=RESULT_FILES[name].media_type,
                             headers={"Content-Length": str(blob.size)})


FILE_ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody, "description": "No such segment job"},
                                                409: {"model": ErrorBody, "description": "Not finished"}}
BINARY = {"schema": {"type": "string", "format": "binary"}}


def _file(name: str, what: str, schema: dict[str, Any] | None = None) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI answers of result file `name`: the file (in its media type), 404 or 409."""
    return {**FILE_ERRORS, 200: {"description": what, "content": {RESULT_FILES[name].media_type: schema or BINARY}}}


@router.get("/jobs/{job_id}/result", response_class=Response,
            responses=_file("result", "The curves as JSON", {"schema": {"type": "object"}}))
def result_json(job_id: JobId, session: SessionDep, store: StoreDep, principal: PrincipalDep) -> Response:
    """Per curve, per depth sample: the value and a confidence (null where no curve was found)."""
    return _result_file(job_id, "result", session, store, principal.scope)


@router.get("/jobs/{job_id}/result.csv", response_class=Response,
            responses=_file("csv", "The curves as CSV", {"schema": {"type": "string"}}))
def result_csv(job_id: JobId, session: SessionDep, store: StoreDep, principal: PrincipalDep) -> Response:
    """The curves as CSV: a depth column, then one column per curve."""
    return _result_file(job_id, "csv", session, store, principal.scope)


@router.get("/jobs/{job_id}/result.las", response_class=Response,
            responses=_file("las", "The curves as LAS 2.0", {"schema": {"type": "string"}}))
def result_las(job_id: JobId, session: SessionDep, store: StoreDep, principal: PrincipalDep) -> Response:
    """The curves as LAS 2.0, with the model and calibration in its header."""
    return _result_file(job_id, "las", session, store, principal.scope)


@router.get("/jobs/{job_id}/mask.png", response_class=Response,
            responses=_file("mask", "The predicted mask"))
def result_mask(job_id: JobId, session: SessionDep, store: StoreDep, principal: PrincipalDep) -> Response:
    """The predicted mask."""
    return _result_file(job_id, "mask", session, store, principal.scope)


@router.get("/jobs/{job_id}/overlay.png", response_class=Response,
            responses=_file("overlay", "The traced curves over the scan"))
def result_overlay(job_id: JobId, session: SessionDep, store: StoreDep, principal: PrincipalDep) -> Response:
    """The traced curves drawn over the scan, to check by eye."""
    return _result_file(job_id, "overlay", session, store, principal.scope)
