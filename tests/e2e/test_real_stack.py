"""One job end to end on the real stack: Postgres, Redis, S3 (moto's server), Celery worker processes."""

from __future__ import annotations

import pytest
from e2e_jobs import check_job_runs_to_success, tiny_config
from e2e_stack import Stack

pytestmark = pytest.mark.e2e


def test_job_goes_queued_running_succeeded_with_a_checkpoint_per_epoch(stack: Stack) -> None:
    """With DataLoader workers, as a GPU run has them by default: Celery runs the job in a daemonic pool
    child, which may not start processes unless the runner lets it (worker.runner.allow_loader_workers)."""
    s3 = stack.s3_client()

    def stored(key: str) -> bytes:
        return bytes(s3.get_object(Bucket=stack.bucket, Key=f"{stack.prefix}/{key}")["Body"].read())

    check_job_runs_to_success(stack, tiny_config(num_workers=2), stored)
