"""/jobs over HTTP, on Postgres and SQLite, with a real embedded broker."""

from __future__ import annotations

from typing import Any

from api_testkit import SMALL_CONFIG
from fastapi.testclient import TestClient
from sqlalchemy import select

from api import checkpoints, jobs
from api.db import session_scope
from api.models import Job, JobEvent


def submit(client: TestClient, config: dict[str, Any] | None = None) -> dict[str, Any]:
    response = client.post("/jobs", json={"kind": "train", "config": config or SMALL_CONFIG})
    assert response.status_code == 202, response.text
    assert response.headers["Location"] == f"/jobs/{response.json()['id']}"
    return dict(response.json())


def test_submit_stores_the_validated_config_and_sends_the_id(client: TestClient,
                                                             broker_messages: Any) -> None:
    body = submit(client)
    assert body["status"] == "queued" and body["attempt"] == 0 and body["kind"] == "train"
    assert body["config"]["epochs"] == 2 and body["config"]["lr"] == 1e-3  # defaults filled in
    assert [e["kind"] for e in body["events"]] == ["queued"]
    assert broker_messages("train") == [("veernet.train", [body["id"]])]


def test_submit_with_the_broker_down_still_accepts_and_leaves_the_job_queued(
        client: TestClient, reconfigure: Any) -> None:
    reconfigure(BROKER_URL="redis://127.0.0.1:1/0")  # nothing listens on port 1: the send fails
    body = submit(client)
    assert client.get(f"/jobs/{body['id']}").json()["status"] == "queued"


def test_invalid_config_is_422_naming_each_bad_field(client: TestClient) -> None:
    response = client.post("/jobs", json={"config": {"epochs": 0, "lr": "fast", "bogus": 1,
                                                     "data": {"scale": 5}}})
    assert response.status_code == 422
    errors = {e["field"]: e["message"] for e in response.json()["detail"]}
    assert set(errors) == {"config.epochs", "config.lr", "config.bogus", "config.data.scale"}
    assert errors["config.epochs"] == "must be from 1 to 200 (MAX_EPOCHS), got 0"
    assert "unknown field" in errors["config.bogus"]
    with session_scope() as session:
        assert session.scalar(select(Job.id)) is None  # nothing was queued


def test_a_fine_tune_on_page_tracks_is_accepted_and_a_mismatched_one_named(client: TestClient) -> None:
    """init "bundled" with data.page_share: the job stores both; a network that is not the bundled one's,
    an unknown init and a share past 0.9 are 422s naming each field."""
    import json

    from veernet_core.config import BUNDLED_RECIPE

    recipe = json.loads(BUNDLED_RECIPE.read_text())
    config = {"init": "bundled", "model": recipe["model"], "epochs": 1, "effective_batch": 4,
              "data": {"classes": 2, "dataset_size": 16, "scale": 0.05, "page_share": 0.25}}
    body = submit(client, config)
    assert body["config"]["init"] == "bundled" and body["config"]["data"]["page_share"] == 0.25
    response = client.post("/jobs", json={"config": {**config, "model": {**recipe["model"], "widths": [8] * 6},
                                                     "data": {**config["data"], "page_share": 0.95}}})
    assert response.status_code == 422
    errors = {e["field"]: e["message"] for e in response.json()["detail"]}
    assert set(errors) == {"config.model.widths", "config.data.page_share"}
    assert "with init 'bundled'" in errors["config.model.widths"]
    response = client.post("/jobs", json={"config": {"init": "imagenet"}})
    assert response.status_code == 422
    assert {e["field"]: e["message"] for e in response.json()["detail"]} == {
        "config.init": "must be one of random, bundled, got 'imagenet'"}


def test_malformed_request_is_422_with_a_per_field_list(client: TestClient) -> None:
    response = client.post("/jobs", json={"kind": "paint", "config": [], "extra": 1})
    assert response.status_code == 422
    fields = {e["field"] for e in response.json()["detail"]}
    assert fields == {"kind", "config", "extra"}
    response = client.get("/jobs", params={"limit": 0, "status": "lost"})
    assert {e["field"] for e in response.json()["detail"]} == {"limit", "status"}


def test_list_filters_by_status_and_paginates_newest_first(client: TestClient) -> None:
    ids = [submit(client)["id"] for _ in range(5)]
    client.post(f"/jobs/{ids[1]}/cancel")
    page = client.get("/jobs", params={"status": "queued", "limit": 2, "offset": 1}).json()
    assert page["total"] == 4 and page["limit"] == 2 and page["offset"] == 1
    assert [j["id"] for j in page["items"]] == [ids[3], ids[2]]
    cancelled = client.get("/jobs", params={"status": "cancelled"}).json()
    assert [j["id"] for j in cancelled["items"]] == [ids[1]]
    assert client.get("/jobs").json()["total"] == 5


def test_get_shows_attempt_progress_eta_checkpoint_and_events(client: TestClient, store: Any) -> None:
    from api_testkit import upload_checkpoint

    job_id = submit(client)["id"]
    with session_scope() as session:
        attempt = jobs.claim(session, job_id, "gpu-box-1", lease_s=60)
    assert attempt == 1
    ref, _ = upload_checkpoint(store, job_id, attempt, epoch=1)
    with session_scope() as session:
        assert jobs.record_progress(session, job_id, attempt, epoch=1, step=0, steps_per_epoch=4,
                                    total_steps=8, global_step=4, step_time_s=0.5, images_per_s=4.0,
                                    loss=0.3, metrics={"val_iou": 0.4})
        assert checkpoints.register_checkpoint(session, job_id, attempt, ref)
    body = client.get(f"/jobs/{job_id}").json()
    assert body["status"] == "running" and body["attempt"] == 1 and body["lease_owner"] == "gpu-box-1"
    assert body["progress"]["fraction"] == 0.5 and body["progress"]["loss"] == 0.3
    assert body["metrics"] == {"val_iou": 0.4}
    assert 0 < body["eta"]["seconds"] <= 2.0 and body["eta"]["at"] is not None
    assert body["last_checkpoint"]["storage_key"] == ref.key
    assert body["last_checkpoint"]["download_url"] == f"/checkpoints/{body['last_checkpoint']['id']}/download"
    assert [e["kind"] for e in body["events"]] == ["queued", "claimed", "checkpoint"]
    assert body["recoveries"] == 0 and body["recovery_seconds"] == 0


def test_unknown_job_is_404_everywhere(client: TestClient) -> None:
    routes = [("GET", "/jobs/999"), ("POST", "/jobs/999/cancel"), ("GET", "/jobs/999/checkpoints")]
    for method, path in routes:
        response = client.request(method, path)
        assert response.status_code == 404, path
        assert "no job 999" in response.json()["detail"]


def test_cancel_queued_is_immediate_running_is_requested_finished_is_409(client: TestClient) -> None:
    queued, running = submit(client)["id"], submit(client)["id"]
    response = client.post(f"/jobs/{queued}/cancel")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"

    with session_scope() as session:
        attempt = jobs.claim(session, running, "w1", lease_s=60)
    assert attempt is not None
    response = client.post(f"/jobs/{running}/cancel")
    assert response.status_code == 202
    assert response.json()["status"] == "running" and response.json()["cancel_requested"] is True
    with session_scope() as session:
        assert jobs.is_cancel_requested(session, running)
        assert jobs.finish(session, running, attempt, "cancelled")

    for job_id in (queued, running):
        response = client.post(f"/jobs/{job_id}/cancel")
        assert response.status_code == 409
        assert "already cancelled" in response.json()["detail"]
    with session_scope() as session:
        kinds = session.scalars(select(JobEvent.kind).where(JobEvent.job_id == running).order_by(JobEvent.id))
        assert list(kinds) == ["queued", "claimed", "cancel_requested", "cancelled"]


def test_openapi_documents_every_route(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/jobs", "/jobs/{job_id}", "/jobs/{job_id}/cancel", "/jobs/{job_id}/checkpoints", "/checkpoints",
            "/checkpoints/{checkpoint_id}", "/checkpoints/{checkpoint_id}/download", "/healthz"} <= set(paths)
    assert client.get("/docs").status_code == 200
