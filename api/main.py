"""The FastAPI application: ``uvicorn api.main:app``. OpenAPI at /docs."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from api.routes import checkpoints, health, jobs, segment

log = logging.getLogger(__name__)

app = FastAPI(
    title="VeerNet job service",
    version="0.1.0",
    description="Train VeerNet on flaky GPUs and download its checkpoints.",
)
app.include_router(jobs.router)
app.include_router(checkpoints.router)
app.include_router(segment.router)
app.include_router(health.router)


@app.exception_handler(RequestValidationError)
def validation_failed(_request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 with one entry per bad field: its dotted name and what to fix."""
    detail = [{"field": _dotted(error["loc"]), "message": error["msg"]} for error in exc.errors()]
    return JSONResponse({"detail": detail}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)


@app.exception_handler(DBAPIError)
@app.exception_handler(PoolTimeout)
def database_unavailable(_request: Request, exc: Exception) -> JSONResponse:
    """The database is down or overloaded: 503 with a message, never a 500."""
    log.error("database error: %s", exc)
    reason = getattr(exc, "orig", None) or exc
    detail = f"database unavailable ({type(reason).__name__}); retry shortly or check GET /healthz"
    return JSONResponse({"detail": detail}, status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
                        headers={"Retry-After": "5"})


def _dotted(location: tuple[int | str, ...] | list[int | str]) -> str:
    parts = [str(part) for part in location]
    if parts and parts[0] in {"body", "query", "path", "header", "cookie"}:
        parts = parts[1:]
    return ".".join(parts) or "body"
