"""POST /plan, its chart and POST /jobs?dry_run=true: calibration from completed jobs and their timelines,
the probe fallback on a fresh fleet, and clear 4xx answers. Real Postgres; the probes are real."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from api import jobs
from api.db import session_scope
from api.models import MEMORY_EVENT, Job, JobEvent, utcnow
from api.plan import timeline_taxes
from veernet_core.config import TrainConfig
from veernet_core.manifest import write_manifest
from veernet_core.memory import MemoryModel
from veernet_core.plan import layout, pixel_budget
from veernet_core.plan_probe import device_class, memory_model
from veernet_core.synth import log_size

TINY_MODEL = {"widths": [4, 4, 8, 8, 8, 16], "transformer_heads": 1, "transformer_ff": 16}
CONFIG: dict[str, Any] = {"epochs": 2, "effective_batch": 4, "model": TINY_MODEL,
                          "data": {"dataset_size": 24, "scale": 0.04}}
GPU = "cuda:Test GPU 24GB"


@pytest.fixture(scope="session")
def database_url(postgres_url: str) -> str:
    return postgres_url


def completed_job(step_time_s: float, recovery: tuple[float, float, float] | None = None,
                  config: dict[str, Any] = CONFIG) -> int:
    """A succeeded job of `config` on GPU as a worker leaves it; `recovery`: (total lost s, s from resumed to
    recovered, s the second attempt started after the first claim) for one interruption."""
    now = utcnow()
    with session_scope() as session:
        job_id = jobs.create_job(session, "train", TrainConfig.from_dict(config).to_dict()).id
    with session_scope() as session:
        t0 = now - timedelta(seconds=600)
        assert jobs.claim(session, job_id, "w1", 60, now=t0) == 1
        jobs.record_device(session, job_id, 1, GPU, 24 * 2**30, now=t0)
        job = session.get(Job, job_id)
        assert job is not None
        job.status, job.finished_at, job.started_at = "succeeded", now, t0
        job.step_time_s, job.validation_time_s, job.checkpoint_time_s = step_time_s, 0.5, 0.25
        if recovery is not None:
            lost, redone, restart = recovery
            job.infra_failures, job.recovery_seconds, job.attempt = 1, lost, 2
            second = t0 + timedelta(seconds=restart)
            session.add_all([
                JobEvent(job_id=job_id, attempt=1, kind="requeued", created_at=second - timedelta(seconds=1)),
                JobEvent(job_id=job_id, attempt=2, kind="claimed", created_at=second),
                JobEvent(job_id=job_id, attempt=2, kind="resumed", created_at=second + timedelta(seconds=2)),
                JobEvent(job_id=job_id, attempt=2, kind="recovered", data={"recovery_seconds": lost},
                         created_at=second + timedelta(seconds=2 + redone))])
    return job_id


def test_a_measured_device_class_is_planned_from_its_completed_jobs_and_timelines(client: Any) -> None:
    completed_job(2.0, recovery=(50.0, 8.0, 100.0))
    completed_job(4.0)
    completed_job(3.0)
    response = client.post("/plan", json={"config": CONFIG, "device_class": GPU, "window_hours": 1, "probe": False})
    assert response.status_code == 200, response.text
    plan = response.json()
    config = TrainConfig.from_dict(CONFIG)
    sizes = [log_size(0, i, 0.04) for i in range(24)]
    budget = pixel_budget(config, memory_model(config.model, "cpu"), 24 * 2**30)
    lay = layout(config, sizes, budget)
    px_per_step = lay.train_padded_px / (lay.steps_per_epoch * 2)
    assert plan["throughput"]["jobs"] == 3 and "succeeded jobs" in plan["throughput"]["source"]
    assert plan["throughput"]["train_px_per_s"] == pytest.approx(px_per_step / 3.0)  # the median step time
    assert plan["time"]["step_s"] == pytest.approx(3.0)
    assert plan["throughput"]["checkpoint_s"] == pytest.approx(0.25)
    assert plan["interruptions"]["resume_tax_s"] == pytest.approx(50.0 - 8.0)  # lost time minus redone work
    assert plan["memory"]["device_memory_mb"] == pytest.approx(24 * 1024)
    hours = 3 * 600 / 3600  # one infrastructure loss in the three jobs' wall-clock
    assert plan["checkpointing"]["failure_rate_per_h"] == pytest.approx(1 / hours)
    assert plan["interruptions"]["k"] == pytest.approx(plan["time"]["compute_s"] / 3600 / hours)
    chart = client.post("/plan/chart.svg", json={"config": CONFIG, "device_class": GPU, "probe": False})
    assert chart.status_code == 200 and chart.headers["content-type"].startswith("image/svg+xml")
    assert GPU in chart.text and "window 12 h" in chart.text


def test_a_fresh_fleet_falls_back_to_a_probe_and_a_dry_run_creates_no_job(client: Any) -> None:
    refused = client.post("/plan", json={"config": CONFIG, "probe": False})
    assert refused.status_code == 409 and refused.json()["detail"][0]["field"] == "probe"
    response = client.post("/jobs?dry_run=true", json={"config": CONFIG})
    assert response.status_code == 200, response.text
    plan = response.json()
    assert plan["throughput"]["source"].startswith("probe") and plan["throughput"]["train_px_per_s"] > 0
    assert plan["device_class"].startswith("cpu:")
    assert plan["data"]["steps_per_epoch"] == 19 // 4  # 24 logs, 20 % held out
    assert "estimate" in plan["interruptions"]["resume_tax_source"]
    assert client.get("/jobs").json()["total"] == 0
    with session_scope() as session:
        assert session.scalars(select(Job)).first() is None
    sized = client.post("/plan", json={"config": CONFIG, "gpu_memory_gb": 0.001, "interruptions": 2,
                                       "tiers": [{"name": "spot", "eur_per_month": 300}]})
    assert sized.status_code == 200, sized.text
    assert sized.json()["memory"]["available_mb"] == pytest.approx(0.8 * 1.024)
    assert [c["tier"] for c in sized.json()["costs"]][-1] == "spot" and sized.json()["interruptions"]["k"] == 2


@pytest.mark.parametrize(("body", "field"), [
    ({"config": {"epochs": 0}}, "config.epochs"),
    ({"config": CONFIG, "device_class": "cuda:Nobody's GPU"}, "device_class"),
    ({"config": CONFIG, "window_hours": -1}, "window_hours"),
    ({"config": CONFIG, "tiers": [{"name": "x", "eur_per_month": 0}]}, "tiers.0.eur_per_month"),
    ({"config": CONFIG, "utilisation": 1.5}, "utilisation"),
])
def test_bad_requests_name_the_field(client: Any, body: dict[str, Any], field: str) -> None:
    response = client.post("/plan", json=body)
    assert response.status_code == 422, response.text
    assert field in [e["field"] for e in response.json()["detail"]]


def test_a_zombie_cannot_record_its_device(running_job: tuple[int, int]) -> None:
    job_id, attempt = running_job
    with session_scope() as session:
        assert not jobs.record_device(session, job_id, attempt + 1, "cpu:zombie", 1)
        assert jobs.record_device(session, job_id, attempt, "cpu:mine", 2)
    with session_scope() as session:
        job = session.get(Job, job_id)
        assert job is not None and (job.device_class, job.device_memory_bytes) == ("cpu:mine", 2)


def test_timeline_taxes_split_a_double_loss_between_its_interruptions() -> None:
    t = utcnow()
    events = [JobEvent(attempt=1, kind="claimed", created_at=t),
              JobEvent(attempt=2, kind="claimed", created_at=t + timedelta(seconds=100)),
              JobEvent(attempt=3, kind="claimed", created_at=t + timedelta(seconds=200)),
              JobEvent(attempt=3, kind="resumed", created_at=t + timedelta(seconds=205)),
              JobEvent(attempt=3, kind="recovered", data={"recovery_seconds": 130.0},
                       created_at=t + timedelta(seconds=215))]
    assert timeline_taxes(events) == [pytest.approx(60.0), pytest.approx(60.0)]  # (130 - 10 redone) / 2


def test_a_model_too_costly_to_probe_on_the_api_host_is_a_422_saying_how_to_plan_it(client: Any,
                                                                                    reconfigure: Any) -> None:
    from api.plan import probe_step_gflops

    tiny, default = TrainConfig.from_dict(CONFIG).model, TrainConfig().model
    assert 0 < probe_step_gflops(tiny) < probe_step_gflops(default)
    reconfigure(PLAN_MAX_PROBE_GFLOPS=probe_step_gflops(tiny) / 2)
    for path in ("/plan", "/jobs?dry_run=true"):
        response = client.post(path, json={"config": CONFIG})
        assert response.status_code == 422, response.text
        [error] = response.json()["detail"]
        assert error["field"] == "config.model" and "PLAN_MAX_PROBE_GFLOPS" in error["message"], error
        assert "veernet plan" in error["message"]


def test_a_plan_that_would_wait_for_another_probe_is_told_to_come_back(client: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from api import plan

    monkeypatch.setattr(plan, "PROBE_QUEUE_S", 0.1)
    with plan._probe_lock:  # another request's probe is running
        response = client.post("/plan", json={"config": CONFIG})
    assert response.status_code == 429, response.text
    assert response.headers["retry-after"] == str(plan.PROBE_RETRY_S)
    assert response.json()["detail"][0]["field"] == "probe"


def test_a_manifest_job_calibrates_from_its_manifest_and_one_whose_dataset_is_gone_is_named(
        client: Any, tmp_path: Path) -> None:
    sizes = [(40 + 8 * (k % 3), 300 + 37 * k) for k in range(24)]  # user scans: no generator knows these
    write_manifest(tmp_path, [{"image": f"scans/{k}.png", "mask": f"masks/{k}.png", "height": h, "width": w}
                              for k, (h, w) in enumerate(sizes)])  # sizes listed: no image is read
    labelled = {**CONFIG, "data": {"kind": "manifest", "manifest_url": str(tmp_path)}}
    completed_job(2.0, config=labelled)
    gone = completed_job(5.0, config={**labelled, "data": {**labelled["data"], "manifest_url": str(tmp_path / "x")}})
    response = client.post("/plan", json={"config": CONFIG, "device_class": GPU, "probe": False})
    assert response.status_code == 200, response.text
    plan = response.json()
    config = TrainConfig.from_dict(labelled)
    lay = layout(config, sizes, pixel_budget(config, memory_model(config.model, "cpu"), 24 * 2**30))
    assert plan["throughput"]["jobs"] == 1
    assert plan["throughput"]["train_px_per_s"] == pytest.approx(lay.train_padded_px / (lay.steps_per_epoch * 2) / 2.0)
    [note] = plan["throughput"]["notes"]
    assert note.startswith(f"job {gone} not counted") and str(tmp_path / "x") in note and note in plan["warnings"]


def memory_event(job_id: int, memory: MemoryModel, budget: int, device: str = GPU) -> None:
    """What a worker of `device` records at a (re)start of `job_id` (worker.callbacks.ServiceCallbacks.on_budget)."""
    with session_scope() as session:
        session.add(JobEvent(job_id=job_id, attempt=1, kind=MEMORY_EVENT, data={
            "device_class": device, "pixel_budget": budget, "memory_model": memory.to_dict()}))


def test_a_measured_device_is_planned_with_its_own_memory_model_and_a_named_size_says_it_is_extrapolated(
        client: Any) -> None:
    on_gpu = MemoryModel("cuda", 5e6, 300.0, (32768, 65536), (14_830_400, 24_660_800), 240.0)
    job_id = completed_job(3.0)
    memory_event(job_id, on_gpu, 123_456)
    other_model = completed_job(3.0, config={**CONFIG, "model": {**TINY_MODEL, "transformer_ff": 32}})
    memory_event(other_model, MemoryModel("cuda", 1.0, 1.0, (1, 2), (1, 2)), 1)  # newer, another model config
    response = client.post("/plan", json={"config": CONFIG, "device_class": GPU, "probe": False})
    assert response.status_code == 200, response.text
    memory = response.json()["memory"]
    assert memory["source"].startswith(f"measured on {GPU} by the worker of job {job_id}")
    assert (memory["measured_on"], memory["extrapolated"]) == (GPU, False)
    assert (memory["bytes_per_pixel"], memory["masked_bytes_per_pixel"]) == (300.0, 240.0)
    assert memory["pixel_budget"] == on_gpu.pixel_budget(24 * 2**30 * 0.8)
    assert not any("extrapolated" in w for w in response.json()["warnings"])
    assert response.json()["throughput"]["train_px_per_s"] > 0  # calibrated with the job's recorded budget

    here = device_class("cpu")
    sized = client.post("/plan", json={"config": CONFIG, "gpu_memory_gb": 16})
    assert sized.status_code == 200, sized.text
    memory = sized.json()["memory"]
    assert (memory["measured_on"], memory["extrapolated"]) == (here, True)
    assert f"extrapolated from the probe on {here}, standing for a 16 GiB GPU" in memory["source"]
    assert any(f"extrapolated from a probe on {here}" in w for w in sized.json()["warnings"])
    unmeasured = client.post("/plan", json={"config": {**CONFIG, "model": {**TINY_MODEL, "transformer_ff": 8}},
                                            "device_class": GPU})
    assert unmeasured.status_code == 200, unmeasured.text
    assert unmeasured.json()["memory"]["extrapolated"] is True
    assert f"no job of this model config on {GPU}" in unmeasured.json()["memory"]["source"]
