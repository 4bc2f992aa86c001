"""`veernet up`: the whole service on one machine, against whatever the environment names."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from api.cli.processes import Managed, celery_worker_argv, supervise, worker_processes
from api.settings import get_settings, redact_url

log = logging.getLogger(__name__)


def stack_processes(host: str, port: int, gpus: Sequence[str] | None, loglevel: str = "INFO") -> list[Managed]:
    """The API, training workers (one per GPU, or one on the CPU), an inference worker and the reaper.

    With the embedded broker the reaper is a thread in the API process; otherwise it is Celery beat.
    """
    settings = get_settings()
    env = dict(os.environ)
    api_argv = [sys.executable, "-m", "api.cli", "api", "--host", host, "--port", str(port),
                "--loglevel", loglevel.lower()]
    if settings.uses_embedded_broker:
        api_argv.append("--reaper")
    children = [Managed("api", api_argv, env)]
    children += worker_processes(gpus, "train", loglevel)
    children += worker_processes(None, "segment", loglevel)
    if not settings.uses_embedded_broker:
        children.append(Managed("reaper", celery_worker_argv("reaper", "reaper@%h", loglevel, beat=True), env))
    return children


def run_stack(host: str, port: int, gpus: Sequence[str] | None, loglevel: str = "INFO") -> int:
    from api.db import migrate

    settings = get_settings()
    migrate()
    log.info("database %s; broker %s; checkpoints %s", redact_url(settings.database_url),
             redact_url(settings.broker_url), settings.checkpoint_url)
    return supervise(stack_processes(host, port, gpus, loglevel))
