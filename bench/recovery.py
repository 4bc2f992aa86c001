"""Recovery soak on the real stack: training jobs whose workers keep dying; prints one JSON line.

Postgres (a fresh database), Redis (a db of its own), moto's S3 server, the API with the reaper
(``veernet api --reaper``: api.reaper.ReaperThread) and two Celery training workers started as
`veernet worker --cpu` starts them. Jobs run one after another; each attempt is lost at a random
step by one of:

- ``child``: SIGKILL to the pool process running the job (the Celery parent survives);
- ``box``: SIGKILL to the whole worker (parent and child), which is then started again, as its
  supervisor would;
- ``freeze``: SIGSTOP to the whole worker, SIGCONT once another worker has taken the job over,
  so that a zombie wakes up holding a lost attempt.

Figures, each from the job rows and timelines in Postgres:

- ``detect_s``: kill to the reaper's 'lease_lost' event (median and max);
- ``restart_s``: the requeue to the new attempt's first progress write, which it makes right after
  its first optimiser step; claim, checkpoint download, sha256 check and load included;
- ``redone_steps``: per loss, steps the lost attempt had done past the checkpoint the next attempt
  resumed from. The kill lands within ~50 ms of a fresh progress write, well inside the next step,
  so the steps done at the kill are the global_step of that write (or of a checkpoint-phase write
  of the same step that was in flight);
- ``zombie_writes``: events and checkpoint rows written under an attempt after it lost the job
  (the reaper's own 'lease_lost'/'requeued' and the refusals excepted); must be 0;
- ``weights_identical``: each job's final weights against an uninterrupted run of its config
  (veernet_core straight into a local directory, same environment), tensor by tensor, bit for bit.

Run: ``.venv/bin/python bench/recovery.py`` (5 to 6 minutes on 2 CPU cores).
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "e2e")]

from e2e_jobs import (  # noqa: E402
    ReferenceRun,
    checkpoint_rows,
    data,
    download,
    events,
    final_checkpoint,
    job_row,
    model_state,
    owner_pid,
    submit,
    tiny_config,
    weight_differences,
    writes_after_loss,
)
from e2e_procs import Proc, migrate_database, snapshot_code  # noqa: E402
from e2e_stack import Stack, moto_server, real_stack, redis_db  # noqa: E402

from tests.conftest import fresh_postgres_database  # noqa: E402

LEASE_S, HEARTBEAT_S = 6.0, 1.0  # the lease bounds detection; six renewals per lease
REAPER_S = 0.25  # the reaper's pass is two indexed queries: cheap enough to run four times a second
EVERY = 3  # checkpoint every 3 optimiser steps (and at each epoch end)
SEED = 0  # kill points and modes are drawn from this
# Four jobs, one after another, each losing its attempts as listed (a job that ends first skips the
# rest of its plan): up to 13 SIGKILLs and 2 freezes.
PLANS = [["child", "box", "child", "box"], ["freeze", "child", "box", "child"],
         ["box", "child", "freeze", "child"], ["child", "box", "child"]]
JOB_TIMEOUT_S = 150.0  # a job with four losses takes about a minute here
POLL_S = 0.05


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def job_config(index: int) -> dict[str, Any]:
    return tiny_config(checkpoint_every_steps=EVERY, seed=index, data={"dataset_size": 48, "seed": 100 + index})


@dataclass
class Loss:
    """One attempt lost on purpose."""

    job_id: int
    attempt: int
    mode: str
    killed_at: datetime
    steps_done: int
    lease_until: datetime | None = None  # the lease the lost attempt last renewed


@dataclass
class Soak:
    stack: Stack
    rng: random.Random
    losses: list[Loss] = field(default_factory=list)
    first_step_at: dict[tuple[int, int], datetime] = field(default_factory=dict)  # (job, attempt) -> time

    def run_job(self, job_id: int, plan: list[str]) -> None:
        """Watch the job, lose its attempts as planned, until it finishes."""
        plan = list(plan)
        target: dict[int, int] = {}  # attempt -> the step at which to lose it
        lost: set[int] = set()  # attempts lost already (a write in flight at the kill may still land)
        frozen: tuple[Proc, int] | None = None  # the frozen worker and the attempt it held
        last_write: datetime | None = None
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while time.monotonic() < deadline:
            job = job_row(self.stack.database_url, job_id)
            if job.status in ("succeeded", "failed", "cancelled"):
                return
            fresh = job.status == "running" and job.progress_at != last_write
            last_write = job.progress_at
            if fresh and self._note_first_step(job):
                continue
            if frozen and job.attempt > frozen[1] and (job_id, job.attempt) in self.first_step_at:
                frozen[0].signal(signal.SIGCONT)  # the zombie wakes up after the takeover
                log(f"job {job_id}: SIGCONT to {frozen[0].name}, whose attempt {frozen[1]} was taken over")
                frozen = None
            step, total = int(job.global_step or 0), int(job.total_steps or 0)
            # Never at the last steps: the next attempt must have a step left to train, to be measured.
            if (fresh and plan and (job_id, job.attempt) in self.first_step_at and step < total - 1
                    and job.attempt not in lost):
                goal = target.setdefault(job.attempt, min(step + self.rng.randint(1, 2 * EVERY), total - 2))
                if step >= goal:
                    lost.add(job.attempt)
                    frozen = self._lose(job, plan.pop(0)) or frozen
            time.sleep(POLL_S)
        # Stuck: count it as lost (jobs_lost), wake what was frozen and cancel it, and go on.
        log(f"job {job_id}: not finished within {JOB_TIMEOUT_S:.0f} s; counted as lost")
        if frozen:
            frozen[0].signal(signal.SIGCONT)
        self.stack.client.post(f"/jobs/{job_id}/cancel")

    def _note_first_step(self, job: Any) -> bool:
        """Record when an attempt made its first progress write (right after its first step)."""
        key = (job.id, job.attempt)
        if key in self.first_step_at:
            return False
        claimed = [e.created_at for e in events(self.stack.database_url, job.id)
                   if e.kind == "claimed" and e.attempt == job.attempt]
        if claimed and job.progress_at and job.progress_at > claimed[0]:
            self.first_step_at[key] = job.progress_at
            return True
        return False

    def _lose(self, job: Any, mode: str) -> tuple[Proc, int] | None:
        pid = owner_pid(job)
        worker = self.stack.worker_of(pid)
        killed_at = datetime.now(UTC)
        if mode == "child":
            os.kill(pid, signal.SIGKILL)
        elif mode == "box":
            worker.kill()
            worker.start()  # its supervisor brings the box back; the job is recovered by lease anyway
        else:
            worker.signal(signal.SIGSTOP)
        # A write in flight at the kill may still land (the checkpoint-phase report of the same step);
        # after it the row holds the lost attempt's last step and its last lease renewal.
        time.sleep(0.2)
        after = job_row(self.stack.database_url, job.id)
        assert after.attempt == job.attempt, "the reaper cannot have acted within 0.2 s of the kill"
        steps_done = max(int(job.global_step or 0), int(after.global_step or 0))
        self.losses.append(Loss(job.id, job.attempt, mode, killed_at, steps_done, after.lease_expires_at))
        log(f"job {job.id}: {mode} at step {job.global_step} of attempt {job.attempt} ({worker.name}, pid {pid})")
        return (worker, job.attempt) if mode == "freeze" else None


def loss_figures(stack: Stack, soak: Soak) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {"detect_s": [], "lease_left_s": [], "restart_s": [], "redone_steps": [],
                                       "zombie_writes": [], "zombie_refused": [], "to_claim_s": [],
                                       "to_resumed_s": [], "to_first_step_s": []}
    for loss in soak.losses:
        timeline = events(stack.database_url, loss.job_id)
        lost_at = next((e.created_at for e in timeline if e.kind == "lease_lost" and e.attempt == loss.attempt),
                       None)
        first_step_at = soak.first_step_at.get((loss.job_id, loss.attempt + 1))
        if lost_at is None or first_step_at is None:
            log(f"job {loss.job_id}: attempt {loss.attempt} was never recovered; no figures for it")
            continue
        requeued_at = next((e.created_at for e in timeline if e.kind == "requeued" and e.attempt == loss.attempt),
                           lost_at)  # a takeover by a new claim requeues and claims at once
        resumed = [data(e) for e in timeline if e.kind == "resumed" and e.attempt == loss.attempt + 1]
        figures["detect_s"].append((lost_at - loss.killed_at).total_seconds())
        if loss.lease_until is not None:
            figures["lease_left_s"].append((loss.lease_until - loss.killed_at).total_seconds())
        figures["restart_s"].append((first_step_at - requeued_at).total_seconds())
        claimed_at = next(e.created_at for e in timeline if e.kind == "claimed" and e.attempt == loss.attempt + 1)
        figures["to_claim_s"].append((claimed_at - requeued_at).total_seconds())
        resumed_at = next((e.created_at for e in timeline if e.kind == "resumed" and e.attempt == loss.attempt + 1),
                          None)  # None: lost before its first checkpoint, so the next attempt starts afresh
        if resumed_at is not None:
            figures["to_resumed_s"].append((resumed_at - claimed_at).total_seconds())
            figures["to_first_step_s"].append((first_step_at - resumed_at).total_seconds())
        figures["redone_steps"].append(loss.steps_done - (int(resumed[0]["global_step"]) if resumed else 0))
        figures["zombie_writes"].append(len(writes_after_loss(stack.database_url, loss.job_id, loss.attempt, lost_at)))
        figures["zombie_refused"].append(sum(1 for e in timeline if e.kind == "stale_write_refused"
                                             and e.attempt == loss.attempt and e.created_at > lost_at))
    return figures


def divergence(stack: Stack, job_id: int, reference: ReferenceRun) -> list[str]:
    """Each committed checkpoint of the job against the reference run's at the same position."""
    from veernet_core.checkpoint import LocalStore, SidecarRegistry, deserialize

    store = LocalStore(reference.out)
    theirs = {(r.epoch, r.step): r for r in SidecarRegistry(store).committed()}
    report = []
    for row in checkpoint_rows(stack.database_url, job_id):
        ref = theirs.get((row.epoch, row.step))
        if ref is None:
            report.append(f"{row.storage_key}: no reference")
            continue
        differing = weight_differences(deserialize(store.get(ref.key))["model"], model_state(download(stack, row)))
        report.append(f"{row.storage_key}: {'same' if not differing else f'{len(differing)} tensors differ'}")
    return report


def spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "max": round(max(values), 3)}


def soak(workdir: Path) -> dict[str, Any]:
    snapshot_code(workdir / "code")  # every process runs this copy, whatever happens to the tree meanwhile
    references = [ReferenceRun(job_config(i), workdir / f"reference-{i}").start() for i in range(len(PLANS))]
    log(f"uninterrupted reference runs of {len(PLANS)} configs started")
    expected = [run.final_model() for run in references]  # before the soak, so they do not slow it down
    log("reference runs done")
    with moto_server(workdir / "moto.log") as s3_port, redis_db() as broker, \
            fresh_postgres_database("veernet_recovery") as database:
        migrate_database(database)
        stack = real_stack(workdir / "stack", database, broker, s3_port, workers=2, reaper="thread",
                           LEASE_SECONDS=LEASE_S, HEARTBEAT_SECONDS=HEARTBEAT_S, REAPER_INTERVAL_SECONDS=REAPER_S,
                           MAX_INFRA_ATTEMPTS=20)
        stack.start()
        log(f"stack up: API {stack.api_url}, broker {broker}, logs in {workdir}")
        try:
            runner = Soak(stack, random.Random(SEED))
            job_ids = []
            for index, plan in enumerate(PLANS):
                job_id = submit(stack, job_config(index))
                job_ids.append(job_id)
                runner.run_job(job_id, plan)
                log(f"job {job_id}: {job_row(database, job_id).status}")
            succeeded = [job_row(database, j).status == "succeeded" for j in job_ids]
            identical = [ok and not weight_differences(
                want, model_state(download(stack, final_checkpoint(database, j, int(job_config(i)["epochs"])))))
                for i, (j, ok, want) in enumerate(zip(job_ids, succeeded, expected, strict=True))]
            for job_id, run, same in zip(job_ids, references, identical, strict=True):
                if not same:
                    log(f"job {job_id}: final weights differ; by checkpoint: {divergence(stack, job_id, run)}")
            figures = loss_figures(stack, runner)
            checkpoints = sum(len(checkpoint_rows(database, j)) for j in job_ids)
        finally:
            stack.stop()
            if stack.link is not None:
                stack.link.close()
    return {
        "jobs": len(job_ids),
        "kills": sum(1 for loss in runner.losses if loss.mode != "freeze"),
        "freezes": sum(1 for loss in runner.losses if loss.mode == "freeze"),
        "jobs_lost": succeeded.count(False),
        "zombie_writes": int(sum(figures["zombie_writes"])),
        "zombie_writes_refused": int(sum(figures["zombie_refused"])),
        "weights_identical": all(identical),
        "detect_s": spread(figures["detect_s"]),
        # detect_s = the lease still left at the kill (at most the lease) + the reaper's next pass
        "lease_left_at_kill_s": spread(figures["lease_left_s"]),
        "restart_s": spread(figures["restart_s"]),
        # restart_s in three parts (medians): message to a fresh job process and its claim; checkpoint
        # download, sha256 check and load; the first optimiser step
        "restart_parts_s": {part: round(statistics.median(figures[f"to_{part}_s"]), 3)
                            for part in ("claim", "resumed", "first_step")},
        "redone_steps": [int(s) for s in figures["redone_steps"]],
        "checkpoint_interval_steps": EVERY,
        "lease_s": LEASE_S,
        "heartbeat_s": HEARTBEAT_S,
        "reaper_interval_s": REAPER_S,
        "checkpoints_committed": checkpoints,
        "losses": [f"{loss.mode}@{loss.steps_done}" for loss in runner.losses],
    }


def main() -> None:
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="veernet-recovery-"))
    result = soak(workdir)
    result["targets_met"] = {
        "kills>=10": result["kills"] >= 10,
        "jobs_lost==0": result["jobs_lost"] == 0,
        "zombie_writes==0": result["zombie_writes"] == 0,
        "weights_identical": result["weights_identical"],
        "detect_s<=lease": result["detect_s"]["max"] <= LEASE_S,
        "restart_s<=10": result["restart_s"]["max"] <= 10,
        "redone_steps<=interval": max(result["redone_steps"]) <= EVERY,
    }
    result["duration_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
