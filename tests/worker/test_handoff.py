"""The handoff watchdog on real Celery requests: what it counts as a job message no pool process started.

The restart itself (the pool ended, the worker run again in place, the job run) is tested end to end on a
real worker whose pool process is stopped: tests/e2e/test_embedded_default.py."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from celery.worker import state as worker_state
from celery.worker.request import Request
from kombu import Message

import worker.tasks  # noqa: F401  (registers the tasks)
from worker.celery_app import PROBE_TASK, REAP_TASK, SEGMENT_TASK, TRAIN_TASK, get_celery
from worker.handoff import HandoffWatchdog


def _request(name: str, *args: Any, **options: Any) -> Request:
    """The Request a worker's main process builds from a message of task ``name`` as the API sends it."""
    app = get_celery()
    sent = app.amqp.as_task_v2(f"{name}-{args}", name, args=args, **options)
    message = Message(body=json.dumps(sent.body), headers=sent.headers, content_type="application/json",
                      content_encoding="utf-8", delivery_info={"exchange": "", "routing_key": "train"})
    return Request(message, app=app, task=app.tasks[name])


def _reserved(request: Request) -> Request:
    """What the worker's main process does with a request it will run now: reserve it (until task_ready)."""
    worker_state.task_reserved(request)
    return request


def _never(reason: str) -> None:
    raise AssertionError(f"restarted: {reason}")


def test_a_job_message_no_pool_process_accepted_in_time_is_stuck_and_an_accepted_one_is_forgotten() -> None:
    watchdog = HandoffWatchdog(30.0, _never)
    lost, started = _reserved(_request(TRAIN_TASK, 7)), _reserved(_request(SEGMENT_TASK, 8))
    watchdog.taken(lost)
    watchdog.taken(started)
    now = time.monotonic()
    assert watchdog.check(now + 29) == [], "not yet: a pool process may still be starting"
    started.on_accepted(4321, time.monotonic())  # what the main process does when a pool process takes it
    assert watchdog.check(now + 31) == [lost]
    assert list(watchdog._taken) == [lost], "the accepted request is forgotten"
    worker_state.task_ready(lost)  # settled (say revoked) without a pool process: no longer held, forgotten
    assert watchdog.check(now + 32) == [] and not watchdog._taken


def test_job_tasks_and_reaper_passes_taken_to_run_now_are_watched_and_those_held_for_later_are_not() -> None:
    watchdog = HandoffWatchdog(1.0, _never)
    later = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    watchdog.taken(_request(REAP_TASK, eta=later))  # the extra pass at a lease's end, held until then
    watchdog.taken(_request(TRAIN_TASK, 9, eta=later))
    probe, reap = _reserved(_request(PROBE_TASK, 10)), _reserved(_request(REAP_TASK))
    watchdog.taken(probe)
    watchdog.taken(reap)
    assert set(watchdog.check(time.monotonic() + 60)) == {probe, reap}
    for request in list(worker_state.reserved_requests):
        worker_state.task_ready(request)


def test_the_watchdog_restarts_once_naming_the_job_and_ends() -> None:
    reasons: list[str] = []
    restarted = threading.Event()

    def restart(reason: str) -> None:
        reasons.append(reason)
        restarted.set()

    watchdog = HandoffWatchdog(0.2, restart)
    lost = _reserved(_request(TRAIN_TASK, 11))
    watchdog.taken(lost)
    watchdog.start()
    assert restarted.wait(10), "the watchdog never restarted the worker"
    watchdog.join(10)
    assert not watchdog.is_alive(), "one restart, then the thread ends (the process is replaced)"
    assert len(reasons) == 1 and "task message veernet.train[11]" in reasons[0]
    assert "started by no pool process" in reasons[0]
    worker_state.task_ready(lost)
