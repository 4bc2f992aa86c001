"""The real stack for end-to-end tests and bench/recovery.py: the API, a reaper and training workers
on Postgres, Redis and S3, the S3 server behind a link the caller can break.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from e2e_link import FaultyLink
from e2e_procs import FAST_LEASES, Proc, code_root, free_port, process_group, service_env, wait_until

from api.cli.processes import celery_worker_argv, preload_env


@contextlib.contextmanager
def moto_server(log: Path) -> Iterator[int]:
    """A real S3-compatible HTTP server (moto's server mode) in its own process; yields its port."""
    port = free_port()
    proc = Proc("moto", [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                service_env(), log).start()
    try:
        wait_until(lambda: _answers(port) or not proc.alive(), 60, "the moto S3 server", diagnose=proc.tail)
        assert proc.alive(), proc.tail()
        yield port
    finally:
        proc.kill()


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def redis_db(host: str = "127.0.0.1:6379", candidates: tuple[int, ...] = (15, 14, 12, 11, 10, 9, 8)) -> Iterator[str]:
    """A Redis db (as a broker URL) that no other test session or bench on this machine is using, flushed.

    Celery's queue names are fixed, so two sessions sharing a db would take each other's messages;
    a file lock per db number keeps them apart (bench/api_load.py uses db 13). Raises
    ConnectionError when Redis is down.
    """
    import redis

    for db in candidates:
        with open(Path(tempfile.gettempdir()) / f"veernet-e2e-redis-{db}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            url = f"redis://{host}/{db}"
            client = redis.Redis.from_url(url, socket_connect_timeout=3)
            try:
                client.flushdb()
            except redis.RedisError as exc:
                raise ConnectionError(f"Redis at {host} unavailable: {exc}") from exc
            try:
                yield url
            finally:
                with contextlib.suppress(redis.RedisError):
                    client.flushdb()
                client.close()
            return
    raise ConnectionError(f"Redis dbs {candidates} are all in use by other test sessions")


def create_bucket(endpoint: str, bucket: str) -> None:
    import boto3

    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                 region_name="us-east-1").create_bucket(Bucket=bucket)


def worker_proc(name: str, env: dict[str, str], logs: Path, queue: str = "train") -> Proc:
    """A training worker exactly as `veernet worker --cpu` starts one (api.cli.processes)."""
    return Proc(name, celery_worker_argv(queue, f"{name}@%h", "INFO"),
                {**env, **preload_env(queue), "CUDA_VISIBLE_DEVICES": ""}, logs / f"{name}.log")


def start_workers(workers: list[Proc], timeout_s: float = 90.0) -> None:
    for worker in workers:
        if not worker.alive():
            worker.start()
    for worker in workers:
        worker.wait_logged(r"ready\.", timeout_s)


def api_proc(env: dict[str, str], logs: Path, port: int, reaper: bool = False) -> Proc:
    argv = [sys.executable, "-m", "api.cli", "api", "--host", "127.0.0.1", "--port", str(port),
            "--loglevel", "warning"]
    return Proc("api", argv + (["--reaper"] if reaper else []), env, logs / "api.log")


def wait_healthy(proc: Proc, url: str, timeout_s: float = 90.0) -> None:
    def healthy() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False
    wait_until(lambda: healthy() or not proc.alive(), timeout_s, f"{url}/healthz", diagnose=proc.tail)
    assert proc.alive(), proc.tail()


@dataclass
class Stack:
    """The real stack: API, beat reaper and training workers on Postgres, Redis and S3 (via the link)."""

    env: dict[str, str]
    logs: Path
    database_url: str
    broker_url: str
    api_url: str
    api: Proc
    reaper: Proc | None
    workers: list[Proc]
    link: FaultyLink | None = None  # None: checkpoints in a local directory
    s3_endpoint: str = ""  # the S3 server itself, behind the link
    bucket: str = ""
    prefix: str = ""
    client: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(base_url=self.api_url, timeout=30.0)

    def start(self) -> Stack:
        self.api.start()
        if self.reaper is not None:
            self.reaper.start()
        start_workers(self.workers)
        wait_healthy(self.api, self.api_url)
        if self.reaper is not None:
            self.reaper.wait_logged(r"ready\.", 90)
        return self

    def stop(self) -> None:
        """Stop every process at once (each then gets its own grace period), not one after another: a
        Celery worker takes about 5 s to shut down warm."""
        self.client.close()
        procs = [*self.workers, *([self.reaper] if self.reaper else []), self.api]
        for proc in procs:
            if proc.alive():
                proc.signal(signal.SIGCONT)
                proc.signal(signal.SIGTERM, group=False)
        for proc in procs:
            proc.stop(timeout_s=20)

    def worker_of(self, pid: int) -> Proc:
        """The worker whose process group holds ``pid`` (a pool child or the parent itself)."""
        group = process_group(pid)
        for worker in self.workers:
            if worker.alive() and worker.pid == group:
                return worker
        raise AssertionError(f"pid {pid} belongs to no running worker (its group is {group})")

    def tails(self) -> str:
        """Each process's log tail; for a worker, what its pool processes are doing too (state, wait channel):
        one that took a job and hangs shows here, where its own log says nothing."""
        parts = [p.tail() for p in [self.api, *([self.reaper] if self.reaper else [])]]
        for worker in self.workers:
            parts.append(worker.tail())
            if worker.alive():
                parts.append(subprocess.run(["ps", "-o", "pid,stat,etime,time,wchan:20,cmd", "--ppid", str(worker.pid)],
                                            capture_output=True, text=True, check=False).stdout)
        return "\n".join(parts)

    def s3_client(self) -> Any:
        """A boto3 client straight to the S3 server (not through the link)."""
        import boto3

        return boto3.client("s3", endpoint_url=self.s3_endpoint, aws_access_key_id="testing",
                            aws_secret_access_key="testing", region_name="us-east-1")


def real_stack(logs: Path, database_url: str, broker_url: str, s3_port: int, workers: int = 2,
               reaper: str = "beat", **settings: object) -> Stack:
    """Build (not start) the real stack; ``reaper`` is "beat" (a Celery beat process, as deployed) or
    "thread" (api.reaper.ReaperThread inside the API process)."""
    link = FaultyLink(s3_port)
    bucket, prefix = f"veernet-e2e-{os.getpid()}-{free_port()}", "ckpt"
    create_bucket(f"http://127.0.0.1:{s3_port}", bucket)
    env = service_env(DATABASE_URL=database_url, BROKER_URL=broker_url, CHECKPOINT_URL=f"s3://{bucket}/{prefix}",
                      S3_ENDPOINT_URL=link.url, VEERNET_DATA_DIR=logs / "data", **{**FAST_LEASES, **settings})
    port = free_port()
    reaper_proc = None
    if reaper == "beat":
        reaper_proc = Proc("reaper", celery_worker_argv("reaper", "reaper@%h", "INFO", beat=True), env,
                           logs / "reaper.log")
    return Stack(env=env, logs=logs, database_url=database_url, broker_url=broker_url, link=link,
                 s3_endpoint=f"http://127.0.0.1:{s3_port}", bucket=bucket, prefix=prefix,
                 api_url=f"http://127.0.0.1:{port}", api=api_proc(env, logs, port, reaper=reaper == "thread"),
                 reaper=reaper_proc, workers=[worker_proc(f"train-{i}", env, logs) for i in range(workers)])


def embedded_default(logs: Path, **settings: object) -> Stack:
    """Build (not start) the embedded default: SQLite, kombu's SQLAlchemy broker, a local checkpoint directory
    under ``logs``/data, the API with its reaper thread and one worker; nothing configured but the data dir
    (and ``settings``, over FAST_LEASES). Its database is migrated here."""
    data = logs / "data"
    env = service_env(VEERNET_DATA_DIR=data, **{**FAST_LEASES, **settings})  # no DATABASE_URL, BROKER_URL, ...
    subprocess.run([sys.executable, "-m", "api.cli", "migrate"], env=env, cwd=code_root(), check=True, timeout=120,
                   capture_output=True)
    port = free_port()
    return Stack(env=env, logs=logs, database_url=f"sqlite:///{data / 'veernet.db'}",
                 broker_url=f"sqla+sqlite:///{data / 'broker.db'}", api_url=f"http://127.0.0.1:{port}",
                 api=api_proc(env, logs, port, reaper=True), reaper=None,
                 workers=[worker_proc("train-embedded", env, logs)])
