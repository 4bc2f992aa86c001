"""The FastAPI application: ``uvicorn api.main:app``. OpenAPI at /docs.

Requests pass the API-key check, then the body-size limit (api.middleware), before any route.
"""

from __future__ import annotations

import gc
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cache

from fastapi import Depends, FastAPI, Request, status
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.deps import reject_unknown_query
from api.errors import ServiceError
from api.middleware import ApiKeyMiddleware, BodySizeLimitMiddleware, database_unavailable, service_error_response
from api.plan_sources import warm_up_planner
from api.routes import checkpoints, dashboard, health, jobs, metrics, plan, scans, segment, timeline


@asynccontextmanager
async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
    """Freeze the start-up heap out of the garbage collector.

    The API imports veernet_core (and so torch): a quarter of a million long-lived objects, which every
    full collection would walk, 0.1-0.2 s during which no request is answered, the tail of every
    latency figure. Frozen, they are never walked again; what requests allocate is collected as usual.
    Once per process. The planner's FLOP counter is warmed up in the background (see warm_up_planner).
    """
    if not gc.get_freeze_count():
        gc.collect()
        gc.freeze()
    warming = warm_up_planner()
    yield
    warming.join()


app = FastAPI(
    lifespan=lifespan,
    title="VeerNet job service",
    version="0.1.0",
    description="Train VeerNet on flaky GPUs and download its checkpoints. Every endpoint but /healthz, "
                "/livez and the docs needs `Authorization: Bearer <key>` once VEERNET_ADMIN_KEY is set; "
                "each tenant sees only its own jobs, checkpoints and results.",
    dependencies=[Depends(reject_unknown_query)],
)
app.include_router(jobs.router)
app.include_router(timeline.router)
app.include_router(checkpoints.router)
app.include_router(segment.router)
app.include_router(scans.router)
app.include_router(plan.router)
app.include_router(health.router)
app.include_router(metrics.router)
app.include_router(dashboard.router)  # GET / and /dashboard/*: the web dashboard, outside the OpenAPI schema
app.add_middleware(BodySizeLimitMiddleware)
app.add_middleware(ApiKeyMiddleware)  # added last: runs first, so a keyless request never sends its body


@app.exception_handler(RequestValidationError)
def validation_failed(_request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 with one entry per bad field: its dotted name and what to fix."""
    detail = [{"field": _dotted(error["loc"]), "message": error["msg"]} for error in exc.errors()]
    return JSONResponse({"detail": detail}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)


@app.exception_handler(ServiceError)
def service_error(_request: Request, exc: ServiceError) -> JSONResponse:
    """Every domain error (api.errors): its own status, message and headers; routes never catch them."""
    return service_error_response(exc)


@app.exception_handler(DBAPIError)
@app.exception_handler(PoolTimeout)
def database_unavailable_handler(_request: Request, exc: Exception) -> JSONResponse:
    """The database is down or overloaded: 503 with a message, never a 500."""
    return database_unavailable(exc)


@app.exception_handler(StarletteHTTPException)
async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """As FastAPI's own, but a 405's Allow lists every method of the path, not those of the first route
    that matched it (Starlette's way: POST /jobs and GET /jobs are two routes)."""
    if exc.status_code == status.HTTP_405_METHOD_NOT_ALLOWED:
        methods = _methods_of(route_path_of(request))
        if methods:
            exc.headers = {**(exc.headers or {}), "Allow": ", ".join(methods)}
    return await http_exception_handler(request, exc)


def route_path_of(request: Request) -> str:
    return request.url.path.removeprefix(request.scope.get("root_path", "")) or "/"


def _methods_of(path: str) -> list[str]:
    return sorted({method for pattern, methods in _path_methods() if pattern.fullmatch(path) for method in methods})


@cache
def _path_methods() -> list[tuple[re.Pattern[str], frozenset[str]]]:
    """Each documented path as a pattern, with its methods (and HEAD where GET is served)."""
    found = []
    for path, operations in app.openapi()["paths"].items():
        pattern = re.compile(re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(path)))
        methods = {method.upper() for method in operations}
        found.append((pattern, frozenset(methods | ({"HEAD"} if "GET" in methods else set()))))
    return found


def _dotted(location: tuple[int | str, ...] | list[int | str]) -> str:
    parts = [str(part) for part in location]
    if parts and parts[0] in {"body", "query", "path", "header", "cookie"}:
        parts = parts[1:]
    return ".".join(parts) or "body"
