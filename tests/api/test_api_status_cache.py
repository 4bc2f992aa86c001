"""The per-process status cache: fresh within STATUS_CACHE_SECONDS, then kept while Postgres has
notified no change (api/changes.py) or else version-checked, and a cancel through this process is
visible at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event

from api import changes, jobs, queries, status_reads
from api.db import session_scope
from api.errors import JobNotFound
from api.settings import Settings, get_settings


def test_worker_writes_show_after_the_cache_window(client: TestClient, running_job: tuple[int, int],
                                                   reconfigure: Callable[..., Settings]) -> None:
    reconfigure(STATUS_CACHE_SECONDS=3600)
    job_id, attempt = running_job
    assert client.get(f"/jobs/{job_id}").json()["progress"]["global_step"] in (None, 0)
    with session_scope() as session:
        assert jobs.record_progress(session, job_id, attempt, global_step=7, total_steps=20, step_time_s=1.0)
    cached = client.get(f"/jobs/{job_id}").json()
    reconfigure(STATUS_CACHE_SECONDS=0)  # the window is over: the next read checks the job's version
    fresh = client.get(f"/jobs/{job_id}").json()
    assert cached["progress"]["global_step"] in (None, 0), "within the window the cached detail is served"
    assert fresh["progress"]["global_step"] == 7, "after the window a changed job is rebuilt"


def test_version_check_alone_is_never_stale(client: TestClient, running_job: tuple[int, int]) -> None:
    job_id, attempt = running_job  # STATUS_CACHE_SECONDS=0 in the service fixture
    for step in (1, 2, 3):
        with session_scope() as session:
            assert jobs.record_progress(session, job_id, attempt, global_step=step, total_steps=20)
        assert client.get(f"/jobs/{job_id}").json()["progress"]["global_step"] == step
    with session_scope() as session:
        assert jobs.record_event(session, job_id, attempt, "resumed", "from a checkpoint")
    assert client.get(f"/jobs/{job_id}").json()["events"][-1]["kind"] == "resumed"


def test_a_cancel_is_visible_at_once(client: TestClient, running_job: tuple[int, int],
                                     reconfigure: Callable[..., Settings]) -> None:
    reconfigure(STATUS_CACHE_SECONDS=60)
    job_id, _ = running_job
    assert client.get(f"/jobs/{job_id}").json()["cancel_requested"] is False
    assert client.post(f"/jobs/{job_id}/cancel").status_code == 202
    assert client.get(f"/jobs/{job_id}").json()["cancel_requested"] is True


# ---- the change feed (Postgres NOTIFY, api/changes.py) ----------------------------------------------


@pytest.fixture
def feed(service: Settings, reconfigure: Callable[..., Settings]) -> changes.ChangeFeed:
    """The API process's change feed on the test database (Postgres only), listening."""
    if not service.database_url.startswith("postgresql"):
        pytest.skip("SQLite has no NOTIFY: status polls always check the job's version there")
    settings = reconfigure(STATUS_CACHE_SECONDS=3600)
    found = changes.feed(settings.database_url)
    assert found is not None and found.connected.wait(10), "the feed connects and listens"
    return found


def _statements(run: Callable[[], object]) -> int:
    """How many SQL statements ``run`` sends, on any engine of this process."""
    sent: list[str] = []

    def count(*args: object) -> None:
        sent.append(str(args[2]))

    event.listen(Engine, "before_cursor_execute", count)
    try:
        run()
    finally:
        event.remove(Engine, "before_cursor_execute", count)
    return len(sent)


def _until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_sqlite_has_no_feed_and_polls_check_the_version(service: Settings) -> None:
    if service.database_url.startswith("postgresql"):
        pytest.skip("the Postgres side is the tests below")
    assert changes.feed(service.database_url) is None


def test_an_unchanged_job_is_served_without_a_query_and_a_change_is_heard(
        client: TestClient, running_job: tuple[int, int], feed: changes.ChangeFeed,
        reconfigure: Callable[..., Settings]) -> None:
    job_id, attempt = running_job
    settings = reconfigure(STATUS_CACHE_SECONDS=0.001)  # every poll past the JSON window
    feed = changes.feed(settings.database_url)
    assert feed is not None and feed.connected.wait(10)
    first = client.get(f"/jobs/{job_id}").json()
    time.sleep(0.01)
    assert _statements(lambda: client.get(f"/jobs/{job_id}").raise_for_status()) == 0, \
        "no change notified since the read: the kept detail is served, no query"
    with session_scope() as session:  # a worker's write, on another connection
        assert jobs.record_progress(session, job_id, attempt, global_step=7, total_steps=20, step_time_s=1.0)
    assert _until(lambda: client.get(f"/jobs/{job_id}").json()["progress"]["global_step"] == 7), \
        "the notification voids what was kept: the next poll reads the change"
    assert first["progress"]["global_step"] in (None, 0)
    with session_scope() as session:
        assert jobs.record_event(session, job_id, attempt, "resumed", "from a checkpoint")
    assert _until(lambda: client.get(f"/jobs/{job_id}").json()["events"][-1]["kind"] == "resumed")


def test_a_token_taken_before_a_change_is_never_vouched_for(running_job: tuple[int, int],
                                                            feed: changes.ChangeFeed) -> None:
    job_id, attempt = running_job
    other = feed.token(job_id + 1)
    taken = feed.token(job_id)
    assert taken is not None and feed.vouches(job_id, taken)
    with session_scope() as session:
        assert jobs.record_progress(session, job_id, attempt, global_step=1, total_steps=20)
    assert _until(lambda: not feed.vouches(job_id, taken)), "the job's write is heard"
    assert feed.vouches(job_id + 1, other), "another job's token still holds"


def test_a_lost_feed_vouches_for_nothing_and_a_new_connection_starts_over(
        client: TestClient, running_job: tuple[int, int], feed: changes.ChangeFeed, service: Settings) -> None:
    job_id, attempt = running_job
    taken = feed.token(job_id)
    with psycopg.connect(service.database_url.replace("+psycopg", ""), autocommit=True) as admin:
        killed = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                               (changes.APPLICATION_NAME,)).fetchall()
    assert any(row[0] for row in killed)
    assert _until(lambda: not feed.vouches(job_id, taken)), "cut off: nothing is vouched for"
    with session_scope() as session:  # written while the feed may be away: its notification is lost
        assert jobs.record_progress(session, job_id, attempt, global_step=5, total_steps=20)
    assert feed.connected.wait(10), "the feed reconnects"
    assert not feed.vouches(job_id, taken), "a token of the old connection stays void"
    assert client.get(f"/jobs/{job_id}").json()["progress"]["global_step"] == 5


def test_a_changed_job_is_answered_from_what_was_kept_while_it_is_read_again_in_the_background(
        client: TestClient, running_job: tuple[int, int], feed: changes.ChangeFeed) -> None:
    job_id, attempt = running_job  # STATUS_CACHE_SECONDS=3600 (the feed fixture)
    assert client.get(f"/jobs/{job_id}").json()["progress"]["global_step"] in (None, 0)
    with session_scope() as session:
        assert jobs.record_progress(session, job_id, attempt, global_step=9, total_steps=20, step_time_s=1.0)
    settings = get_settings()
    kept = queries._DETAIL_CACHE[(settings.database_url, job_id)]
    assert _until(lambda: feed.changed_for(job_id, kept.token) is not None), "the change is heard"
    data, refresh = queries.peek_detail_json(job_id, settings)
    assert data is not None and refresh, "the kept bytes are served (changed < the window), and a read is due"
    assert client.get(f"/jobs/{job_id}").json()["progress"]["global_step"] in (None, 0), "the poll does not wait"
    assert _until(lambda: client.get(f"/jobs/{job_id}").json()["progress"]["global_step"] == 9), \
        "the background read lands the change"


def test_polls_of_a_job_nothing_was_kept_for_wait_for_one_read(service: Settings, running_job: tuple[int, int],
                                                                reconfigure: Callable[..., Settings]) -> None:
    job_id, _ = running_job
    settings = reconfigure(STATUS_CACHE_SECONDS=3600)

    async def polls(count: int) -> list[bytes]:
        return await asyncio.gather(*(status_reads.detail_json(job_id, settings, None) for _ in range(count)))

    one = _statements(lambda: asyncio.run(polls(1)))
    queries.forget_detail(settings, job_id)
    many = _statements(lambda: asyncio.run(polls(10)))
    assert one > 0 and many == one, f"10 concurrent polls sent {many} statements, one poll {one}"
    with pytest.raises(JobNotFound):
        asyncio.run(status_reads.detail_json(job_id, settings, "another-tenant"))
