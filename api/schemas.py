"""Request and response bodies of the HTTP API."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.models import Checkpoint, Job, JobEvent


class FieldError(BaseModel):
    field: str  # dotted path, e.g. "config.epochs" or "limit"
    message: str


class ErrorBody(BaseModel):
    detail: str | list[FieldError]


class JobCreate(BaseModel):
    """A training job: ``config`` is a veernet_core TrainConfig as JSON; omitted fields take defaults."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["train"] = "train"
    config: dict[str, Any] = Field(default_factory=dict)


class Progress(BaseModel):
    epoch: int | None
    step: int | None
    steps_per_epoch: int | None
    global_step: int | None
    total_steps: int | None
    fraction: float | None
    images_per_s: float | None
    step_time_s: float | None
    loss: float | None

    @classmethod
    def of(cls, job: Job) -> Progress:
        fraction = None
        if job.total_steps and job.global_step is not None:
            fraction = min(job.global_step / job.total_steps, 1.0)
        return cls(epoch=job.epoch, step=job.step, steps_per_epoch=job.steps_per_epoch,
                   global_step=job.global_step, total_steps=job.total_steps, fraction=fraction,
                   images_per_s=job.images_per_s, step_time_s=job.step_time_s, loss=job.loss)


class Eta(BaseModel):
    seconds: float | None = None  # until the job finishes
    at: datetime | None = None
    expected_start_seconds: float | None = None  # queued jobs: until a worker is free for it
    expected_start_at: datetime | None = None


class CheckpointOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    job_id: int
    attempt: int
    epoch: int
    step: int
    global_step: int
    storage_key: str
    size: int
    sha256: str
    metrics: dict[str, Any]
    is_best: bool
    created_at: datetime
    download_url: str = ""

    @classmethod
    def of(cls, row: Checkpoint) -> CheckpointOut:
        return cls.model_validate(row).model_copy(update={"download_url": f"/checkpoints/{row.id}/download"})


class EventOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    attempt: int
    kind: str
    message: str
    data: dict[str, Any] | None
    created_at: datetime


class JobSummary(BaseModel):
    id: int
    kind: str
    status: str
    attempt: int
    recoveries: int  # attempts lost to infrastructure so far
    recovery_seconds: float  # wall time those recoveries cost
    job_failures: int
    cancel_requested: bool
    progress: Progress
    metrics: dict[str, Any] | None
    eta: Eta
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime

    @classmethod
    def fields_of(cls, job: Job, eta: Eta) -> dict[str, Any]:
        return dict(
            id=job.id, kind=job.kind, status=job.status, attempt=job.attempt, recoveries=job.infra_failures,
            recovery_seconds=job.recovery_seconds, job_failures=job.job_failures,
            cancel_requested=job.cancel_requested, progress=Progress.of(job), metrics=job.metrics, eta=eta,
            error=job.error, created_at=job.created_at, started_at=job.started_at,
            finished_at=job.finished_at, updated_at=job.updated_at,
        )


class JobDetail(JobSummary):
    config: dict[str, Any]
    result: dict[str, Any] | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    last_checkpoint: CheckpointOut | None
    events: list[EventOut]  # the most recent, oldest first

    @classmethod
    def of(cls, job: Job, eta: Eta, last: Checkpoint | None, events: list[JobEvent]) -> JobDetail:
        return cls(**cls.fields_of(job, eta), config=job.config, result=job.result,
                   lease_owner=job.lease_owner, lease_expires_at=job.lease_expires_at,
                   last_checkpoint=None if last is None else CheckpointOut.of(last),
                   events=[EventOut.model_validate(e) for e in events])


class JobPage(BaseModel):
    items: list[JobSummary]
    total: int
    limit: int
    offset: int


class CheckpointPage(BaseModel):
    items: list[CheckpointOut]
    total: int
    limit: int
    offset: int


class Health(BaseModel):
    status: Literal["ok", "error"]
    checks: dict[str, Literal["ok", "error"]]  # database, broker, store
    errors: dict[str, str]  # what failed, for each check that did
