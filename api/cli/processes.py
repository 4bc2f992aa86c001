"""Starting and supervising the service's processes: workers pinned to GPUs, the API, the reaper.

No torch and no FastAPI here: `veernet worker` must stay light in the parent process.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

log = logging.getLogger(__name__)
RESTART_DELAY_S = 5.0  # a crashed worker comes back after this; its job is recovered by lease anyway
SEGMENT_TASKS_PER_CHILD = 1000  # a fresh process now and then bounds any slow leak


@dataclass
class Managed:
    """A child process the supervisor restarts if it dies on its own."""

    name: str
    argv: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    started_at: float = field(default=0.0)

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, env=self.env)
        self.started_at = time.monotonic()
        log.info("started %s (pid %s): %s", self.name, self.process.pid, " ".join(self.argv))


PRELOAD = {"VEERNET_PRELOAD": "1"}  # training and inference workers: torch imported once, before the pool forks


def celery_worker_argv(queue: str, hostname: str, loglevel: str = "INFO", beat: bool = False) -> list[str]:
    # A training worker also takes probe jobs: the planner's measurements of a model on its device.
    queues = "train,probe" if queue == "train" else queue
    argv = [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", queues,
            "--concurrency", "1", "--prefetch-multiplier", "1", "--pool", "prefork",
            "--hostname", hostname, "--loglevel", loglevel, "--without-gossip", "--without-mingle"]
    if queue == "segment":  # inference is short: keep the process and its loaded models between scans
        argv += ["--max-tasks-per-child", str(SEGMENT_TASKS_PER_CHILD)]
    return argv + (["--beat"] if beat else [])


def worker_processes(gpus: Sequence[str] | None, queue: str, loglevel: str = "INFO") -> list[Managed]:
    """One Celery worker per GPU, each seeing only its own device; or one CPU worker."""
    base = {**os.environ, **PRELOAD}
    if not gpus:
        env = {**base, "CUDA_VISIBLE_DEVICES": ""}
        return [Managed(f"{queue}-cpu", celery_worker_argv(queue, f"{queue}-cpu@%h", loglevel), env)]
    return [
        Managed(f"{queue}-gpu{gpu}", celery_worker_argv(queue, f"{queue}-gpu{gpu}@%h", loglevel),
                {**base, "CUDA_VISIBLE_DEVICES": gpu})
        for gpu in gpus
    ]


def supervise(children: list[Managed], poll_s: float = 0.5) -> int:
    """Run until SIGTERM/SIGINT; then forward it to every child and wait for them to finish.

    Children forward SIGTERM to their training process, which checkpoints and releases its job.
    """
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.process and child.process.poll() is None:
                child.process.send_signal(signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for child in children:
            child.start()
        while True:
            alive = [c for c in children if c.process and c.process.poll() is None]
            if stopping and not alive:
                return 0
            if not stopping:
                _restart_dead(children)
            time.sleep(poll_s)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _restart_dead(children: list[Managed]) -> None:
    for child in children:
        if child.process is None or child.process.poll() is None:
            continue
        if time.monotonic() - child.started_at < RESTART_DELAY_S:
            continue
        child.restarts += 1
        log.warning("%s exited with %s; restarting (restart %d)", child.name, child.process.returncode,
                    child.restarts)
        child.start()


def parse_gpus(text: str) -> list[str]:
    gpus = [g.strip() for g in text.split(",") if g.strip()]
    if not gpus or any(not g.isdigit() for g in gpus) or len(set(gpus)) != len(gpus):
        raise ValueError(f"--gpus takes distinct GPU indices like 0,1; got {text!r}")
    return gpus
