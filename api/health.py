"""Liveness of the three things the service depends on: database (its schema at this code's head
included), broker and checkpoint store."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import Connection, text

from api.db import code_revisions, get_engine, schema_revision
from api.queue import check_broker
from api.storage import get_store, probe_store

_at_head: set[str] = set()  # database URLs this process found at the code's head: their schema is not read again
_at_head_lock = threading.Lock()


class Unhealthy(Exception):
    """A check's own finding: reported as its message alone, which says what to do."""


def check_database() -> None:
    engine = get_engine()
    url = engine.url.render_as_string(hide_password=False)
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))
        if url not in _at_head:
            check_schema(connection)
            with _at_head_lock:
                _at_head.add(url)


def check_schema(connection: Connection) -> None:
    """Unhealthy unless the database's schema is at this code's newest migration.

    A database never migrated, or migrated by an older version, fails every request that touches a
    new table or column; /healthz says so instead of answering ok.
    """
    head, known = code_revisions()
    current = schema_revision(connection)
    if current == head:
        return
    if current is not None and current not in known:
        raise Unhealthy(f"schema not at head (database at {current}, which this code does not know; code at {head}): "
                        "a newer version of VeerNet migrated it; run that version")
    raise Unhealthy(f"schema not at head (database at {current or 'no schema'}, code at {head}): "
                    "run veernet migrate")


def forget_schema_checks() -> None:
    """Read every database's schema revision again at its next check (tests that swap databases)."""
    with _at_head_lock:
        _at_head.clear()


def check_store() -> None:
    probe_store(get_store())


CHECKS: dict[str, Callable[[], None]] = {
    "database": check_database, "broker": check_broker, "store": check_store,
}


def run_checks() -> dict[str, str | None]:
    """{name: None if ok, else what went wrong}; the checks run in parallel, each with its own timeout."""
    with ThreadPoolExecutor(max_workers=len(CHECKS)) as pool:
        futures = {name: pool.submit(check) for name, check in CHECKS.items()}
    results: dict[str, str | None] = {}
    for name, future in futures.items():
        error = future.exception()
        results[name] = None if error is None else describe(error)
    return results


def describe(error: BaseException) -> str:
    return str(error) if isinstance(error, Unhealthy) else f"{type(error).__name__}: {error}"
