"""Log lines as text or as JSON, one object per line, carrying the job id and attempt of the work they are about.

``VEERNET_LOG_FORMAT=json`` (api/settings.py) switches every `veernet` process to JSON: the API (its
own lines and uvicorn's), the workers and the reaper (Celery's handlers get the formatter through
``worker.celery_app``). A worker binds the job it runs with :func:`job_context` (the task) and
:func:`bind_attempt` (the claim, which is what decides the attempt); every line logged meanwhile, from
any module, carries ``job_id`` and ``attempt``, so one job's story can be pulled out of a log
aggregator with a single filter. Context variables are per thread: a thread working for a job (the
heartbeat) binds it again.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_job_id: ContextVar[int | None] = ContextVar("veernet_job_id", default=None)
_attempt: ContextVar[int | None] = ContextVar("veernet_attempt", default=None)
# LogRecord attributes that are the record's own, not extra fields a caller passed with extra={...}.
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


@contextmanager
def job_context(job_id: int, attempt: int | None = None) -> Iterator[None]:
    """Lines logged inside carry ``job_id`` (and ``attempt`` once known); both are unbound afterwards."""
    job_token, attempt_token = _job_id.set(int(job_id)), _attempt.set(attempt)
    try:
        yield
    finally:
        _attempt.reset(attempt_token)
        _job_id.reset(job_token)


def bind_job(job_id: int, attempt: int | None = None) -> None:
    """Bind the job (and attempt) for the rest of this thread's context: a thread that works for one job."""
    _job_id.set(int(job_id))
    _attempt.set(attempt)


def bind_attempt(attempt: int) -> None:
    """The claim returned this attempt (the fencing token): later lines of the job carry it."""
    _attempt.set(int(attempt))


def current_job() -> tuple[int | None, int | None]:
    return _job_id.get(), _attempt.get()


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, process, and
    job_id and attempt when the record was logged for a job; extra={...} fields are kept."""

    def format(self, record: logging.LogRecord) -> str:
        job_id, attempt = current_job()
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        if job_id is not None:
            entry["job_id"] = job_id
        if attempt is not None:
            entry["attempt"] = attempt
        for name, value in vars(record).items():
            if name not in _RECORD_FIELDS and not name.startswith("_"):
                entry.setdefault(name, value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str)


def formatter(log_format: str) -> logging.Formatter:
    """The formatter for VEERNET_LOG_FORMAT ("text" or "json")."""
    return JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)


def configure(level: str, log_format: str) -> None:
    """The root logger of a `veernet` process: one stderr handler in ``log_format`` at ``level``."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(log_format))
    logging.basicConfig(level=level.upper(), handlers=[handler])  # a no-op where logging is set up already


def use_json(*loggers: logging.Logger) -> None:
    """Put the JSON formatter on every handler of ``loggers`` (ones another library set up: Celery's, uvicorn's)."""
    json_formatter = JsonFormatter()
    for logger in loggers:
        for handler in logger.handlers:
            handler.setFormatter(json_formatter)


def flush_before_exit() -> None:
    """Flush and close every log handler, and flush the standard streams: before ``os._exit`` or ``os.execv``,
    which skip the interpreter's own shutdown (a worker ending a stalled job's process, or restarting itself)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
