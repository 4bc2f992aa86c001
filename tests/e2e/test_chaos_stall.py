"""A training job stuck in its own process while the process lives on: a real worker on the embedded default,
whose job's DataLoader worker is stopped (SIGSTOP: a read hung on a dead mount, a wedged device) after the
first checkpoint. The training thread then waits on it for ever while the heartbeat thread still renews the
lease, so the lease alone never frees the job. After STALL_SECONDS without progress the process records
where it was stuck, hands the job back and ends itself with its children; the job resumes from its last
checkpoint in a fresh process and ends with the bits of an uninterrupted run."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_jobs import (
    ReferenceRun,
    data,
    download,
    events,
    final_checkpoint,
    kinds,
    model_state,
    owner_pid,
    resumed_from,
    submit,
    timeline,
    tiny_config,
    wait_checkpoint,
    wait_finished,
    wait_gone,
    wait_running,
    weight_differences,
)
from e2e_procs import child_pids, wait_until
from e2e_stack import Stack, embedded_default

from worker.attempt import STALLED_EXIT

pytestmark = pytest.mark.e2e
# Far above a tiny job's step, validation or checkpoint on a loaded 2-core machine. At 8, a clean-clone run that
# took 18 minutes (10 on a quiet machine) saw the first attempt's first phase ('budget set', its DataLoader
# worker starting beside the reference run) pass 8 s twice, and the job was handed back before its first
# checkpoint (2026-12-07).
STALL_SECONDS = 15
# One DataLoader worker renders the logs: the child process a hung read leaves the training thread waiting on.
CONFIG = tiny_config(num_workers=1, epochs=3, checkpoint_every_steps=2)


@pytest.fixture
def stalling_stack(tmp_path: Path, e2e_dir: Path) -> Iterator[tuple[Stack, ReferenceRun]]:
    reference = ReferenceRun(CONFIG, tmp_path / "reference").start()
    stack = embedded_default(tmp_path / "stack", STALL_SECONDS=STALL_SECONDS)
    try:
        yield stack.start(), reference
    finally:
        stack.stop()
        if reference.process is not None and reference.process.poll() is None:
            reference.process.kill()


def test_a_job_stuck_on_a_hung_loader_worker_is_handed_back_and_resumes_from_its_checkpoint(
        stalling_stack: tuple[Stack, ReferenceRun]) -> None:
    stack, reference = stalling_stack
    job_id = submit(stack, CONFIG)
    committed = wait_checkpoint(stack, job_id, attempt=1, global_step=2)
    job = wait_running(stack, job_id, attempt=1)
    process = owner_pid(job)
    stopped: set[int] = set()

    def stalled() -> bool:
        """Stop every process the job's process starts (each epoch starts a DataLoader worker) until it stalls."""
        for pid in set(child_pids(process)) - stopped:
            os.kill(pid, signal.SIGSTOP)
            stopped.add(pid)
        return "stalled" in kinds(stack.database_url, job_id)

    wait_until(stalled, 120, "the job to stall", every_s=0.05, diagnose=stack.tails)
    assert stopped, "no DataLoader worker was stopped: the test hung nothing"

    job = wait_finished(stack, job_id, timeout_s=180)
    story = timeline(stack.database_url, job_id)
    assert (job.status, job.attempt, job.infra_failures) == ("succeeded", 2, 1), story
    first = [e for e in events(stack.database_url, job_id) if e.attempt == 1]
    stall = next(e for e in first if e.kind == "stalled")
    assert [e.kind for e in first][-2:] == ["stalled", "requeued"], story
    assert "lease_lost" not in kinds(stack.database_url, job_id), f"handed back, not left to lapse\n{story}"
    stuck_in = "".join(data(stall)["stack"])
    assert "dataloader" in stuck_in.lower(), f"the stall should show the wait on the DataLoader:\n{stuck_in}"
    assert data(stall)["idle_seconds"] >= STALL_SECONDS, story

    # The stuck process ended itself, and took its stopped DataLoader workers with it.
    worker = stack.workers[0]
    assert f"exitcode {STALLED_EXIT}" in worker.output(), worker.tail()
    for pid in {process, *stopped}:
        wait_gone(pid, 30)

    # Attempt 2 resumed from attempt 1's newest checkpoint and ended with an uninterrupted run's bits.
    newest = [e for e in first if e.kind == "checkpoint"][-1]
    assert data(newest)["global_step"] >= committed.global_step
    assert resumed_from(stack.database_url, job_id, 2) == data(newest)["key"], story
    epochs = int(CONFIG["epochs"])
    final = model_state(download(stack, final_checkpoint(stack.database_url, job_id, epochs)))
    differing = weight_differences(reference.final_model(), final)
    assert not differing, f"final weights differ from the uninterrupted run in {differing}"

