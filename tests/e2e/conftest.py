"""End-to-end fixtures: the real stack, started once per session and repaired between tests.

Postgres (a fresh database), Redis (a db of the session's own, flushed), moto's S3 server in its own
process behind a link the tests can slow or cut, the API (uvicorn), the reaper (Celery beat) and two Celery training
workers started as `veernet worker --cpu` starts them. Every process is configured by environment
variables only; nothing runs in this process but the link and the test's own reads.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from e2e_jobs import CHAOS_CONFIG, FINISHED, ReferenceRun, job_row
from e2e_procs import migrate_database, snapshot_code, wait_until
from e2e_stack import Stack, moto_server, real_stack, redis_db, start_workers, wait_healthy


@pytest.fixture(scope="session")
def e2e_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Logs and files of the run, and the snapshot of the code every service process runs.

    VEERNET_E2E_DIR keeps them somewhere that outlives pytest's rotation of its temp dirs.
    """
    kept = os.environ.get("VEERNET_E2E_DIR")
    if kept:
        path = Path(kept) / time.strftime("%Y%m%d-%H%M%S")
        path.mkdir(parents=True)
    else:
        path = tmp_path_factory.mktemp("e2e")
    snapshot_code(path / "code")
    return path


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis db of this session's own (15, or the next free one down), flushed at the start."""
    try:
        with redis_db() as url:
            yield url
    except ConnectionError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def e2e_database(postgres_database: Callable[[str], AbstractContextManager[str]]) -> Iterator[str]:
    with postgres_database("veernet_e2e") as url:
        migrate_database(url)
        yield url


@pytest.fixture(scope="session")
def s3_port(e2e_dir: Path) -> Iterator[int]:
    with moto_server(e2e_dir / "moto.log") as port:
        yield port


@pytest.fixture(scope="session")
def chaos_reference(e2e_dir: Path) -> ReferenceRun:
    """The uninterrupted run of CHAOS_CONFIG, started in the background as soon as any e2e test runs."""
    return ReferenceRun(CHAOS_CONFIG, e2e_dir / "reference").start()


@pytest.fixture(scope="session")
def session_stack(e2e_dir: Path, e2e_database: str, redis_url: str, s3_port: int,
                  chaos_reference: ReferenceRun) -> Iterator[Stack]:
    stack = real_stack(e2e_dir / "stack", e2e_database, redis_url, s3_port, workers=2)
    try:
        yield stack.start()
    finally:
        stack.stop()
        if stack.link is not None:
            stack.link.close()
        if chaos_reference.process is not None and chaos_reference.process.poll() is None:
            chaos_reference.process.kill()


@pytest.fixture
def stack(session_stack: Stack) -> Iterator[Stack]:
    """The real stack with both workers up and the S3 link healthy; leftovers cancelled afterwards."""
    _repair(session_stack)
    before = _job_ids(session_stack)
    yield session_stack
    _repair(session_stack)
    _cancel_leftovers(session_stack, _job_ids(session_stack) - before)


def _repair(stack: Stack) -> None:
    """Whatever the last test froze, killed or cut comes back."""
    if stack.link is not None:
        stack.link.passthrough()
    for proc in [*([stack.reaper] if stack.reaper else []), *stack.workers]:
        if proc.alive():
            proc.signal(signal.SIGCONT)
        else:
            proc.start()
    if not stack.api.alive():
        stack.api.start()
    wait_healthy(stack.api, stack.api_url)
    start_workers(stack.workers)


def _job_ids(stack: Stack) -> set[int]:
    from sqlalchemy import select

    from api.db import session_scope
    from api.models import Job

    with session_scope(stack.database_url) as session:
        return set(session.scalars(select(Job.id)))


def _cancel_leftovers(stack: Stack, job_ids: set[int]) -> None:
    """A failed test may leave a job behind: cancel it so the next test starts with idle workers."""
    unfinished = [j for j in job_ids if job_row(stack.database_url, j).status not in FINISHED]
    for job_id in unfinished:
        with contextlib.suppress(Exception):
            stack.client.post(f"/jobs/{job_id}/cancel")
    with contextlib.suppress(AssertionError):
        wait_until(lambda: all(job_row(stack.database_url, j).status in FINISHED for j in unfinished), 60,
                   "leftover jobs to stop")

