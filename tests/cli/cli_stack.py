"""The service the `veernet` client commands are tested against, and the `veernet` command run as a
user runs it.

The service is what `veernet api --reaper` and `veernet worker --cpu [--queue segment]` run, on
SQLite, the embedded broker and a local checkpoint directory, with API keys required
(VEERNET_ADMIN_KEY set) and a tenant key made as `veernet keys create` makes one. The commands
under test run as subprocesses of the installed `veernet` script, on the same snapshot of the code.
Process helpers come from tests/e2e (conftest.py puts it on the path).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e_procs import FAST_LEASES, Proc, free_port, service_env, snapshot_code, wait_until
from e2e_stack import Stack, _answers, api_proc, create_bucket, start_workers, wait_healthy, worker_proc

from api import auth, db

VEERNET = str(Path(sys.executable).with_name("veernet"))
CLIENT_ENV = ("VEERNET_URL", "VEERNET_API_KEY")
PRESIGN_BUCKET = "cli-presign"


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Cli:
    """Runs `veernet ...` as a user would: URL and key from the environment unless a test says otherwise."""

    url: str
    key: str
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)

    def __call__(self, *args: str, timeout_s: float = 120.0, **env: str | None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([VEERNET, *args], env=self._env(env), cwd=self.cwd, capture_output=True, text=True,
                              timeout=timeout_s)

    def start(self, *args: str) -> subprocess.Popen[str]:
        """The command in the background, for a test to interrupt."""
        # PYTHONFAULTHANDLER: a command that hangs can be made to print every thread's stack (SIGABRT).
        # SIGINT as a terminal gives it: a test run started in the background (`make test &`, some CI
        # runners) ignores SIGINT, children inherit that, and Python then installs no Ctrl-C handler.
        return subprocess.Popen([VEERNET, *args], env=self._env({"PYTHONFAULTHANDLER": "1"}), cwd=self.cwd,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_default_sigint)

    def _env(self, changes: dict[str, str | None]) -> dict[str, str]:
        full = {**self.env, "VEERNET_URL": self.url, "VEERNET_API_KEY": self.key}
        for name, value in changes.items():
            if value is None:
                full.pop(name, None)
            else:
                full[name] = value
        return full


@dataclass
class CliService:
    stack: Stack
    cli: Cli
    checkpoints: Path  # the local checkpoint store: storage keys are paths under it


@contextmanager
def embedded_service(root: Path) -> Iterator[CliService]:
    """`veernet api --reaper`, a CPU train worker and a segment worker on a fresh data dir under ``root``."""
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
        # 80 columns, as a pipe gets by default: piped output must not wrap whatever the width.
        client_env = {k: v for k, v in env.items() if k != "VEERNET_ADMIN_KEY"} | {"COLUMNS": "80"}
        work = root / "work"
        work.mkdir()
        cli = Cli(stack.api_url, key, work, client_env)
        yield CliService(stack, cli, data / "checkpoints")
    finally:
        stack.stop()
        db.dispose_engines()




@dataclass
class Presigning:
    """A second API on the service's database whose checkpoints are in S3 (moto's server) with
    S3_PRESIGN=true: every download is a 307 to a presigned URL."""

    moto: Proc
    moto_port: int
    api: Proc
    url: str
    bucket: str

    def ready(self) -> Any:
        """Wait for the S3 server, create the bucket, wait for the API (healthy once its bucket exists);
        a boto3 client of the S3 server."""
        import boto3

        wait_until(lambda: _answers(self.moto_port) or not self.moto.alive(), 60, "the moto S3 server",
                   diagnose=self.moto.tail)
        endpoint = f"http://127.0.0.1:{self.moto_port}"
        create_bucket(endpoint, self.bucket)
        wait_healthy(self.api, self.url)
        return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                            region_name="us-east-1")


@contextmanager
def start_presigning_api(service: CliService, bucket: str) -> Iterator[Presigning]:
    """Started, not awaited: the caller waits when it needs it (Presigning.ready)."""
    logs, moto_port, port = service.stack.logs, free_port(), free_port()
    moto = Proc("moto", [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(moto_port)],
                service.stack.env, logs / "moto.log").start()
    env = {**service.stack.env, "CHECKPOINT_URL": f"s3://{bucket}/ckpt",
           "S3_ENDPOINT_URL": f"http://127.0.0.1:{moto_port}", "S3_PRESIGN": "true"}
    api = api_proc(env, logs / "presign", port).start()
    try:
        yield Presigning(moto, moto_port, api, f"http://127.0.0.1:{port}", bucket)
    finally:
        api.stop()
        moto.kill()
