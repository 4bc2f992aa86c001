"""Migrations run up, down and up again on Postgres and SQLite, and match the models exactly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from api.db import alembic_config, make_engine, migrate
from api.models import Base


@pytest.fixture(params=["sqlite", "postgres"])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'migrations.db'}"
        return
    with request.getfixturevalue("postgres_database")("veernet_migrations") as url:
        yield url


def tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def drift(url: str) -> list[object]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade_and_no_drift(empty_database: str) -> None:
    migrate(empty_database)
    assert tables(empty_database) == {"jobs", "checkpoints", "job_events", "api_keys"}
    command.downgrade(alembic_config(empty_database), "base")
    assert tables(empty_database) == set()
    migrate(empty_database)
    assert drift(empty_database) == []


def test_the_ini_at_the_repo_root_reads_the_url_from_settings(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from alembic.config import Config

    from api.settings import get_settings

    url = f"sqlite:///{tmp_path / 'from-env.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    get_settings.cache_clear()
    try:
        command.upgrade(Config(str(Path(__file__).resolve().parents[2] / "alembic.ini")), "head")
    finally:
        get_settings.cache_clear()
    assert tables(url) == {"jobs", "checkpoints", "job_events", "api_keys"}
