"""Secrets never reach logs: the database password, the broker password, the admin key and tenants' keys.

Everything the service logs (at DEBUG, SQLAlchemy's statements included) and prints is captured through a
request cycle, a database that is down, a broker that refuses the password, and the start-up of real
`veernet` processes, then searched for each secret.
"""

from __future__ import annotations

import logging
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from api_testkit import SMALL_CONFIG
from auth_testkit import bearer, cli_env, free_port, make_key, new_admin_key, wait_live
from fastapi.testclient import TestClient

from api.settings import Settings, get_settings

DB_PASSWORD = "dbpw-" + secrets.token_hex(12)  # trust auth on the test server: accepted, never checked
BROKER_PASSWORD = "brokerpw-" + secrets.token_hex(12)


@pytest.fixture(scope="session")
def database_url(postgres_url: str) -> str:
    """Postgres only: the one of the two that takes a password."""
    return postgres_url


def with_password(url: str, password: str, port: int | None = None) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username or 'postgres'}:{password}@{parts.hostname}:{port or parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def assert_no_secret(text: str, *extra: str) -> None:
    for secret in (DB_PASSWORD, BROKER_PASSWORD, *extra):
        assert secret not in text, f"a secret ({secret[:6]}...) leaked:\n" + "\n".join(
            line for line in text.splitlines() if secret in line)


@pytest.fixture
def everything_logged(caplog: pytest.LogCaptureFixture) -> Callable[[], str]:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="sqlalchemy.engine")  # statements and their parameters

    def text() -> str:
        return "\n".join(f"{r.name} {r.levelname} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)

    return text


def test_a_request_cycle_logs_no_secret(client: TestClient, service: Settings, reconfigure: Callable[..., Settings],
                                        everything_logged: Callable[[], str]) -> None:
    admin = new_admin_key()
    reconfigure(VEERNET_ADMIN_KEY=admin, DATABASE_URL=with_password(service.database_url, DB_PASSWORD))
    tenant_key = make_key("acme")
    revoked = make_key("acme", revoked=True)
    bodies = []
    for headers in (bearer(admin), bearer(tenant_key), bearer(revoked), bearer(admin[:-1]), {}):
        job = client.post("/jobs", json={"config": SMALL_CONFIG}, headers=headers)
        bodies += [job.text, client.get("/jobs", headers=headers).text, client.get("/jobs/999", headers=headers).text,
                   client.post("/jobs", json={"config": {"epochs": -1}}, headers=headers).text]
    bodies.append(client.get("/healthz").text)
    settings = get_settings()
    bodies += [repr(settings), str(settings)]  # what a log line holding the settings would show
    assert settings.veernet_admin_key is not None and settings.veernet_admin_key.get_secret_value() == admin
    logged = everything_logged()
    assert "SELECT" in logged, "the capture must see the service's logs for the search to mean anything"
    assert_no_secret(logged + "\n".join(bodies), admin, tenant_key, revoked, admin[:-1])


def test_a_database_that_is_down_logs_no_secret(client: TestClient, service: Settings, closed_port: int,
                                                reconfigure: Callable[..., Settings],
                                                everything_logged: Callable[[], str]) -> None:
    tenant_key = make_key("acme")  # in the live database, before it goes away
    admin = new_admin_key()
    reconfigure(VEERNET_ADMIN_KEY=admin,
                DATABASE_URL=with_password(service.database_url, DB_PASSWORD, port=closed_port))
    answers = [client.get("/jobs", headers=bearer(admin)), client.get("/jobs", headers=bearer(tenant_key)),
               client.post("/jobs", json={"config": SMALL_CONFIG}, headers=bearer(admin)), client.get("/healthz")]
    assert [a.status_code for a in answers] == [503, 503, 503, 503]
    logged = everything_logged()
    assert "database error: OperationalError" in logged
    assert_no_secret(logged + "\n".join(a.text for a in answers), admin, tenant_key)


def test_a_broker_refusing_its_password_logs_no_secret(client: TestClient, reconfigure: Callable[..., Settings],
                                                       closed_port: int, everything_logged: Callable[[], str]) -> None:
    admin = new_admin_key()
    reconfigure(VEERNET_ADMIN_KEY=admin, BROKER_URL=f"redis://:{BROKER_PASSWORD}@127.0.0.1:{closed_port}/0")
    assert client.post("/jobs", json={"config": SMALL_CONFIG}, headers=bearer(admin)).status_code == 202
    health = client.get("/healthz")
    logged = everything_logged()
    assert "could not send job" in logged
    assert_no_secret(logged + health.text, admin)


# ---- real `veernet` processes ---------------------------------------------------------------------------


@pytest.fixture
def secret_env(tmp_path: Path, postgres_url: str) -> dict[str, str]:
    admin = new_admin_key()
    return cli_env(tmp_path, DATABASE_URL=with_password(postgres_url, DB_PASSWORD), VEERNET_ADMIN_KEY=admin)


def veernet(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "api.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_veernet_migrate_keys_and_api_start_up_log_no_secret(secret_env: dict[str, str], tmp_path: Path) -> None:
    admin = secret_env["VEERNET_ADMIN_KEY"]
    migrated = veernet(secret_env, "migrate")
    assert migrated.returncode == 0 and "postgres:***@" in migrated.stdout, migrated.stderr
    created = veernet(secret_env, "keys", "create", "--tenant", "acme")
    tenant_key = created.stdout.strip()
    listed = veernet(secret_env, "keys", "list")
    port, log = free_port(), tmp_path / "api.log"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, "-m", "api.cli", "api", "--port", str(port), "--loglevel", "debug"],
                                  env=secret_env, stdout=out, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_live(base, server)
            for key in (admin, tenant_key, "vn_wrong", admin + "x"):
                httpx.get(f"{base}/jobs", headers=bearer(key))
                httpx.post(f"{base}/jobs", json={"config": SMALL_CONFIG}, headers=bearer(key))
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)
    output = log.read_text()
    assert "API keys required (VEERNET_ADMIN_KEY is set)" in output and "GET /jobs" in output
    everything = "\n".join([migrated.stdout, migrated.stderr, created.stderr, listed.stdout, listed.stderr, output])
    assert_no_secret(everything, admin, tenant_key, admin + "x")


def test_veernet_up_and_a_failed_database_connection_log_no_secret(secret_env: dict[str, str], tmp_path: Path,
                                                                  closed_port: int, redis_url: str) -> None:
    admin = secret_env["VEERNET_ADMIN_KEY"]
    broker = redis_url.replace("redis://", f"redis://:{BROKER_PASSWORD}@", 1)  # Redis has no password: ignored
    env = {**secret_env, "BROKER_URL": broker}
    port, log = free_port(), tmp_path / "up.log"
    with log.open("w") as out:
        stack = subprocess.Popen([sys.executable, "-m", "api.cli", "up", "--port", str(port), "--loglevel", "DEBUG"],
                                 env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_live(base, stack, timeout_s=90)
            assert httpx.post(f"{base}/jobs", json={"config": SMALL_CONFIG}, headers=bearer(admin)).status_code == 202
        finally:
            stack.send_signal(signal.SIGTERM)
            stack.wait(timeout=60)
    output = log.read_text()
    assert "database postgresql://postgres:***@" in output and "redis://:***@" in output, output[-3000:]
    down = veernet({**env, "DATABASE_URL": with_password(env["DATABASE_URL"], DB_PASSWORD, closed_port)},
                   "up", "--port", str(free_port()))
    assert down.returncode != 0 and "OperationalError" in down.stderr
    keys = veernet({**env, "DATABASE_URL": with_password(env["DATABASE_URL"], DB_PASSWORD, closed_port)},
                   "keys", "list")
    assert keys.returncode == 1 and "postgres:***@" in keys.stderr
    assert_no_secret("\n".join([output, down.stdout, down.stderr, keys.stdout, keys.stderr]), admin)
