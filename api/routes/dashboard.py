"""The web dashboard: GET / (the page) and /dashboard/{name} (its script and style), served without a key.

The files hold no data; the page calls the JSON API with the key the user gives it (kept in the
browser's localStorage) and asks for one when the API answers 401. Nothing is fetched from anywhere
else: the Content-Security-Policy allows this origin only.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException, status
from fastapi.responses import FileResponse

router = APIRouter(include_in_schema=False)
FILES = Path(__file__).resolve().parents[1] / "dashboard"
MEDIA = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8"}
HEADERS = {
    "Cache-Control": "no-cache",  # revalidate: a new release's script is never mixed with an old page
    "Content-Security-Policy": "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; "
                               "script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


@router.get("/")
def dashboard_page() -> FileResponse:
    """The dashboard's single page."""
    return _file("index.html")


@router.get("/dashboard/{name}")
def dashboard_file(name: str) -> FileResponse:
    """One of the dashboard's scripts or style sheets."""
    return _file(name)


def _file(name: str) -> FileResponse:
    path = FILES / name
    if "/" in name or path.suffix not in MEDIA or not path.is_file():
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no dashboard file {name!r}")
    return FileResponse(path, media_type=MEDIA[path.suffix], headers=HEADERS)
