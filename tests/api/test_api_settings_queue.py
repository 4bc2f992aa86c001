"""Settings defaults, the Celery configuration, and the torch-free import rule."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from api.db import normalize_url
from api.settings import Settings
from worker.celery_app import celery_config, get_celery
from worker.sqlite_fork import ForkSafeConnection

ROOT = Path(__file__).resolve().parents[2]


def test_with_nothing_set_everything_is_embedded_under_the_data_dir(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.chdir(tmp_path)
    settings = Settings()
    data = tmp_path / "var"
    assert settings.veernet_data_dir == data
    assert settings.database_url == f"sqlite:///{data / 'veernet.db'}"
    assert settings.broker_url == f"sqla+sqlite:///{data / 'broker.db'}"
    assert settings.checkpoint_url == str(data / "checkpoints")
    assert (settings.s3_endpoint_url, settings.s3_presign, settings.presign_seconds) == (None, False, 300)
    assert settings.lease_seconds == 60 and settings.heartbeat_seconds == 10
    assert settings.queued_resend_seconds == 60 and settings.reaper_interval_seconds == 10
    assert settings.worker_handoff_seconds == 30
    assert settings.max_infra_attempts == 5 and settings.max_job_failures == 2


def test_environment_overrides_and_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@db/veernet")
    monkeypatch.setenv("S3_PRESIGN", "true")
    monkeypatch.setenv("LEASE_SECONDS", "30")
    settings = Settings()
    assert settings.database_url == "postgresql://u@db/veernet" and settings.s3_presign
    assert normalize_url(settings.database_url) == "postgresql+psycopg://u@db/veernet"
    monkeypatch.setenv("HEARTBEAT_SECONDS", "30")
    with pytest.raises(ValueError, match="HEARTBEAT_SECONDS must be shorter than LEASE_SECONDS"):
        Settings()


def test_celery_config_is_durable_json_only_and_routes_by_task_name() -> None:
    conf = celery_config(Settings(broker_url="redis://localhost:6379/0", reaper_interval_seconds=7))
    assert conf["task_serializer"] == "json" and conf["accept_content"] == ["json"]
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"] and conf["task_ignore_result"]
    assert conf["worker_prefetch_multiplier"] == 1 and conf["worker_max_tasks_per_child"] == 1
    assert conf["broker_transport_options"]["visibility_timeout"] >= 24 * 3600
    assert conf["task_routes"]["veernet.train"] == {"queue": "train"}
    assert conf["task_routes"]["veernet.segment"] == {"queue": "segment"}
    reap = conf["beat_schedule"]["reap"]
    assert reap["task"] == "veernet.reap" and reap["schedule"] == 7
    embedded = celery_config(Settings(broker_url="sqla+sqlite:////tmp/b.db"))
    assert "visibility_timeout" not in embedded["broker_transport_options"]


def test_the_app_is_built_lazily_and_found_by_the_celery_cli(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    from api.settings import get_settings

    monkeypatch.setenv("BROKER_URL", f"sqla+sqlite:///{tmp_path / 'sub' / 'broker.db'}")
    get_settings.cache_clear()
    get_celery.cache_clear()
    try:
        import worker.celery_app as module

        assert module.app is get_celery()
        assert module.app.conf.task_acks_late is True
        assert (tmp_path / "sub").is_dir()  # the embedded broker's directory exists before first use
        with module.app.connection_for_read() as connection:  # kombu's own SQLite connection, as a worker polls
            dbapi = connection.default_channel.session.connection().connection.dbapi_connection
            assert isinstance(dbapi, ForkSafeConnection), type(dbapi)
    finally:
        get_settings.cache_clear()
        get_celery.cache_clear()


def test_the_celery_parent_and_the_state_machine_never_import_torch() -> None:
    code = ("import sys; import worker.celery_app as c; c.get_celery(); import api.jobs, api.reaper, api.db; "
            "assert 'torch' not in sys.modules and 'veernet_core' not in sys.modules, 'torch imported'")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path: Path) -> None:
    from api.db import make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'nested' / 'veernet.db'}")  # creates the directory
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 10_000
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        engine.dispose()


@pytest.mark.parametrize(("url", "expected"), [
    ("postgresql://u:p@h:5432/d", "postgresql+psycopg://u:p@h:5432/d"),
    ("postgres://u@h/d", "postgresql+psycopg://u@h/d"),
    ("postgresql+psycopg://u@h/d", "postgresql+psycopg://u@h/d"),
    ("sqlite:///x.db", "sqlite:///x.db"),
])
def test_postgres_urls_go_through_psycopg3(url: str, expected: str) -> None:
    assert normalize_url(url) == expected
