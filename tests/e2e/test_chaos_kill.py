"""Workers lost with real signals: SIGKILL mid-epoch, SIGKILL mid-upload, SIGTERM (a planned stop).

Each job ends with weights bitwise equal to an uninterrupted run of the same config (CPU).
"""

from __future__ import annotations

import hashlib
import os
import signal
from datetime import datetime

import pytest
from e2e_jobs import (
    CHAOS_CONFIG,
    ReferenceRun,
    checkpoint_rows,
    data,
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
    wait_checkpoint,
    wait_finished,
    wait_gone,
    wait_running,
    weight_differences,
    writes_after_loss,
)
from e2e_link import Upload
from e2e_procs import wait_until
from e2e_stack import Stack, start_workers

pytestmark = pytest.mark.e2e
EPOCHS = int(CHAOS_CONFIG["epochs"])
EVERY = int(CHAOS_CONFIG["checkpoint_every_steps"])


def _check_final_weights(stack: Stack, job_id: int, reference: ReferenceRun) -> None:
    final = final_checkpoint(stack.database_url, job_id, EPOCHS)
    differing = weight_differences(reference.final_model(), model_state(download(stack, final)))
    assert not differing, f"final weights differ from the uninterrupted run in {differing}"


def _newest_of(stack: Stack, job_id: int, attempt: int) -> str:
    rows = [r for r in checkpoint_rows(stack.database_url, job_id) if r.attempt == attempt]
    assert rows, f"attempt {attempt} committed no checkpoint:\n{timeline(stack.database_url, job_id)}"
    return rows[-1].storage_key


def _lost_at(stack: Stack, job_id: int, attempt: int) -> datetime:
    lost = [e.created_at for e in events(stack.database_url, job_id) if e.kind == "lease_lost" and e.attempt == attempt]
    assert len(lost) == 1, f"attempt {attempt} should lose its lease once:\n{timeline(stack.database_url, job_id)}"
    return lost[0]


def test_sigkill_mid_epoch_resumes_from_the_last_checkpoint_bit_identical(
        stack: Stack, chaos_reference: ReferenceRun) -> None:
    job_id = submit(stack, CHAOS_CONFIG)
    # Attempt 1: its pool child is killed one step past a committed checkpoint, in epoch 0.
    wait_checkpoint(stack, job_id, attempt=1, global_step=EVERY)
    child = owner_pid(wait_running(stack, job_id, attempt=1, min_step=EVERY + 1))
    os.kill(child, signal.SIGKILL)
    first_resume_point = _newest_of(stack, job_id, 1)  # read after the kill: everything it committed

    # Attempt 2 (on either worker): the whole worker (Celery parent and child) dies mid-epoch 1.
    job = wait_running(stack, job_id, attempt=2)
    steps_per_epoch = int(job.steps_per_epoch or 0)
    wait_checkpoint(stack, job_id, attempt=2, global_step=steps_per_epoch + EVERY)
    job = wait_running(stack, job_id, attempt=2, min_step=steps_per_epoch + EVERY + 1)
    box = stack.worker_of(owner_pid(job))
    box.kill()
    second_resume_point = _newest_of(stack, job_id, 2)

    job = wait_finished(stack, job_id)
    story = timeline(stack.database_url, job_id)
    assert (job.status, job.attempt, job.infra_failures) == ("succeeded", 3, 2), story
    assert resumed_from(stack.database_url, job_id, 2) == first_resume_point, story
    assert resumed_from(stack.database_url, job_id, 3) == second_resume_point, story
    for attempt in (1, 2):
        assert writes_after_loss(stack.database_url, job_id, attempt, _lost_at(stack, job_id, attempt)) == []
    _check_final_weights(stack, job_id, chaos_reference)


def test_sigkill_during_a_checkpoint_upload_never_uses_the_partial_object(
        stack: Stack, chaos_reference: ReferenceRun) -> None:
    assert stack.link is not None
    job_id = submit(stack, CHAOS_CONFIG)
    wait_checkpoint(stack, job_id, attempt=1, global_step=EVERY)
    stack.link.throttle(150_000)  # a ~1.4 MB checkpoint now takes ~10 s to reach the server
    attempt_1 = f"/{stack.bucket}/{stack.prefix}/jobs/{job_id}/attempt-1/"

    def upload_in_flight() -> Upload | None:
        assert stack.link is not None
        return next((u for u in stack.link.uploads if u.method == "PUT" and u.path.startswith(attempt_1)
                     and u.path.endswith(".pt") and u.forwarded > 300_000 and not u.answered), None)

    upload: Upload = wait_until(upload_in_flight, 120, "a checkpoint upload in flight", every_s=0.05)
    child = owner_pid(wait_running(stack, job_id, attempt=1))
    os.kill(child, signal.SIGKILL)
    wait_gone(child)
    stack.link.passthrough()
    assert not upload.answered, "the upload finished before the kill; the test did not kill it mid-upload"
    partial_key = upload.path.removeprefix(f"/{stack.bucket}/{stack.prefix}/")

    job = wait_finished(stack, job_id)
    story = timeline(stack.database_url, job_id)
    assert (job.status, job.attempt) == ("succeeded", 2), story
    committed = {data(e)["key"]: data(e) for e in events(stack.database_url, job_id) if e.kind == "checkpoint"}
    assert partial_key not in committed, f"the half-uploaded {partial_key} was registered:\n{story}"
    resumed = resumed_from(stack.database_url, job_id, 2)
    assert resumed != partial_key and committed[resumed]["global_step"] == EVERY, story

    s3 = stack.s3_client()
    prefix = f"{stack.prefix}/jobs/{job_id}/attempt-1/"
    stored = {o["Key"].removeprefix(f"{stack.prefix}/")
              for o in s3.list_objects_v2(Bucket=stack.bucket, Prefix=prefix).get("Contents", [])}
    for key in stored - set(committed):
        assert key == partial_key, f"{key} is stored under the dead attempt but was never registered"
    body = s3.get_object(Bucket=stack.bucket, Key=f"{stack.prefix}/{resumed}")["Body"].read()
    assert hashlib.sha256(body).hexdigest() == committed[resumed]["sha256"], "resumed from a corrupt object"
    _check_final_weights(stack, job_id, chaos_reference)


def test_sigterm_checkpoints_releases_and_the_job_moves_on_at_once(
        stack: Stack, chaos_reference: ReferenceRun) -> None:
    job_id = submit(stack, CHAOS_CONFIG)
    job = wait_running(stack, job_id, attempt=1, min_step=EVERY + 1)
    first_owner = job.lease_owner
    worker = stack.worker_of(owner_pid(job))
    worker.signal(signal.SIGTERM, group=False)  # to the Celery parent, as `docker stop` or `kill` would
    assert worker.popen is not None and worker.popen.wait(timeout=120) == 0, worker.tail()
    taken_over = wait_running(stack, job_id, attempt=2)
    assert stack.worker_of(owner_pid(taken_over)) is not worker and taken_over.lease_owner != first_owner

    job = wait_finished(stack, job_id)
    story = timeline(stack.database_url, job_id)
    assert (job.status, job.attempt) == ("succeeded", 2), story
    # Released, not lost: no lease ran out, no recovery was counted.
    assert job.infra_failures == 0 and "lease_lost" not in [e.kind for e in events(stack.database_url, job_id)]
    first = [e for e in events(stack.database_url, job_id) if e.attempt == 1]
    assert [e.kind for e in first][-2:] == ["checkpoint", "requeued"], story
    assert "SIGTERM" in first[-1].message, story
    assert resumed_from(stack.database_url, job_id, 2) == data(first[-2])["key"], story
    _check_final_weights(stack, job_id, chaos_reference)


def test_sigkill_between_taking_a_job_and_claiming_it_the_job_is_sent_again(stack: Stack) -> None:
    """The boxes drop after a worker took the job's message from Redis and before its claim committed.
    The message sits unacknowledged, which Redis would hand on only after its visibility timeout (days):
    the reaper counts it lost once it is as old as a lost send, and sends the job again."""
    # The next claim sleeps 3 s in its transaction; the sequence counts claims, as the killed one rolls back.
    first_claim = "OLD.status = 'queued' AND NEW.status = 'running' AND nextval('chaos_slow_claim_calls') = 1"
    with job_update_trigger(stack.database_url, "chaos_slow_claim", first_claim, 3.0):
        job_id = submit(stack, tiny_config(epochs=1))
        wait_until(lambda: sleeping_job_update(stack.database_url), 60, f"a worker's claim of job {job_id}",
                   diagnose=stack.tails)
        for worker in stack.workers:  # whichever took it: no claim committed, no acknowledgement
            worker.kill()
    assert job_row(stack.database_url, job_id).status == "queued"
    start_workers(stack.workers)

    job = wait_finished(stack, job_id, timeout_s=120)
    story = timeline(stack.database_url, job_id)
    assert (job.status, job.attempt, job.infra_failures) == ("succeeded", 1, 0), story
    assert "resent" in [e.kind for e in events(stack.database_url, job_id)], story
