"""The reaper re-sends a queued job only when its message is gone from the broker, never while it is
merely waiting for a free worker; and it passes again when the next lease runs out."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from api_testkit import SMALL_CONFIG, take_messages
from kombu import Connection

from api import jobs
from api.db import session_scope
from api.models import Job, utcnow
from api.queue import jobs_in_broker, send_job_id
from api.reaper import EXPIRY_MARGIN_S, next_pass_s, reap_once
from api.settings import Settings


@pytest.fixture(params=["embedded", "redis"])
def broker(request: pytest.FixtureRequest, service: Settings, reconfigure: Callable[..., Settings]) -> Iterator[str]:
    """The service's broker: the embedded one, or a real Redis."""
    if request.param == "embedded":
        yield service.broker_url
        return
    url = str(request.getfixturevalue("redis_url"))
    reconfigure(BROKER_URL=url)
    yield url


def queued_job(age_s: float) -> int:
    with session_scope() as session:
        job = jobs.create_job(session, "train", SMALL_CONFIG)
        job.queued_at = utcnow() - timedelta(seconds=age_s)
        return job.id


def take_all(url: str, queue: str) -> list[int]:
    """Consume every waiting message, as workers would: the job ids they carried."""
    return [args[0] for _task, args in take_messages(url, queue)]


def test_the_broker_is_read_for_the_jobs_it_holds_per_queue(broker: str) -> None:
    assert jobs_in_broker("train") == set()
    for job_id, kind in ((41, "train"), (42, "train"), (7, "segment")):
        assert send_job_id(job_id, kind)
    assert (jobs_in_broker("train"), jobs_in_broker("segment")) == ({41, 42}, {7})
    assert sorted(take_all(broker, "train")) == [41, 42]
    assert jobs_in_broker("train") == set()


def test_a_job_waiting_for_a_free_worker_is_not_sent_again_and_a_lost_one_is(broker: str) -> None:
    settings = Settings()
    waiting, lost = queued_job(age_s=600), queued_job(age_s=600)
    assert send_job_id(waiting, "train")  # its message sits in the queue: every worker is busy

    report = reap_once()
    assert report.resent == [lost], "only the job whose message is gone is sent again"
    assert take_all(broker, "train") == [waiting, lost], "one message each: no duplicate"

    # The broker emptied (a flushed Redis): both messages are gone, so both are sent again.
    later = utcnow() + timedelta(seconds=settings.queued_resend_seconds + 1)
    assert reap_once(now=later).resent == [waiting, lost]
    assert sorted(take_all(broker, "train")) == [waiting, lost]


def test_a_message_a_worker_took_but_has_not_acknowledged_counts_on_redis_until_it_should_have_claimed(
        service: Settings, reconfigure: Any, redis_url: str) -> None:
    url = redis_url
    resend_s = 2.0  # the reaper below runs well within it, even on a loaded machine
    reconfigure(BROKER_URL=url, QUEUED_RESEND_SECONDS=resend_s)
    job_id = queued_job(age_s=600)
    assert send_job_id(job_id, "train")
    with Connection(url) as connection:
        channel = connection.default_channel
        message = channel.basic_get("train", no_ack=False)  # taken: a worker is about to claim it
        assert message is not None and message.payload[0] == [job_id]
        assert jobs_in_broker("train", resend_s) == {job_id}
        assert reap_once().resent == []

        # The worker never claims: it died or froze after taking the message, which Redis would hand on
        # only after its visibility timeout, days later. Once it is as old as a lost send, it is one.
        time.sleep(resend_s + 0.1)
        assert (jobs_in_broker("train", resend_s), jobs_in_broker("train")) == (set(), {job_id})
        assert reap_once().resent == [job_id]
        assert take_all(url, "train") == [job_id], "sent again: another worker takes it"
        channel.basic_ack(message.delivery_tag)  # the frozen worker wakes; its claim would be refused
    assert jobs_in_broker("train") == set()


def test_an_unreadable_broker_falls_back_to_sending_again(service: Settings, reconfigure: Any,
                                                          closed_port: int) -> None:
    reconfigure(BROKER_URL=f"redis://127.0.0.1:{closed_port}/0")
    assert jobs_in_broker("train") is None


def test_the_next_pass_is_when_the_first_lease_runs_out_if_that_is_sooner(service: Settings) -> None:
    assert next_pass_s(10.0) == 10.0, "nothing running: the interval"
    job_id = queued_job(age_s=0)
    with session_scope() as session:
        assert jobs.claim(session, job_id, "w1", lease_s=3.0) == 1
    wait_s = next_pass_s(10.0)
    assert 2.0 < wait_s <= 3.0 + EXPIRY_MARGIN_S
    assert next_pass_s(1.0) == 1.0, "a lease running out after the next tick changes nothing"
    with session_scope() as session:
        job = session.get(Job, job_id)
        assert job is not None
        job.lease_expires_at = utcnow() - timedelta(seconds=5)
    assert next_pass_s(10.0) == EXPIRY_MARGIN_S, "already expired: at once"
    assert reap_once().requeued == [job_id]
