"""Request and response bodies of the HTTP API."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.models import Checkpoint, Job, JobEvent
from veernet_core.config import CHOICES, RANGES, DataConfig, ModelConfig, TrainConfig, allowed_range
from veernet_core.reference import config_descriptions
from veernet_core.synth_factors import EXCLUDABLE


def config_schema(cls: type, prefix: str, bounds: dict[str, tuple[float, str]]) -> dict[str, Any]:
    """JSON schema of a config dataclass: each field's type, default, range (tightened by ``bounds``) and choices."""
    properties, defaults = {}, cls()
    for field in dataclasses.fields(cls):
        dotted = prefix + field.name
        nested = {"ModelConfig": ModelConfig, "DataConfig": DataConfig}.get(str(field.type))
        if nested is not None:
            properties[field.name] = config_schema(nested, dotted + ".", bounds)
            continue
        default = getattr(defaults, field.name)
        properties[field.name] = {**_FIELD_TYPES[str(field.type)], "default": list(default) if isinstance(
            default, tuple) else default, **_range(dotted, bounds), **_choices(dotted),
            "description": _DESCRIPTIONS.get(dotted, "")}
    return {"type": "object", "properties": properties, "additionalProperties": False}


_DESCRIPTIONS = config_descriptions()  # the comment beside each field in veernet_core/config.py
_FIELD_TYPES: dict[str, dict[str, Any]] = {
    "int": {"type": "integer"}, "float": {"type": "number"}, "bool": {"type": "boolean"}, "str": {"type": "string"},
    # model.widths: the stem and five stride-2 stages
    "tuple[int, ...]": {"type": "array", "items": {"type": "integer", "minimum": 4, "maximum": 1024},
                        "minItems": 6, "maxItems": 6},
    # data.exclude: synthetic factor levels never generated
    "tuple[str, ...]": {"type": "array", "items": {"type": "string", "enum": list(EXCLUDABLE)}},
}


def _range(dotted: str, bounds: dict[str, tuple[float, str]]) -> dict[str, float]:
    if dotted not in RANGES:
        return {}
    low, high, _source = allowed_range(dotted, bounds)  # the range POST /jobs checks: one place
    return {"minimum": low, "maximum": high}


def _choices(dotted: str) -> dict[str, list[str]]:
    return {"enum": list(CHOICES[dotted])} if dotted in CHOICES else {}


class FieldError(BaseModel):
    field: str  # dotted path, e.g. "config.epochs" or "limit"
    message: str


class ErrorBody(BaseModel):
    detail: str | list[FieldError]


def _train_config_schema(schema: dict[str, Any]) -> None:
    """The ``config`` field's schema: veernet_core's TrainConfig, within this service's bounds."""
    from api.limits import train_bounds
    from api.settings import get_settings

    schema.clear()
    schema.update(config_schema(TrainConfig, "", train_bounds(get_settings())))
    schema["description"] = ("A veernet_core TrainConfig; omitted fields take their defaults. Rules across fields "
                             "(model.num_classes = data.classes, heads dividing the bottleneck width, enough "
                             "training images for one step) are checked on submission.")


class JobCreate(BaseModel):
    """A training job: ``config`` is a veernet_core TrainConfig as JSON; omitted fields take defaults."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["train"] = "train"
    config: dict[str, Any] = Field(default_factory=dict, json_schema_extra=_train_config_schema)


class Progress(BaseModel):
    """How far a training job is. Counts are of work done: ``epoch`` 1 of ``epochs`` 2 means the first
    epoch is complete and the second is being trained; a finished two-epoch job is at 2 of 2, and its
    checkpoints' and history's ``epoch`` count the same way."""

    epoch: int | None = Field(description="epochs completed, 0 to `epochs`")
    epochs: int | None = Field(description="epochs the job trains in all (its config's `epochs`)")
    step: int | None = Field(description="optimiser steps completed in the epoch being trained")
    steps_per_epoch: int | None
    global_step: int | None = Field(description="optimiser steps completed in all, 0 to `total_steps`")
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
        epochs = job.config.get("epochs") if job.kind == "train" and isinstance(job.config, dict) else None
        return cls(epoch=job.epoch, epochs=epochs, step=job.step, steps_per_epoch=job.steps_per_epoch,
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
    tenant: str  # who may see the job: the tenant of the key that submitted it
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
            id=job.id, tenant=job.tenant, kind=job.kind, status=job.status, attempt=job.attempt,
            recoveries=job.infra_failures, recovery_seconds=job.recovery_seconds, job_failures=job.job_failures,
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


class EventPage(BaseModel):
    items: list[EventOut]  # oldest first
    total: int
    limit: int
    offset: int


class EpochRecord(BaseModel):
    """One committed epoch of a training job: what its loss and IoU curves plot."""

    epoch: int  # epochs done, as in the checkpoint's name
    global_step: int | None
    attempt: int  # the attempt that trained and committed it
    at: datetime
    train_loss: float | None  # mean over the epoch's steps
    metrics: dict[str, float]  # validation: iou_<class>, dice_<class>, iou_fg_mean
