"""The dashboard's files are served without a key (they hold no data) under a policy that allows this origin
only; the JSON it reads, a job's whole timeline and its per-epoch history, is keyed and paged like the rest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api_testkit import SMALL_CONFIG, upload_checkpoint
from auth_testkit import bearer, make_key, new_admin_key
from fastapi.testclient import TestClient

from api import checkpoints, jobs
from api.db import session_scope
from api.settings import Settings


def test_the_page_and_its_files_need_no_key_even_with_keys_on(client: TestClient, service: Settings,
                                                               reconfigure: Callable[..., Settings]) -> None:
    reconfigure(VEERNET_ADMIN_KEY=new_admin_key())
    assert client.get("/jobs").status_code == 401
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "script-src 'self'" in policy and "unsafe" not in policy
    for name, media in (("app.js", "text/javascript"), ("charts.js", "text/javascript"), ("dashboard.css", "text/css")):
        assert f'src="dashboard/{name}"' in page.text or f'href="dashboard/{name}"' in page.text
        served = client.get(f"/dashboard/{name}")
        assert served.status_code == 200 and served.headers["content-type"].startswith(media), name
    assert "http" not in client.get("/dashboard/app.js").text.replace("http://www.w3.org/2000/svg", ""), \
        "the dashboard fetches nothing from another origin"


def test_only_the_dashboards_own_files_are_served(client: TestClient, service: Settings) -> None:
    for name in ("missing.js", "..%2Fmain.py", "%2E%2E%2Fsettings.py", "index.htm", "README"):
        response = client.get(f"/dashboard/{name}")
        assert response.status_code == 404, (name, response.text)
    assert client.get("/dashboard/../main.py").status_code == 404
    assert "/" not in client.get("/openapi.json").json()["paths"], "the HTML routes stay out of the API schema"


def test_events_are_the_whole_timeline_paged_and_history_has_one_record_per_committed_epoch(
        client: TestClient, service: Settings, store: Any) -> None:
    with session_scope() as session:
        job_id = jobs.create_job(session, "train", SMALL_CONFIG).id
    with session_scope() as session:
        attempt = jobs.claim(session, job_id, "w1", lease_s=60)
    assert attempt == 1
    for epoch in (1, 2):
        ref, _ = upload_checkpoint(store, job_id, attempt, epoch)
        record = {"epoch": epoch, "train_loss": 1.0 / epoch, **ref.metrics}
        with session_scope() as session:  # what worker.callbacks attaches at an epoch's end
            assert checkpoints.register_checkpoint(session, job_id, attempt, ref,
                                            event_data={"history": record, "upload_seconds": 0.5})
    with session_scope() as session:
        assert jobs.finish(session, job_id, attempt, "succeeded")

    everything = client.get(f"/jobs/{job_id}/events").json()
    assert [e["kind"] for e in everything["items"]] == ["queued", "claimed", "checkpoint", "checkpoint", "succeeded"]
    assert everything["total"] == 5
    page = client.get(f"/jobs/{job_id}/events", params={"limit": 2, "offset": 2}).json()
    assert [e["id"] for e in page["items"]] == [e["id"] for e in everything["items"][2:4]]

    history = client.get(f"/jobs/{job_id}/history").json()
    assert [(r["epoch"], r["train_loss"], r["attempt"]) for r in history] == [(1, 1.0, 1), (2, 0.5, 1)]
    assert history[1]["metrics"] == {"val_iou": 0.52}
    assert client.get("/jobs/987654/history").status_code == 404
    assert client.get("/jobs/987654/events").status_code == 404


def test_another_tenants_timeline_is_not_found(client: TestClient, service: Settings,
                                               reconfigure: Callable[..., Settings]) -> None:
    reconfigure(VEERNET_ADMIN_KEY=new_admin_key())
    owner, other = make_key("acme"), make_key("globex")
    job_id = client.post("/jobs", json={"config": SMALL_CONFIG}, headers=bearer(owner)).json()["id"]
    assert client.get(f"/jobs/{job_id}/events", headers=bearer(owner)).json()["total"] == 1
    for path in ("events", "history"):
        assert client.get(f"/jobs/{job_id}/{path}", headers=bearer(other)).status_code == 404
