"""Structured logs: with VEERNET_LOG_FORMAT=json every line is one JSON object, and lines logged while a
worker runs a job carry its id and attempt (the fencing token its claim returned)."""

from __future__ import annotations

import io
import json
import logging
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from auth_testkit import cli_env, free_port, wait_live
from fastapi.testclient import TestClient
from PIL import Image

from api.logs import JsonFormatter, bind_attempt, current_job, job_context
from api.settings import Settings
from veernet_core.synth import generate
from worker.segment_runner import run_segment_job


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """Everything logged at INFO and above, through the JSON formatter, one line per record."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield out
    root.removeHandler(handler)
    root.setLevel(level)


def records(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_line_is_one_json_object_with_the_job_bound_and_none_after(json_lines: io.StringIO) -> None:
    log = logging.getLogger("veernet.test")
    with job_context(41):
        log.info("before the claim")
        bind_attempt(3)
        log.warning("quote \" and newline\n inside", extra={"checkpoint": "jobs/41/a.pt"})
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("it failed")
    log.info("after the job")
    assert current_job() == (None, None)
    lines = records(json_lines)
    assert len(json_lines.getvalue().splitlines()) == 4, "a multi-line message is still one line"
    assert [(r["message"], r.get("job_id"), r.get("attempt")) for r in lines] == [
        ("before the claim", 41, None), ("quote \" and newline\n inside", 41, 3), ("it failed", 41, 3),
        ("after the job", None, None)]
    assert lines[1]["checkpoint"] == "jobs/41/a.pt" and lines[1]["level"] == "WARNING"
    assert "ValueError: boom" in str(lines[2]["exception"]) and lines[0]["logger"] == "veernet.test"


def test_a_worker_running_a_job_logs_its_id_and_attempt(client: TestClient, service: Settings,
                                                        json_lines: io.StringIO) -> None:
    log = generate(seed=7, index=0, scale=0.1, classes=3)
    scan = io.BytesIO()
    Image.fromarray(log.image).save(scan, format="PNG")
    job_id = client.post("/segment", files={"file": ("log.png", scan.getvalue(), "image/png")},
                         data={"options": json.dumps({"calibration": log.calibration()})}).json()["id"]
    with job_context(job_id):  # what worker.tasks.segment_job does around the runner
        assert run_segment_job(job_id) == "succeeded"
    claimed = [r for r in records(json_lines) if "claimed as attempt 1" in str(r["message"])]
    assert len(claimed) == 1, json_lines.getvalue()
    assert (claimed[0]["job_id"], claimed[0]["attempt"], claimed[0]["logger"]) == (job_id, 1, "worker.attempt")


def test_veernet_api_writes_json_lines(tmp_path: Path) -> None:
    env = cli_env(tmp_path, VEERNET_LOG_FORMAT="json")
    assert subprocess.run([sys.executable, "-m", "api.cli", "migrate"], env=env, capture_output=True,
                          timeout=120).returncode == 0
    port, log = free_port(), tmp_path / "api.log"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, "-m", "api.cli", "api", "--port", str(port)], env=env,
                                  stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_live(f"http://127.0.0.1:{port}", server)
            assert httpx.get(f"http://127.0.0.1:{port}/jobs").status_code == 200
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)
    lines = [json.loads(line) for line in log.read_text().splitlines()]  # every line parses, or this fails
    messages = [str(r["message"]) for r in lines]
    assert any("API keys are off" in m for m in messages), messages
    assert any('"GET /jobs HTTP/1.1" 200' in m for m in messages), messages  # uvicorn's access log
    assert all({"time", "level", "logger", "message"} <= set(r) for r in lines)
