"""The handoff watchdog: a task message this worker took that no pool process ever starts restarts the worker.

A worker runs each job in a fresh pool process (``worker_max_tasks_per_child`` 1, for a fresh CUDA
context). Celery's prefork pool has a race there: a message that arrives while the pool replaces its
process can be handed to neither the old process nor the new one. The worker then holds the message
(its one prefetch slot) and takes no other, so its job, and every job behind it, waits for ever: the
reaper re-sends the message, but a worker holding one takes none, and the embedded default has no other
worker. A pool process stopped before it takes its job (SIGSTOP, a box frozen in part) ends the same way.

The watchdog is a thread of the worker's main process, apart from its event loop (which may be what is
stuck): every second it looks at the task messages the worker took and no pool process has started.
One left so for HANDOFF_SECONDS, and the worker ends its pool processes and restarts itself in place
(the same process, command line and log): the fresh worker reads the queue again and takes the job
from the reaper's re-sent message. A claim is fenced, so a message delivered twice runs the job once.
The reaper's own worker is watched the same way (its passes, not those it holds back for a lease's end).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from celery import signals
from celery.worker import state as worker_state

from api.logs import flush_before_exit
from worker.celery_app import PROBE_TASK, REAP_TASK, SEGMENT_TASK, TRAIN_TASK

log = logging.getLogger(__name__)
# The reaper's worker recycles its pool process after every pass too, and a wedged one recovers no lease.
WATCHED_TASKS = frozenset({TRAIN_TASK, SEGMENT_TASK, PROBE_TASK, REAP_TASK})
CHECK_EVERY_S = 1.0
EX_RESTART_FAILED = 70  # EX_SOFTWARE
REAP_WAIT_S = 5.0  # for the killed pool processes to be reaped before the restart


class HandoffWatchdog(threading.Thread):
    """Watches this worker's task messages from their arrival until a pool process accepts them."""

    def __init__(self, handoff_s: float, restart: Callable[[str], None]) -> None:
        super().__init__(name="veernet-handoff", daemon=True)
        self.handoff_s, self.restart = handoff_s, restart
        # Held here, not weakly: a request the pool lost may be referenced by nothing else.
        self._taken: dict[Any, float] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def taken(self, request: Any) -> None:
        """The worker took ``request``'s message (Celery's task_received, in the main process)."""
        if request.name in WATCHED_TASKS and request.eta is None:
            with self._lock:
                self._taken[request] = time.monotonic()

    def check(self, now: float | None = None) -> list[Any]:
        """The requests no pool process accepted within HANDOFF_SECONDS that the worker still holds
        (reserved, not settled); forgets those accepted, acknowledged or settled otherwise."""
        now = time.monotonic() if now is None else now
        held = worker_state.reserved_requests  # Celery's: taken to run now, and not yet settled
        stuck = []
        with self._lock:
            for request, at in list(self._taken.items()):
                if request.time_start is not None or request.acknowledged:
                    del self._taken[request]
                elif now - at > self.handoff_s:
                    if request in held:
                        stuck.append(request)
                    else:  # revoked, expired or rejected: Celery settled it without a pool process
                        del self._taken[request]
        return stuck

    def run(self) -> None:
        while not self._stopped.wait(CHECK_EVERY_S):
            lost = self.check()
            if lost:
                names = ", ".join(f"{r.name}{list(r.args)}" for r in lost)
                self.restart(f"task message {names} taken over {self.handoff_s:g} s ago and started by no pool "
                             "process (Celery's prefork pool lost it, or its process is stopped)")
                return

    def stop(self) -> None:
        self._stopped.set()


def restart_worker(reason: str) -> None:
    """End this worker's pool processes and run its command line again in this process."""
    import billiard.process

    log.error("%s; restarting this worker", reason)
    children = list(billiard.process.active_children())
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGKILL)  # a stopped process too
    deadline = time.monotonic() + REAP_WAIT_S
    for child in children:
        while time.monotonic() < deadline:
            try:
                if os.waitpid(child.pid, os.WNOHANG)[0]:
                    break
            except ChildProcessError:
                break
            time.sleep(0.05)
    flush_before_exit()
    try:
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    except OSError:  # nothing to restart with: exit, and let the supervisor (veernet worker, compose) start one
        os._exit(EX_RESTART_FAILED)


_watchdog: HandoffWatchdog | None = None


@signals.worker_ready.connect
def _start(**_: Any) -> None:
    global _watchdog
    from api.settings import get_settings

    _watchdog = HandoffWatchdog(get_settings().worker_handoff_seconds, restart_worker)
    _watchdog.start()


@signals.task_received.connect
def _taken(request: Any = None, **_: Any) -> None:
    if _watchdog is not None and request is not None:
        _watchdog.taken(request)


@signals.worker_shutting_down.connect
def _stop(**_: Any) -> None:
    if _watchdog is not None:
        _watchdog.stop()
