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
    409: {"model": ErrorBody, "description": "probe=false and nothing to calibrate from"},
    422: {"model": ErrorBody, "description": "Invalid config or target, one entry per bad field, or a model "
          "too large to probe here (PLAN_MAX_PROBE_GFLOPS)"},
    429: {"model": ErrorBody, "description": "Another plan is probing this host: retry after Retry-After seconds",
          "headers": SUBMISSION_ERRORS[429]["headers"]},
}


@router.post("", response_model=PlanOut, responses=ERRORS)
def plan_run(body: PlanBody, session: SessionDep, settings: SettingsDep, principal: PrincipalDep) -> Any:
    """Memory, steps, wall-clock with interruptions, checkpoint interval and cost of a training run."""
    return plan.plan_body(body, session, settings, principal.tenant)


SVG = {"image/svg+xml": {"schema": {"type": "string"}}}


@router.post("/chart.svg", response_class=Response, responses={
    **ERRORS, 200: {"description": "The plan as a chart", "content": SVG}})
def plan_chart(body: PlanBody, session: SessionDep, settings: SettingsDep, principal: PrincipalDep) -> Response:
    """The plan as an SVG bar: compute, the interruptions' cost stacked on it, and the window line."""
    return Response(render_svg(plan.plan_body(body, session, settings, principal.tenant)),
                    media_type="image/svg+xml", status_code=status.HTTP_200_OK)
