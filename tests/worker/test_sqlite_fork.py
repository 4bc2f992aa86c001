"""Forks while another thread works in SQLite: with the embedded broker's connections (worker.sqlite_fork),
no forked process hangs in its own first SQLite call."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

from worker.sqlite_fork import ForkSafeConnection

FORKS = 300  # a plain connection in the busy thread leaves about 1 child in 20 hung (see the module's docstring)
HUNG_AFTER_S = 10.0


def _forks_into_busy_sqlite(tmp_path: Path, factory: type[sqlite3.Connection]) -> int:
    """Fork FORKS children while a thread polls and writes a database through ``factory``'s connections, as a
    worker's main thread polls the embedded broker; each child opens another database and queries it, as a
    fresh pool process claims its job. The number of children that had not ended after HUNG_AFTER_S."""
    broker, jobs = tmp_path / "broker.db", tmp_path / "jobs.db"
    with sqlite3.connect(broker) as setup:
        setup.execute("create table message (id integer primary key, visible integer)")
    stop = threading.Event()

    def poll() -> None:
        db = sqlite3.connect(broker, factory=factory)
        while not stop.is_set():
            db.execute("insert into message (visible) values (1)")
            db.commit()
            db.execute("select id from message where visible = 1 order by id limit 1").fetchone()
            db.execute("update message set visible = 0 where id % 3 = 0")
            db.commit()
        db.close()

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    hung = 0
    try:
        for _ in range(FORKS):
            pid = os.fork()
            if pid == 0:  # the child: its first SQLite calls
                try:
                    with sqlite3.connect(jobs, timeout=30) as db:
                        db.execute("create table if not exists job (id integer primary key)")
                        db.execute("select count(*) from job").fetchone()
                finally:
                    os._exit(0)
            deadline = time.monotonic() + HUNG_AFTER_S
            while not os.waitpid(pid, os.WNOHANG)[0]:
                if time.monotonic() > deadline:
                    hung += 1
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.001)
    finally:
        stop.set()
        poller.join(10)
    return hung


def test_no_process_forked_beside_a_thread_in_sqlite_hangs_on_its_own_first_sqlite_call(tmp_path: Path) -> None:
    assert _forks_into_busy_sqlite(tmp_path, ForkSafeConnection) == 0
