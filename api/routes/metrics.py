"""/metrics: the service's figures for Prometheus, read from the database at scrape time (api.metrics)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response, status

from api.deps import COMMON_ERRORS, PrincipalDep, SettingsDep
from api.metrics import CONTENT_TYPE, exposition
from api.schemas import ErrorBody

router = APIRouter(tags=["metrics"], responses=COMMON_ERRORS)
TEXT = {"schema": {"type": "string"}}


@router.get("/metrics", response_class=Response, responses={
    200: {"description": "Prometheus text format (version 0.0.4)", "content": {"text/plain": TEXT}},
    403: {"model": ErrorBody, "description": "A tenant's key: the figures cover every tenant; scrape with the "
          "admin key"}})
def metrics(principal: PrincipalDep, settings: SettingsDep) -> Response:
    """Jobs by status, queue depth, claims, recoveries, refused zombie writes, step time, images/s,
    checkpoint uploads and segment latency: every figure read from the database now."""
    if principal.key_id is not None:
        raise HTTPException(status.HTTP_403_FORBIDDEN, detail="/metrics covers every tenant: scrape it with the "
                            "admin key (VEERNET_ADMIN_KEY) as 'Authorization: Bearer <key>'")
    return Response(exposition(settings), media_type=CONTENT_TYPE)
