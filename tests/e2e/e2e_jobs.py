"""Jobs as end-to-end tests see them: submitted over HTTP, watched in the database, weights compared.

The database is read with the service's own models over a plain URL, never through the settings
of this process, so tests and the bench can run next to other suites.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from e2e_procs import code_root, pid_alive, service_env, wait_until
from e2e_stack import Stack
from sqlalchemy import select, text

from api.db import session_scope
from api.models import Checkpoint, Job, JobEvent

FINISHED = ("succeeded", "failed", "cancelled")
# Events the reaper or a takeover writes under the attempt that lost the job: not the loser's writes.
WRITTEN_FOR_THE_LOSER = frozenset({"lease_lost", "requeued", "stale_write_refused"})

# VeerNet at a fraction of its width on small synthetic logs: a job trains in seconds on a CPU.
TINY: dict[str, Any] = {
    "model": {"widths": [8, 8, 16, 16, 32, 32], "transformer_heads": 2, "transformer_ff": 64},
    "data": {"dataset_size": 32, "scale": 0.1, "seed": 3},
    "epochs": 2, "effective_batch": 4, "warmup_steps": 2, "device": "cpu",
    "pixel_budget": 200_000,  # two or three logs per micro-batch: every step accumulates
    "keep_last": 50,  # keep every checkpoint, so tests can inspect each one
}


def tiny_config(**overrides: Any) -> dict[str, Any]:
    config = copy.deepcopy(TINY)
    for name, value in overrides.items():
        if isinstance(value, dict):
            config[name] = {**config.get(name, {}), **value}
        else:
            config[name] = value
    return config


# The kill, freeze and SIGTERM tests' config; the uninterrupted run of it gives the bits they must end with.
CHAOS_CONFIG = tiny_config(checkpoint_every_steps=2)


def submit(stack: Stack, config: dict[str, Any]) -> int:
    response = stack.client.post("/jobs", json={"kind": "train", "config": config})
    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"/jobs/{response.json()['id']}"
    return int(response.json()["id"])


def job_json(stack: Stack, job_id: int) -> dict[str, Any]:
    response = stack.client.get(f"/jobs/{job_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def job_row(url: str, job_id: int) -> Job:
    with session_scope(url) as session:
        job = session.get(Job, job_id, populate_existing=True)
        assert job is not None, f"job {job_id} has no row"
        return job


def events(url: str, job_id: int) -> list[JobEvent]:
    with session_scope(url) as session:
        return list(session.scalars(select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id)))


def checkpoint_rows(url: str, job_id: int) -> list[Checkpoint]:
    with session_scope(url) as session:
        stmt = select(Checkpoint).where(Checkpoint.job_id == job_id).order_by(Checkpoint.global_step, Checkpoint.id)
        return list(session.scalars(stmt))


def timeline(url: str, job_id: int) -> str:
    return "\n".join(f"  #{e.id} a{e.attempt} {e.created_at:%H:%M:%S.%f} {e.kind}: {e.message}"
                     for e in events(url, job_id))


def wait_finished(stack: Stack, job_id: int, timeout_s: float = 240.0) -> Job:
    def finished() -> Job | None:
        job = job_row(stack.database_url, job_id)
        return job if job.status in FINISHED else None
    return wait_until(finished, timeout_s, f"job {job_id} to finish",
                      diagnose=lambda: f"{timeline(stack.database_url, job_id)}\n{stack.tails()}")


def wait_running(stack: Stack, job_id: int, attempt: int = 1, min_step: int = 0, timeout_s: float = 120.0) -> Job:
    """The job running under ``attempt`` with at least ``min_step`` steps done (as its progress row says)."""
    def there() -> Job | None:
        job = job_row(stack.database_url, job_id)
        assert job.status not in FINISHED, f"job {job_id} ended {job.status} early: {job.error}"
        ok = job.status == "running" and job.attempt == attempt and (job.global_step or 0) >= min_step
        return job if ok else None
    return wait_until(there, timeout_s, f"job {job_id} running as attempt {attempt} past step {min_step}",
                      every_s=0.05, diagnose=lambda: f"{timeline(stack.database_url, job_id)}\n{stack.tails()}")


def wait_checkpoint(stack: Stack, job_id: int, attempt: int, global_step: int, timeout_s: float = 120.0) -> Checkpoint:
    def committed() -> Checkpoint | None:
        rows = [r for r in checkpoint_rows(stack.database_url, job_id)
                if r.attempt == attempt and r.global_step >= global_step]
        return rows[0] if rows else None
    return wait_until(committed, timeout_s, f"job {job_id} attempt {attempt} to commit a checkpoint at step "
                      f"{global_step}", every_s=0.05, diagnose=lambda: timeline(stack.database_url, job_id))


def owner_pid(job: Job) -> int:
    """The pid of the process holding the job's lease (`host:pid:gpu=...`)."""
    assert job.lease_owner, f"job {job.id} has no lease owner"
    return int(job.lease_owner.split(":")[1])


def wait_gone(pid: int, timeout_s: float = 60.0) -> None:
    wait_until(lambda: not pid_alive(pid), timeout_s, f"process {pid} to exit")


def kinds(url: str, job_id: int, attempt: int | None = None) -> list[str]:
    return [e.kind for e in events(url, job_id) if attempt is None or e.attempt == attempt]


def data(event: JobEvent) -> dict[str, Any]:
    """What an event records beside its message (checkpoint, resumed and claimed events all have it)."""
    assert event.data is not None, f"event #{event.id} {event.kind!r} carries no data"
    return event.data


def resumed_from(url: str, job_id: int, attempt: int) -> str:
    """The storage key of the checkpoint ``attempt`` resumed from (it must resume exactly once)."""
    found = [e for e in events(url, job_id) if e.kind == "resumed" and e.attempt == attempt]
    assert len(found) == 1, f"attempt {attempt} should resume exactly once:\n{timeline(url, job_id)}"
    return str(data(found[0])["key"])


def writes_after_loss(url: str, job_id: int, attempt: int, lost_at: datetime) -> list[str]:
    """What the loser of ``attempt`` got written after it lost the job: must be nothing."""
    writes = [f"event {e.kind}: {e.message}" for e in events(url, job_id)
              if e.attempt == attempt and e.created_at > lost_at and e.kind not in WRITTEN_FOR_THE_LOSER]
    writes += [f"checkpoint {r.storage_key}" for r in checkpoint_rows(url, job_id)
               if r.attempt == attempt and r.created_at > lost_at]
    return writes


def download(stack: Stack, checkpoint: Checkpoint) -> bytes:
    """GET /checkpoints/{id}/download, checked byte for byte against the row and the header."""
    response = stack.client.get(f"/checkpoints/{checkpoint.id}/download")
    assert response.status_code == 200, response.text
    data = response.content
    assert int(response.headers["content-length"]) == len(data) == checkpoint.size
    assert response.headers["x-checksum-sha256"] == checkpoint.sha256
    assert hashlib.sha256(data).hexdigest() == checkpoint.sha256, "downloaded bytes differ from the registered sha256"
    return data


def final_checkpoint(url: str, job_id: int, epochs: int) -> Checkpoint:
    final = [r for r in checkpoint_rows(url, job_id) if (r.epoch, r.step) == (epochs, 0)]
    assert len(final) == 1, f"job {job_id} should have one final (epoch {epochs}) checkpoint"
    return final[0]


def model_state(data: bytes) -> dict[str, Any]:
    from veernet_core.checkpoint import deserialize

    return dict(deserialize(data)["model"])


def load_state(data: bytes) -> dict[str, Any]:
    import torch

    return dict(torch.load(io.BytesIO(data), map_location="cpu", weights_only=True))


def weight_differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Names of tensors that are not bitwise equal (or missing); empty when identical."""
    import torch

    names = sorted(set(expected) | set(actual))
    return [n for n in names if n not in expected or n not in actual or not torch.equal(expected[n], actual[n])]


@dataclass
class ReferenceRun:
    """An uninterrupted run of a config straight through veernet_core (CLI, local directory), in the
    same environment as the workers (one intra-op thread, CPU): the bits a service run must match."""

    config: dict[str, Any]
    out: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> ReferenceRun:
        self.out.mkdir(parents=True, exist_ok=True)
        config_path = self.out / "job-config.json"
        config_path.write_text(json.dumps(self.config))
        argv = [sys.executable, "-m", "veernet_core", "train", "--out", str(self.out), "--config", str(config_path)]
        with (self.out / "train.log").open("wb") as log:
            self.process = subprocess.Popen(argv, env=service_env(), cwd=code_root(), stdout=log,
                                            stderr=subprocess.STDOUT)
        return self

    def final_model(self, timeout_s: float = 600.0) -> dict[str, Any]:
        from veernet_core.checkpoint import LocalStore, SidecarRegistry, deserialize

        assert self.process is not None
        code = self.process.wait(timeout=timeout_s)
        assert code == 0, f"reference run failed ({code}):\n{(self.out / 'train.log').read_text()[-3000:]}"
        store = LocalStore(self.out)
        epochs = int(self.config["epochs"])
        final = [r for r in SidecarRegistry(store).committed() if (r.epoch, r.step) == (epochs, 0)]
        assert len(final) == 1, f"reference run in {self.out} has no final checkpoint"
        return dict(deserialize(store.get(final[0].key), final[0].sha256)["model"])


@dataclass
class Watched:
    """What GET /jobs/{id} showed while the job ran, in order."""

    statuses: list[str]
    steps: list[int]  # global_step while running
    etas: list[float]  # ETA seconds while running
    last: dict[str, Any]


def watch(stack: Stack, job_id: int, timeout_s: float = 240.0) -> Watched:
    seen = Watched([], [], [], {})

    def finished() -> bool:
        job = seen.last = job_json(stack, job_id)
        if not seen.statuses or seen.statuses[-1] != job["status"]:
            seen.statuses.append(job["status"])
        if job["status"] == "running":
            if job["progress"]["global_step"] is not None:
                seen.steps.append(job["progress"]["global_step"])
            if job["eta"]["seconds"] is not None:
                seen.etas.append(job["eta"]["seconds"])
        return job["status"] in FINISHED
    wait_until(finished, timeout_s, f"job {job_id} to finish", every_s=0.1,
               diagnose=lambda: f"{timeline(stack.database_url, job_id)}\n{stack.tails()}")
    return seen


def check_job_runs_to_success(stack: Stack, config: dict[str, Any], read_object: Any) -> None:
    """One job through the service: queued -> running -> succeeded, progress and ETA moving, a
    checkpoint committed per epoch, each download byte-exact. ``read_object(key)``: the stored bytes."""
    job_id = submit(stack, config)
    seen = watch(stack, job_id)
    job = seen.last
    assert job["status"] == "succeeded", f"{job['error']}\n{timeline(stack.database_url, job_id)}"
    assert seen.statuses[0] in ("queued", "running") and "running" in seen.statuses, seen.statuses
    assert seen.statuses[seen.statuses.index("running"):] == ["running", "succeeded"], (
        f"{seen.statuses}\n{timeline(stack.database_url, job_id)}")
    timeline_kinds = kinds(stack.database_url, job_id)
    assert timeline_kinds[:2] == ["queued", "claimed"] and timeline_kinds[-1] == "succeeded", timeline_kinds
    assert job["attempt"] == 1 and job["recoveries"] == 0

    assert seen.steps == sorted(seen.steps) and len(set(seen.steps)) >= 2, f"global_step did not move: {seen.steps}"
    assert job["progress"]["global_step"] == job["progress"]["total_steps"] > 0
    assert len(set(seen.etas)) >= 2, f"the ETA should appear and move while running: {seen.etas}"
    assert job["eta"]["seconds"] == 0

    rows = checkpoint_rows(stack.database_url, job_id)
    epochs = int(config["epochs"])
    assert [(r.epoch, r.step) for r in rows] == [(e, 0) for e in range(1, epochs + 1)], "one checkpoint per epoch"
    listed = stack.client.get(f"/jobs/{job_id}/checkpoints").json()
    assert [c["sha256"] for c in listed] == [r.sha256 for r in rows]
    for row in rows:
        data = download(stack, row)
        assert data == read_object(row.storage_key), f"{row.storage_key}: download differs from the stored object"
        state = load_state(data)
        assert (state["epoch"], state["step"], state["global_step"]) == (row.epoch, row.step, row.global_step)
    assert job["last_checkpoint"]["id"] == rows[-1].id


@contextmanager
def job_update_trigger(database_url: str, name: str, condition: str, seconds: float) -> Iterator[None]:
    """A test-only trigger: an UPDATE of a job row for which the plpgsql ``condition`` holds (OLD and NEW
    are the row before and after) sleeps ``seconds`` inside its transaction, after taking the row's lock
    and before changing it: a window to signal the worker in, every time. A sequence ``{name}_calls``
    (not rolled back with a killed transaction) is there for conditions that count."""
    with session_scope(database_url) as session:
        session.execute(text(f"CREATE SEQUENCE {name}_calls"))
        session.execute(text(
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN IF {condition} THEN PERFORM pg_sleep({float(seconds)}); END IF; RETURN NEW; END $$"))
        session.execute(text(f"CREATE TRIGGER {name} BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION {name}()"))
    try:
        yield
    finally:
        with session_scope(database_url) as session:
            session.execute(text(f"DROP TRIGGER IF EXISTS {name} ON jobs"))
            session.execute(text(f"DROP FUNCTION IF EXISTS {name}()"))
            session.execute(text(f"DROP SEQUENCE IF EXISTS {name}_calls"))


def sleeping_job_update(database_url: str) -> int | None:
    """The Postgres pid of a session whose UPDATE of a job sleeps in such a trigger, if there is one."""
    with session_scope(database_url) as session:
        return session.execute(text(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND state = 'active' AND wait_event = 'PgSleep' AND query ILIKE 'UPDATE jobs%' LIMIT 1")).scalar()
