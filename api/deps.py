"""FastAPI dependencies as type aliases: routes take ``session: SessionDep`` and so on."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Path, Query, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from api.auth import HOW_TO_GET_A_KEY, Principal
from api.db import get_session
from api.models import MAX_ID
from api.schemas import ErrorBody
from api.settings import Settings, get_settings
from api.storage import get_store
from veernet_core.checkpoint import LocalStore, S3Store

# Documents the scheme in OpenAPI (and /docs' Authorize button); api.middleware checks the key.
bearer = HTTPBearer(auto_error=False, scheme_name="ApiKey", description=(
    "An API key (`veernet keys create --tenant NAME`) or the admin key (VEERNET_ADMIN_KEY). Not needed "
    "while VEERNET_ADMIN_KEY is unset."))


# The dependencies that do no I/O are ``async def``: FastAPI runs a plain ``def`` dependency in its thread
# pool, and on a polled endpoint those hand-offs cost more than the work (api_load's status figures).


async def get_principal(request: Request,
                        _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Principal:
    """Who the request acts for, as api.middleware.ApiKeyMiddleware established it."""
    principal = getattr(request.state, "principal", None)
    if not isinstance(principal, Principal):  # the middleware is not installed: refuse, never guess
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, detail=f"no caller established; {HOW_TO_GET_A_KEY}",
                            headers={"WWW-Authenticate": 'Bearer realm="veernet"'})
    return principal


async def reject_unknown_query(request: Request) -> None:
    """422 for a query parameter the operation does not take: a typo (?stauts=queued) must not pass unnoticed."""
    if not request.query_params:
        return
    path = getattr(request.scope.get("route"), "path", None)
    operation = request.app.openapi()["paths"].get(path, {}).get(request.method.lower(), {})
    known = sorted(p["name"] for p in operation.get("parameters", []) if p["in"] == "query")
    unknown = sorted(set(request.query_params) - set(known))
    if unknown:
        message = f"unknown query parameter; allowed: {', '.join(known) or 'none'}"
        raise RequestValidationError([{"loc": ("query", name or "''"), "msg": message, "type": "extra_forbidden"}
                                      for name in unknown])


SessionDep = Annotated[Session, Depends(get_session)]
JobId = Annotated[int, Path(ge=1, le=MAX_ID, description="A job's id")]
CheckpointId = Annotated[int, Path(ge=1, le=MAX_ID, description="A checkpoint's id")]
Offset = Annotated[int, Query(ge=0, le=MAX_ID)]
async def settings_dep() -> Settings:
    return get_settings()


SettingsDep = Annotated[Settings, Depends(settings_dep)]
StoreDep = Annotated[LocalStore | S3Store, Depends(get_store)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]

# OpenAPI answers shared by the routers: every keyed route may say 401, 422 or 503; submissions 400, 413, 429.
# 422 is api.main.validation_failed's body (field and message per entry), not FastAPI's default one.
COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No API key, or an unknown or revoked one",
          "headers": {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "Bearer"}}},
    422: {"model": ErrorBody, "description": "Invalid parameters, one entry per bad field"},
    503: {"model": ErrorBody, "description": "The database or the checkpoint store is unreachable; retry"},
}
SUBMISSION_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "The body could not be parsed (not UTF-8 JSON, or a broken form)"},
    413: {"model": ErrorBody, "description": "The request body is over its limit"},
    429: {"model": ErrorBody, "description": "Too many submissions, or too many queued jobs, for this key",
          "headers": {"Retry-After": {"schema": {"type": "integer"}, "required": False,
                                      "description": "Seconds until a submission is accepted again"}}},
}
