"""The services under the workers fail: Redis emptied, S3 unreachable, Postgres restarted. Jobs finish."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
import redis
from e2e_jobs import (
    data,
    events,
    job_row,
    submit,
    timeline,
    tiny_config,
    wait_checkpoint,
    wait_finished,
)
from e2e_link import Upload
from e2e_procs import wait_until
from e2e_stack import Stack

from api.models import utcnow
from api.queue import _job_id
from worker.celery_app import TRAIN_QUEUE, TRAIN_TASK

pytestmark = pytest.mark.e2e
# The worker's S3Store (veernet_core/checkpoint.py: 6 retries, backoff from 0.5 s doubling) tries an upload at about 0,
# 0.7, 1.8, 4.0, 8.1, 16.2 and 24.4 s after it is cut, each try a few quick attempts of botocore's own (api/storage.py,
# standard mode: well under 0.2 s of backoff in all). An outage of 3 s fails the cut upload and the next two tries
# and lets the fourth through: both retry layers, and S3Store's growing backoff, meet the outage.
OUTAGE_S = 3.0
PG_DOWN_AFTER_UPLOAD_S = 1.0  # the worker's commit runs into the outage, which is still within the lease


def test_redis_flushed_while_jobs_are_queued_and_running_every_job_finishes(stack: Stack) -> None:
    configs = [tiny_config(epochs=1, data={"dataset_size": 24, "seed": seed}) for seed in (11, 12, 13)]
    job_ids = [submit(stack, config) for config in configs]
    broker = redis.Redis.from_url(stack.broker_url)
    flushed_at: list[datetime] = []

    def flushed_while_one_runs_and_one_waits() -> set[int | None] | None:
        """Three jobs on two workers: one waits in the queue from the first claim to the third. Flush then,
        and only while a message still waits in Redis (checked in the same atomic step), so the flush
        certainly took it; returns the jobs whose waiting messages went."""
        if "running" not in {job_row(stack.database_url, j).status for j in job_ids}:
            return None
        flushed_at[:] = [utcnow()]
        waiting = broker.eval(FLUSH_IF_WAITING, 1, TRAIN_QUEUE)  # every message, waiting or unacknowledged
        return {_job_id(json.loads(m), TRAIN_TASK) for m in waiting} or None  # read as the reaper reads them
    lost = wait_until(flushed_while_one_runs_and_one_waits, 120, "a job running and another waiting",
                      every_s=0.05, diagnose=lambda: "\n".join(
                          f"job {j}: {job_row(stack.database_url, j).status}\n{timeline(stack.database_url, j)}"
                          for j in job_ids) + f"\n{stack.tails()}")
    assert lost <= set(job_ids), lost
    job_ids.append(submit(stack, tiny_config(epochs=1, data={"dataset_size": 24, "seed": 14})))  # and after it

    for job_id in job_ids:
        job = wait_finished(stack, job_id)
        assert (job.status, job.infra_failures) == ("succeeded", 0), timeline(stack.database_url, job_id)
    for flushed in [j for j in job_ids if j in lost]:
        resent = [e for e in events(stack.database_url, flushed) if e.kind == "resent" and e.created_at > flushed_at[0]]
        assert resent, f"job {flushed}'s flushed message should have been sent again by the reaper:\n" \
                       f"{timeline(stack.database_url, flushed)}"


# The queue's waiting messages; the whole database flushed with them, but only if there is one.
FLUSH_IF_WAITING = "local m = redis.call('LRANGE', KEYS[1], 0, -1) if #m > 0 then redis.call('FLUSHDB') end return m"


def test_s3_server_stopped_during_a_checkpoint_the_job_retries_and_continues(stack: Stack) -> None:
    """The S3 server goes away mid-upload (that upload cut, new connections refused) for OUTAGE_S."""
    assert stack.link is not None
    job_id, cut_key = _checkpoint_through_an_outage(stack, stack.link.stop)
    puts = [u for u in stack.link.uploads if u.path.endswith(f"/{cut_key}")]
    assert len(puts) >= 2 and puts[-1].answered, f"the cut upload of {cut_key} should have been sent again"


def test_s3_dropping_every_request_during_a_checkpoint_the_job_retries_and_continues(stack: Stack) -> None:
    """The S3 endpoint takes each request and closes the connection unanswered, for OUTAGE_S."""
    assert stack.link is not None
    _checkpoint_through_an_outage(stack, stack.link.drop)
    assert stack.link.dropped >= 2, "the worker should have retried while requests were dropped"


def _checkpoint_through_an_outage(stack: Stack, outage: Callable[[], None]) -> tuple[int, str]:
    """Start ``outage`` while a checkpoint uploads, end it after OUTAGE_S; the job must carry on as if
    nothing happened. Returns the job and the key of the upload the outage interrupted."""
    assert stack.link is not None
    job_id = submit(stack, tiny_config(checkpoint_every_steps=1))
    wait_checkpoint(stack, job_id, attempt=1, global_step=1)
    stack.link.throttle(300_000)  # a ~1.4 MB checkpoint is in flight for ~5 s: long enough to cut it
    upload = wait_until(lambda: _upload_in_flight(stack, job_id, 200_000), 120, "a checkpoint upload in flight",
                        every_s=0.02)
    outage()
    cut_at = utcnow()
    time.sleep(OUTAGE_S)
    stack.link.passthrough()

    job = wait_finished(stack, job_id)
    story = timeline(stack.database_url, job_id)
    assert (job.status, job.attempt, job.infra_failures, job.job_failures) == ("succeeded", 1, 0, 0), story
    assert not upload.answered, "the outage should have cut the upload in flight"
    committed = {data(e)["key"]: e for e in events(stack.database_url, job_id) if e.kind == "checkpoint"}
    steps = sorted(data(e)["global_step"] for e in committed.values())
    assert steps == list(range(1, int(job.total_steps or 0) + 1)), f"a checkpoint was skipped:\n{story}"
    cut_key = upload.path.removeprefix(f"/{stack.bucket}/{stack.prefix}/")
    assert committed[cut_key].created_at > cut_at, "the cut upload should have been retried and committed"
    return job_id, cut_key


def _upload_in_flight(stack: Stack, job_id: int, forwarded: int) -> Upload | None:
    """A checkpoint upload of the job that has sent ``forwarded`` bytes and is not answered yet."""
    assert stack.link is not None
    ours = f"/{stack.bucket}/{stack.prefix}/jobs/{job_id}/"
    return next((u for u in stack.link.uploads if u.method == "PUT" and u.path.startswith(ours)
                 and u.path.endswith(".pt") and u.forwarded > forwarded and not u.answered), None)


def _pg_ctlcluster(action: str) -> list[str] | None:
    clusters = Path("/etc/postgresql")
    if not shutil.which("pg_ctlcluster") or not clusters.is_dir():
        return None
    versions = sorted(p.name for p in clusters.iterdir())
    if not versions:
        return None
    return ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", action]


def _postmaster_started(url: str) -> object:
    from sqlalchemy import text

    from api.db import session_scope

    with session_scope(url) as session:
        return session.execute(text("SELECT pg_postmaster_start_time()")).scalar_one()


@pytest.mark.serial  # every other test's database goes down with it
def test_postgres_restarted_mid_run_the_worker_retries_and_the_job_finishes(stack: Stack) -> None:
    """Postgres goes down while a checkpoint uploads and comes back just after: the commit is retried."""
    assert stack.link is not None
    stop, start = _pg_ctlcluster("stop"), _pg_ctlcluster("start")
    if stop is None or start is None:
        pytest.skip("no pg_ctlcluster and /etc/postgresql cluster here: cannot restart the real Postgres")
    job_id = submit(stack, tiny_config(checkpoint_every_steps=1))
    wait_checkpoint(stack, job_id, attempt=1, global_step=1)
    started = _postmaster_started(stack.database_url)
    stack.link.throttle(400_000)  # each ~1.4 MB checkpoint now takes ~4 s to upload
    upload = wait_until(lambda: _upload_in_flight(stack, job_id, 1_000_000), 120, "a checkpoint upload near its end",
                        every_s=0.02)

    stopped = subprocess.run(stop, capture_output=True, text=True, timeout=120)
    if stopped.returncode != 0:
        pytest.skip(f"cannot stop Postgres here ({' '.join(stop)}): {stopped.stderr.strip()}")
    try:  # the upload completes while the database is down: its commit meets the outage
        wait_until(lambda: upload.answered, 30, "the upload to complete", every_s=0.02)
        time.sleep(PG_DOWN_AFTER_UPLOAD_S)
    finally:
        subprocess.run(start, check=True, capture_output=True, timeout=120)
    stack.link.passthrough()
    wait_until(lambda: _postmaster_started(stack.database_url) != started, 60, "Postgres to come back")

    job = wait_finished(stack, job_id)
    story = timeline(stack.database_url, job_id)
    # An outage of the database is not the job's fault: no failure counted, nothing redone.
    assert (job.status, job.job_failures, job.attempt) == ("succeeded", 0, 1), story
    committed = sorted(data(e)["global_step"] for e in events(stack.database_url, job_id) if e.kind == "checkpoint")
    assert committed == list(range(1, int(job.total_steps or 0) + 1)), f"a checkpoint was lost:\n{story}"
