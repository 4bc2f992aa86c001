"""/healthz and the API's answers when a dependency is down: 503 with a message, never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

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
