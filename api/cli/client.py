"""A small client of the VeerNet HTTP API (what `veernet submit`, `watch`, `download`... and the demo use).

Every failure, whether the API cannot be reached, answers 4xx/5xx, or a download does not match its
registered sha256, is an ``ApiError`` whose message is one readable line. No FastAPI, SQLAlchemy or
torch here: the client runs wherever httpx does.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"
FINISHED = ("succeeded", "failed", "cancelled")
CHUNK_BYTES = 1 << 20
RESULT_PATHS = {"json": "result", "csv": "result.csv", "las": "result.las"}


class ApiError(Exception):
    """What went wrong, in one line; ``status`` is the HTTP status when the API answered."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(" ".join(message.split()))  # one line, whatever the server sent
        self.status = status


class ChecksumMismatch(ApiError):
    """A download whose bytes are not the checkpoint's registered ones (the partial file is deleted)."""


def error_line(response: httpx.Response) -> str:
    """The API's error body as one line: ``{"detail": "..."}`` or ``{"detail": [{"field", "message"}, ...]}``."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if isinstance(detail, list):
        detail = "; ".join(f"{e.get('field', '?')}: {e.get('message', e)}" if isinstance(e, dict) else str(e)
                           for e in detail)
    if not detail:  # not the API's own body (a proxy, S3): its text, cut short
        detail = response.text.strip()[:200] or "no message"
    reason = response.reason_phrase or "error"
    return f"{response.status_code} {reason} from {response.request.method} {response.request.url.path}: {detail}"


class VeerNetClient:
    """The HTTP API as methods that return parsed JSON (or write files) and raise ``ApiError``."""

    def __init__(self, url: str = DEFAULT_URL, key: str | None = None, timeout_s: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        try:  # httpx drops Authorization on a redirect to another origin (a presigned S3 URL must not get it)
            self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s, transport=transport)
        except httpx.InvalidURL as exc:
            raise ApiError(f"{url!r} is not a usable API URL ({exc}); give one like {DEFAULT_URL}") from exc

    def __enter__(self) -> VeerNetClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; ApiError on a connection failure or any answer outside 2xx."""
        with self._connection(method, path):
            response = self.http.request(method, path, **kwargs)
        if not response.is_success:
            raise ApiError(error_line(response), response.status_code)
        return response

    @contextmanager
    def _connection(self, method: str, path: str) -> Iterator[None]:
        try:
            yield
        except httpx.TimeoutException as exc:
            raise ApiError(f"{method} {self.url}{path} timed out ({type(exc).__name__}); the API may be "
                           "overloaded, retry") from exc
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            raise ApiError(f"cannot reach the VeerNet API at {self.url}: {str(exc).rstrip('.') or type(exc).__name__}; "
                           "start it with `veernet up`, or point --url / VEERNET_URL at it") from exc

    # Jobs

    def health(self) -> dict[str, Any]:
        return dict(self.request("GET", "/healthz").json())

    def submit(self, config: dict[str, Any], kind: str = "train") -> dict[str, Any]:
        """POST /jobs: the queued job's detail."""
        return dict(self.request("POST", "/jobs", json={"kind": kind, "config": config}).json())

    def jobs(self, status: str | None = None, limit: int = 50, offset: int = 0) -> dict[str, Any]:
        """GET /jobs: a page {items, total, limit, offset}, newest first."""
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if status:
            params["status"] = status
        return dict(self.request("GET", "/jobs", params=params).json())

    def job(self, job_id: int) -> dict[str, Any]:
        return dict(self.request("GET", f"/jobs/{job_id}").json())

    def cancel(self, job_id: int) -> dict[str, Any]:
        return dict(self.request("POST", f"/jobs/{job_id}/cancel").json())

    def wait(self, job_id: int, on_poll: Callable[[dict[str, Any]], None] | None = None, interval_s: float = 1.0,
             timeout_s: float | None = None) -> dict[str, Any]:
        """Poll GET /jobs/{id} until the job is finished; ``on_poll`` sees every answer."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            job = self.job(job_id)
            if on_poll is not None:
                on_poll(job)
            if job["status"] in FINISHED:
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise ApiError(f"job {job_id} is still {job['status']} after {timeout_s:.0f} s")
            time.sleep(interval_s)

    # Checkpoints

    def checkpoints(self, job_id: int) -> list[dict[str, Any]]:
        """A job's committed checkpoints, oldest first."""
        return list(self.request("GET", f"/jobs/{job_id}/checkpoints").json())

    def checkpoint(self, checkpoint_id: int) -> dict[str, Any]:
        return dict(self.request("GET", f"/checkpoints/{checkpoint_id}").json())

    def download(self, checkpoint_id: int, dest: Path,
                 on_bytes: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Stream a checkpoint to ``dest``, verified against its registered size and sha256.

        The bytes go to ``dest``.part first and are renamed only once verified; on a mismatch, a
        dropped connection or Ctrl-C the partial file is deleted and ``dest`` is left as it was.
        ``on_bytes(done, total)`` follows progress. Returns the checkpoint's row.
        """
        row = self.checkpoint(checkpoint_id)
        part = dest.with_name(dest.name + ".part")
        try:
            try:
                digest, size = self._stream_to(f"/checkpoints/{checkpoint_id}/download", part, row, on_bytes)
                if size != row["size"] or digest != row["sha256"]:
                    raise ChecksumMismatch(f"checkpoint {checkpoint_id} downloaded as {size} bytes with sha256 "
                                           f"{digest}, but {row['size']} bytes with sha256 {row['sha256']} were "
                                           "registered: the stored file is corrupt or was changed; nothing was "
                                           "saved. Try another checkpoint of the job")
                os.replace(part, dest)
            except OSError as exc:
                raise ApiError(f"cannot save checkpoint {checkpoint_id} as {dest}: {exc.strerror or exc}") from exc
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        return row

    def _stream_to(self, path: str, part: Path, row: dict[str, Any],
                   on_bytes: Callable[[int, int], None] | None) -> tuple[str, int]:
        sha, size = hashlib.sha256(), 0
        with self._connection("GET", path), self.http.stream("GET", path, follow_redirects=True) as response:
            if not response.is_success:
                response.read()
                raise ApiError(error_line(response), response.status_code)
            header = response.headers.get("x-checksum-sha256")
            if header is not None and header != row["sha256"]:
                raise ChecksumMismatch(f"checkpoint {row['id']}: the server sent sha256 {header}, but "
                                       f"{row['sha256']} is registered; nothing was saved")
            total = int(response.headers.get("content-length") or row["size"])
            with part.open("wb") as out:
                for chunk in response.iter_bytes(CHUNK_BYTES):
                    out.write(chunk)
                    sha.update(chunk)
                    size += len(chunk)
                    if on_bytes is not None:
                        on_bytes(size, total)
        return sha.hexdigest(), size

    # Segmentation

    def segment(self, scan: Path, options: dict[str, Any], wait_s: float = 30.0) -> tuple[int, dict[str, Any] | None]:
        """POST /segment?wait=true: (job id, the result JSON if it finished within ``wait_s``, else None)."""
        import json

        try:
            data = scan.read_bytes()
        except OSError as exc:
            raise ApiError(f"cannot read the scan {scan}: {exc.strerror or exc}") from exc
        response = self.request("POST", "/segment", params={"wait": "true", "timeout": wait_s},
                                files={"file": (scan.name, data)}, data={"options": json.dumps(options)},
                                timeout=wait_s + 30.0)
        job_id = int(response.headers["location"].rsplit("/", 1)[1])
        return job_id, (dict(response.json()) if response.status_code == 200 else None)

    def plan(self, body: dict[str, Any], timeout_s: float = 30.0) -> dict[str, Any]:
        """POST /plan: memory, steps, time with interruptions and cost of a training run (answers at once)."""
        return dict(self.request("POST", "/plan", json=body, timeout=timeout_s).json())

    def plan_chart(self, body: dict[str, Any], timeout_s: float = 30.0) -> bytes:
        """POST /plan/chart.svg: the same plan as an SVG chart."""
        return self.request("POST", "/plan/chart.svg", json=body, timeout=timeout_s).content

    def result(self, job_id: int, fmt: str) -> bytes:
        """A finished segment job's curves as "json", "csv" or "las"."""
        return self.request("GET", f"/jobs/{job_id}/{RESULT_PATHS[fmt]}").content
