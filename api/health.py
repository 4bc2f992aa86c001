"""Liveness of the three things the service depends on: database, broker and checkpoint store."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import text

from api.db import get_engine
from api.queue import check_broker
from api.storage import get_store, probe_store


def check_database() -> None:
    with get_engine().connect() as connection:
        connection.execute(text("SELECT 1"))


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
        results[name] = None if error is None else f"{type(error).__name__}: {error}"
    return results
