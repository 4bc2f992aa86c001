"""Service processes for end-to-end tests and bench/recovery.py, started the way `veernet` starts them.

Each ``Proc`` runs in its own process group, so a test can signal the whole "box" (a Celery parent
and its pool child) or one process of it. Every process is configured by environment variables
only (``service_env``) and imports the code from one snapshot (``snapshot_code``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from api.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SERVICE_ENV = {name.upper() for name in Settings.model_fields}
CODE_PACKAGES = ("api", "worker", "veernet_core", "migrations")
T = TypeVar("T")
_code = ROOT  # where service processes import the code from; see snapshot_code

# Short enough that a lost worker is noticed within seconds; the heartbeat renews six times per lease.
FAST_LEASES = {"LEASE_SECONDS": 6, "HEARTBEAT_SECONDS": 1, "REAPER_INTERVAL_SECONDS": 1, "WORKER_HANDOFF_SECONDS": 10,
               "QUEUED_RESEND_SECONDS": 5,
               # Polls here assert that progress and ETA move between reads; the cache has its own tests.
               "STATUS_CACHE_SECONDS": 0}


def child_pids(pid: int) -> list[int]:
    """The processes ``pid`` started (a worker's: its pool processes)."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False).stdout
    return [int(child) for child in found.split()]


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(probe: Callable[[], T | None], timeout_s: float, what: str, every_s: float = 0.2,
               diagnose: Callable[[], str] | None = None) -> T:
    """Poll ``probe`` until it returns something truthy; AssertionError naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f"\n{diagnose()}" if diagnose else ""
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}{extra}")
        time.sleep(every_s)


def snapshot_code(dest: Path) -> Path:
    """Copy the service's packages as they are now and run every later process from the copy.

    The working tree may be edited while a long run goes on (a shared checkout); a worker forked
    mid-run would then import different code from the reference run or the migrated schema. With a
    snapshot, one run tests one version of the code.

    The caches in `__pycache__` come along with their sources' times (copy2): Python's bytecode and
    numba's compiled tracer (`veernet_core.digitise.tracer_loop`) are checked against their source's
    time and size, so where the checkout's caches are current every process loads them instead of
    compiling (about 27 s of CPU per inference worker for numba alone), and where a source has
    changed since, that one is compiled again.
    """
    global _code
    for package in CODE_PACKAGES:
        shutil.copytree(ROOT / package, dest / package)
    _code = dest
    return dest


def code_root() -> Path:
    return _code


def migrate_database(url: str) -> None:
    """`veernet migrate` on ``url``, with the code the service processes run."""
    subprocess.run([sys.executable, "-m", "api.cli", "migrate"], env=service_env(DATABASE_URL=url), cwd=_code,
                   check=True, capture_output=True, timeout=180)


def service_env(**settings: object) -> dict[str, str]:
    """The environment of every service process: this one's, minus any service setting or AWS
    variable the developer has set, plus ``settings`` (NAME=value)."""
    env = {k: v for k, v in os.environ.items() if k.upper() not in SERVICE_ENV and not k.startswith("AWS_")}
    # A deployed worker has its bytecode cached; without it every fresh job process compiles the code.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update({
        "PYTHONPATH": str(_code), "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": "",
        # One intra-op thread per process: on a shared 2-core machine, OpenMP threads spinning
        # against each other make a step ~10x slower. Every run compared bit for bit uses the same.
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
    })
    env.update({name.upper(): str(value) for name, value in settings.items()})
    return env


@dataclass
class Proc:
    """A service process in its own process group, its output appended to ``log``."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    _log_offset: int = 0

    def start(self) -> Proc:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(self.argv, env=self.env, cwd=self.env.get("PYTHONPATH", ROOT), stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None, f"{self.name} was never started"
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, sig: int, *, group: bool = True) -> None:
        """``sig`` to the whole process group (the box), or to the main process only."""
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(self.pid, sig)
            else:
                os.kill(self.pid, sig)

    def kill(self) -> None:
        if self.popen is None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        self.popen.wait(timeout=30)

    def stop(self, timeout_s: float = 30.0) -> None:
        """A planned stop (SIGTERM to the main process), then SIGKILL if it lingers."""
        if not self.alive():
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM, group=False)
        try:
            self.popen.wait(timeout=timeout_s)  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            self.kill()
        self.signal(signal.SIGKILL)  # leftovers of the group, if any

    def output(self) -> str:
        """What this run of the process has logged so far."""
        with contextlib.suppress(FileNotFoundError), self.log.open("rb") as handle:
            handle.seek(self._log_offset)
            return handle.read().decode(errors="replace")
        return ""

    def tail(self, lines: int = 40) -> str:
        return f"--- {self.name} ({self.log}) ---\n" + "\n".join(self.output().splitlines()[-lines:])

    def wait_logged(self, pattern: str, timeout_s: float) -> None:
        wait_until(lambda: re.search(pattern, self.output()) or not self.alive(), timeout_s,
                   f"{self.name} to log {pattern!r}", diagnose=self.tail)
        assert self.alive(), f"{self.name} exited with {self.popen.returncode if self.popen else '?'}\n{self.tail()}"


def process_group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, reaped by nobody yet, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"
