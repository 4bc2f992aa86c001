"""Alembic environment: the database URL comes from ``api.settings`` (or the caller), never the ini."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection

from api.db import make_engine, normalize_url
from api.models import Base
from api.settings import get_settings

config = context.config
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    return normalize_url(config.attributes.get("url") or get_settings().database_url)


def _configure(connection: Connection | None = None, **kwargs: object) -> None:
    dialect = connection.dialect.name if connection is not None else _url().split(":", 1)[0]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=dialect.startswith("sqlite"),  # SQLite alters tables by copy-and-rename
        compare_type=True,
        **kwargs,  # type: ignore[arg-type]
    )


def run_migrations_offline() -> None:
    _configure(url=_url(), literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_url())
    try:
        with engine.connect() as connection:
            _configure(connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
