"""A job that always fails fails once, after its cap, with its error: no endless requeue."""

from __future__ import annotations

import time

import pytest
from e2e_jobs import events, job_json, kinds, submit, timeline, tiny_config, wait_finished
from e2e_procs import FAST_LEASES
from e2e_stack import Stack

from api.settings import Settings

pytestmark = pytest.mark.e2e
MAX_JOB_FAILURES = Settings.model_fields["max_job_failures"].default  # the stack runs with the default


def test_a_job_whose_data_cannot_load_fails_after_its_cap_exactly_once(stack: Stack) -> None:
    missing = "no-such-dataset"  # a dataset name: the worker looks for it in the tenant's datasets folder
    job_id = submit(stack, tiny_config(data={"kind": "manifest", "manifest_url": missing}))

    job = wait_finished(stack, job_id)
    story = timeline(stack.database_url, job_id)
    assert job.status == "failed", story
    assert (job.job_failures, job.attempt, job.infra_failures) == (MAX_JOB_FAILURES, MAX_JOB_FAILURES, 0), story
    assert f"MAX_JOB_FAILURES={MAX_JOB_FAILURES}" in (job.error or "") and missing in (job.error or ""), job.error
    assert job_json(stack, job_id)["error"] == job.error

    # Give the reaper a chance to bring it back (a re-send period and two more passes): it must not.
    time.sleep(float(FAST_LEASES["QUEUED_RESEND_SECONDS"]) + 2 * float(FAST_LEASES["REAPER_INTERVAL_SECONDS"]))
    settled = kinds(stack.database_url, job_id)
    assert settled.count("failed") == 1, story
    assert settled.count("claimed") == MAX_JOB_FAILURES and settled.count("requeued") == MAX_JOB_FAILURES - 1, story
    assert len(events(stack.database_url, job_id)) == len(settled) and settled[-1] == "failed", story
    assert job_json(stack, job_id)["attempt"] == MAX_JOB_FAILURES
