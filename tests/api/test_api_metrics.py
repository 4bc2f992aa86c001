"""GET /metrics, read with prometheus-client's own parser: the figures move when real jobs run.

Jobs are run by the functions a Celery worker calls (worker.runner.run_training_job,
worker.segment_runner.run_segment_job) and the reaper's (api.jobs.reap_expired), on both databases:
nothing is set by hand, so each figure is what the service's own writes leave behind.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable
from datetime import timedelta

import numpy as np
import pytest
from auth_testkit import bearer, make_key, new_admin_key
from fastapi.testclient import TestClient
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families

from api import jobs
from api.db import session_scope
from api.models import utcnow
from api.settings import Settings
from veernet_core.synth import generate
from worker.runner import run_training_job
from worker.segment_runner import run_segment_job

# VeerNet at a fraction of its width on small synthetic logs: two epochs in seconds on a CPU.
TINY = {"model": {"widths": [8, 8, 16, 16, 32, 32], "transformer_heads": 2, "transformer_ff": 64},
        "data": {"dataset_size": 16, "scale": 0.08, "seed": 3}, "epochs": 2, "effective_batch": 4,
        "warmup_steps": 1, "device": "cpu", "pixel_budget": 200_000}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: TestClient, **headers: str) -> Samples:
    """Every sample of GET /metrics by (name, labels), as Prometheus' own parser reads the page."""
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def test_a_training_job_moves_jobs_claims_and_checkpoint_uploads(client: TestClient, service: Settings) -> None:
    before = scrape(client)
    job_id = client.post("/jobs", json={"kind": "train", "config": TINY}).json()["id"]
    queued = scrape(client)
    assert moved(before, queued, "veernet_queue_depth", queue="train") == 1
    assert moved(before, queued, "veernet_jobs", kind="train", status="queued") == 1

    assert run_training_job(job_id) == "succeeded"
    after = scrape(client)
    checkpoints = client.get(f"/jobs/{job_id}/checkpoints").json()
    assert [c["epoch"] for c in checkpoints] == [1, 2]
    assert moved(before, after, "veernet_queue_depth", queue="train") == 0
    assert moved(before, after, "veernet_jobs", kind="train", status="succeeded") == 1
    assert moved(before, after, "veernet_job_claims_total", kind="train") == 1
    assert moved(before, after, "veernet_checkpoint_uploads_total") == 2
    assert moved(before, after, "veernet_checkpoint_upload_bytes_total") == sum(c["size"] for c in checkpoints)
    assert moved(before, after, "veernet_checkpoint_upload_seconds_count") == 2
    assert moved(before, after, "veernet_checkpoint_upload_seconds_sum") > 0
    assert value(after, "veernet_checkpoint_upload_seconds_bucket", le="+Inf") == value(
        after, "veernet_checkpoint_upload_seconds_count")
    assert moved(before, after, "veernet_job_recoveries_total", kind="train") == 0

    history = client.get(f"/jobs/{job_id}/history").json()  # what the job page plots: one record per epoch
    assert [r["epoch"] for r in history] == [1, 2] and {r["attempt"] for r in history} == {1}
    assert all(math.isfinite(r["train_loss"]) and 0 <= r["metrics"]["iou_fg_mean"] <= 1 for r in history)
    assert history[-1]["metrics"] == client.get(f"/checkpoints/{checkpoints[-1]['id']}").json()["metrics"]


def test_a_lost_lease_counts_a_recovery_and_the_zombies_write_a_refusal(client: TestClient,
                                                                         service: Settings) -> None:
    before = scrape(client)
    with session_scope() as session:
        job_id = jobs.create_job(session, "train", TINY).id
    with session_scope() as session:
        zombie = jobs.claim(session, job_id, "box-a", lease_s=1)
    with session_scope() as session:  # the reaper's pass, once the lease has run out
        assert jobs.reap_expired(session, utcnow() + timedelta(seconds=5)) == [job_id]
    with session_scope() as session:
        assert jobs.claim(session, job_id, "box-b", lease_s=60) == 2
    with session_scope() as session:  # box-a wakes up and reports progress: the fence refuses it
        assert zombie is not None and not jobs.record_progress(session, job_id, zombie, global_step=3)
    with session_scope() as session:
        assert jobs.record_progress(session, job_id, 2, global_step=1, step_time_s=0.25, images_per_s=16.0)
    after = scrape(client)
    assert moved(before, after, "veernet_job_recoveries_total", kind="train") == 1
    assert moved(before, after, "veernet_job_stalls_total", kind="train") == 0
    assert moved(before, after, "veernet_zombie_writes_refused_total", kind="train") == 1
    assert moved(before, after, "veernet_job_claims_total", kind="train") == 2
    assert value(after, "veernet_train_step_seconds", job_id=str(job_id)) == 0.25
    assert value(after, "veernet_train_images_per_second", job_id=str(job_id)) == 16.0


def test_a_stalled_attempt_counts_a_stall_and_a_recovery(client: TestClient, service: Settings) -> None:
    before = scrape(client)
    with session_scope() as session:
        job_id = jobs.create_job(session, "train", TINY).id
    with session_scope() as session:
        attempt = jobs.claim(session, job_id, "box-a", lease_s=60)
    with session_scope() as session:
        assert attempt is not None and jobs.give_up_stalled(session, job_id, attempt, "no progress") == "queued"
    after = scrape(client)
    assert moved(before, after, "veernet_job_stalls_total", kind="train") == 1
    assert moved(before, after, "veernet_job_recoveries_total", kind="train") == 1
    assert moved(before, after, "veernet_job_stalls_total", kind="segment") == 0


def test_a_segment_job_is_counted_in_the_latency_histogram(client: TestClient, service: Settings) -> None:
    before = scrape(client)
    log = generate(seed=7, index=0, scale=0.1, classes=3)
    scan = io.BytesIO()
    Image.fromarray(log.image).save(scan, format="PNG")
    response = client.post("/segment", files={"file": ("log.png", scan.getvalue(), "image/png")},
                           data={"options": json.dumps({"calibration": log.calibration()})})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    assert run_segment_job(job_id) == "succeeded"
    job = client.get(f"/jobs/{job_id}").json()
    took = (np.datetime64(job["finished_at"][:26]) - np.datetime64(job["created_at"][:26])) / np.timedelta64(1, "s")
    after = scrape(client)
    assert moved(before, after, "veernet_segment_latency_seconds_count") == 1
    assert moved(before, after, "veernet_segment_latency_seconds_sum") == pytest.approx(took, abs=0.01)
    bounds = [le for (name, labels), _ in after.items() if name == "veernet_segment_latency_seconds_bucket"
              for key, le in labels if key == "le"]
    for le in bounds:  # cumulative: the job falls in every bucket from the first bound above its latency
        if le != "+Inf" and abs(took - float(le)) <= 0.01:
            continue  # at a bound, to the precision the sum is checked to: either side is right
        expected = 1 if le == "+Inf" or took <= float(le) else 0
        assert moved(before, after, "veernet_segment_latency_seconds_bucket", le=le) == expected, (le, took)
    assert moved(before, after, "veernet_job_claims_total", kind="segment") == 1
    assert moved(before, after, "veernet_jobs", kind="segment", status="succeeded") == 1


def test_with_keys_on_only_the_admin_key_may_scrape(client: TestClient, service: Settings,
                                                    reconfigure: Callable[..., Settings]) -> None:
    assert scrape(client), "keys off (the embedded default, loopback only): open like the rest of the API"
    admin = new_admin_key()
    reconfigure(VEERNET_ADMIN_KEY=admin)
    tenant = make_key("acme")
    no_key = client.get("/metrics")
    assert no_key.status_code == 401 and no_key.headers["www-authenticate"].startswith("Bearer")
    refused = client.get("/metrics", headers=bearer(tenant))
    assert refused.status_code == 403 and "admin key" in refused.json()["detail"]
    assert value(scrape(client, **bearer(admin)), "veernet_queue_depth", queue="train") == 0


def test_a_database_that_is_down_is_a_503_not_a_500(client: TestClient, service: Settings, closed_port: int,
                                                   reconfigure: Callable[..., Settings]) -> None:
    url = service.database_url
    down = (url.replace("127.0.0.1:5432", f"127.0.0.1:{closed_port}") if url.startswith("postgresql")
            else "sqlite:////nonexistent-dir/veernet.db")
    reconfigure(DATABASE_URL=down)
    response = client.get("/metrics")
    assert response.status_code == 503, response.text
    assert "database unavailable" in response.json()["detail"]


