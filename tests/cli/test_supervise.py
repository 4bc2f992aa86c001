"""`veernet up` and `veernet worker` stop their processes (api.cli.processes.supervise): real processes, real
signals. Each child records the signals it receives; its shutdown takes a moment, as a Celery worker's does,
so a second signal sent during it is recorded too (in a Celery worker it deadlocks the shutdown handler)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from e2e_procs import pid_alive, wait_until

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import os, signal, sys, time
from pathlib import Path
record, stubborn = Path(sys.argv[1]), sys.argv[2] == "stubborn"
def on(signum, frame):
    with record.open("a") as out:
        out.write(signal.Signals(signum).name + "\\n")
    if not stubborn:
        time.sleep(0.3)  # its shutdown: a signal sent now lands inside this handler
        sys.exit(0)
signal.signal(signal.SIGTERM, on)
signal.signal(signal.SIGINT, on)
Path(sys.argv[1] + ".pid").write_text(str(os.getpid()))
while True:
    time.sleep(1)
"""

SUPERVISOR = """
import logging, os, sys
from api.cli.processes import Managed, supervise
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
record, mode, grace = sys.argv[1], sys.argv[2], float(sys.argv[3])
child = Managed("child", [sys.executable, "-c", sys.argv[4], record, mode], dict(os.environ))
sys.exit(supervise([child], poll_s=0.05, grace_s=grace))
"""


def start(tmp_path: Path, mode: str = "clean", grace_s: float = 60.0) -> tuple[subprocess.Popen[str], Path, int]:
    """A supervisor of one child, in a process group of its own as a terminal's command is: (it, the child's
    record of signals, the child's pid)."""
    record = tmp_path / "signals"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    supervisor = subprocess.Popen([sys.executable, "-c", SUPERVISOR, str(record), mode, str(grace_s), CHILD],
                                  env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    pid_file = Path(f"{record}.pid")
    wait_until(lambda: (pid_file.exists() and pid_file.read_text()) or supervisor.poll() is not None, 60,
               "the child to start", every_s=0.05)
    assert supervisor.poll() is None, supervisor.communicate()[1]
    return supervisor, record, int(pid_file.read_text())


def finish(supervisor: subprocess.Popen[str], timeout_s: float) -> tuple[int, str]:
    try:
        _, err = supervisor.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(supervisor.pid, signal.SIGKILL)
        raise
    return supervisor.returncode, err


def signals(record: Path) -> list[str]:
    return record.read_text().split() if record.exists() else []


def test_ctrl_c_reaches_each_child_once(tmp_path: Path) -> None:
    """A terminal's Ctrl-C signals the whole foreground process group at once. Sent together, the two copies a
    child would get (the terminal's and the supervisor's) may merge into one pending signal; the one that
    hangs a Celery worker lands while the child already handles the first. So here the child's copy goes
    first, and the supervisor's once the child is inside its handler."""
    supervisor, record, child = start(tmp_path)
    os.kill(child, signal.SIGINT)
    wait_until(lambda: signals(record) == ["SIGINT"], 30, "the child to handle its SIGINT", every_s=0.01,
               diagnose=lambda: str(signals(record)))
    supervisor.send_signal(signal.SIGINT)
    code, err = finish(supervisor, 30)
    assert code == 0, err
    assert signals(record) == ["SIGINT"], "the supervisor signalled a child that was already stopping"


def test_a_stop_sent_to_the_supervisor_alone_reaches_its_children(tmp_path: Path) -> None:
    supervisor, record, _ = start(tmp_path)
    supervisor.send_signal(signal.SIGTERM)  # as `docker stop` (through the image's init) does
    code, err = finish(supervisor, 30)
    assert code == 0, err
    assert signals(record) == ["SIGTERM"]


def test_a_child_that_does_not_stop_is_killed_after_the_grace(tmp_path: Path) -> None:
    supervisor, record, child = start(tmp_path, "stubborn", grace_s=2.0)
    started = time.monotonic()
    supervisor.send_signal(signal.SIGTERM)
    code, err = finish(supervisor, 30)
    assert code == 0, err
    assert time.monotonic() - started >= 2.0, "killed before its grace ran out"
    assert signals(record) == ["SIGTERM"] and not pid_alive(child)
    assert "killing child" in err and "still running 2 s after the stop" in err, err


def test_a_second_stop_kills_the_children_at_once(tmp_path: Path) -> None:
    supervisor, record, child = start(tmp_path, "stubborn", grace_s=600.0)
    supervisor.send_signal(signal.SIGTERM)
    wait_until(lambda: signals(record) == ["SIGTERM"], 30, "the stop passed on (the child ignores it)",
               every_s=0.05, diagnose=lambda: str(signals(record)))
    supervisor.send_signal(signal.SIGTERM)  # the user presses Ctrl-C again
    code, err = finish(supervisor, 30)
    assert code == 0 and not pid_alive(child), err
    assert "killing child" in err and "stopped a second time" in err, err
