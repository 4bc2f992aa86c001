"""Sending jobs to workers, by task name only (the API never imports ``worker.tasks``)."""

from __future__ import annotations

import base64
import json
import logging
import math
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from worker.celery_app import TASK_FOR_KIND, get_celery

if TYPE_CHECKING:
    from api.models import Job

log = logging.getLogger(__name__)
BROKER_CHECK_TIMEOUT_S = 3.0


def send_job(job: Job) -> bool:
    """Send the job's id to its queue. A failure is logged, not raised: the row stays queued and
    the reaper re-sends it after QUEUED_RESEND_SECONDS."""
    return send_job_id(job.id, job.kind)


def send_job_id(job_id: int, kind: str) -> bool:
    task, queue = TASK_FOR_KIND[kind]
    try:
        get_celery().send_task(task, args=[job_id], queue=queue)
    except Exception:  # kombu raises many types for a down broker
        log.exception("could not send job %s to queue %r; it stays queued and the reaper will re-send it",
                      job_id, queue)
        return False
    return True


def jobs_in_broker(kind: str, taken_within_s: float = math.inf) -> set[int] | None:
    """Ids of ``kind`` jobs whose message is in the broker: waiting in the queue, or (Redis) taken by a
    worker less than ``taken_within_s`` ago and not yet acknowledged. None when the broker cannot be
    read this way.

    The reaper re-sends a queued job only when its message is gone (a flushed Redis, a lost send), not
    while it is merely waiting for a free worker: otherwise every long wait would add a duplicate. A
    worker claims a job within moments of taking its message; one that took it long ago and never
    claimed died or froze in between, and Redis would hand the message on only after its visibility
    timeout (two days). Such a message counts as gone: a duplicate is harmless, claims are fenced.
    """
    task, queue = TASK_FOR_KIND[kind]
    try:
        with get_celery().connection_for_read() as connection:
            channel = connection.default_channel
            if connection.transport.driver_type == "sql":  # kombu's SQLAlchemy transport (the embedded broker)
                payloads = _embedded_payloads(channel, queue)
            elif connection.transport.driver_type == "redis":
                payloads = _redis_payloads(channel.client, queue, taken_within_s)
            else:
                return None
            return {job_id for job_id in map(lambda p: _job_id(p, task), payloads) if job_id is not None}
    except Exception as exc:  # an unreadable broker: the caller falls back to re-sending
        log.warning("could not read the %r queue of the broker (%s); re-sending unclaimed jobs", queue, exc)
        return None


def _redis_payloads(client: Any, queue: str, taken_within_s: float) -> Iterable[Any]:
    # kombu keeps one list per priority step ("train", "train\x06\x163", ...), and taken messages in
    # the "unacked" hash as [payload, exchange, routing_key] until the worker acknowledges them, with
    # the time each was taken in the "unacked_index" sorted set (by the taking worker's clock).
    for key in client.scan_iter(match=f"{queue}*", count=1000):
        if key in (queue.encode(), queue) or key.startswith(f"{queue}\x06\x16".encode()):
            yield from (json.loads(raw) for raw in client.lrange(key, 0, -1))
    tags = client.zrangebyscore("unacked_index", time.time() - taken_within_s, "+inf")
    for raw in client.hmget("unacked", tags) if tags else ():
        if raw is None:  # acknowledged in between
            continue
        payload, _exchange, routing_key = json.loads(raw)
        if routing_key == queue:
            yield payload


def _embedded_payloads(channel: Any, queue: str) -> Iterable[Any]:
    # kombu's SQLAlchemy transport marks a taken message invisible and never shows it again.
    message = channel.message_cls
    rows = channel._query_all(queue).filter(message.visible != False).all()  # noqa: E712 (SQL, not Python)
    channel.session.commit()
    return [json.loads(row.payload) for row in rows]


def _job_id(payload: Any, task: str) -> int | None:
    try:
        if payload["headers"]["task"] != task:
            return None
        args = json.loads(base64.b64decode(payload["body"]))[0]
        return int(args[0])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def check_broker(timeout_s: float = BROKER_CHECK_TIMEOUT_S) -> None:
    """Raise unless a connection to the broker can be opened."""
    with get_celery().connection_for_write() as connection:
        connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout_s)
