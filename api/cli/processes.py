"""Starting and supervising the service's processes: workers pinned to GPUs, the API, the reaper.

No torch and no FastAPI here: `veernet worker` must stay light in the parent process.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

log = logging.getLogger(__name__)
RESTART_DELAY_S = 5.0  # a crashed worker comes back after this; its job is recovered by lease anyway
# A stop (SIGTERM, or Ctrl-C's SIGINT) reaches the children from the supervisor this long after it reached the
# supervisor, and only those still running. A terminal's Ctrl-C (or a `kill` of the process group) has already
# signalled them all at once, and a second signal landing inside a Celery worker's shutdown handler deadlocks it
# (celery.utils.dispatch.signal takes a lock the interrupted handler holds): it would never exit. Their own
# handlers take milliseconds; a stop sent to the supervisor alone (`docker stop`) is this much later.
FORWARD_DELAY_S = 1.0
# A child still running this long after the stop is killed, so that a stop always ends. A training worker
# checkpoints and releases its job well within it; one killed anyway leaves its lease to run out and the
# reaper to hand the job on, from its last checkpoint. Within docker-compose.yml's stop_grace_period.
STOP_GRACE_S = 100.0
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
PRELOAD_SEGMENT = {"VEERNET_PRELOAD": "segment"}  # inference workers: the compiled column tracer loaded too


def preload_env(queue: str) -> dict[str, str]:
    """What a worker of `queue` loads before its pool forks (worker.tasks._preload): only inference workers
    trace, so only they load the compiled tracer."""
    return PRELOAD_SEGMENT if queue == "segment" else PRELOAD
# The memory probe (veernet_core.memory) counts allocations with torch's profiler, whose every start and stop
# prints a trace marker line (kineto's "USDT" level, above ERROR) into the job's log; 6 silences kineto.
# A user's own KINETO_LOG_LEVEL wins.
QUIET_PROFILER = {"KINETO_LOG_LEVEL": "6"}


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
    base = {**QUIET_PROFILER, **os.environ, **preload_env(queue)}
    if not gpus:
        env = {**base, "CUDA_VISIBLE_DEVICES": ""}
        return [Managed(f"{queue}-cpu", celery_worker_argv(queue, f"{queue}-cpu@%h", loglevel), env)]
    # CUDA numbers GPUs fastest first by default, nvidia-smi by PCI bus: on a box of mixed GPUs, --gpus 1
    # would otherwise not be the GPU that nvidia-smi (and `--gpus all`, which asks it) calls 1.
    order = {"CUDA_DEVICE_ORDER": base.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID")}
    return [
        Managed(f"{queue}-gpu{gpu}", celery_worker_argv(queue, f"{queue}-gpu{gpu}@%h", loglevel),
                {**base, **order, "CUDA_VISIBLE_DEVICES": gpu})
        for gpu in gpus
    ]


def celery_node(child: Managed) -> str:
    """The Celery node name ``child`` registers as: its --hostname, with %h expanded as Celery expands it."""
    from celery.utils.nodenames import host_format

    return str(host_format(child.argv[child.argv.index("--hostname") + 1]))


def supervise(children: list[Managed], poll_s: float = 0.5, forward_delay_s: float = FORWARD_DELAY_S,
              grace_s: float = STOP_GRACE_S) -> int:
    """Run until SIGTERM/SIGINT; then pass SIGTERM on to every child still running `forward_delay_s` later and
    wait for them to finish, killing any still running `grace_s` after the stop. A second stop kills them at once.

    Children pass SIGTERM on to their training process, which checkpoints and releases its job.
    """
    stopped_at: float | None = None
    stops = 0
    forwarded = killed = False

    def stop(_signum: int, _frame: object) -> None:  # flags only: the loop below acts (and logs) on them
        nonlocal stopped_at, stops
        stops += 1
        if stopped_at is None:
            stopped_at = time.monotonic()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for child in children:
            child.start()
        while True:
            alive = [c for c in children if c.process and c.process.poll() is None]
            if stopped_at is None:
                _restart_dead(children)
                time.sleep(poll_s)
                continue
            if not alive:
                return 0
            since = time.monotonic() - stopped_at
            if not forwarded and since >= forward_delay_s:
                forwarded = True
                log.info("stopping %s", ", ".join(c.name for c in alive))
                for child in alive:
                    if child.process:
                        child.process.send_signal(signal.SIGTERM)  # nothing once it has exited
            if not killed and (stops > 1 or since >= grace_s):
                killed = True  # once: a killed child may take a poll or two to be reaped
                _kill(alive, "stopped a second time" if stops > 1 else f"still running {grace_s:.0f} s after the stop")
            time.sleep(min(poll_s, 0.05))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _kill(children: list[Managed], why: str) -> None:
    for child in children:
        if child.process and child.process.poll() is None:
            log.warning("killing %s (pid %s): %s", child.name, child.process.pid, why)
            child.process.kill()


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


def port_taken(host: str, port: int) -> str | None:
    """Why the API could not listen on ``host:port`` (something already does), or None if it could.

    A bind test, as uvicorn binds (SO_REUSEADDR: a port left in TIME_WAIT by a service that just
    stopped is free). Checked before anything starts: a client that found another service on the port
    would report its answers as ours.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"port {port} on {host} is in use (another service?)"
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None

