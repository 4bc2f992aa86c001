"""The service's own errors. Lower layers raise these; only routes turn them into HTTP answers."""

from __future__ import annotations


class ServiceError(Exception):
    """Base of every error the job service raises on purpose."""


class JobNotFound(ServiceError):
    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        super().__init__(f"no job {job_id}; list jobs with GET /jobs")


class CheckpointNotFound(ServiceError):
    def __init__(self, checkpoint_id: int | str) -> None:
        self.checkpoint_id = checkpoint_id
        super().__init__(f"no checkpoint {checkpoint_id}; list them with GET /checkpoints?job_id=...")


class InvalidTransition(ServiceError):
    """The job is in a state that does not allow the requested change (e.g. cancelling a finished job)."""


class StoreError(ServiceError):
    """The checkpoint store could not be reached, or an object it should hold is missing."""


class BlobMissing(StoreError):
    def __init__(self, key: str, where: str) -> None:
        self.key = key
        super().__init__(f"checkpoint file {key!r} is missing from {where}; it may have been pruned")
