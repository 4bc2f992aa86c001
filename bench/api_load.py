"""API load on the real stack: a trivial endpoint and the job-status endpoint side by side, then submits.

Starts the API (`veernet api`) with API keys on (a tenant's key, its submission limits off), on a
fresh Postgres database with Redis as the broker; seeds SEED_JOBS running jobs, of which FLEET keep
writing progress (a step a second each, as a worker per GPU does) while they are polled. Drives it
from a second process on loopback with wrk (50 connections) for GET /livez (trivial) and
GET /jobs/{id} (status), each after a warm-up run: first one API process pinned to one core with wrk
pinned to the other (the headline figures: the client does not take the server's core, as on
another host), then API_PROCESSES as docker-compose runs them (suffix _2proc), sharing both cores
with wrk; then 50 concurrent Python clients POST /jobs. Afterwards every 202 must have its row and
its message in the Redis queue. Prints one JSON line. Needs wrk and taskset (`make bench` installs wrk).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import free_port, fresh_postgres_database, reset_service_caches  # noqa: E402

CLIENTS = 50
DURATION_S = 10
WARM_UP_S = 2  # a run of the same load before each measured one, not counted
SUBMIT_S = 8
SEED_JOBS = 200
FLEET = 8  # of the seeded jobs, those whose workers write progress during the run: one per GPU of a box
STEP_S = 1.0  # between a fleet job's progress writes
API_PROCESSES = 2  # docker-compose's `veernet api --workers 2`: one per core of this 2-core machine
# The headline run: (the API's CPU, wrk's CPU), so that the client does not take the server's core.
PINNED = ("0", "1") if len(os.sched_getaffinity(0)) >= 2 and shutil.which("taskset") else None
REDIS_URL = "redis://127.0.0.1:6379/13"
CONFIG = {"data": {"dataset_size": 40, "scale": 0.1}, "epochs": 1, "device": "cpu"}
STATUS_LUA = """
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/jobs/" .. math.random(1, %d))
end
"""


def _wrk(url: str, script: str | None = None, key: str | None = None, duration_s: int = DURATION_S,
         cpus: str | None = None) -> dict[str, float]:
    argv = ["wrk", "-t2", f"-c{CLIENTS}", f"-d{duration_s}s", "--latency", url]
    if key:
        argv[1:1] = ["-H", f"Authorization: Bearer {key}"]
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        if script:
            handle.write(script)
            argv[1:1] = ["-s", handle.name]
    if cpus:
        argv[:0] = ["taskset", "-c", cpus]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}[p99.group(2)]  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": rps, "p99_ms": float(p99.group(1)) * scale,  # type: ignore[union-attr]
            "non_2xx": float(errors.group(1)) if errors else 0.0}


async def _submit(base: str, key: str) -> tuple[list[int], int]:
    ids: list[int] = []
    failures = 0
    deadline = time.monotonic() + SUBMIT_S

    async def client() -> None:
        nonlocal failures
        async with httpx.AsyncClient(base_url=base, timeout=30, headers=_auth(key)) as http:
            while time.monotonic() < deadline:
                response = await http.post("/jobs", json={"kind": "train", "config": CONFIG})
                if response.status_code == 202:
                    ids.append(int(response.json()["id"]))
                else:
                    failures += 1

    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    return ids, failures


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _run_seeded_jobs(db_url: str) -> None:
    """Claim the seeded jobs and write progress, as a fleet of workers would: users poll running jobs."""
    from api import jobs
    from api.db import session_scope

    with session_scope(db_url) as session:
        for job_id in range(1, SEED_JOBS + 1):
            attempt = jobs.claim(session, job_id, "bench-worker", 3600)
            assert attempt is not None
            jobs.record_progress(session, job_id, attempt, epoch=0, step=3, steps_per_epoch=100, total_steps=5000,
                                 global_step=3, images_per_s=12.5, step_time_s=1.3, loss=0.8)


@contextmanager
def _fleet_writing(db_url: str) -> Iterator[list[int]]:
    """FLEET of the seeded jobs take a step every STEP_S, as their workers would; yields the write count."""
    from api import jobs
    from api.db import session_scope

    stop, writes = threading.Event(), [0]

    def run() -> None:
        step = 3
        while not stop.wait(STEP_S):
            step += 1
            for job_id in range(1, FLEET + 1):
                with session_scope(db_url) as session:
                    jobs.record_progress(session, job_id, 1, epoch=0, step=step, steps_per_epoch=100,
                                         total_steps=5000, global_step=step, images_per_s=12.5, step_time_s=1.0,
                                         loss=0.8)
                writes[0] += 1

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield writes
    finally:
        stop.set()
        thread.join()


def _serve(env: dict[str, str], port: int, workers: int, cpus: str | None = None) -> subprocess.Popen[bytes]:
    server = subprocess.Popen([*(["taskset", "-c", cpus] if cpus else []),
                               sys.executable, "-m", "api.cli", "api", "--port", str(port), "--workers", str(workers),
                               "--loglevel", "warning"], env=env)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        for _ in range(150):
            try:
                if http.get("/livez").status_code == 200:
                    return server
            except httpx.TransportError:
                time.sleep(0.2)
    raise RuntimeError("the API did not start")


def _stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    server.wait(timeout=30)


def main() -> None:
    if shutil.which("wrk") is None:
        sys.exit("bench/api_load.py needs wrk: `make bench` installs it (scripts/ensure-services wrk), "
                 "or apt-get install wrk")
    r = redis.Redis.from_url(REDIS_URL)
    r.flushdb()
    figures: dict[str, float] = {}
    with fresh_postgres_database("veernet_bench") as db_url, tempfile.TemporaryDirectory() as data:
        port = free_port()
        env = {**os.environ, "DATABASE_URL": db_url, "BROKER_URL": REDIS_URL, "VEERNET_DATA_DIR": data,
               "CHECKPOINT_URL": str(Path(data) / "checkpoints"), "PYTHONPATH": str(ROOT),
               "VEERNET_ADMIN_KEY": secrets.token_urlsafe(24),
               "MAX_QUEUED_JOBS_PER_TENANT": "0", "SUBMIT_RATE_PER_MINUTE": "0"}  # a tenant without limits
        subprocess.run([sys.executable, "-m", "api.cli", "migrate"], env=env, check=True, capture_output=True)
        key = subprocess.run([sys.executable, "-m", "api.cli", "keys", "create", "--tenant", "bench"], env=env,
                             check=True, capture_output=True, text=True).stdout.strip()
        base = f"http://127.0.0.1:{port}"
        server = _serve(env, port, 1)
        try:
            with httpx.Client(base_url=base, timeout=30, headers=_auth(key)) as http:
                for _ in range(SEED_JOBS):
                    http.post("/jobs", json={"kind": "train", "config": CONFIG}).raise_for_status()
            _run_seeded_jobs(db_url)
            # Side by side on one server. Headline: one API process on one core and wrk on the other, as a
            # client on another host would be. Then API_PROCESSES (as docker-compose runs it, one per core),
            # which on this machine share both cores with wrk.
            for suffix, workers, cpus in (("", 1, PINNED), (f"_{API_PROCESSES}proc", API_PROCESSES, None)):
                _stop(server)
                server = _serve(env, port, workers, cpus and cpus[0])
                wrk_cpus = cpus and cpus[1]
                _wrk(f"{base}/livez", duration_s=WARM_UP_S, cpus=wrk_cpus)  # each process past its first requests
                trivial = _wrk(f"{base}/livez", cpus=wrk_cpus)
                with _fleet_writing(db_url) as writes:
                    _wrk(base, STATUS_LUA % SEED_JOBS, key, WARM_UP_S, wrk_cpus)  # every job read once per process
                    status = _wrk(base, STATUS_LUA % SEED_JOBS, key, cpus=wrk_cpus)
                figures.update({f"trivial_rps{suffix}": round(trivial["rps"], 1),
                                f"trivial_p99_ms{suffix}": round(trivial["p99_ms"], 2),
                                f"status_rps{suffix}": round(status["rps"], 1),
                                f"status_p99_ms{suffix}": round(status["p99_ms"], 2),
                                f"status_over_trivial{suffix}": round(status["rps"] / trivial["rps"], 3),
                                f"status_non_2xx{suffix}": status["non_2xx"],
                                f"progress_writes{suffix}": writes[0]})
            started = time.monotonic()
            ids, failures = asyncio.run(_submit(base, key))
            elapsed = time.monotonic() - started
        finally:
            _stop(server)
        with psycopg.connect(db_url.replace("+psycopg", "")) as conn:
            rows = {row[0] for row in conn.execute("SELECT id FROM jobs WHERE status = 'queued'")}
        os.environ.update({"BROKER_URL": REDIS_URL, "DATABASE_URL": db_url})
        from api.queue import jobs_in_broker

        reset_service_caches()
        queued = jobs_in_broker("train") or set()  # what the reaper reads: the messages waiting in Redis
        persisted = sum(1 for job_id in ids if job_id in rows and job_id in queued)
    print(json.dumps({
        "clients": CLIENTS, "duration_s": DURATION_S, "pinned_api_wrk_cpus": PINNED, "fleet_jobs_writing": FLEET,
        **figures,
        "submit_rps": round(len(ids) / elapsed, 1), "submitted": len(ids), "submit_failures": failures,
        "persisted": persisted,
    }))


if __name__ == "__main__":
    main()
