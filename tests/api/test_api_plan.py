"""POST /plan, its chart and POST /jobs?dry_run=true: calibration from completed jobs and their timelines, the
probe job a missing measurement queues (never a probe in the API process), the known-GPU table's labelled
estimates, and clear 4xx answers. Real Postgres and a real (embedded) broker.

Every test here runs with the probes of veernet_core booby-trapped in this process (``no_probe_in_the_api``):
a plan that ran one would fail the test. tests/worker/test_probe_runner.py runs the probe jobs themselves.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from auth_testkit import bearer, cli_env, make_key, new_admin_key
from sqlalchemy import select

import veernet_core.memory_probe
import veernet_core.plan_probe
from api import jobs
from api.db import session_scope
from api.models import MEMORY_EVENT, Job, JobEvent, utcnow
from api.plan_reliability import timeline_taxes
from api.settings import Settings
from veernet_core.config import TrainConfig
from veernet_core.manifest import write_manifest
from veernet_core.memory import MemoryModel
from veernet_core.plan import layout
from veernet_core.plan_gpus import ASSUMED_EFFICIENCY, find_gpu, model_flops
from veernet_core.synth import log_size
from worker.celery_app import PROBE_QUEUE, PROBE_TASK

TINY_MODEL = {"widths": [4, 4, 8, 8, 8, 16], "transformer_heads": 1, "transformer_ff": 16}
CONFIG: dict[str, Any] = {"epochs": 2, "effective_batch": 4, "model": TINY_MODEL,
                          "data": {"dataset_size": 24, "scale": 0.04}}
GPU = "cuda:Test GPU 24GB"


@pytest.fixture(scope="session")
def database_url(postgres_url: str) -> str:
    return postgres_url


PROBES = [(veernet_core.plan_probe, name) for name in (
    "measure_here", "measure_device", "probe_here", "probe_in_fresh_process", "probe_throughput", "probe_memory",
    "memory_model")] + [(veernet_core.memory_probe, "probe_memory")]


@pytest.fixture(autouse=True)
def no_probe_in_the_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every function that measures on this machine raises if called (and is recorded): the API never probes."""
    called: list[str] = []

    def tripwire(name: str) -> Callable[..., Any]:
        def probe(*_: Any, **__: Any) -> Any:
            called.append(name)
            raise AssertionError(f"the API process ran {name}: a plan must queue a probe job instead")
        return probe

    for module, name in PROBES:
        monkeypatch.setattr(module, name, tripwire(f"{module.__name__}.{name}"))
    yield called
    assert called == [], f"probes ran in the API process: {called}"


API_PROCESS = """
import json, sys
from fastapi.testclient import TestClient
from api.db import migrate
from api.settings import get_settings
migrate(get_settings().database_url)
from api.main import app
imported = "torch" in sys.modules
with TestClient(app) as client:
    answers = [client.post("/plan", json=body) for body in json.loads(sys.argv[1])]
print(json.dumps({"statuses": [a.status_code for a in answers],
                  "probes": [a.json()["measurement"]["probe"]["status"] for a in answers],
                  "loaded": sorted(m for m in sys.modules if m.startswith("veernet_core.plan_probe")),
                  "torch_at_import": imported}))
"""


def test_an_api_process_answers_plans_that_need_a_probe_without_loading_the_probe(tmp_path: Path) -> None:
    """A fresh API process on the embedded default (SQLite): plans that need a measurement are answered, and
    the process never even imports veernet_core.plan_probe, the code that measures on a device. Importing the
    app does not import torch (about 1.5 s of CPU), so the API starts answering without waiting for it: torch
    is loaded after start, in the background, by the planner's warm-up of its FLOP counter
    (`plan_sources.warm_up_planner`), and by the plans that count FLOPs."""
    bodies = [{"config": CONFIG}, {"config": CONFIG, "gpu_memory_gb": 24}, {"config": CONFIG, "device_class": "T4"}]
    env = cli_env(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path / 'veernet.db'}",
                  BROKER_URL=f"sqla+sqlite:///{tmp_path / 'broker.db'}", CHECKPOINT_URL=str(tmp_path / "checkpoints"))
    done = subprocess.run([sys.executable, "-c", API_PROCESS, json.dumps(bodies)], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer == {"statuses": [200, 200, 200], "probes": ["pending"] * 3, "loaded": [],
                      "torch_at_import": False}, answer


def probe_jobs() -> list[Job]:
    with session_scope() as session:
        return list(session.scalars(select(Job).where(Job.kind == "probe").order_by(Job.id)).all())


def completed_job(step_time_s: float, recovery: tuple[float, float, float] | None = None,
                  config: dict[str, Any] = CONFIG, device: str = GPU) -> int:
    """A succeeded job of `config` on GPU as a worker leaves it; `recovery`: (total lost s, s from resumed to
    recovered, s the second attempt started after the first claim) for one interruption."""
    now = utcnow()
    with session_scope() as session:
        job_id = jobs.create_job(session, "train", TrainConfig.from_dict(config).to_dict()).id
    with session_scope() as session:
        t0 = now - timedelta(seconds=600)
        assert jobs.claim(session, job_id, "w1", 60, now=t0) == 1
        jobs.record_device(session, job_id, 1, device, 24 * 2**30, now=t0)
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
    lay = layout(config, sizes, 0)  # no worker recorded a memory model or a budget: the config's budget, none
    px_per_step = lay.train_padded_px / (lay.steps_per_epoch * 2)
    assert plan["throughput"]["jobs"] == 3 and plan["throughput"]["source"] == "completed_jobs"
    assert "median of 3 succeeded jobs" in plan["throughput"]["detail"]
    assert plan["measurement"]["status"] == "measured" and plan["measurement"]["probe"] is None
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
    started = client.post("/plan", json={"config": CONFIG, "device_class": GPU, "window_hours": 1, "probe": False,
                                         "start_at": "2026-11-27T08:00:00Z"}).json()
    assert datetime.fromisoformat(started["start_at"]) == datetime(2026, 11, 27, 8, tzinfo=UTC)
    finish = datetime.fromisoformat(started["finish_at"]) - datetime.fromisoformat(started["start_at"])
    assert finish.total_seconds() == pytest.approx(started["interruptions"]["finish_s"])


def test_a_fresh_fleet_queues_one_probe_job_for_a_worker_and_answers_at_once(
        client: Any, broker_messages: Callable[[str], list[tuple[str, list[Any]]]]) -> None:
    refused = client.post("/plan", json={"config": CONFIG, "probe": False})
    assert refused.status_code == 409 and refused.json()["detail"][0]["field"] == "probe"
    assert probe_jobs() == [], "probe=false queues nothing"
    response = client.post("/plan", json={"config": CONFIG})
    assert response.status_code == 200, response.text
    plan = response.json()
    [probe] = probe_jobs()
    assert (probe.kind, probe.status, probe.tenant) == ("probe", "queued", "local")
    assert probe.config["train"] == TrainConfig.from_dict(CONFIG).to_dict() and probe.config["target_class"] is None
    assert plan["measurement"]["status"] == "none" and plan["measurement"]["probe"]["status"] == "pending"
    assert plan["measurement"]["probe"]["job_id"] == probe.id and f"GET /jobs/{probe.id}" in plan["warnings"][0]
    assert plan["time"] is None and plan["interruptions"] is None and plan["costs"] == []
    assert plan["data"]["steps_per_epoch"] == 19 // 4  # the layout needs no speed: 24 logs, 20 % held out
    assert broker_messages(PROBE_QUEUE) == [(PROBE_TASK, [probe.id])]

    again = client.post("/jobs?dry_run=true", json={"config": CONFIG})  # the same plan, no job created
    assert again.status_code == 200, again.text
    assert again.json()["measurement"]["probe"]["job_id"] == probe.id, "a pending probe is reused"
    chart = client.post("/plan/chart.svg", json={"config": CONFIG})
    assert chart.status_code == 200 and "no times yet" in chart.text and f"probe job {probe.id}" in chart.text
    assert [job.id for job in probe_jobs()] == [probe.id] and broker_messages(PROBE_QUEUE) == []
    with session_scope() as session:
        assert session.scalars(select(Job).where(Job.kind == "train")).first() is None


def test_a_probe_that_failed_or_ran_elsewhere_is_not_repeated_at_once(client: Any) -> None:
    completed_job(3.0)  # GPU is a reported class, but only of another model config below
    other = {**CONFIG, "model": {**TINY_MODEL, "transformer_ff": 8}}
    first = client.post("/plan", json={"config": other, "device_class": GPU}).json()["measurement"]["probe"]
    with session_scope() as session:
        assert jobs.claim(session, first["job_id"], "w2", 60) == 1
        jobs.record_device(session, first["job_id"], 1, "cuda:Another GPU", 2**30)
        jobs.finish(session, first["job_id"], 1, "succeeded")
    elsewhere = client.post("/plan", json={"config": other, "device_class": GPU}).json()["measurement"]
    assert elsewhere["probe"]["status"] == "ran_elsewhere" and "cuda:Another GPU" in elsewhere["probe"]["message"]
    assert elsewhere["status"] == "none" and len(probe_jobs()) == 1

    failing = {**CONFIG, "model": {**TINY_MODEL, "transformer_ff": 12}}
    queued = client.post("/plan", json={"config": failing}).json()["measurement"]["probe"]
    with session_scope() as session:
        assert jobs.claim(session, queued["job_id"], "w2", 60) == 1
        jobs.finish(session, queued["job_id"], 1, "failed", error="CUDA out of memory")
    failed = client.post("/plan", json={"config": failing}).json()["measurement"]["probe"]
    assert failed["status"] == "failed" and "CUDA out of memory" in failed["message"] and len(probe_jobs()) == 2


def test_a_tenant_over_its_submission_limits_gets_its_plan_without_a_probe(
        client: Any, reconfigure: Callable[..., Settings]) -> None:
    reconfigure(VEERNET_ADMIN_KEY=new_admin_key(), SUBMIT_BURST=1, SUBMIT_RATE_PER_MINUTE=1)
    acme = bearer(make_key("acme"))
    assert client.post("/jobs", json={"config": CONFIG}, headers=acme).status_code == 202  # the burst's one token
    response = client.post("/plan", json={"config": {**CONFIG, "epochs": 3}}, headers=acme)
    assert response.status_code == 200, response.text
    probe = response.json()["measurement"]["probe"]
    assert probe["status"] == "not_queued" and probe["job_id"] is None and "SUBMIT_BURST" in probe["message"]
    assert probe_jobs() == []


@pytest.mark.parametrize(("body", "field"), [
    ({"config": {"epochs": 0}}, "config.epochs"),
    ({"config": CONFIG, "device_class": "cuda:Nobody's GPU"}, "device_class"),
    ({"config": CONFIG, "gpu_memory_gb": 500}, "gpu_memory_gb"),
    ({"config": CONFIG, "window_hours": -1}, "window_hours"),
    ({"config": CONFIG, "tiers": [{"name": "x", "eur_per_month": 0}]}, "tiers.0.eur_per_month"),
    ({"config": CONFIG, "utilisation": 1.5}, "utilisation"),
    ({"config": CONFIG, "utilisation": 5e-324}, "utilisation"),  # an infinite hourly rate: a fuzzer's 500
    ({"config": CONFIG, "start_at": 1.9}, "start_at"),  # a number is no date-time (the schema's: a string)
    ({"config": {**CONFIG, "data": {"kind": "manifest", "manifest_url": "gone"}}}, "config.data.manifest_url"),
])
def test_bad_requests_name_the_field(client: Any, body: dict[str, Any], field: str) -> None:
    response = client.post("/plan", json=body)
    assert response.status_code == 422, response.text
    assert field in [e["field"] for e in response.json()["detail"]]


def test_an_unknown_device_is_refused_with_the_known_classes_and_gpus(client: Any) -> None:
    completed_job(3.0)
    [error] = client.post("/plan", json={"config": CONFIG, "device_class": "cuda:Nobody's GPU"}).json()["detail"]
    assert GPU in error["message"] and "NVIDIA A100 80GB" in error["message"] and "run a job" in error["message"]


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


def test_a_gpu_nothing_measured_is_planned_from_the_table_as_a_labelled_estimate(client: Any) -> None:
    response = client.post("/plan", json={"config": CONFIG, "device_class": "A100 80GB", "probe": False})
    assert response.status_code == 200, response.text
    plan = response.json()
    flops = model_flops(TrainConfig.from_dict(CONFIG).model)
    throughput, estimate = plan["throughput"], plan["throughput"]["estimate"]
    assert plan["device_class"] == "NVIDIA A100 80GB" and throughput["source"] == "gpu_table_estimate"
    assert plan["measurement"]["status"] == "estimated" and "ESTIMATE" in plan["warnings"][0]
    assert (estimate["peak_tflops"], estimate["efficiency"], estimate["efficiency_assumed"]) == (
        312, ASSUMED_EFFICIENCY, True)
    assert throughput["train_px_per_s"] == pytest.approx(ASSUMED_EFFICIENCY * 312e12 / flops.train_per_px)
    assert any("assumed" in line for line in estimate["assumptions"])
    assert plan["memory"]["device_memory_mb"] == pytest.approx(80 * 1024)
    assert plan["time"]["images_per_s"] > 0 and plan["interruptions"]["finish_s"] < 3600

    sized = client.post("/plan", json={"config": CONFIG, "gpu_memory_gb": 24}).json()  # the request
    assert sized["device_class"] == "a GPU of 24 GiB, planned as the NVIDIA A10G"
    assert sized["throughput"]["estimate"]["gpu"] == "NVIDIA A10G" and sized["time"]["images_per_s"] > 0
    assert sized["measurement"]["probe"]["status"] == "pending", "no memory model anywhere: a worker measures one"
    off = client.post("/plan", json={"config": {**CONFIG, "amp": "off"}, "device_class": "L4"}).json()
    assert off["time"] is None and "amp is off" in off["measurement"]["message"]


def test_the_efficiency_measured_on_one_known_gpu_carries_to_another(client: Any) -> None:
    a10g = "cuda:NVIDIA A10G"
    completed_job(2.0, device=a10g)
    measured = client.post("/plan", json={"config": CONFIG, "device_class": a10g, "probe": False}).json()
    estimated = client.post("/plan", json={"config": CONFIG, "device_class": "H100 PCIe", "probe": False}).json()
    estimate = estimated["throughput"]["estimate"]
    assert estimate["efficiency_assumed"] is False and a10g in estimate["efficiency_source"]
    gpu = find_gpu(a10g)
    assert gpu is not None
    assert estimate["efficiency"] == pytest.approx(measured["throughput"]["train_px_per_s"]
                                                   * estimate["train_flops_per_px"] / (gpu.peak_tflops * 1e12))
    assert estimated["throughput"]["train_px_per_s"] == pytest.approx(
        measured["throughput"]["train_px_per_s"] * 756.5 / gpu.peak_tflops)
    assert estimated["throughput"]["startup_s"] == pytest.approx(measured["throughput"]["startup_s"])


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
    lay = layout(config, sizes, 0)  # no memory model recorded: no budget
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

    sized = client.post("/plan", json={"config": CONFIG, "gpu_memory_gb": 16})  # no 16 GiB class: the table's T4
    assert sized.status_code == 200, sized.text
    memory = sized.json()["memory"]
    assert (memory["measured_on"], memory["extrapolated"]) == (GPU, True)
    assert f"extrapolated from the measurement on {GPU}" in memory["source"] and "16 GiB" in memory["source"]
    assert sized.json()["throughput"]["estimate"]["gpu"] == "NVIDIA T4"
    assert sized.json()["measurement"]["probe"] is None, "a memory model exists: nothing to probe"
    unmeasured = client.post("/plan", json={"config": {**CONFIG, "model": {**TINY_MODEL, "transformer_ff": 8}},
                                            "device_class": GPU})
    assert unmeasured.status_code == 200, unmeasured.text
    plan = unmeasured.json()
    assert plan["time"] is None and plan["measurement"]["probe"]["status"] == "pending"
    assert [job.config["target_class"] for job in probe_jobs()] == [GPU]
    assert plan["memory"]["bytes_per_pixel"] is None and "none measured" in plan["memory"]["source"]


def test_a_manifest_that_lists_no_sizes_is_planned_from_a_bounded_sample_of_headers(client: Any,
                                                                                     service: Settings) -> None:
    from PIL import Image

    from api.plan_fleet import MANIFEST_HEADER_READS

    folder = Path(service.datasets_url) / "local" / "scans"
    folder.mkdir(parents=True)
    items = []
    for k in range(MANIFEST_HEADER_READS + 8):
        Image.new("L", (300 + 10 * k, 40)).save(folder / f"{k}.png")
        items.append({"image": f"{k}.png", "mask": f"{k}.mask.png"})  # no height/width: a header to read
    write_manifest(folder, items)
    labelled = {**CONFIG, "data": {"kind": "manifest", "manifest_url": "scans"}}
    response = client.post("/plan", json={"config": labelled, "device_class": "L4", "probe": False})
    assert response.status_code == 200, response.text
    assert f"8 images of the manifest list no size: they stand in with the sizes of {MANIFEST_HEADER_READS} image " \
           "headers read" in response.json()["warnings"][-1]
    assert response.json()["data"]["train_images"] + response.json()["data"]["val_images"] == len(items)
