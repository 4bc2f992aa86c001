"""/plan: will a training run finish inside the window on this device, and what will it cost?"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response, status

from api import plan
from api.deps import COMMON_ERRORS, SUBMISSION_ERRORS, PrincipalDep, SessionDep, SettingsDep, get_principal
from api.plan_schemas import PlanBody, PlanOut
from api.schemas import ErrorBody
from veernet_core.plan_chart import render_svg

router = APIRouter(prefix="/plan", tags=["plan"], dependencies=[Depends(get_principal)], responses=COMMON_ERRORS)
ERRORS: dict[int | str, dict[str, Any]] = {
    400: SUBMISSION_ERRORS[400], 413: SUBMISSION_ERRORS[413],
    409: {"model": ErrorBody, "description": "probe=false and nothing measures or estimates the throughput"},
    422: {"model": ErrorBody, "description": "Invalid config, or a device class or GPU size nothing knows "
          "(the message lists the known ones), one entry per bad field"},
}


@router.post("", response_model=PlanOut, responses=ERRORS)
def plan_run(body: PlanBody, session: SessionDep, settings: SettingsDep, principal: PrincipalDep) -> Any:
    """Memory, steps, wall-clock with interruptions, checkpoint interval and cost; never probes in the API."""
    return plan.plan_body(body, session, settings, principal)


SVG = {"image/svg+xml": {"schema": {"type": "string"}}}


@router.post("/chart.svg", response_class=Response, responses={
    **ERRORS, 200: {"description": "The plan as a chart", "content": SVG}})
def plan_chart(body: PlanBody, session: SessionDep, settings: SettingsDep, principal: PrincipalDep) -> Response:
    """The plan as an SVG bar: compute, the interruptions' cost stacked on it, and the window line."""
    return Response(render_svg(plan.plan_body(body, session, settings, principal)),
                    media_type="image/svg+xml", status_code=status.HTTP_200_OK)
