"""read_one: the per-request reads skip the pool's pre-ping, and still survive a connection the server
dropped (a database restart), by invalidating the pool and reading again once."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import text

from api import db


@pytest.fixture(scope="session")
def database_url(postgres_url: str) -> str:
    return postgres_url


def test_a_read_after_the_server_dropped_its_connection_is_made_again_on_a_fresh_one(database_url: str) -> None:
    pid_query = text("SELECT pg_backend_pid()")
    first = db.read_one(database_url, pid_query)[0]
    assert db.read_one(database_url, pid_query)[0] == first, "the pooled connection is reused: no new session"
    admin = database_url.replace("+psycopg", "")
    with psycopg.connect(admin, autocommit=True) as connection:  # as a restart would, from the server's side
        assert connection.execute("SELECT pg_terminate_backend(%s)", (first,)).fetchone() == (True,)
    again = db.read_one(database_url, pid_query)[0]
    assert again != first, "read on a fresh connection"


def test_a_query_error_is_not_retried(database_url: str) -> None:
    from sqlalchemy.exc import DBAPIError

    with pytest.raises(DBAPIError):
        db.read_one(database_url, text("SELECT * FROM no_such_table"))
    assert db.read_one(database_url, text("SELECT 1"))[0] == 1
