"""How GET /jobs/{id}, the most polled endpoint, is answered: on the event loop when it can be, and with
at most one database read of a job at a time per process.

A poll is answered at once from what this process kept (api.queries.peek_detail_json: fresh, vouched for
by Postgres' change feed, or changed less than STATUS_CACHE_SECONDS ago); a job that changed, or that
nothing vouches for past half its window, is read again in the background meanwhile. Only a poll with
nothing to serve waits, and polls of the same job wait for the same read.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.concurrency import run_in_threadpool

from api import queries
from api.db import session_factory
from api.errors import JobNotFound
from api.settings import Settings

log = logging.getLogger(__name__)
_reads: dict[tuple[str, int], asyncio.Future[tuple[bytes, str]]] = {}  # the read under way per job


async def detail_json(job_id: int, settings: Settings, tenant: str | None) -> bytes:
    """The job's detail as JSON for ``tenant`` (None: the admin); JobNotFound if it is not theirs."""
    data, refresh = queries.peek_detail_json(job_id, settings, tenant)
    if data is not None:
        if refresh:
            _read(job_id, settings).add_done_callback(_quietly)
        return data
    read, owner = await asyncio.shield(_read(job_id, settings))
    if tenant is not None and owner != tenant:
        raise JobNotFound(job_id)
    return read


def _read(job_id: int, settings: Settings) -> asyncio.Future[tuple[bytes, str]]:
    """The read of the job under way, or a new one: the bytes kept for every caller, and the job's tenant."""
    key = (settings.database_url, job_id)
    found = _reads.get(key)
    if found is None or found.get_loop() is not asyncio.get_running_loop():  # another loop's: a test's, gone
        found = _reads[key] = asyncio.ensure_future(run_in_threadpool(_read_job, job_id, settings))
        found.add_done_callback(lambda done: _reads.pop(key) if _reads.get(key) is done else None)
    return found


def _read_job(job_id: int, settings: Settings) -> tuple[bytes, str]:
    with session_factory()() as session:
        return queries.job_detail_json_and_tenant(session, job_id, settings)


def _quietly(done: asyncio.Future[tuple[bytes, str]]) -> None:
    """A background read that failed (the job is gone, the database is down): the next poll reads again."""
    if not done.cancelled() and done.exception() is not None:
        log.debug("background read of a polled job failed: %r", done.exception())
