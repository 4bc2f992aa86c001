"""A plan's probe job through the worker's runner: POST /plan queues it, the worker measures its model config on
its own device and records it, and the next plan is timed from that measurement. The probe is real (CPU)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from api.db import session_scope
from api.models import MEMORY_EVENT, PROBE_EVENT, Job, JobEvent
from api.settings import Settings
from veernet_core.plan_probe import device_class
from worker.probe_runner import run_probe_job

TINY_MODEL = {"widths": [4, 4, 8, 8, 8, 16], "transformer_heads": 1, "transformer_ff": 16}
CONFIG: dict[str, Any] = {"epochs": 2, "effective_batch": 4, "model": TINY_MODEL,
                          "data": {"dataset_size": 24, "scale": 0.04}}


def test_a_probe_job_measures_on_the_worker_and_the_next_plan_uses_it(client: Any, service: Settings) -> None:
    pending = client.post("/plan", json={"config": CONFIG}).json()["measurement"]
    job_id = pending["probe"]["job_id"]
    assert pending["status"] == "none" and pending["probe"]["status"] == "pending"

    assert run_probe_job(job_id) == "succeeded"
    assert run_probe_job(job_id) == "ignored", "a duplicate delivery of a finished probe changes nothing"
    here = device_class("cpu")
    with session_scope() as session:
        job = session.get(Job, job_id)
        assert job is not None and (job.status, job.device_class, job.attempt) == ("succeeded", here, 1)
        assert job.result is not None and job.result["train_px_per_s"] > 0
        kinds = [e.kind for e in session.scalars(select(JobEvent).where(JobEvent.job_id == job_id)).all()]
    assert MEMORY_EVENT in kinds and PROBE_EVENT in kinds

    plan = client.post("/plan", json={"config": {**CONFIG, "epochs": 3}}).json()  # same model, another run
    assert plan["device_class"] == here and plan["measurement"]["status"] == "measured"
    assert plan["measurement"]["probe"] is None, "measured: no second probe"
    assert plan["throughput"]["source"] == "probe" and f"probe job {job_id}" in plan["throughput"]["detail"]
    assert plan["throughput"]["train_px_per_s"] == job.result["train_px_per_s"]
    assert plan["memory"]["source"].startswith(f"measured on {here} by the worker of job {job_id}")
    assert plan["memory"]["extrapolated"] is False and plan["memory"]["bytes_per_pixel"] > 0
    assert plan["time"]["compute_s"] > 0 and plan["data"]["epochs"] == 3
    with session_scope() as session:
        assert len(session.scalars(select(Job).where(Job.kind == "probe")).all()) == 1
