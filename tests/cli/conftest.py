"""The `veernet` client commands against a real embedded service, started once per module.

The service is what `veernet api --reaper` and `veernet worker --cpu [--queue segment]` run, on
SQLite, the embedded broker and a local checkpoint directory, with API keys required
(VEERNET_ADMIN_KEY set) and a tenant key made as `veernet keys create` makes one. The commands
under test run as subprocesses of the installed `veernet` script, on the same snapshot of the code.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))  # the e2e stack helpers, reused

from e2e_procs import FAST_LEASES, free_port, service_env, snapshot_code  # noqa: E402
from e2e_stack import Stack, api_proc, start_workers, wait_healthy, worker_proc  # noqa: E402

from api import auth, db  # noqa: E402

VEERNET = str(Path(sys.executable).with_name("veernet"))
CLIENT_ENV = ("VEERNET_URL", "VEERNET_API_KEY")


@dataclass
class Cli:
    """Runs `veernet ...` as a user would: URL and key from the environment unless a test says otherwise."""

    url: str
    key: str
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)

    def __call__(self, *args: str, timeout_s: float = 120.0, **env: str | None) -> subprocess.CompletedProcess[str]:
        full = {**self.env, "VEERNET_URL": self.url, "VEERNET_API_KEY": self.key}
        for name, value in env.items():
            if value is None:
                full.pop(name, None)
            else:
                full[name] = value
        return subprocess.run([VEERNET, *args], env=full, cwd=self.cwd, capture_output=True, text=True,
                              timeout=timeout_s)


@dataclass
class CliService:
    stack: Stack
    cli: Cli
    admin_key: str
    checkpoints: Path  # the local checkpoint store: storage keys are paths under it


@pytest.fixture(scope="module")
def cli_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliService]:
    root = tmp_path_factory.mktemp("cli")
    snapshot_code(root / "code")  # others edit this checkout: one run, one version of the code
    data, admin_key = root / "data", "admin-cli-tests-key"
    # MAX_JOB_FAILURES=1: a job that cannot run fails at its first attempt (watch's exit code for it).
    env = service_env(VEERNET_DATA_DIR=data, VEERNET_ADMIN_KEY=admin_key, MAX_JOB_FAILURES=1, **FAST_LEASES)
    for name in CLIENT_ENV:
        env.pop(name, None)
    port, database_url = free_port(), f"sqlite:///{data / 'veernet.db'}"
    stack = Stack(env=env, logs=root, database_url=database_url, broker_url=f"sqla+sqlite:///{data / 'broker.db'}",
                  api_url=f"http://127.0.0.1:{port}", api=api_proc(env, root, port, reaper=True), reaper=None,
                  workers=[worker_proc("train-cli", env, root), worker_proc("segment-cli", env, root, "segment")])
    try:
        for worker in stack.workers:  # they touch no job table until a job comes: start them while we migrate
            worker.start()
        data.mkdir(parents=True, exist_ok=True)
        db.migrate(database_url)
        with db.session_scope(database_url) as session:  # as `veernet keys create --tenant cli-tests` does
            _row, key = auth.create_key(session, "cli-tests", "tests/cli")
        stack.api.start()
        start_workers(stack.workers)
        wait_healthy(stack.api, stack.api_url)
        client_env = {k: v for k, v in env.items() if k != "VEERNET_ADMIN_KEY"} | {"COLUMNS": "200"}
        work = root / "work"
        work.mkdir()
        cli = Cli(stack.api_url, key, work, client_env)
        yield CliService(stack, cli, admin_key, data / "checkpoints")
    finally:
        stop_together(stack)
        db.dispose_engines()


def stop_together(stack: Stack) -> None:
    """Stop every process at once (each then gets its own grace period), not one after another."""
    procs = [*stack.workers, stack.api]
    for proc in procs:
        if proc.alive():
            proc.signal(signal.SIGTERM, group=False)
    stack.client.close()
    for proc in procs:
        proc.stop(timeout_s=20)
