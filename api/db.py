"""The one engine factory: created lazily, once per process (a forked Celery child builds its own).

SQLite runs in WAL mode with a busy timeout, and every transaction starts with ``BEGIN IMMEDIATE``:
writers queue on the lock instead of failing with "database is locked" when a read-then-write
transaction races another writer. Postgres runs through psycopg 3.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from api.settings import get_settings

SQLITE_BUSY_TIMEOUT_MS = 30_000  # a checkpoint commit may wait behind a burst of API writes
POSTGRES_CONNECT_TIMEOUT_S = 5  # a down database answers 503 quickly instead of hanging requests
POSTGRES_POOL_SIZE, POSTGRES_MAX_OVERFLOW = 10, 20  # the API serves requests from ~40 threads

_lock = threading.Lock()
_engines: dict[tuple[int, str], Engine] = {}
_read_engines: dict[tuple[int, str], Engine] = {}  # read_one's: no pre-ping, autocommit
_factories: dict[tuple[int, str], sessionmaker[Session]] = {}


def normalize_url(url: str) -> str:
    """Accept ``postgres://`` and ``postgresql://`` URLs and route them through psycopg 3."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def _idle_in_transaction_option() -> str:
    """A process frozen or cut off inside a transaction would hold its job row's lock for ever, and
    the reaper skips locked rows: Postgres ends such a session well within one lease."""
    timeout_ms = max(1000, int(get_settings().lease_seconds * 1000 / 3))
    return f"-c idle_in_transaction_session_timeout={timeout_ms}"


def make_engine(url: str, pre_ping: bool = True) -> Engine:
    """A new engine for ``url``; use :func:`get_engine` for the process's shared one."""
    url = normalize_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, parsed.database)
    if parsed.get_backend_name() == "postgresql":
        return create_engine(url, pool_pre_ping=pre_ping, pool_size=POSTGRES_POOL_SIZE,
                             max_overflow=POSTGRES_MAX_OVERFLOW,
                             connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S,
                                           "options": _idle_in_transaction_option()})
    return create_engine(url, pool_pre_ping=pre_ping)


def _sqlite_engine(url: str, database: str | None) -> Engine:
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself, below
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL mode
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def get_engine(url: str | None = None) -> Engine:
    """This process's engine for ``url`` (default: the configured ``DATABASE_URL``)."""
    key = (os.getpid(), normalize_url(url or get_settings().database_url))
    engine = _engines.get(key)
    if engine is None:
        with _lock:
            _forget_parent_engines()
            engine = _engines.get(key)
            if engine is None:
                engine = _engines[key] = make_engine(key[1])
    return engine


def _forget_parent_engines() -> None:
    """In a forked child, drop the parent's pools without closing them: the sockets are the parent's."""
    pid = os.getpid()
    for key in [k for k in _engines if k[0] != pid]:
        _engines.pop(key).dispose(close=False)
        _factories.pop(key, None)


def session_factory(url: str | None = None) -> sessionmaker[Session]:
    """The sessionmaker bound to :func:`get_engine`; objects stay readable after commit."""
    key = (os.getpid(), normalize_url(url or get_settings().database_url))
    factory = _factories.get(key)
    if factory is None:
        factory = _factories.setdefault(key, sessionmaker(get_engine(key[1]), expire_on_commit=False))
    return factory


@contextmanager
def session_scope(url: str | None = None) -> Iterator[Session]:
    """A session committed on success and rolled back on any error."""
    with session_factory(url)() as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def get_session() -> Iterator[Session]:
    """A request's session, for a dependency; the caller commits what it writes."""
    with session_factory()() as session:
        yield session


def read_one(url: str, statement: Any, params: dict[str, Any] | None = None) -> Any:
    """One row (or None) of a single read in autocommit: no BEGIN/ROLLBACK, and no pre-ping round trip.

    For the reads made on every request (a polled job's version, an API key). Their pool does not
    ping before each checkout, so a connection that went stale (a database restart) fails once:
    SQLAlchemy then invalidates the pool and the read is made again on a fresh connection, as a
    ping would have, without paying a round trip for it every time.
    """
    key = (os.getpid(), normalize_url(url))
    engine = _read_engines.get(key)
    if engine is None:
        with _lock:
            engine = _read_engines.setdefault(
                key, make_engine(key[1], pre_ping=False).execution_options(isolation_level="AUTOCOMMIT"))
    for retry in (False, True):
        try:
            with engine.connect() as connection:
                return connection.execute(statement, params or {}).one_or_none()
        except DBAPIError as exc:
            if retry or not exc.connection_invalidated:
                raise
    return None  # not reached: the second attempt returns or raises


def dispose_engines() -> None:
    """Close every pooled connection of this process and forget the engines (tests, shutdown)."""
    with _lock:
        for engines in (_engines, _read_engines):
            for (pid, _url), engine in list(engines.items()):
                if pid == os.getpid():
                    engine.dispose()
            engines.clear()
        _factories.clear()


def migrate(url: str | None = None, revision: str = "head") -> None:
    """Run ``alembic upgrade`` on ``url`` (default: the configured ``DATABASE_URL``)."""
    from alembic import command

    command.upgrade(alembic_config(url), revision)


@functools.cache
def code_revisions() -> tuple[str, frozenset[str]]:
    """The head revision of this code's migrations, and every revision they know."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config(url="sqlite://"))  # the scripts only: no database
    return str(script.get_current_head()), frozenset(r.revision for r in script.walk_revisions())


def schema_revision(connection: Connection) -> str | None:
    """The revision the database's schema is at (None: never migrated)."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def alembic_config(url: str | None = None) -> Any:
    """An Alembic config for the ``migrations`` package, independent of the working directory."""
    from alembic.config import Config

    import migrations

    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.attributes["url"] = normalize_url(url or get_settings().database_url)
    return config
