"""/segment: digitise a scanned log; /jobs/{id}/result...: its curves, mask and overlay."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, HTTPException, Query, Response, UploadFile, status
from fastapi.responses import JSONResponse, StreamingResponse

from api import queries, segment
from api.db import session_scope
from api.deps import SessionDep, SettingsDep, StoreDep
from api.errors import BlobMissing, CheckpointNotFound, JobNotFound, StoreError
from api.queue import send_job
from api.schemas import ErrorBody, JobDetail
from api.storage import open_blob

router = APIRouter(tags=["segment"])
ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "Unknown checkpoint or job"},
    413: {"model": ErrorBody, "description": "Too many bytes or pixels"},
    422: {"model": ErrorBody, "description": "Not an image, or options that make no sense"},
}
MEDIA = {"result": "application/json", "csv": "text/csv", "las": "text/plain", "mask": "image/png",
         "overlay": "image/png"}


@router.post("/segment", status_code=status.HTTP_202_ACCEPTED, response_model=JobDetail, responses=ERRORS)
def submit_segment(file: Annotated[UploadFile, File(description="PNG, TIFF or JPEG scan")],
                   session: SessionDep, settings: SettingsDep, store: StoreDep, response: Response,
                   options: Annotated[str | None, Form(description="JSON: calibration, model, ...")] = None,
                   wait: bool = False, timeout: float = Query(30.0, gt=0)) -> Any:
    """Queue a scan for digitising; with wait=true answer with the result if it is done in time."""
    data = file.file.read(settings.max_upload_bytes + 1)
    try:
        opts = segment.parse_options(options)
        scan = segment.check_scan(data, settings, bool(opts.get("rotate_portrait")))
        calibration = segment.check_calibration(opts, scan)
        model = segment.resolve_model(session, opts.get("model"))
    except segment.SegmentInputError as exc:
        raise HTTPException(exc.status, detail=[{"field": exc.field, "message": str(exc)}]) from exc
    except (CheckpointNotFound, JobNotFound) as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=str(exc)) from exc
    job = segment.create_segment_job(session, opts, model, calibration, file.filename or "scan")
    store.put(segment.input_key(job.id), data)  # uploaded before the row commits: a worker always finds it
    session.commit()
    send_job(job)
    response.headers["Location"] = f"/jobs/{job.id}"
    if wait and _wait(job.id, min(timeout, settings.segment_wait_max_seconds)):
        return _result_response(job.id, store)
    return queries.job_detail(session, job.id, settings)


def _wait(job_id: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with session_scope() as session:
            if segment.finished(segment.segment_job(session, job_id)):
                return True
        time.sleep(0.05)
    return False


def _result_response(job_id: int, store: Any) -> Response:
    with session_scope() as session:
        job = segment.segment_job(session, job_id)
        state, error = job.status, job.error
    if state != "succeeded":
        return JSONResponse({"detail": f"segment job {job_id} {state}: {error}"}, status_code=422)
    blob = open_blob(store, segment.result_key(job_id, "result"))
    return Response(b"".join(blob.chunks), media_type="application/json", headers={"Location": f"/jobs/{job_id}"})


def _result_file(job_id: int, name: str, session: SessionDep, store: StoreDep) -> Response:
    try:
        job = segment.segment_job(session, job_id)
        if job.status != "succeeded":
            hint = job.error or f"poll GET /jobs/{job_id} until it succeeds"
            raise HTTPException(status.HTTP_409_CONFLICT, detail=f"segment job {job_id} is {job.status}: {hint}")
        session.close()
        blob = open_blob(store, segment.result_key(job_id, name))
    except (JobNotFound, BlobMissing) as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=str(exc)) from exc
    except StoreError as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail=str(exc)) from exc
    return StreamingResponse(blob.chunks, media_type=MEDIA[name], headers={"Content-Length": str(blob.size)})


FILE_ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody, "description": "No such segment job"},
                                                409: {"model": ErrorBody, "description": "Not finished"}}


@router.get("/jobs/{job_id}/result", responses=FILE_ERRORS)
def result_json(job_id: int, session: SessionDep, store: StoreDep) -> Response:
    """Per curve, per depth sample: the value and a confidence (null where no curve was found)."""
    return _result_file(job_id, "result", session, store)


@router.get("/jobs/{job_id}/result.csv", responses=FILE_ERRORS)
def result_csv(job_id: int, session: SessionDep, store: StoreDep) -> Response:
    """The curves as CSV: a depth column, then one column per curve."""
    return _result_file(job_id, "csv", session, store)


@router.get("/jobs/{job_id}/result.las", responses=FILE_ERRORS)
def result_las(job_id: int, session: SessionDep, store: StoreDep) -> Response:
    """The curves as LAS 2.0, with the model and calibration in its header."""
    return _result_file(job_id, "las", session, store)


@router.get("/jobs/{job_id}/mask.png", responses=FILE_ERRORS)
def result_mask(job_id: int, session: SessionDep, store: StoreDep) -> Response:
    """The predicted mask."""
    return _result_file(job_id, "mask", session, store)


@router.get("/jobs/{job_id}/overlay.png", responses=FILE_ERRORS)
def result_overlay(job_id: int, session: SessionDep, store: StoreDep) -> Response:
    """The traced curves drawn over the scan, to check by eye."""
    return _result_file(job_id, "overlay", session, store)
