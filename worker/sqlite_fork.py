"""SQLite connections that a fork never catches inside a call: the embedded broker's.

SQLite guards its allocator and shared caches with process-wide mutexes. A process forked while another
thread of its parent is inside SQLite inherits those mutexes held, by a thread it does not have, and its
own first SQLite call waits for ever. On the embedded default that is every worker's lot: its main thread
polls the broker (SQLite) every 50 ms while its pool forks a fresh process for each job from another
thread, and that process claims its job through SQLite (the embedded database). About one fork in twenty
into a thread busy in SQLite left a process that hung; a job it had taken waited for ever.

Every call a ``ForkSafeConnection`` (or its cursor) makes into SQLite holds one lock, and this
process takes the same lock before each fork (``os.register_at_fork``) and lets it go after: a fork waits
for the call in progress, at most one busy timeout, and no call starts until the fork is done.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any


class _Guard:
    lock = threading.RLock()  # held by every call into SQLite through these connections, and across every fork


def _before_fork() -> None:
    _Guard.lock.acquire()


def _after_fork_in_parent() -> None:
    _Guard.lock.release()


def _after_fork_in_child() -> None:
    _Guard.lock = threading.RLock()  # the forking thread's hold belongs to the parent


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)


def _guarded(call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call)
    def run(*args: Any, **kwargs: Any) -> Any:
        with _Guard.lock:
            return call(*args, **kwargs)
    return run


class ForkSafeCursor(sqlite3.Cursor):
    def __next__(self) -> Any:
        with _Guard.lock:
            return super().__next__()


class ForkSafeConnection(sqlite3.Connection):
    """``sqlite3.connect(..., factory=ForkSafeConnection)``; SQLAlchemy: ``connect_args={"factory": ...}``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with _Guard.lock:
            super().__init__(*args, **kwargs)

    def cursor(self, factory: Any = ForkSafeCursor) -> Any:  # type: ignore[override]
        with _Guard.lock:
            return super().cursor(factory)


_STATEMENTS = ("execute", "executemany", "executescript", "close")
for _class, _base, _names in ((ForkSafeCursor, sqlite3.Cursor, (*_STATEMENTS, "fetchone", "fetchmany", "fetchall")),
                              (ForkSafeConnection, sqlite3.Connection, (*_STATEMENTS, "commit", "rollback"))):
    for _name in _names:
        setattr(_class, _name, _guarded(getattr(_base, _name)))
