"""/healthz: is each dependency reachable."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.health import run_checks
from api.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/livez")
async def livez() -> dict[str, str]:
    """The process is up; checks nothing else (a liveness probe, and the baseline of the API load bench)."""
    return {"status": "ok"}


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
def healthz(response: Response) -> Health:
    """Database, broker and checkpoint store, each ok or error; 503 if any is down."""
    results = run_checks()
    errors = {name: error for name, error in results.items() if error is not None}
    if errors:
        response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    checks = {name: "error" if name in errors else "ok" for name in results}
    return Health(status="error" if errors else "ok", checks=checks, errors=errors)  # type: ignore[arg-type]
