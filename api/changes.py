"""Which jobs changed, pushed by Postgres, so an API process can keep a polled job's status until it changes.

Migration 0004 makes every write to a job's row or timeline ``NOTIFY veernet_job_changed, '<id>'`` at
commit. Each API process listens on one connection in a daemon thread (:class:`ChangeFeed`). A reader
takes a :meth:`~ChangeFeed.token` for the job *before* it reads the database and keeps it with what it
read; the feed :meth:`~ChangeFeed.vouches` for that read while no notification for the job has arrived
since. Every doubt voids every token: while the feed is not connected nothing is vouched for (readers
fall back to checking the job's version in the database), and each new connection starts a new epoch,
since notifications sent while it was away are lost. SQLite has no NOTIFY: no feed, always the fallback.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import suppress

import psycopg
from sqlalchemy.engine import make_url

from api.db import POSTGRES_CONNECT_TIMEOUT_S, normalize_url

log = logging.getLogger(__name__)
CHANNEL = "veernet_job_changed"  # migration 0004
APPLICATION_NAME = "veernet-change-feed"  # as pg_stat_activity shows the listening connection
RECONNECT_S = 1.0  # after the connection is lost, or could not be made
PING_S = 5.0  # with no notification for this long, check that the connection is still alive
WAIT_S = 0.5  # the longest wait for a notification before looking at the stop flag
MAX_TRACKED_JOBS = 100_000  # past this many changed jobs, start a new epoch instead of growing

Token = tuple[int, int]  # (epoch, the job's notification count in it)


class ChangeFeed:
    """One process's LISTEN connection to one database, run in a daemon thread."""

    def __init__(self, url: str) -> None:
        self._dsn = make_url(normalize_url(url)).set(drivername="postgresql").render_as_string(hide_password=False)
        self._epoch = 0  # 0: not listening; vouch for nothing
        self._epochs = 0
        self._changes: dict[int, int] = {}
        self._first_change: dict[int, float] = {}  # job: when the first change since its last read was heard
        self._stop = threading.Event()
        self.connected = threading.Event()
        self._thread = threading.Thread(target=self._run, name="veernet-change-feed", daemon=True)
        self._thread.start()

    def token(self, job_id: int) -> Token | None:
        """Take before reading the job; None while the feed cannot vouch for anything."""
        self._first_change.pop(job_id, None)  # the read will see what changed so far
        return self._now(job_id)

    def _now(self, job_id: int) -> Token | None:
        epoch = self._epoch
        return None if epoch == 0 else (epoch, self._changes.get(job_id, 0))

    def changed_for(self, job_id: int, token: Token | None) -> float | None:
        """How long ago the job first changed since ``token`` was taken (seconds), if the feed knows;
        None if it does not (not listening, another epoch, or no change since)."""
        if token is None or token[0] != self._epoch or self.vouches(job_id, token):
            return None
        first = self._first_change.get(job_id)
        return None if first is None else time.monotonic() - first

    def vouches(self, job_id: int, token: Token | None) -> bool:
        """True if what was read after taking ``token`` is still the job as it is in the database."""
        return token is not None and token == self._now(job_id)

    def stop(self) -> None:
        """Vouch for nothing from now on; the thread ends within WAIT_S."""
        self._stop.set()
        self._epoch = 0

    def _new_epoch(self) -> None:
        self._changes = {}
        self._first_change = {}
        self._epochs += 1
        self._epoch = self._epochs

    def _run(self) -> None:
        warned = False
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._dsn, autocommit=True, connect_timeout=POSTGRES_CONNECT_TIMEOUT_S,
                                     application_name=APPLICATION_NAME) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._new_epoch()  # only now: whatever changed while away was not heard
                    self.connected.set()
                    if warned:
                        log.warning("job change feed: listening again")
                    warned = False
                    for job_id in self._listen(conn):
                        self._first_change.setdefault(job_id, time.monotonic())
                        self._changes[job_id] = self._changes.get(job_id, 0) + 1
                        if len(self._changes) > MAX_TRACKED_JOBS:
                            self._new_epoch()
            except psycopg.Error as exc:
                if not warned:
                    log.warning("job change feed lost (%s); status polls check the database until it is back",
                                type(exc).__name__)
                warned = True
            finally:
                self._epoch = 0
                self.connected.clear()
            self._stop.wait(RECONNECT_S)
        self._epoch = 0

    def _listen(self, conn: psycopg.Connection) -> Iterator[int]:
        checked = time.monotonic()
        while not self._stop.is_set():
            for notify in conn.notifies(timeout=WAIT_S):
                checked = time.monotonic()
                with suppress(ValueError):
                    yield int(notify.payload)
            if time.monotonic() - checked > PING_S:  # quiet: make sure the connection is not silently gone
                conn.execute("SELECT 1")
                checked = time.monotonic()


_feeds: dict[tuple[int, str], ChangeFeed] = {}
_lock = threading.Lock()


def feed(url: str) -> ChangeFeed | None:
    """This process's feed for ``url``, started on first use; None if the database cannot notify (SQLite)."""
    key = (os.getpid(), normalize_url(url))
    found = _feeds.get(key)
    if found is not None or make_url(key[1]).get_backend_name() != "postgresql":
        return found
    with _lock:
        if key not in _feeds:
            _feeds[key] = ChangeFeed(url)
        return _feeds[key]


def token(url: str, job_id: int) -> Token | None:
    """The token of ``job_id`` in this process's feed for ``url`` (None: no feed, or not listening)."""
    found = feed(url)
    return None if found is None else found.token(job_id)


def vouches(url: str, job_id: int, taken: Token | None) -> bool:
    """True if ``url``'s feed vouches for a read of ``job_id`` made after ``taken``; no feed is started."""
    found = _feeds.get((os.getpid(), normalize_url(url)))
    return found is not None and found.vouches(job_id, taken)


def changed_for(url: str, job_id: int, taken: Token | None) -> float | None:
    """:meth:`ChangeFeed.changed_for` on ``url``'s feed; None if there is none. No feed is started."""
    found = _feeds.get((os.getpid(), normalize_url(url)))
    return None if found is None else found.changed_for(job_id, taken)


def stop_feeds() -> None:
    """Stop this process's feeds (tests, shutdown)."""
    with _lock:
        found = list(_feeds.values())
        _feeds.clear()
    for each in found:
        each.stop()
