"""ETA arithmetic, and the ETA the API shows for running and queued jobs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from api_testkit import SMALL_CONFIG
from fastapi.testclient import TestClient

from api import jobs
from api.db import session_scope
from api.eta import estimate_queue_start, eta_from_progress
from api.models import utcnow
from api.settings import Settings


def test_eta_is_remaining_steps_plus_validations_and_checkpoints_to_come() -> None:
    # 10 epochs of 100 steps, at step 250 (epochs 1-2 done): 750 steps, 8 epoch ends left.
    common: dict[str, Any] = dict(step_time_s=0.5, global_step=250, total_steps=1000, steps_per_epoch=100)
    assert eta_from_progress(**common) == 375.0
    assert eta_from_progress(**common, validation_s=10.0, checkpoint_s=2.0) == 375.0 + 8 * 10 + 8 * 2
    # validation every 3 epochs: after epochs 3, 6 and 9
    assert eta_from_progress(**common, validation_s=10.0, validate_every_epochs=3) == 375.0 + 30
    # plus a checkpoint every 300 steps: at 300, 600 and 900
    assert eta_from_progress(**common, checkpoint_s=2.0, checkpoint_every_steps=300) == 375.0 + (8 + 3) * 2


def test_an_epoch_whose_steps_are_done_still_has_its_validation_and_save_to_come() -> None:
    # 2 epochs of 10 steps, the first's last step done: until the job reports epoch 1, its end is ahead.
    common: dict[str, Any] = dict(step_time_s=1.0, global_step=10, total_steps=20, steps_per_epoch=10,
                                  validation_s=4.0, checkpoint_s=2.0)
    assert eta_from_progress(**common, epochs_ended=0) == 10.0 + 2 * (4.0 + 2.0)
    assert eta_from_progress(**common, epochs_ended=1) == 10.0 + 1 * (4.0 + 2.0)
    assert eta_from_progress(**common) == eta_from_progress(**common, epochs_ended=1)
    assert eta_from_progress(**{**common, "global_step": 20}, epochs_ended=1) == 4.0 + 2.0  # the run's last end


def test_eta_edges() -> None:
    assert eta_from_progress(step_time_s=None, global_step=5, total_steps=10) is None
    assert eta_from_progress(step_time_s=1.0, global_step=5, total_steps=None) is None
    assert eta_from_progress(step_time_s=1.0, global_step=None, total_steps=10) == 10.0
    assert eta_from_progress(step_time_s=1.0, global_step=12, total_steps=10, steps_per_epoch=5,
                        validation_s=3.0) == 0.0


@pytest.mark.parametrize(("running", "ahead", "workers", "expected"), [
    ([], [], 1, 0.0),  # an idle worker
    ([100.0], [], 1, 100.0),  # wait for the running job
    ([100.0], [50.0, 30.0], 1, 180.0),  # ... and the two queued ahead
    ([100.0, 20.0], [50.0], 2, 70.0),  # two workers: the second frees at 20, runs the 50 s job
    ([100.0], [50.0], 3, 0.0),  # a spare worker
    ([None], [10.0], 1, None),  # an unknown duration makes the start unknown
    ([10.0], [None], 1, None),
])
def test_queue_start_assigns_each_job_to_the_first_free_worker(running: list[Any], ahead: list[Any],
                                                               workers: int, expected: float | None) -> None:
    assert estimate_queue_start(running, ahead, workers) == expected


def test_record_progress_stores_eta_and_the_api_counts_it_down(client: TestClient, service: Settings) -> None:
    t0 = utcnow()
    with session_scope() as session:
        job_id = jobs.create_job(session, "train", SMALL_CONFIG | {"validate_every_epochs": 1}).id
        attempt = jobs.claim(session, job_id, "w1", 600, now=t0)
        assert attempt is not None
        assert jobs.record_progress(session, job_id, attempt, global_step=20, total_steps=100,
                                    steps_per_epoch=50, step_time_s=2.0, validation_time_s=30.0,
                                    checkpoint_time_s=5.0, now=t0)
    with session_scope() as session:
        job = jobs.get_job(session, job_id)
    assert job.eta_seconds == 80 * 2.0 + 2 * 30.0 + 2 * 5.0
    assert job.eta_at == t0 + timedelta(seconds=230)
    shown = client.get(f"/jobs/{job_id}").json()["eta"]["seconds"]
    assert 225 < shown <= 230  # counted down since the progress write


def test_a_queued_job_expects_to_start_after_the_running_job_and_those_ahead(client: TestClient) -> None:
    t0 = utcnow()
    with session_scope() as session:  # history: one finished job of 100 s
        done = jobs.create_job(session, "train", SMALL_CONFIG).id
        jobs.claim(session, done, "w1", 60, now=t0 - timedelta(seconds=200))
        jobs.finish(session, done, 1, "succeeded", now=t0 - timedelta(seconds=100))
    with session_scope() as session:
        running = jobs.create_job(session, "train", SMALL_CONFIG).id
        ahead = jobs.create_job(session, "train", SMALL_CONFIG).id
        mine = jobs.create_job(session, "train", SMALL_CONFIG).id
        jobs.claim(session, running, "w1", 600, now=t0)
        jobs.record_progress(session, running, 1, global_step=0, total_steps=10, step_time_s=4.0, now=t0)
    eta = client.get(f"/jobs/{mine}").json()["eta"]
    # running: 40 s left; ahead: a typical 100 s; mine: 100 s more
    assert eta["expected_start_seconds"] == pytest.approx(140.0, abs=2)
    assert eta["seconds"] == pytest.approx(240.0, abs=2)
    assert client.get(f"/jobs/{ahead}").json()["eta"]["expected_start_seconds"] == pytest.approx(40, abs=2)


def test_the_workers_of_a_queue_are_the_jobs_of_its_kind_running(client: TestClient) -> None:
    """No worker count to configure: while jobs wait, every worker of their queue runs one (a box of 1 to 8
    GPUs, or several boxes, alike); a segment job runs on another queue's worker and frees none of them."""
    t0 = utcnow()
    with session_scope() as session:  # history: one finished training job of 100 s
        done = jobs.create_job(session, "train", SMALL_CONFIG).id
        jobs.claim(session, done, "w1", 60, now=t0 - timedelta(seconds=200))
        jobs.finish(session, done, 1, "succeeded", now=t0 - timedelta(seconds=100))
    with session_scope() as session:
        running = [jobs.create_job(session, "train", SMALL_CONFIG).id for _ in range(3)]
        other_queue = jobs.create_job(session, "segment", {}).id
        ahead = jobs.create_job(session, "train", SMALL_CONFIG).id
        mine = jobs.create_job(session, "train", SMALL_CONFIG).id
        for n, job_id in enumerate(running):  # 30, 60 and 90 s left
            jobs.claim(session, job_id, f"box:gpu={n}", 600, now=t0)
            jobs.record_progress(session, job_id, 1, global_step=0, total_steps=10, step_time_s=3.0 * (n + 1), now=t0)
        jobs.claim(session, other_queue, "box:gpu=", 600, now=t0)
        jobs.record_progress(session, other_queue, 1, global_step=0, total_steps=1, step_time_s=5.0, now=t0)
    # ahead (a typical 100 s) takes the GPU that frees at 30 s; mine the next one, free at 60 s.
    assert client.get(f"/jobs/{ahead}").json()["eta"]["expected_start_seconds"] == pytest.approx(30, abs=2)
    eta = client.get(f"/jobs/{mine}").json()["eta"]
    assert (eta["expected_start_seconds"], eta["seconds"]) == (pytest.approx(60, abs=2), pytest.approx(160, abs=2))
