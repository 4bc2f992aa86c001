"""API keys and tenancy: the matrix of every endpoint against every kind of caller, the keys-off
default, `veernet keys`, and the refusal to serve without keys beyond localhost."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_testkit import SMALL_CONFIG
from auth_testkit import (
    CALIBRATION,
    World,
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
from sqlalchemy import select
from typer.testing import CliRunner

from api import auth, jobs
from api.auth import is_loopback
from api.cli.main import app as cli_app
from api.db import make_engine, migrate, session_scope
from api.main import app
from api.models import ApiKey, Job
from api.settings import Settings

OWNER, OTHER = "acme", "globex"
MISSING = 987654


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # {train}, {segment}, {queued}, {checkpoint}: the owner's ids
    kind: str  # owned: another tenant gets 404; listing; submit; segment (names the owner's model); open;
    # admin: figures across tenants, a tenant's key gets 403; plan and analyse: no tenant's data, any key
    ok: int = 200

    def request(self, world: World, **ids: int) -> dict[str, Any]:
        values = {"train": world.train_job, "segment": world.segment_job, "queued": world.queued[0],
                  "checkpoint": world.checkpoint, **ids}
        kwargs: dict[str, Any] = {"method": self.method, "url": self.path.format(**values)}
        if self.kind == "submit":
            kwargs["json"] = {"kind": "train", "config": SMALL_CONFIG}
        if self.kind == "plan":
            kwargs["json"] = {"config": PLAN_CONFIG, "interruptions": 1, "device_class": "L4", "probe": False}
        if self.kind == "segment":
            kwargs.update(segment_form({"calibration": CALIBRATION, "model": {"checkpoint_id": values["checkpoint"]}}))
        if self.kind == "analyse":
            kwargs["files"] = {"file": ("page.png", png(120, 200), "image/png")}
        return kwargs

ENDPOINTS = {
    "POST /jobs": Endpoint("POST", "/jobs", "submit", 202),
    "GET /jobs": Endpoint("GET", "/jobs", "listing"),
    "GET /jobs/{job_id}": Endpoint("GET", "/jobs/{train}", "owned"),
    "POST /jobs/{job_id}/cancel": Endpoint("POST", "/jobs/{queued}/cancel", "owned"),
    "GET /jobs/{job_id}/checkpoints": Endpoint("GET", "/jobs/{train}/checkpoints", "owned"),
    "GET /jobs/{job_id}/events": Endpoint("GET", "/jobs/{train}/events", "owned"),
    "GET /jobs/{job_id}/history": Endpoint("GET", "/jobs/{train}/history", "owned"),
    "GET /checkpoints": Endpoint("GET", "/checkpoints", "listing"),
    "GET /checkpoints/{checkpoint_id}": Endpoint("GET", "/checkpoints/{checkpoint}", "owned"),
    "GET /checkpoints/{checkpoint_id}/download": Endpoint("GET", "/checkpoints/{checkpoint}/download", "owned"),
    "POST /segment": Endpoint("POST", "/segment", "segment", 202),
    "GET /jobs/{job_id}/result": Endpoint("GET", "/jobs/{segment}/result", "owned"),
    "GET /jobs/{job_id}/result.csv": Endpoint("GET", "/jobs/{segment}/result.csv", "owned"),
    "GET /jobs/{job_id}/result.las": Endpoint("GET", "/jobs/{segment}/result.las", "owned"),
    "GET /jobs/{job_id}/mask.png": Endpoint("GET", "/jobs/{segment}/mask.png", "owned"),
    "GET /jobs/{job_id}/overlay.png": Endpoint("GET", "/jobs/{segment}/overlay.png", "owned"),
    "GET /healthz": Endpoint("GET", "/healthz", "open"),
    "GET /livez": Endpoint("GET", "/livez", "open"),
    "GET /docs": Endpoint("GET", "/docs", "open"),
    "GET /docs/oauth2-redirect": Endpoint("GET", "/docs/oauth2-redirect", "open"),
    "GET /redoc": Endpoint("GET", "/redoc", "open"),
    "GET /openapi.json": Endpoint("GET", "/openapi.json", "open"),
    "GET /metrics": Endpoint("GET", "/metrics", "admin"),
    "POST /plan": Endpoint("POST", "/plan", "plan"),
    "POST /plan/chart.svg": Endpoint("POST", "/plan/chart.svg", "plan"),
    "POST /scans/analyse": Endpoint("POST", "/scans/analyse", "analyse"),
    "GET /": Endpoint("GET", "/", "open"),
    "GET /dashboard/{name}": Endpoint("GET", "/dashboard/app.js", "open"),
}
# A plan is arithmetic over the fleet's measurements, no tenant's data: every key may ask. A GPU of the table,
# so that the plan has times (an estimate) without a probe job.
PLAN_CONFIG = {"epochs": 2, "effective_batch": 4, "data": {"dataset_size": 24, "scale": 0.04},
               "model": {"widths": [4, 4, 8, 8, 8, 16], "transformer_heads": 1, "transformer_ff": 16}}
CALLERS = ("no key", "bad key", "revoked key", "other tenant", "own tenant", "admin")
REFUSED = {"no key", "bad key", "revoked key"}


@pytest.fixture
def admin_key(service: Settings, reconfigure: Callable[..., Settings]) -> str:
    """Keys on: VEERNET_ADMIN_KEY set on top of ``service``."""
    key = new_admin_key()
    reconfigure(VEERNET_ADMIN_KEY=key)
    return key


@pytest.fixture
def world(admin_key: str, store: Any) -> World:
    return build_world(store, OWNER)


def caller_headers(caller: str, admin_key: str) -> dict[str, str]:
    keys: dict[str, Callable[[], str]] = {
        "bad key": lambda: "vn_" + "x" * 43,
        "revoked key": lambda: make_key(OWNER, revoked=True),
        "other tenant": lambda: make_key(OTHER),
        "own tenant": lambda: make_key(OWNER),
        "admin": lambda: admin_key,
    }
    return bearer(keys[caller]()) if caller in keys else {}


def operations(routes: list[Any] | None = None, prefix: str = "") -> set[str]:
    """Every operation the app serves, as 'METHOD /path', walking included routers."""
    found = set()
    route: Any
    for route in app.routes if routes is None else routes:
        if hasattr(route, "original_router"):  # FastAPI includes routers lazily
            found |= operations(route.original_router.routes, prefix + route.include_context.prefix)
        else:
            found |= {f"{method} {prefix}{route.path}" for method in route.methods - {"HEAD"}}
    return found


def test_the_matrix_covers_every_operation_of_the_app() -> None:
    assert set(ENDPOINTS) == operations()
    protected = [name for name, endpoint in ENDPOINTS.items() if endpoint.kind != "open"]
    print(f"\nauth matrix: {len(ENDPOINTS)} endpoints ({len(protected)} keyed) x {len(CALLERS)} callers = "
          f"{len(ENDPOINTS) * len(CALLERS)} cells")


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("name", list(ENDPOINTS))
def test_auth_matrix(client: TestClient, world: World, admin_key: str, name: str, caller: str) -> None:
    endpoint = ENDPOINTS[name]
    response = client.request(**endpoint.request(world), headers=caller_headers(caller, admin_key))
    if endpoint.kind == "open":
        assert response.status_code == 200, response.text
    elif caller in REFUSED:
        assert response.status_code == 401, response.text
        assert response.headers["www-authenticate"].startswith('Bearer realm="veernet"')
        assert "veernet keys create" in response.json()["detail"]
    elif endpoint.kind == "admin" and caller != "admin":
        assert response.status_code == 403 and "admin key" in response.json()["detail"], response.text
    elif caller == "other tenant":
        check_other_tenant(client, endpoint, world, response, admin_key)
    else:
        assert response.status_code == endpoint.ok, response.text
        check_success(name, response, world, OWNER if caller == "own tenant" else "admin")


def check_other_tenant(client: TestClient, endpoint: Endpoint, world: World, response: httpx.Response,
                       admin_key: str) -> None:
    if endpoint.kind == "listing":
        assert response.status_code == 200 and response.json()["total"] == 0 and response.json()["items"] == []
    elif endpoint.kind == "submit":
        assert response.status_code == 202 and response.json()["tenant"] == OTHER
    elif endpoint.kind in ("plan", "analyse"):  # no tenant's data: every key may ask
        assert response.status_code == 200, response.text
    else:  # the owner's job or checkpoint: 404, word for word as for one that does not exist
        missing = client.request(**endpoint.request(world, train=MISSING, segment=MISSING, queued=MISSING,
                                                    checkpoint=MISSING), headers=bearer(admin_key))
        assert response.status_code == missing.status_code == 404, response.text
        assert re.sub(r"\d+", "N", response.json()["detail"]) == re.sub(r"\d+", "N", missing.json()["detail"])
        with session_scope() as session:
            assert session.scalar(select(Job.status).where(Job.id == world.queued[0])) == "queued", \
                "another tenant cancelled nothing"


def check_success(name: str, response: httpx.Response, world: World, tenant: str) -> None:
    body: Any = response.json() if response.headers.get("content-type") == "application/json" else None
    expected: dict[str, Callable[[], bool]] = {
        "POST /jobs": lambda: body["tenant"] == tenant and body["status"] == "queued",
        "GET /jobs": lambda: {world.train_job, world.segment_job, *world.queued} <= {j["id"] for j in body["items"]},
        "GET /jobs/{job_id}": lambda: body["id"] == world.train_job and body["tenant"] == OWNER,
        "POST /jobs/{job_id}/cancel": lambda: body["status"] == "cancelled",
        "GET /jobs/{job_id}/checkpoints": lambda: [c["id"] for c in body] == [world.checkpoint],
        "GET /jobs/{job_id}/events": lambda: [e["kind"] for e in body["items"]] == ["queued", "claimed", "checkpoint"],
        "GET /jobs/{job_id}/history": lambda: body == [],  # build_world's checkpoint carries no epoch record
        "GET /metrics": lambda: 'veernet_jobs{kind="train",status="running"} 1.0' in response.text,
        "POST /plan": lambda: body["data"]["steps_per_epoch"] > 0 and body["interruptions"]["k"] == 1,
        "POST /plan/chart.svg": lambda: response.text.lstrip().startswith("<svg"),
        "POST /scans/analyse": lambda: body["format"] == "veernet.page-calibration/1" and body["sections"] == [],
        "GET /checkpoints": lambda: [c["id"] for c in body["items"]] == [world.checkpoint],
        "GET /checkpoints/{checkpoint_id}": lambda: body["id"] == world.checkpoint,
        "GET /checkpoints/{checkpoint_id}/download": lambda: response.content == world.checkpoint_data,
        "POST /segment": lambda: (body["tenant"], body["config"]["model"]["checkpoint_id"]) == (tenant,
                                                                                                 world.checkpoint),
    }
    files = {"result": "result", "result.csv": "csv", "result.las": "las", "mask.png": "mask", "overlay.png": "overlay"}
    for suffix, file in files.items():
        expected[f"GET /jobs/{{job_id}}/{suffix}"] = lambda file=file: (  # type: ignore[misc]
            response.content == world.results[file])
    assert expected[name](), response.text[:500]


# ---- keys off: the embedded default -------------------------------------------------------------------


def test_with_keys_off_no_key_is_needed_and_every_job_is_local(client: TestClient, service: Settings) -> None:
    assert not service.keys_required
    job = client.post("/jobs", json={"config": SMALL_CONFIG}).json()
    assert job["tenant"] == "local"
    garbage = {"Authorization": "Bearer not-a-key"}  # ignored: there are no keys to check
    assert client.get(f"/jobs/{job['id']}", headers=garbage).status_code == 200
    assert client.get("/jobs").json()["total"] == 1


def test_jobs_made_with_keys_off_are_the_admins_once_keys_are_on(client: TestClient, service: Settings,
                                                                  reconfigure: Callable[..., Settings]) -> None:
    job_id = client.post("/jobs", json={"config": SMALL_CONFIG}).json()["id"]
    admin = new_admin_key()
    reconfigure(VEERNET_ADMIN_KEY=admin)
    assert client.get(f"/jobs/{job_id}").status_code == 401
    assert client.get(f"/jobs/{job_id}", headers=bearer(make_key(OWNER))).status_code == 404
    assert client.get(f"/jobs/{job_id}", headers=bearer(admin)).json()["tenant"] == "local"
    assert client.get(f"/jobs/{job_id}", headers=bearer(make_key("local"))).status_code == 200


# ---- keys on --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("header", ["", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "vn_abc"])
def test_a_malformed_authorization_header_is_a_missing_key(client: TestClient, admin_key: str, header: str) -> None:
    response = client.get("/jobs", headers={"Authorization": header} if header else {})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="veernet"'
    assert response.json()["detail"].startswith("this endpoint needs an API key")


def test_a_wrong_key_is_an_invalid_token_and_the_scheme_is_case_insensitive(client: TestClient,
                                                                           admin_key: str) -> None:
    for wrong in (admin_key[:-1], admin_key + "x", make_key(OWNER) + "x"):
        response = client.get("/jobs", headers=bearer(wrong))
        assert response.status_code == 401 and 'error="invalid_token"' in response.headers["www-authenticate"]
        assert response.json()["detail"].startswith("unknown API key")
    assert client.get("/jobs", headers={"Authorization": f"bearer {admin_key}"}).status_code == 200


def test_unknown_paths_need_a_key_too(client: TestClient, admin_key: str) -> None:
    assert client.get("/no/such/path").status_code == 401, "the route map is not shown to strangers"
    assert client.get("/no/such/path", headers=bearer(admin_key)).status_code == 404


def test_a_keyless_upload_is_refused_before_its_body_is_read(client: TestClient, admin_key: str,
                                                              reconfigure: Callable[..., Settings]) -> None:
    reconfigure(VEERNET_ADMIN_KEY=admin_key, MAX_REQUEST_BYTES=1024)
    response = client.post("/jobs", content=b"{" + b" " * 10_000 + b"}", headers={"Content-Type": "application/json"})
    assert response.status_code == 401, "401 before 413: strangers learn nothing, not even the limits"


def test_each_tenant_lists_only_its_own_and_the_admin_lists_all(client: TestClient, admin_key: str) -> None:
    acme, globex = make_key(OWNER), make_key(OTHER)
    mine = [client.post("/jobs", json={"config": SMALL_CONFIG}, headers=bearer(acme)).json()["id"] for _ in range(2)]
    theirs = client.post("/jobs", json={"config": SMALL_CONFIG}, headers=bearer(globex)).json()["id"]
    admins = client.post("/jobs", json={"config": SMALL_CONFIG}, headers=bearer(admin_key)).json()["id"]
    listed = {key: [j["id"] for j in client.get("/jobs", headers=bearer(key)).json()["items"]]
              for key in (acme, globex, admin_key)}
    assert listed == {acme: mine[::-1], globex: [theirs], admin_key: [admins, theirs, *mine[::-1]]}
    queued = client.get("/jobs", params={"status": "queued"}, headers=bearer(globex)).json()
    assert queued["total"] == 1


def test_the_status_cache_never_serves_a_job_to_another_tenant(client: TestClient, admin_key: str,
                                                                 reconfigure: Callable[..., Settings]) -> None:
    reconfigure(VEERNET_ADMIN_KEY=admin_key, STATUS_CACHE_SECONDS=60)
    acme = make_key(OWNER)
    job_id = client.post("/jobs", json={"config": SMALL_CONFIG}, headers=bearer(acme)).json()["id"]
    with session_scope() as session:
        assert jobs.claim(session, job_id, "w1", lease_s=60) == 1  # running jobs are cached
    assert client.get(f"/jobs/{job_id}", headers=bearer(acme)).status_code == 200  # now in the cache
    assert client.get(f"/jobs/{job_id}", headers=bearer(make_key(OTHER))).status_code == 404
    assert client.get(f"/jobs/{job_id}", headers=bearer(admin_key)).status_code == 200


def test_a_segment_job_may_name_only_its_own_tenants_model(client: TestClient, world: World,
                                                            admin_key: str) -> None:
    other = bearer(make_key(OTHER))
    for model in ({"checkpoint_id": world.checkpoint}, {"job_id": world.train_job}):
        response = client.post("/segment", **segment_form({"calibration": CALIBRATION, "model": model}),
                               headers=other)
        assert response.status_code == 404, response.text
    own = client.post("/segment", **segment_form({"calibration": CALIBRATION, "model": {"job_id": world.train_job}}),
                      headers=bearer(make_key(OWNER)))
    assert own.status_code == 202 and own.json()["config"]["model"]["checkpoint_id"] == world.checkpoint


def test_only_a_hash_and_a_prefix_of_a_key_are_stored(service: Settings) -> None:
    key = make_key(OWNER, name="ci")
    assert re.fullmatch(r"vn_[A-Za-z0-9_-]{43}", key), "vn_ + 32 random bytes, urlsafe base64"
    with session_scope() as session:
        row = session.scalars(select(ApiKey)).one()
        stored = [str(value) for value in (row.tenant, row.name, row.prefix, row.key_hash)]
    assert row.prefix == key[:11] and key not in stored and not any(key[11:] in value for value in stored)
    assert row.key_hash == hashlib.sha256(key.encode()).hexdigest()


# ---- `veernet keys` -------------------------------------------------------------------------------------


def test_keys_create_list_and_revoke_from_the_command_line(client: TestClient, admin_key: str) -> None:
    runner = CliRunner()
    created = runner.invoke(cli_app, ["keys", "create", "--tenant", OWNER, "--name", "laptop"])
    assert created.exit_code == 0, created.output
    key = created.stdout.strip()
    assert re.fullmatch(r"vn_\S{43}", key), "stdout holds the key alone, for scripts"
    assert "shown only now" in created.stderr
    assert client.get("/jobs", headers=bearer(key)).status_code == 200

    listed = runner.invoke(cli_app, ["keys", "list"])
    assert listed.exit_code == 0 and key[:11] in listed.stdout and "laptop" in listed.stdout
    assert key not in listed.stdout, "a key is never shown again"

    revoked = runner.invoke(cli_app, ["keys", "revoke", key[:11]])
    assert revoked.exit_code == 0 and "revoked key" in revoked.stdout
    response = client.get("/jobs", headers=bearer(key))
    assert response.status_code == 401 and "revoked" in response.json()["detail"]
    again = runner.invoke(cli_app, ["keys", "revoke", key[:11]])
    assert again.exit_code == 0, "revoking twice keeps the first revocation"


def test_a_key_is_read_once_per_cache_window_and_a_revocation_lands_when_it_ends(
        client: TestClient, admin_key: str, reconfigure: Callable[..., Settings],
        monkeypatch: pytest.MonkeyPatch) -> None:
    reconfigure(VEERNET_ADMIN_KEY=admin_key, API_KEY_CACHE_SECONDS=3600)
    key = make_key(OWNER)
    assert client.get("/jobs", headers=bearer(key)).status_code == 200  # read from the database, and kept
    assert CliRunner().invoke(cli_app, ["keys", "revoke", key[:11]]).exit_code == 0
    assert client.get("/jobs", headers=bearer(key)).status_code == 200, "within the window: the kept row"
    assert client.get("/jobs", headers=bearer(make_key(OTHER))).status_code == 200, "a new key works at once"
    later = auth.monotonic() + 3600
    monkeypatch.setattr(auth, "monotonic", lambda: later)  # the window is over
    response = client.get("/jobs", headers=bearer(key))
    assert response.status_code == 401 and "revoked" in response.json()["detail"]


def test_when_a_kept_key_expires_one_request_reads_it_while_the_others_use_the_kept_row(
        service: Settings, admin_key: str, reconfigure: Callable[..., Settings],
        monkeypatch: pytest.MonkeyPatch) -> None:
    settings = reconfigure(VEERNET_ADMIN_KEY=admin_key, API_KEY_CACHE_SECONDS=60)
    key = make_key(OWNER)
    header = f"Bearer {key}"
    assert auth.authenticate_now(settings, header) is None, "never read: it must be read"
    assert auth.authenticate(settings, header).tenant == OWNER
    kept = auth.authenticate_now(settings, header)
    assert kept is not None and kept.tenant == OWNER, "kept"
    assert CliRunner().invoke(cli_app, ["keys", "revoke", key[:11]]).exit_code == 0
    later = auth.monotonic() + 61
    monkeypatch.setattr(auth, "monotonic", lambda: later)
    assert auth.authenticate_now(settings, header) is None, "the window is over: this request reads it"
    assert auth.authenticate_now(settings, header) is not None, "meanwhile the others use the kept row"
    with pytest.raises(auth.AuthError, match="revoked"):
        auth.authenticate(settings, header)  # the read lands the revocation
    with pytest.raises(auth.AuthError, match="revoked"):
        auth.authenticate_now(settings, header)
    # A second past the grace: exactly at its end, `later + 65 - later` may round below 65 (float seconds).
    monkeypatch.setattr(auth, "monotonic", lambda: later + 60 + auth.REFRESH_GRACE_S + 1)
    assert auth.authenticate_now(settings, header) is None
    assert auth.authenticate_now(settings, header) is None, "a read under way too long stands in no more"


def test_keys_revoke_by_id_and_the_errors_of_the_command(client: TestClient, admin_key: str) -> None:
    runner = CliRunner()
    key = make_key(OTHER)
    with session_scope() as session:
        key_id = session.scalars(select(ApiKey.id).where(ApiKey.tenant == OTHER)).one()
    assert runner.invoke(cli_app, ["keys", "revoke", str(key_id)]).exit_code == 0
    assert client.get("/jobs", headers=bearer(key)).status_code == 401
    unknown = runner.invoke(cli_app, ["keys", "revoke", "vn_nothing"])
    assert unknown.exit_code == 1 and "no key with id or prefix 'vn_nothing'" in unknown.stderr
    for tenant in ("Acme Corp", "admin", ""):
        bad = runner.invoke(cli_app, ["keys", "create", "--tenant", tenant])
        assert bad.exit_code == 2 and "tenant" in bad.output, bad.output


def test_keys_commands_say_to_migrate_when_the_table_is_missing(tmp_path: Path,
                                                                 reconfigure: Callable[..., Settings]) -> None:
    reconfigure(DATABASE_URL=f"sqlite:///{tmp_path / 'empty.db'}")
    result = CliRunner().invoke(cli_app, ["keys", "list"])
    assert result.exit_code == 1 and "veernet migrate" in result.stderr


def test_the_migration_gives_existing_jobs_to_tenant_local(tmp_path: Path,
                                                           postgres_database: Callable[..., Any]) -> None:
    with postgres_database("veernet_tenants") as postgres:
        for url in (f"sqlite:///{tmp_path / 'old.db'}", postgres):
            migrate(url, "0001")
            engine = make_engine(url)
            with engine.begin() as connection:
                connection.exec_driver_sql(
                    "INSERT INTO jobs (kind, status, config, attempt, infra_failures, job_failures, cancel_requested,"
                    " queued_at, recovery_seconds, created_at, updated_at) VALUES ('train', 'queued', '{}', 0, 0, 0,"
                    " false, CURRENT_TIMESTAMP, 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")
            migrate(url)
            with engine.connect() as connection:
                assert connection.exec_driver_sql("SELECT tenant FROM jobs").scalars().all() == ["local"]
            engine.dispose()


# ---- start-up: keys off binds loopback only, and says so ------------------------------------------------


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.8.9.10", True), ("localhost", True), ("::1", True), ("[::1]", True),
    ("0.0.0.0", False), ("::", False), ("10.1.2.3", False), ("example.org", False), ("", False)])
def test_what_counts_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(("command", "host"), [("api", "0.0.0.0"), ("up", "::")])
def test_without_an_admin_key_the_service_refuses_a_public_address(tmp_path: Path, command: str, host: str) -> None:
    result = subprocess.run([sys.executable, "-m", "api.cli", command, "--host", host, "--port", "1"],
                            env=cli_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    message = " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.stderr).split())  # as read, without rich's box
    assert f"{host} is not a loopback address and VEERNET_ADMIN_KEY is unset" in message, message
    assert "Set VEERNET_ADMIN_KEY to require API keys" in message and "bind 127.0.0.1" in message


def test_without_an_admin_key_the_api_starts_on_loopback_and_says_keys_are_off(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "api.log"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, "-m", "api.cli", "api", "--port", str(port)],
                                  env=cli_env(tmp_path), stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_live(f"http://127.0.0.1:{port}", server)
        finally:
            server.terminate()
            server.wait(timeout=30)
    lines = [line for line in log.read_text().splitlines() if "API keys are off" in line]
    assert len(lines) == 1, log.read_text()
    assert "tenant 'local'" in lines[0] and "bound to 127.0.0.1, localhost only" in lines[0]

