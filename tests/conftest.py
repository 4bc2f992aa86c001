"""Shared fixtures: real databases (a fresh Postgres database per run, and SQLite), the service's
environment, and a real S3-compatible HTTP server (moto in server mode)."""

from __future__ import annotations

import os

# Under pytest-xdist (`make test` runs one worker process per core) each worker's torch and numpy, and the
# processes its tests start, compute on one thread: two workers of two OpenMP threads each on two cores stall
# each other. Before anything imports them. The serial run, one process, keeps the defaults.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _threads in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_threads, "1")

import secrets  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from contextlib import AbstractContextManager, closing, contextmanager  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the repo is not installed in the test venv; make its packages importable
    sys.path.insert(0, str(ROOT))

import ast  # noqa: E402

from tests.syntax import parse_retried  # noqa: E402

# pytest parses every test module it rewrites with `ast.parse`: on CPython 3.11 before 3.11.8 that parse
# may fail spuriously now and then (tests/syntax.py); tried again, it does not stop the run.
ast.parse = parse_retried  # type: ignore[assignment]

from api import auth, changes, db, health, limits, queries, storage  # noqa: E402
from api.settings import Settings, get_settings  # noqa: E402
from worker.celery_app import get_celery  # noqa: E402

POSTGRES_ADMIN_URL = os.environ.get("VEERNET_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
SERVICE_ENV = [name.upper() for name in Settings.model_fields]
TABLES = ("job_events", "checkpoints", "jobs", "api_keys")
# `make test` runs the tests marked `serial` from the files whose text names the mark so (Makefile: its grep).
SERIAL_MARK = "pytest.mark.serial"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test marked serial in a file that does not spell the mark as SERIAL_MARK would run in neither of `make
    test`'s two runs: refused at collection."""
    files = {item.path for item in items if item.get_closest_marker("serial")}
    unspelled = sorted(str(path.relative_to(ROOT)) for path in files if SERIAL_MARK not in path.read_text())
    if unspelled:
        raise pytest.UsageError(f"{', '.join(unspelled)}: mark serial tests as `{SERIAL_MARK}` in the test file "
                                "itself, so that `make test` finds them (Makefile)")


def free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _postgres_admin() -> object:
    import psycopg

    return psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=3)


def postgres_unavailable() -> str | None:
    """Why Postgres cannot be used for tests, or None when it can."""
    try:
        with _postgres_admin():  # type: ignore[attr-defined]
            return None
    except Exception as exc:
        return f"Postgres at {POSTGRES_ADMIN_URL} unreachable: {exc}"


@contextmanager
def fresh_postgres_database(prefix: str = "veernet_test") -> Iterator[str]:
    """A new, empty database on the test server, dropped (with its connections) afterwards."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    with _postgres_admin() as admin:  # type: ignore[attr-defined]
        admin.execute(f'CREATE DATABASE "{name}"')
    url = POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        yield url
    finally:
        db.dispose_engines()
        with _postgres_admin() as admin:  # type: ignore[attr-defined]
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_database() -> Callable[[str], AbstractContextManager[str]]:
    """A factory of fresh, empty Postgres databases (skips the test when Postgres is unreachable)."""
    reason = postgres_unavailable()
    if reason:
        pytest.skip(reason)
    return fresh_postgres_database


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on: a dependency that is down."""
    return free_port()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A migrated Postgres database for this test run."""
    reason = postgres_unavailable()
    if reason:
        pytest.skip(reason)
    with fresh_postgres_database() as url:
        db.migrate(url)
        yield url


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A migrated SQLite database file for this test run."""
    url = f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'veernet.db'}"
    db.migrate(url)
    yield url
    db.dispose_engines()


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str:
    """Each database-backed test runs on both dialects."""
    return str(request.getfixturevalue(f"{request.param}_url"))


def reset_service_caches() -> None:
    """Forget everything built from the environment: settings, Celery app, stores."""
    get_settings.cache_clear()
    get_celery.cache_clear()
    storage._stores.clear()
    queries._DETAIL_CACHE.clear()
    queries._JSON_CACHE.clear()
    limits.submissions.reset()
    auth.forget_keys()
    changes.stop_feeds()
    health.forget_schema_checks()


def truncate(url: str) -> None:
    """Every table emptied (children first) and, on Postgres, its ids restarted at 1. DELETE on tables of a
    few rows, not TRUNCATE: TRUNCATE gives each table new files, about 54 ms a test against 8 ms."""
    engine = db.get_engine(url)
    with engine.begin() as connection:
        for table in TABLES:
            connection.exec_driver_sql(f"DELETE FROM {table}")
        if engine.dialect.name == "postgresql":
            for table in TABLES:
                connection.exec_driver_sql(f"ALTER SEQUENCE {table}_id_seq RESTART")


@pytest.fixture
def reconfigure(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Settings]:
    """Set service environment variables (NAME=value) and rebuild settings from them."""

    def apply(**env: object) -> Settings:
        for name, value in env.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, str(value))
        reset_service_caches()
        return get_settings()

    return apply


@pytest.fixture
def service(database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            reconfigure: Callable[..., Settings]) -> Iterator[Settings]:
    """The service configured on empty tables of ``database_url``, an embedded broker in a temp
    file and a local checkpoint directory; nothing from the developer's environment leaks in."""
    for name in SERVICE_ENV:
        monkeypatch.delenv(name, raising=False)
    truncate(database_url)
    settings = reconfigure(
        VEERNET_DATA_DIR=tmp_path / "data",
        DATABASE_URL=database_url,
        BROKER_URL=f"sqla+sqlite:///{tmp_path / 'broker.db'}",
        CHECKPOINT_URL=tmp_path / "checkpoints",
        STATUS_CACHE_SECONDS=0,  # tests write through api.jobs and read at once; the cache has its own tests
        API_KEY_CACHE_SECONDS=0,  # likewise for keys revoked by `veernet keys revoke`
    )
    yield settings
    reset_service_caches()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3-compatible HTTP server (moto's server mode) on a free loopback port."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3_bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new bucket on the test S3 server; boto3 gets test credentials through its own env vars."""
    import boto3

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    bucket = f"veernet-{secrets.token_hex(4)}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=bucket)
    return bucket


@pytest.fixture
def client(service: Settings) -> Iterator[object]:
    """An HTTP client on the app, configured by ``service``."""
    from fastapi.testclient import TestClient

    from api.main import app

    with TestClient(app) as test_client:
        yield test_client
