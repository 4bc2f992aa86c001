"""Limits: body size (413), training config bounds (422), queued jobs per tenant and submission rate (429),
short-lived presigned URLs, and storage keys built from server-side ids only."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from api_testkit import SMALL_CONFIG
from auth_testkit import (
    CALIBRATION,
    bearer,
    build_world,
    cli_env,
    free_port,
    make_key,
    new_admin_key,
    png,
    segment_form,
    wait_live,
)
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from api import jobs
from api.auth import Principal
from api.db import session_scope
from api.limits import LimitExceeded, SubmissionLimiter, TokenBucket
from api.models import Job
from api.settings import Settings, get_settings
from api.storage import make_store


def job_count() -> int:
    with session_scope() as session:
        return int(session.scalar(select(func.count()).select_from(Job)) or 0)


@pytest.fixture
def keys_on(service: Settings, reconfigure: Callable[..., Settings]) -> Callable[..., str]:
    """Turn keys on with extra settings; returns the admin key."""
    admin = new_admin_key()

    def apply(**env: object) -> str:
        reconfigure(VEERNET_ADMIN_KEY=admin, **env)
        return admin

    return apply


# ---- request body size --------------------------------------------------------------------------------


def test_a_body_over_max_request_bytes_is_413_from_its_content_length(client: TestClient,
                                                                      reconfigure: Callable[..., Settings]) -> None:
    reconfigure(MAX_REQUEST_BYTES=2048)
    config = {**SMALL_CONFIG, "data": {**SMALL_CONFIG["data"], "manifest_url": "x" * 4000}}
    response = client.post("/jobs", json={"config": config})
    assert response.status_code == 413
    detail = response.json()["detail"]
    assert detail.startswith("the request body is ")
    assert "the limit for POST /jobs is 2048 bytes (MAX_REQUEST_BYTES)" in detail
    assert job_count() == 0
    assert client.post("/jobs", json={"config": SMALL_CONFIG}).status_code == 202, "under the limit: accepted"


def test_a_body_streamed_without_content_length_is_counted(client: TestClient,
                                                           reconfigure: Callable[..., Settings]) -> None:
    reconfigure(MAX_REQUEST_BYTES=2048)
    chunks = (b'{"config": {"epochs": 2' + b" " * 1000, b" " * 1000, b" " * 1000 + b"}}")
    response = client.post("/jobs", content=iter(chunks), headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert "more than 2048 bytes" in response.json()["detail"]
    assert job_count() == 0


def test_an_upload_is_bounded_by_max_upload_bytes_plus_the_form(client: TestClient,
                                                                 reconfigure: Callable[..., Settings]) -> None:
    reconfigure(MAX_UPLOAD_BYTES=1024, MAX_REQUEST_BYTES=1024)
    big = b"\0" * (1024 + 1024 * 1024 + 1)
    response = client.post("/segment", files={"file": ("scan.png", big, "image/png")},
                           data={"options": "{}"})
    assert response.status_code == 413 and "MAX_UPLOAD_BYTES plus 1 MiB" in response.json()["detail"]
    noisy = png(noise=True)  # ~20 kB: over MAX_REQUEST_BYTES, but an upload has its own limit
    small = client.post("/segment", files={"file": ("scan.png", noisy, "image/png")},
                        data={"options": json.dumps({"calibration": CALIBRATION})})
    assert small.status_code == 413 and "1024 bytes (MAX_UPLOAD_BYTES)" in small.json()["detail"][0]["message"]


@pytest.fixture(scope="module")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`veernet api` on loopback with MAX_REQUEST_BYTES=2048: a real HTTP server reading a real socket."""
    tmp = tmp_path_factory.mktemp("limits")
    port = free_port()
    env = cli_env(tmp, MAX_REQUEST_BYTES="2048", DATABASE_URL=f"sqlite:///{tmp / 'veernet.db'}")
    subprocess.run([sys.executable, "-m", "api.cli", "migrate"], env=env, check=True, capture_output=True)
    server = subprocess.Popen([sys.executable, "-m", "api.cli", "api", "--port", str(port), "--loglevel", "warning"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_live(f"http://127.0.0.1:{port}", server)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_real_server_cuts_a_chunked_body_at_the_limit(real_server: str) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"config": {"epochs": 2'
        for _ in range(3):
            yield b" " * 1000
        yield b"}}"

    response = httpx.post(f"{real_server}/jobs", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413, response.text
    assert "more than 2048 bytes" in response.json()["detail"]
    declared = httpx.post(f"{real_server}/jobs", content=b" " * 3000, headers={"Content-Type": "application/json"})
    assert declared.status_code == 413 and "is 3000 bytes" in declared.json()["detail"]
    assert httpx.post(f"{real_server}/jobs", json={"config": SMALL_CONFIG}).status_code == 202


# ---- training config bounds -----------------------------------------------------------------------------


def test_config_bounds_are_422_naming_each_field_and_its_limit(client: TestClient,
                                                               reconfigure: Callable[..., Settings]) -> None:
    too_long = {**SMALL_CONFIG, "epochs": 201}
    response = client.post("/jobs", json={"config": too_long})
    assert response.status_code == 422
    assert response.json()["detail"] == [
        {"field": "config.epochs", "message": "must be from 1 to 200 (MAX_EPOCHS), got 201"}]
    reconfigure(MAX_EPOCHS=10, MAX_DATASET_SIZE=1000, MAX_SCALE=0.5)
    big = {"epochs": 11, "data": {"dataset_size": 1001, "scale": 0.6}}
    errors = {e["field"]: e["message"] for e in client.post("/jobs", json={"config": big}).json()["detail"]}
    assert errors == {"config.epochs": "must be from 1 to 10 (MAX_EPOCHS), got 11",
                      "config.data.dataset_size": "must be from 2 to 1000 (MAX_DATASET_SIZE), got 1001",
                      "config.data.scale": "must be from 0.01 to 0.5 (MAX_SCALE), got 0.6"}
    assert job_count() == 0
    at_bounds = {"epochs": 10, "data": {"dataset_size": 1000, "scale": 0.5}}
    assert client.post("/jobs", json={"config": at_bounds}).status_code == 202


@pytest.mark.parametrize("epochs", [-1, 0, 201, 500, 1001])
def test_both_ends_of_a_bounded_field_name_one_range(client: TestClient, epochs: int) -> None:
    """Below the core's minimum, above the service's maximum, above the core's own: one message, one range."""
    response = client.post("/jobs", json={"config": {**SMALL_CONFIG, "epochs": epochs}})
    assert response.status_code == 422
    assert response.json()["detail"] == [
        {"field": "config.epochs", "message": f"must be from 1 to 200 (MAX_EPOCHS), got {epochs}"}]


def test_a_service_maximum_above_the_core_s_own_leaves_the_core_s_range(
        client: TestClient, reconfigure: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch) -> None:
    from api.main import app

    reconfigure(MAX_EPOCHS=5000)  # the core trains at most 1000 epochs whatever the service allows
    response = client.post("/jobs", json={"config": {**SMALL_CONFIG, "epochs": 1001}})
    assert response.json()["detail"] == [{"field": "config.epochs", "message": "must be from 1 to 1000, got 1001"}]
    monkeypatch.setattr(app, "openapi_schema", None)  # built once per process: build it for these settings
    schema = client.get("/openapi.json").json()["components"]["schemas"]["JobCreate"]["properties"]["config"]
    assert (schema["properties"]["epochs"]["minimum"], schema["properties"]["epochs"]["maximum"]) == (1, 1000)


def test_an_unknown_query_parameter_is_422_naming_it(client: TestClient) -> None:
    """A typo must not pass unnoticed: ?stauts=queued would otherwise list every job."""
    response = client.get("/jobs", params={"stauts": "queued"})
    assert response.status_code == 422
    assert response.json()["detail"] == [{"field": "stauts",
                                          "message": "unknown query parameter; allowed: limit, offset, status"}]
    assert client.get("/livez", params={"x": 1}).status_code == 422


def test_a_wrong_method_is_405_allowing_every_method_of_the_path(client: TestClient) -> None:
    """Found by the schemathesis run: Starlette listed only the first matching route's methods."""
    response = client.request("DELETE", "/jobs")
    assert response.status_code == 405 and response.headers["allow"] == "GET, HEAD, POST"
    assert client.request("PUT", "/jobs/1/cancel").headers["allow"] == "POST"


@pytest.mark.parametrize("path", ["/jobs/0", "/jobs/2147483648", "/checkpoints/99999999999", "/jobs/1/result.las"])
def test_ids_outside_the_database_range_are_422_not_a_database_error(client: TestClient, path: str) -> None:
    """Found by the schemathesis run: an id past int4 reached Postgres and came back as a 503."""
    expected = 404 if path.endswith(".las") else 422
    assert client.get(path).status_code == expected
    model = {"calibration": CALIBRATION, "model": {"job_id": 2**40}}
    assert client.post("/segment", **segment_form(model)).status_code == 404


# ---- queued jobs per tenant -------------------------------------------------------------------------------


def test_a_tenant_over_its_queued_jobs_gets_429_and_others_do_not(client: TestClient,
                                                                  keys_on: Callable[..., str]) -> None:
    admin = keys_on(MAX_QUEUED_JOBS_PER_TENANT=2)
    acme, globex = bearer(make_key("acme")), bearer(make_key("globex"))
    ids = [client.post("/jobs", json={"config": SMALL_CONFIG}, headers=acme).json()["id"] for _ in range(2)]
    response = client.post("/jobs", json={"config": SMALL_CONFIG}, headers=acme)
    assert response.status_code == 429
    assert response.json()["detail"].startswith("tenant 'acme' already has 2 queued jobs")
    assert "MAX_QUEUED_JOBS_PER_TENANT=2" in response.json()["detail"]
    assert client.post("/segment", **segment_form(), headers=acme).status_code == 429, "segment jobs queue too"
    assert client.post("/jobs", json={"config": SMALL_CONFIG}, headers=globex).status_code == 202
    assert client.post("/jobs", json={"config": SMALL_CONFIG}, headers=bearer(admin)).status_code == 202
    client.post(f"/jobs/{ids[0]}/cancel", headers=acme)
    with session_scope() as session:
        assert jobs.claim(session, ids[1], "w1", lease_s=60) == 1  # a running job is not queued
    assert client.post("/jobs", json={"config": SMALL_CONFIG}, headers=acme).status_code == 202


def test_with_keys_off_the_local_user_has_no_queue_cap_or_rate(client: TestClient,
                                                                reconfigure: Callable[..., Settings]) -> None:
    reconfigure(MAX_QUEUED_JOBS_PER_TENANT=1, SUBMIT_BURST=1, SUBMIT_RATE_PER_MINUTE=1)
    assert [client.post("/jobs", json={"config": SMALL_CONFIG}).status_code for _ in range(3)] == [202] * 3


# ---- submission rate per key ---------------------------------------------------------------------------


def test_a_key_over_its_submission_rate_gets_429_with_retry_after(client: TestClient,
                                                                  keys_on: Callable[..., str]) -> None:
    admin = keys_on(SUBMIT_BURST=2, SUBMIT_RATE_PER_MINUTE=60)
    first, second = bearer(make_key("acme")), bearer(make_key("acme"))
    statuses = [client.post("/jobs", json={"config": SMALL_CONFIG}, headers=first).status_code for _ in range(2)]
    assert statuses == [202, 202]
    response = client.post("/jobs", json={"config": SMALL_CONFIG}, headers=first)
    assert response.status_code == 429 and response.headers["retry-after"] == "1"
    assert "at most 2 at once, then 60 a minute" in response.json()["detail"]
    assert client.post("/segment", **segment_form(), headers=first).status_code == 429, "one bucket per key"
    assert client.post("/jobs", json={"config": SMALL_CONFIG}, headers=second).status_code == 202
    assert [client.post("/jobs", json={"config": SMALL_CONFIG}, headers=bearer(admin)).status_code
            for _ in range(4)] == [202] * 4, "the admin is not rate-limited"
    time.sleep(1.05)  # one token back at 60 a minute
    assert client.post("/jobs", json={"config": SMALL_CONFIG}, headers=first).status_code == 202


def test_the_token_bucket_refills_at_the_rate_up_to_the_burst() -> None:
    limits = Settings(submit_burst=3, submit_rate_per_minute=6)  # a token every 10 s
    limiter, key = SubmissionLimiter(), Principal("acme", key_id=1)
    for _ in range(3):
        limiter.check(key, limits, now=0.0)
    with pytest.raises(LimitExceeded) as refused:
        limiter.check(key, limits, now=0.0)
    assert (refused.value.status, refused.value.retry_after_s) == (429, 10)
    with pytest.raises(LimitExceeded) as refused:
        limiter.check(key, limits, now=4.0)
    assert refused.value.retry_after_s == 6
    limiter.check(key, limits, now=10.0)
    for _ in range(3):  # a long idle refills to the burst, no more
        limiter.check(key, limits, now=10_000.0)
    with pytest.raises(LimitExceeded):
        limiter.check(key, limits, now=10_000.0)


@settings(max_examples=200, deadline=None)
@given(burst=st.integers(1, 20), per_minute=st.floats(1, 600),
       gaps=st.lists(st.floats(0, 30, allow_nan=False), min_size=1, max_size=200))
def test_no_key_ever_gets_more_than_the_burst_plus_the_rate(burst: int, per_minute: float, gaps: list[float]) -> None:
    """Over any window, accepted submissions <= burst + rate x elapsed; and the wait a refusal names is enough."""
    bucket = TokenBucket(capacity=burst, rate_per_s=per_minute / 60, tokens=burst, updated=0.0)
    now, accepted = 0.0, []
    for gap in gaps:
        now += gap
        wait_s = bucket.take(now)
        if wait_s == 0:
            accepted.append(now)
        else:
            assert replace(bucket).take(now + wait_s + 1e-9) == 0, "accepted after waiting as told"
    for i, start in enumerate(accepted):
        for j in range(i, len(accepted)):
            assert j - i + 1 <= burst + (accepted[j] - start) * per_minute / 60 + 1e-6


# ---- storage -----------------------------------------------------------------------------------------------


def test_a_presigned_download_expires_within_presign_seconds(client: TestClient, reconfigure: Callable[..., Settings],
                                                             s3_endpoint: str, s3_bucket: str) -> None:
    settings_ = reconfigure(CHECKPOINT_URL=f"s3://{s3_bucket}/runs", S3_ENDPOINT_URL=s3_endpoint, S3_PRESIGN="true",
                            PRESIGN_SECONDS=90)
    world = build_world(make_store(settings_), "local")
    signed_at = datetime.now(UTC)
    response = client.get(f"/checkpoints/{world.checkpoint}/download", follow_redirects=False)
    assert response.status_code == 307
    query = parse_qs(urlsplit(response.headers["location"]).query)
    expires_s = int(query["X-Amz-Expires"][0])
    assert 0 < expires_s <= get_settings().presign_seconds == 90
    issued = datetime.strptime(query["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    assert abs((issued - signed_at).total_seconds()) < 60, "signed now, so it lapses PRESIGN_SECONDS from now"
    assert httpx.get(response.headers["location"]).content == world.checkpoint_data


def test_storage_keys_come_from_server_ids_never_from_user_strings(client: TestClient, store: Any,
                                                                   service: Settings) -> None:
    hostile = "../../../etc/passwd"
    options = json.dumps({"calibration": CALIBRATION, "well": "../../x/%2e%2e/y"})
    response = client.post("/segment", files={"file": (hostile, png(), "image/png")}, data={"options": options})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    root = Path(service.checkpoint_url)
    assert [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()] == [f"segments/{job_id}/input"]


def _manifest_job(client: TestClient, name: str, headers: dict[str, str] | None = None) -> httpx.Response:
    config = {**SMALL_CONFIG, "data": {**SMALL_CONFIG["data"], "kind": "manifest", "manifest_url": name}}
    return client.post("/jobs", json={"config": config}, headers=headers or {})


@pytest.mark.parametrize("name", ["/etc", "../globex/scans", "s3://another-bucket/prefix", "a/b", "..", ".x",
                                  "file:///tmp/x", ""])
def test_a_dataset_is_a_name_never_a_path_or_url(client: TestClient, name: str) -> None:
    response = _manifest_job(client, name)
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == [{"field": "config.data.manifest_url", "message": ANY_MESSAGE}]
    assert job_count() == 0


class _AnyMessage(str):
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and ("name a dataset of yours" in other or "is required" in other)

    __hash__ = str.__hash__


ANY_MESSAGE = _AnyMessage()


def test_each_tenant_reads_datasets_only_from_its_own_folder(client: TestClient, keys_on: Callable[..., str],
                                                             reconfigure: Callable[..., Settings]) -> None:
    admin = keys_on(DATASETS_URL="s3://veernet-data/datasets/")
    acme, globex = bearer(make_key("acme")), bearer(make_key("globex"))
    urls = []
    for headers in (acme, globex):
        response = _manifest_job(client, "scans-2024", headers)
        assert response.status_code == 202, response.text
        urls.append(response.json()["config"]["data"]["manifest_url"])
    assert urls == ["s3://veernet-data/datasets/acme/scans-2024", "s3://veernet-data/datasets/globex/scans-2024"]
    reconfigure(VEERNET_ADMIN_KEY=admin, DATASETS_URL="/srv/datasets")
    response = _manifest_job(client, "scans-2024", acme)
    assert response.json()["config"]["data"]["manifest_url"] == "/srv/datasets/acme/scans-2024"


def test_zero_transformer_heads_is_a_422_not_a_500(client: TestClient) -> None:
    """Found by the schemathesis run: the divisibility rule divided by zero."""
    response = client.post("/jobs", json={"config": {"model": {"transformer_heads": 0}}})
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["detail"]] == ["config.model.transformer_heads"]
