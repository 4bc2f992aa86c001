"""ASGI middleware that answers before any route runs: API keys (401) and request body size (413).

Both are plain ASGI, so a request is refused before its body is read, and every path is covered,
including routes added later: only OPEN_PATHS are reachable without a key.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.auth import AuthError, authenticate, authenticate_now
from api.errors import ServiceError
from api.limits import body_limit, body_too_large
from api.settings import get_settings

log = logging.getLogger(__name__)
OPEN_PATHS = frozenset({"/healthz", "/livez", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json", "/"})
# The dashboard's page and files hold no data: the page asks for a key itself, and sends it with its API calls.
OPEN_PREFIXES = ("/dashboard/",)


def route_path(scope: Scope) -> str:
    """The request's path below the app's root_path (a reverse proxy's prefix)."""
    path, root = scope["path"], scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root):] or "/"
    return path


def database_unavailable(exc: Exception) -> JSONResponse:
    """The database is down or overloaded: 503 with a message, never a 500.

    Only the driver's own message is logged: SQLAlchemy's text adds the statement's parameters.
    """
    reason = getattr(exc, "orig", None) or exc
    log.error("database error: %s: %s", type(reason).__name__, reason)
    detail = f"database unavailable ({type(reason).__name__}); retry shortly or check GET /healthz"
    return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": "5"})


def service_error_response(exc: ServiceError) -> JSONResponse:
    """A domain error's answer: its status, its detail (one entry per field for bad input), its headers."""
    return JSONResponse({"detail": exc.detail()}, status_code=exc.status, headers=exc.headers)


class ApiKeyMiddleware:
    """Every request but OPEN_PATHS carries a valid key (when keys are on); its Principal goes to
    ``request.state.principal`` for the routes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or route_path(scope) in OPEN_PATHS or route_path(scope).startswith(OPEN_PREFIXES):
            await self.app(scope, receive, send)
            return
        header, settings = Headers(scope=scope).get("authorization"), get_settings()
        try:  # on the event loop when no I/O is needed; a key lookup is a blocking database read: off it
            principal = authenticate_now(settings, header) or await run_in_threadpool(authenticate, settings, header)
        except AuthError as exc:
            await service_error_response(exc)(scope, receive, send)
            return
        except (DBAPIError, PoolTimeout) as exc:
            await database_unavailable(exc)(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


class BodySizeLimitMiddleware:
    """413 for a body over its limit (see api.limits.body_limit): at once from Content-Length, and
    while reading for a body streamed without one (or longer than it claimed)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings, method, path = get_settings(), scope["method"], route_path(scope)
        limit, _ = body_limit(method, path, settings)
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await _too_large(body_too_large(int(declared), method, path, settings))(scope, receive, send)
            return
        received, started = 0, False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:  # the app's exception handlers turn this into the 413 response
                    raise HTTPException(413, body_too_large(received, method, path, settings, at_least=True))
            return message

        async def watching_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, watching_send)
        except HTTPException as exc:  # read outside the app's handlers (e.g. by another middleware)
            if exc.status_code != 413 or started:
                raise
            await _too_large(str(exc.detail))(scope, receive, send)


def _too_large(detail: Any) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=413)
