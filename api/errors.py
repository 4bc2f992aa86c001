"""The service's own errors. Lower layers raise these; each carries its HTTP answer, and api.main's one
handler turns any of them into a response (routes never catch them to re-raise)."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """Base of every error the job service raises on purpose: its message, HTTP status and headers."""

    status: int = 500  # each subclass names its own; raisers may override it per instance

    def __init__(self, message: str, status: int | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.headers = headers

    def detail(self) -> Any:
        """The response body's ``detail``: the message (a list of field errors for bad input)."""
        return str(self)


class FieldErrors(ServiceError):
    """Bad input: ``errors`` maps each bad field (dotted, as the request names it) to what to fix.
    Answered with one ``{field, message}`` entry per field."""

    status = 422

    def __init__(self, errors: dict[str, str], status: int | None = None,
                 headers: dict[str, str] | None = None) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{name}: {message}" for name, message in errors.items()), status, headers)

    def detail(self) -> list[dict[str, str]]:
        return [{"field": name, "message": message} for name, message in self.errors.items()]


class JobNotFound(ServiceError):
    status = 404

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        super().__init__(f"no job {job_id}; list jobs with GET /jobs")


class CheckpointNotFound(ServiceError):
    status = 404

    def __init__(self, checkpoint_id: int | str) -> None:
        self.checkpoint_id = checkpoint_id
        super().__init__(f"no checkpoint {checkpoint_id}; list them with GET /checkpoints?job_id=...")


class InvalidTransition(ServiceError):
    """The job is in a state that does not allow the requested change (e.g. cancelling a finished job)."""

    status = 409


class StoreError(ServiceError):
    """The checkpoint store could not be reached: retry later."""

    status = 503


class BlobMissing(StoreError):
    """An object the store should hold is missing."""

    status = 404

    def __init__(self, key: str, where: str) -> None:
        self.key = key
        super().__init__(f"checkpoint file {key!r} is missing from {where}; it may have been pruned")
