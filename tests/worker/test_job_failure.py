"""A job that fails in the worker's runner: its failure is the attempt's last write. The heartbeat stops
before it, so no beat of the failed attempt lands after it (a refused beat on a cleanly failed job)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from api.db import session_scope
from api.models import Job, JobEvent
from api.settings import Settings
from worker.runner import run_training_job

# A dataset name the tenant does not have: the run fails as it loads its data, on every attempt.
CONFIG: dict[str, Any] = {"epochs": 1, "effective_batch": 4,
                          "model": {"widths": [4, 4, 8, 8, 8, 16], "transformer_heads": 1, "transformer_ff": 16},
                          "data": {"kind": "manifest", "manifest_url": "no-such-dataset"}}


def test_a_failing_attempt_writes_nothing_after_its_failure(client: Any, service: Settings,
                                                            reconfigure: Callable[..., Settings]) -> None:
    # A beat every millisecond: a heartbeat still running when the failure is written beats after it.
    settings = reconfigure(HEARTBEAT_SECONDS=0.001, LEASE_SECONDS=60)
    response = client.post("/jobs", json={"config": CONFIG})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]

    outcomes = [run_training_job(job_id) for _ in range(settings.max_job_failures)]
    assert outcomes == ["failed (queued)"] * (settings.max_job_failures - 1) + ["failed (failed)"], outcomes
    with session_scope() as session:
        job = session.get(Job, job_id)
        assert job is not None and job.status == "failed" and "no-such-dataset" in (job.error or "")
        kinds = [e.kind for e in session.scalars(select(JobEvent).where(JobEvent.job_id == job_id)
                                                 .order_by(JobEvent.id))]
    assert "stale_write_refused" not in kinds, kinds
    assert kinds[-1] == "failed" and kinds.count("claimed") == settings.max_job_failures, kinds
