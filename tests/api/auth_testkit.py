"""Helpers shared by the auth, limits and schemathesis tests: keys, and one tenant's jobs as a worker leaves them."""

from __future__ import annotations

import io
import json
import os
import secrets
import socket
import subprocess
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from api_testkit import SMALL_CONFIG, upload_checkpoint
from PIL import Image

from api import auth, checkpoints, jobs
from api.db import session_scope
from api.segment import result_key
from api.settings import Settings
from veernet_core.checkpoint import LocalStore, S3Store
from veernet_core.digitise.export import RESULT_FILES

ROOT = Path(__file__).resolve().parents[2]
SERVICE_ENV = {name.upper() for name in Settings.model_fields}
CALIBRATION = {"depth": {"top": 1000.0, "bottom": 1010.0, "unit": "m"},
               "curves": [{"mnemonic": "GR", "unit": "API", "left": 0, "right": 150}],
               "track_top": 2, "track_bottom": 61, "step": 0.5}


def new_admin_key() -> str:
    return "admin-" + secrets.token_urlsafe(24)


def make_key(tenant: str, name: str = "", revoked: bool = False) -> str:
    """A real key, created (and perhaps revoked) the way `veernet keys` does it."""
    with session_scope() as session:
        row, key = auth.create_key(session, tenant, name)
        if revoked:
            auth.revoke_key(session, str(row.id))
    return key


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def png(width: int = 320, height: int = 64, noise: bool = False) -> bytes:
    """A blank scan (a few hundred bytes), or one of random pixels (incompressible: about width x height bytes)."""
    pixels = np.random.default_rng(0).integers(0, 255, (height, width), dtype=np.uint8) if noise else np.full(
        (height, width), 230, np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def segment_form(options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Keyword arguments of a valid POST /segment."""
    return {"files": {"file": ("scan.png", png(), "image/png")},
            "data": {"options": json.dumps(options or {"calibration": CALIBRATION})}}


@dataclass
class World:
    """One tenant's jobs: a running train job with a checkpoint, a finished segment job, queued jobs."""

    tenant: str
    train_job: int
    checkpoint: int
    checkpoint_data: bytes
    segment_job: int
    results: dict[str, bytes]
    queued: list[int] = field(default_factory=list)


def build_world(store: LocalStore | S3Store, tenant: str, queued: int = 1) -> World:
    with session_scope() as session:
        train_id = jobs.create_job(session, "train", SMALL_CONFIG, tenant).id
        segment_id = jobs.create_job(session, "segment", {"model": {"source": "bundled"}}, tenant).id
        queued_ids = [jobs.create_job(session, "train", SMALL_CONFIG, tenant).id for _ in range(queued)]
    with session_scope() as session:
        attempt = jobs.claim(session, train_id, "w1", lease_s=600)
        segment_attempt = jobs.claim(session, segment_id, "w2", lease_s=600)
    assert attempt == 1 and segment_attempt == 1
    ref, data = upload_checkpoint(store, train_id, attempt, epoch=1)
    with session_scope() as session:
        assert checkpoints.register_checkpoint(session, train_id, attempt, ref)
    results = {name: json.dumps({"file": name, "job": segment_id}).encode() for name in RESULT_FILES}
    for name, content in results.items():  # as worker.segment_runner writes them, before finishing
        store.put(result_key(segment_id, name), content)
    with session_scope() as session:
        assert jobs.finish(session, segment_id, segment_attempt, "succeeded", result={"files": {}})
        checkpoint_id = checkpoints.list_checkpoints(session, train_id)[0].id
    return World(tenant, train_id, checkpoint_id, data, segment_id, results, queued_ids)


# ---- `veernet` as a real process ----------------------------------------------------------------------


def free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """This environment without any service setting of the developer's, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if k.upper() not in SERVICE_ENV}
    return {**env, "VEERNET_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT), **settings}


def wait_live(base: str, server: subprocess.Popen[Any], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert server.poll() is None, f"the server exited with {server.returncode}"
        try:
            if httpx.get(f"{base}/livez", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"{base} not live within {timeout_s} s")
