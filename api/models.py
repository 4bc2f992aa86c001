"""Every table of the service. Times are timezone-aware UTC on both Postgres and SQLite."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class JobKind(StrEnum):
    TRAIN = "train"
    SEGMENT = "segment"
    PROBE = "probe"  # a planner's measurement of a model config on a worker's device (worker.probe_runner)


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
MAX_ID = 2**31 - 1  # ids are INTEGER (int4 on Postgres): a larger one names nothing, and must not reach SQL
LOCAL_TENANT = "local"  # the owner of every job while API keys are off (VEERNET_ADMIN_KEY unset)


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """``DateTime(timezone=True)`` that only accepts aware datetimes and always returns UTC ones.

    SQLite stores no offset, so values are normalised to UTC on the way in; that also keeps its
    text comparisons (``lease_expires_at < :now``) chronological.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass an aware UTC datetime")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UtcDateTime, dict[str, Any]: JSON}


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint("kind IN ('train', 'segment', 'probe')", name="kind"),
        CheckConstraint("status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')", name="status"),
        Index(None, "status", "lease_expires_at"),  # the reaper: expired leases
        Index(None, "status", "queued_at"),  # the reaper: messages nobody claimed
        Index(None, "status", "id"),  # listing by status; the queue ahead of a job
        Index(None, "tenant", "status", "id"),  # a tenant's jobs by status; its queued-job cap
        Index(None, "tenant", "id"),  # a tenant's jobs, newest first
        Index(None, "device_class", "status"),  # the planner: completed jobs of a device class
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # Who may see the job, its checkpoints and its results; another tenant gets 404.
    tenant: Mapped[str] = mapped_column(String(64), default=LOCAL_TENANT, server_default=LOCAL_TENANT)
    kind: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default=JobStatus.QUEUED)
    config: Mapped[dict[str, Any]]
    # The fencing token: bumped by every claim; every worker write is conditioned on it.
    attempt: Mapped[int] = mapped_column(default=0)
    infra_failures: Mapped[int] = mapped_column(default=0)  # attempts lost: lease expiry, worker loss
    job_failures: Mapped[int] = mapped_column(default=0)  # the job's own errors: bad data, NaN loss
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    lease_owner: Mapped[str | None] = mapped_column(String(255))
    lease_expires_at: Mapped[datetime | None]
    queued_at: Mapped[datetime] = mapped_column(default=utcnow)  # last (re)send to the broker

    epoch: Mapped[int | None]
    step: Mapped[int | None]  # optimiser steps done within `epoch`
    steps_per_epoch: Mapped[int | None]
    total_steps: Mapped[int | None]
    global_step: Mapped[int | None]
    images_per_s: Mapped[float | None] = mapped_column(Float)
    step_time_s: Mapped[float | None] = mapped_column(Float)  # mean time of a step still to come (fitted)
    validation_time_s: Mapped[float | None] = mapped_column(Float)  # one validation pass
    checkpoint_time_s: Mapped[float | None] = mapped_column(Float)  # one checkpoint save + upload
    loss: Mapped[float | None] = mapped_column(Float)
    metrics: Mapped[dict[str, Any] | None]
    progress_at: Mapped[datetime | None]  # last progress write: the last time work was proven done
    eta_seconds: Mapped[float | None] = mapped_column(Float)
    eta_at: Mapped[datetime | None]
    # Time lost to recoveries: from the lost attempt's last progress to the moment a later
    # attempt is back at that step. `recovering_*` hold an open recovery.
    recovery_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    recovering_since: Mapped[datetime | None]
    recovering_from_step: Mapped[int | None]
    # What the last attempt trained on, recorded at its claim: the planner calibrates per device class.
    device_class: Mapped[str | None] = mapped_column(String(200))
    device_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)

    error: Mapped[str | None] = mapped_column(Text)
    result: Mapped[dict[str, Any] | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    checkpoints: Mapped[list[Checkpoint]] = relationship(back_populates="job", passive_deletes=True)


class Checkpoint(Base):
    """A registered (committed) checkpoint: the row exists only after the upload completed."""

    __tablename__ = "checkpoints"
    __table_args__ = (Index(None, "job_id", "global_step"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    attempt: Mapped[int]
    epoch: Mapped[int]
    step: Mapped[int]
    global_step: Mapped[int]
    storage_key: Mapped[str] = mapped_column(String(512), unique=True)
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    metrics: Mapped[dict[str, Any]] = mapped_column(default=dict)
    is_best: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    job: Mapped[Job] = relationship(back_populates="checkpoints")


MEMORY_EVENT = "memory_measured"  # a training attempt's memory model and pixel budget; the planner reads it
PROBE_EVENT = "throughput_measured"  # a probe job's throughput of its model config on its device; the planner reads it


class JobEvent(Base):
    """The job's timeline: queued, claimed, checkpoint, lease_lost, requeued, ..."""

    __tablename__ = "job_events"
    __table_args__ = (Index(None, "job_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(default=0)
    kind: Mapped[str] = mapped_column(String(32))
    message: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any] | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ApiKey(Base):
    """A tenant's API key. Only its sha256 is kept; the key itself is shown once, when created."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64), index=True)
    name: Mapped[str] = mapped_column(String(100), default="")
    prefix: Mapped[str] = mapped_column(String(16))  # the key's first characters, to tell keys apart
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex of the whole key
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None]
