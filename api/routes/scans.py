"""/scans/analyse: a full-page scan's layout, proposed as a calibration to confirm (see api.scans)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, File, Form, UploadFile

from api import limits, scans
from api.deps import COMMON_ERRORS, SUBMISSION_ERRORS, PrincipalDep, SettingsDep, get_principal
from api.schemas import ErrorBody

router = APIRouter(tags=["scans"], dependencies=[Depends(get_principal)], responses=COMMON_ERRORS)
ERRORS: dict[int | str, dict[str, Any]] = {
    **SUBMISSION_ERRORS,
    200: {"description": "The proposed calibration: every field a {value, confidence, evidence}; null where "
          "nothing could be read, with a message saying what to supply",
          "content": {"application/json": {"schema": {"type": "object"}}}},
    413: {"model": ErrorBody, "description": "Too many bytes or pixels"},
    422: {"model": ErrorBody, "description": "Not an image, several pages in one file, or a bad dpi"},
    503: {"model": ErrorBody, "description": "Every analysis slot of this API process is busy; retry after "
          "Retry-After seconds"},
}


@router.post("/scans/analyse", responses=ERRORS)
def analyse_scan(file: Annotated[UploadFile, File(description="One page: TIFF (any mode), PNG or JPEG")],
                 settings: SettingsDep, principal: PrincipalDep,
                 dpi: Annotated[float | None, Form(description="The scan's resolution, when its file states none "
                                                   "or a wrong one")] = None) -> dict[str, Any]:
    """Propose a full-page log's calibration: orientation, header, sections, tracks, depth fit, value grids."""
    limits.submissions.check(principal, settings)  # seconds of CPU: counted like a submission
    data = file.file.read(settings.max_upload_bytes + 1)
    return scans.analyse_upload(data, settings, dpi)
