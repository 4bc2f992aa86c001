"""The per-process status cache: fresh within STATUS_CACHE_SECONDS, version-checked after, and
a cancel through this process is visible at once."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from api import jobs
from api.db import session_scope
from api.settings import Settings


def test_worker_writes_show_after_the_cache_window(client: TestClient, running_job: tuple[int, int],
                                                   reconfigure: Callable[..., Settings]) -> None:
    reconfigure(STATUS_CACHE_SECONDS=3600)
    job_id, attempt = running_job
    assert client.get(f"/jobs/{job_id}").json()["progress"]["global_step"] in (None, 0)
    with session_scope() as session:
        assert jobs.record_progress(session, job_id, attempt, global_step=7, total_steps=20, step_time_s=1.0)
    cached = client.get(f"/jobs/{job_id}").json()
    reconfigure(STATUS_CACHE_SECONDS=0)  # the window is over: the next read checks the job's version
    fresh = client.get(f"/jobs/{job_id}").json()
    assert cached["progress"]["global_step"] in (None, 0), "within the window the cached detail is served"
    assert fresh["progress"]["global_step"] == 7, "after the window a changed job is rebuilt"


def test_version_check_alone_is_never_stale(client: TestClient, running_job: tuple[int, int]) -> None:
    job_id, attempt = running_job  # STATUS_CACHE_SECONDS=0 in the service fixture
    for step in (1, 2, 3):
        with session_scope() as session:
            assert jobs.record_progress(session, job_id, attempt, global_step=step, total_steps=20)
        assert client.get(f"/jobs/{job_id}").json()["progress"]["global_step"] == step
    with session_scope() as session:
        assert jobs.record_event(session, job_id, attempt, "resumed", "from a checkpoint")
    assert client.get(f"/jobs/{job_id}").json()["events"][-1]["kind"] == "resumed"


def test_a_cancel_is_visible_at_once(client: TestClient, running_job: tuple[int, int],
                                     reconfigure: Callable[..., Settings]) -> None:
    reconfigure(STATUS_CACHE_SECONDS=60)
    job_id, _ = running_job
    assert client.get(f"/jobs/{job_id}").json()["cancel_requested"] is False
    assert client.post(f"/jobs/{job_id}/cancel").status_code == 202
    assert client.get(f"/jobs/{job_id}").json()["cancel_requested"] is True
