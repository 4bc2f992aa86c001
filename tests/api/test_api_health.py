"""/healthz and the API's answers when a dependency is down: 503 with a message, never a 500."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from auth_testkit import cli_env, free_port, wait_live
from fastapi.testclient import TestClient
from sqlalchemy import text

from api import db
from api.settings import Settings


def test_livez_checks_nothing_but_the_process(client: TestClient) -> None:
    assert client.get("/livez").json() == {"status": "ok"}


def test_healthz_reports_each_dependency_ok(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "broker": "ok", "store": "ok"},
                               "errors": {}}


def test_healthz_on_the_real_stack_services(client: TestClient, reconfigure: Any, s3_endpoint: str,
                                            s3_bucket: str) -> None:
    reconfigure(BROKER_URL="redis://127.0.0.1:6379/15", CHECKPOINT_URL=f"s3://{s3_bucket}/x",
                S3_ENDPOINT_URL=s3_endpoint)
    body = client.get("/healthz").json()
    if body["errors"].get("broker", "").startswith("OperationalError"):
        pytest.skip(f"no Redis on 127.0.0.1:6379: {body['errors']['broker']}")
    assert body == {"status": "ok", "checks": {"database": "ok", "broker": "ok", "store": "ok"}, "errors": {}}


def test_healthz_is_503_naming_what_is_down(client: TestClient, reconfigure: Any, s3_endpoint: str,
                                            s3_bucket: str, closed_port: int) -> None:
    reconfigure(BROKER_URL=f"redis://127.0.0.1:{closed_port}/0", CHECKPOINT_URL="s3://no-such-bucket/x",
                S3_ENDPOINT_URL=s3_endpoint)
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "error"
    assert body["checks"] == {"database": "ok", "broker": "error", "store": "error"}
    assert "Connection refused" in body["errors"]["broker"]
    assert "no-such-bucket" in body["errors"]["store"]


@pytest.fixture
def database_down(service: Settings, reconfigure: Any, closed_port: int) -> None:
    reconfigure(DATABASE_URL=f"postgresql://postgres@127.0.0.1:{closed_port}/veernet")  # nothing listens


@pytest.mark.usefixtures("database_down")
@pytest.mark.parametrize(("method", "path", "body"), [
    ("GET", "/jobs", None), ("GET", "/jobs/1", None), ("POST", "/jobs", {"config": {}}),
    ("POST", "/jobs/1/cancel", None), ("GET", "/checkpoints", None), ("GET", "/checkpoints/1/download", None),
])
def test_every_route_answers_503_with_a_message_when_the_database_is_down(
        client: TestClient, method: str, path: str, body: Any) -> None:
    response = client.request(method, path, json=body)
    assert response.status_code == 503, response.text
    assert "database unavailable" in response.json()["detail"]
    assert response.headers["retry-after"] == "5"


@pytest.mark.usefixtures("database_down")
def test_healthz_reports_the_database_down(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"] == "error"
    assert "OperationalError" in response.json()["errors"]["database"]


@pytest.fixture
def empty_database(database_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new database of the dialect under test, with no schema at all."""
    if database_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    with request.getfixturevalue("postgres_database")() as url:
        yield url


def test_healthz_is_503_until_the_schema_is_at_head(client: TestClient, reconfigure: Any,
                                                    empty_database: str) -> None:
    head = db.code_revisions()[0]
    reconfigure(DATABASE_URL=empty_database)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"] == "error"
    assert response.json()["errors"]["database"] == (
        f"schema not at head (database at no schema, code at {head}): run veernet migrate")

    db.migrate(empty_database, "0002")  # an older version's schema
    assert client.get("/healthz").json()["errors"]["database"] == (
        f"schema not at head (database at 0002, code at {head}): run veernet migrate")

    db.migrate(empty_database)
    assert client.get("/healthz").status_code == 200
    assert client.get("/jobs").status_code == 200


def test_a_schema_newer_than_the_code_is_named_as_such(client: TestClient, reconfigure: Any,
                                                       empty_database: str) -> None:
    db.migrate(empty_database)
    with db.get_engine(empty_database).begin() as connection:  # as a newer version's migration would leave it
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    reconfigure(DATABASE_URL=empty_database)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["errors"]["database"].startswith(
        "schema not at head (database at 9999, which this code does not know;")


def test_the_embedded_default_migrates_itself_when_the_api_starts(tmp_path: Path) -> None:
    """`veernet api` on a fresh data dir, no DATABASE_URL and no `veernet migrate`: healthy, and jobs are served."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with (tmp_path / "api.log").open("w") as log:
        server = subprocess.Popen([sys.executable, "-m", "api.cli", "api", "--port", str(port), "--reaper"],
                                  env=cli_env(tmp_path), stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_live(base, server)
            assert httpx.get(f"{base}/healthz").json()["status"] == "ok"
            created = httpx.post(f"{base}/jobs", json={"config": {"epochs": 1, "data": {"dataset_size": 20}}})
            assert created.status_code == 202, created.text
            assert httpx.get(f"{base}/jobs/{created.json()['id']}").json()["status"] == "queued"
        finally:
            server.terminate()
            server.wait(timeout=30)


def test_an_api_on_a_configured_database_does_not_migrate_it_and_healthz_says_so(tmp_path: Path) -> None:
    """DATABASE_URL set: migrating is the operator's step (`veernet migrate`, compose's one-shot)."""
    database = tmp_path / "configured.db"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = cli_env(tmp_path, DATABASE_URL=f"sqlite:///{database}")
    with (tmp_path / "api.log").open("w") as log:
        server = subprocess.Popen([sys.executable, "-m", "api.cli", "api", "--port", str(port)], env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_live(base, server)
            response = httpx.get(f"{base}/healthz")
            assert response.status_code == 503
            assert response.json()["errors"]["database"].endswith("run veernet migrate")
        finally:
            server.terminate()
            server.wait(timeout=30)


def test_a_serving_process_freezes_its_start_up_heap() -> None:
    """The API's long-lived objects (torch's among them) are out of the collector's walks: no request
    waits behind a full collection of the start-up heap (a subprocess: a fresh interpreter, as uvicorn's)."""
    code = ("import gc\nfrom fastapi.testclient import TestClient\nfrom api.main import app\n"
            "before = len(gc.get_objects())\nwith TestClient(app):\n    frozen = gc.get_freeze_count()\n"
            "print(before, frozen)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout.split()
    before, frozen = int(out[0]), int(out[1])
    assert frozen >= 0.9 * before, f"{frozen} of {before} start-up objects frozen"
