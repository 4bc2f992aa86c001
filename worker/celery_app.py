"""The one Celery configuration, built lazily from ``api.settings``. No torch, no veernet_core here.

The broker carries only job ids; the job row in the database decides who owns a job (DESIGN.md,
"Who owns a job"). So delivery is at-least-once and duplicates are harmless: late ack, reject on
worker loss, prefetch 1, and a visibility timeout longer than the longest job so Redis does not
hand a running job's message to a second worker on its own.

``celery -A worker.celery_app worker`` finds the app through the module attribute ``app``.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from functools import cache
from pathlib import Path
from typing import Any

from celery import Celery, bootsteps, signals
from kombu import Queue

from api.logs import use_json
from api.settings import Settings, get_settings
from worker.sqlite_fork import ForkSafeConnection

TRAIN_TASK = "veernet.train"
SEGMENT_TASK = "veernet.segment"
PROBE_TASK = "veernet.probe"
REAP_TASK = "veernet.reap"
# Training workers take probe jobs too (api.cli.processes): a probe measures the device they train on. On a
# queue of its own, a probe waits for the next free training worker, not behind every queued training job.
TRAIN_QUEUE, SEGMENT_QUEUE, PROBE_QUEUE, REAPER_QUEUE = "train", "segment", "probe", "reaper"
TASK_FOR_KIND = {"train": (TRAIN_TASK, TRAIN_QUEUE), "segment": (SEGMENT_TASK, SEGMENT_QUEUE),
                 "probe": (PROBE_TASK, PROBE_QUEUE)}
TASK_MODULES = ("worker.tasks",)  # imported by worker processes only; the API sends by name
LONGEST_JOB_S = 48 * 3600  # the reference multiclass run is ~9 h on one GPU; leave a wide margin
# kombu polls the embedded broker every second by default: up to a second's wait on a scan that takes
# a second to digitise. A poll is one small SQLite read per queue (about 1 % of a core at this rate).
EMBEDDED_POLL_S = 0.05


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery settings, as one dict."""
    embedded = settings.uses_embedded_broker
    return {
        "broker_url": settings.broker_url,
        "broker_connection_retry_on_startup": True,
        "broker_connection_timeout": 3,  # a down broker fails a send fast; the reaper re-sends
        # Redis re-delivers an unacked message after this; the lease, not the broker, recovers jobs. The
        # embedded broker's SQLite connections hold off a fork while in a call: a pool process forked beside
        # the main thread's poll could hang in its first SQLite call (worker.sqlite_fork).
        "broker_transport_options": ({"connect_args": {"factory": ForkSafeConnection}} if embedded
                                     else {"visibility_timeout": LONGEST_JOB_S}),
        "task_publish_retry_policy": {"max_retries": 2, "interval_start": 0, "interval_step": 0.5,
                                      "interval_max": 1},
        "task_serializer": "json",
        "accept_content": ["json"],
        "result_serializer": "json",
        "task_ignore_result": True,  # status lives in the jobs table
        "task_acks_late": True,  # a job whose worker dies is redelivered ...
        "task_reject_on_worker_lost": True,  # ... including when the child is killed mid-job
        "worker_prefetch_multiplier": 1,  # never hold a second nine-hour job while running one
        "worker_concurrency": 1,  # one job per process; one process per GPU
        "worker_max_tasks_per_child": 1,  # a fresh child (and a fresh CUDA context) per job
        # Keep training through a broker outage: the job row is the truth, the message only a wake-up.
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "worker_send_task_events": not embedded,  # for flower; the embedded transport has no fanout
        "task_send_sent_event": not embedded,
        "task_queues": [Queue(TRAIN_QUEUE), Queue(SEGMENT_QUEUE), Queue(PROBE_QUEUE), Queue(REAPER_QUEUE)],
        "task_default_queue": TRAIN_QUEUE,
        "task_routes": {TRAIN_TASK: {"queue": TRAIN_QUEUE}, SEGMENT_TASK: {"queue": SEGMENT_QUEUE},
                        PROBE_TASK: {"queue": PROBE_QUEUE}, REAP_TASK: {"queue": REAPER_QUEUE}},
        "beat_schedule": {
            "reap": {
                "task": REAP_TASK,
                "schedule": settings.reaper_interval_seconds,
                # A reap nobody ran in time is superseded by the next one; never let them pile up.
                "options": {"queue": REAPER_QUEUE, "expires": settings.reaper_interval_seconds},
            },
        },
        "beat_schedule_filename": str(settings.veernet_data_dir / "celerybeat-schedule"),
        "include": list(TASK_MODULES),
    }


@cache
def get_celery() -> Celery:
    """This process's Celery app, configured from the environment on first use."""
    settings = get_settings()
    _ensure_local_dirs(settings)
    app = Celery("veernet", set_as_current=False)
    app.conf.update(celery_config(settings))
    if settings.uses_embedded_broker:
        app.steps["consumer"].add(EmbeddedBrokerPolling)
    return app


class EmbeddedBrokerPolling(bootsteps.StartStopStep):
    """A worker polls the embedded broker every EMBEDDED_POLL_S. Not a transport option: kombu's
    SQLAlchemy channel hands those to create_engine, which refuses `polling_interval`."""

    requires = ("celery.worker.consumer.connection:Connection",)

    def start(self, consumer: Any) -> None:
        if consumer.connection.transport.driver_type == "sql":
            consumer.connection.transport.polling_interval = EMBEDDED_POLL_S


def _ensure_local_dirs(settings: Settings) -> None:
    """The embedded broker's file and beat's schedule file need their directories."""
    prefix = "sqla+sqlite:///"
    dirs = [settings.veernet_data_dir]
    if settings.broker_url.startswith(prefix) and settings.broker_url[len(prefix):] not in ("", ":memory:"):
        dirs.append(Path(settings.broker_url[len(prefix):]).expanduser().parent)
    for directory in dirs:
        with suppress(OSError):  # a read-only data dir only matters to beat, which then says so itself
            directory.mkdir(parents=True, exist_ok=True)


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def _log_format(logger: logging.Logger, **_: Any) -> None:
    """VEERNET_LOG_FORMAT=json: Celery's own handlers (worker, beat, task loggers) write JSON lines too."""
    if get_settings().veernet_log_format == "json":
        use_json(logger)


def __getattr__(name: str) -> Celery:
    """``app`` (and ``celery``) are built on first access, so importing this module costs nothing."""
    if name in ("app", "celery"):
        return get_celery()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
