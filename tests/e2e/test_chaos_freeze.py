"""A frozen worker (SIGSTOP: a hung or partitioned box) loses its job, and when it wakes changes nothing."""

from __future__ import annotations

import signal

import pytest
from e2e_jobs import (
    CHAOS_CONFIG,
    ReferenceRun,
    checkpoint_rows,
    download,
    events,
    final_checkpoint,
    job_row,
    job_update_trigger,
    model_state,
    owner_pid,
    resumed_from,
    sleeping_job_update,
    submit,
    timeline,
    tiny_config,
    wait_finished,
    wait_gone,
    wait_running,
    weight_differences,
    writes_after_loss,
)
from e2e_procs import FAST_LEASES, Proc, wait_until
from e2e_stack import Stack
from sqlalchemy import text

from api.db import session_scope

pytestmark = pytest.mark.e2e


def test_sigstopped_worker_is_replaced_and_after_sigcont_writes_nothing(
        stack: Stack, chaos_reference: ReferenceRun) -> None:
    job_id = submit(stack, CHAOS_CONFIG)
    every = int(CHAOS_CONFIG["checkpoint_every_steps"])
    zombie = owner_pid(wait_running(stack, job_id, attempt=1, min_step=every + 1))
    frozen = stack.worker_of(zombie)
    frozen.signal(signal.SIGSTOP)  # the Celery parent and the job's process: the whole box

    resumed_at = int(wait_running(stack, job_id, attempt=2).global_step or 0)
    wait_running(stack, job_id, attempt=2, min_step=resumed_at + 1)  # the other worker trains on
    lost = [e for e in events(stack.database_url, job_id) if e.kind == "lease_lost" and e.attempt == 1]
    assert len(lost) == 1, timeline(stack.database_url, job_id)
    before_wake = [(r.storage_key, r.sha256) for r in checkpoint_rows(stack.database_url, job_id) if r.attempt == 1]

    frozen.signal(signal.SIGCONT)
    wait_gone(zombie)  # it noticed it lost the job and ended its task (a fresh process per job)
    wait_until(lambda: "'lease lost'" in frozen.output(), 30, "the woken worker to end its task as 'lease lost'",
               diagnose=frozen.tail)
    assert frozen.alive(), "the woken worker itself should keep serving"

    job = wait_finished(stack, job_id)
    story = timeline(stack.database_url, job_id)
    assert (job.status, job.attempt) == ("succeeded", 2), story
    assert writes_after_loss(stack.database_url, job_id, 1, lost[0].created_at) == [], story
    refused = [e for e in events(stack.database_url, job_id)
               if e.kind == "stale_write_refused" and e.attempt == 1 and e.created_at > lost[0].created_at]
    assert refused, f"the woken worker should have tried to write and been refused:\n{story}"
    after = [(r.storage_key, r.sha256) for r in checkpoint_rows(stack.database_url, job_id) if r.attempt == 1]
    assert after == before_wake, "the woken worker changed the checkpoints of its lost attempt"
    assert resumed_from(stack.database_url, job_id, 2) == before_wake[-1][0], story

    final = final_checkpoint(stack.database_url, job_id, int(CHAOS_CONFIG["epochs"]))
    differing = weight_differences(chaos_reference.final_model(), model_state(download(stack, final)))
    assert not differing, f"final weights differ from the uninterrupted run in {differing}"


def test_a_worker_frozen_inside_a_transaction_still_loses_its_job(stack: Stack) -> None:
    job_id = submit(stack, tiny_config(checkpoint_every_steps=1))
    wait_running(stack, job_id, attempt=1, min_step=1)
    frozen = stack.worker_of(owner_pid(job_row(stack.database_url, job_id)))
    # Every update of the job's row under attempt 1 sleeps half a second holding the row's lock.
    with job_update_trigger(stack.database_url, "chaos_slow_job_update",
                            f"NEW.id = {int(job_id)} AND NEW.attempt = 1", 0.5):
        backend = _freeze_inside_a_transaction(stack, frozen)
        try:
            # The stopped worker's session stays open holding the job row's lock; Postgres ends it within
            # a third of a lease, then the reaper (every second) requeues: a takeover within four leases.
            wait_running(stack, job_id, attempt=2, timeout_s=4 * float(FAST_LEASES["LEASE_SECONDS"]))
            assert not _in_transaction(stack.database_url, backend), "Postgres should have ended the frozen session"
        finally:
            frozen.signal(signal.SIGCONT)
        assert wait_finished(stack, job_id).status == "succeeded"


def _freeze_inside_a_transaction(stack: Stack, worker: Proc) -> int:
    """SIGSTOP ``worker`` while its job process's UPDATE sleeps in the trigger; returns the Postgres pid of
    the session it leaves 'idle in transaction' (the UPDATE finishes, the COMMIT never comes)."""
    backend = wait_until(lambda: sleeping_job_update(stack.database_url), 60,
                         "the worker to update its job row under attempt 1", every_s=0.02)
    worker.signal(signal.SIGSTOP)
    wait_until(lambda: _in_transaction(stack.database_url, backend), 5,
               "the stopped worker's session to sit idle in its transaction")
    return int(backend)


def _in_transaction(database_url: str, backend: int) -> bool:
    with session_scope(database_url) as session:
        return bool(session.execute(IDLE_IN_TRANSACTION, {"pid": backend}).scalar())


IDLE_IN_TRANSACTION = text("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = :pid "
                           "AND state = 'idle in transaction' AND backend_xid IS NOT NULL)")
