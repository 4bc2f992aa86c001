"""Initial tables: jobs, checkpoints, job_events.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _time(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _int(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.Integer(), nullable=nullable)


def _float(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.Float(), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "jobs",
        _int("id", nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        _int("attempt", nullable=False),
        _int("infra_failures", nullable=False),
        _int("job_failures", nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("lease_owner", sa.String(length=255), nullable=True),
        _time("lease_expires_at"),
        _time("queued_at", nullable=False),
        *(_int(name) for name in ("epoch", "step", "steps_per_epoch", "total_steps", "global_step")),
        *(_float(name) for name in ("images_per_s", "step_time_s", "validation_time_s",
                                    "checkpoint_time_s", "loss")),
        sa.Column("metrics", sa.JSON(), nullable=True),
        _time("progress_at"),
        _float("eta_seconds"),
        _time("eta_at"),
        _float("recovery_seconds", nullable=False),
        _time("recovering_since"),
        _int("recovering_from_step"),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        _time("created_at", nullable=False),
        _time("started_at"),
        _time("finished_at"),
        _time("updated_at", nullable=False),
        sa.CheckConstraint("kind IN ('train', 'segment')", name=op.f("ck_jobs_kind")),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')", name=op.f("ck_jobs_status")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index(op.f("ix_jobs_status_id"), "jobs", ["status", "id"])
    op.create_index(op.f("ix_jobs_status_lease_expires_at"), "jobs", ["status", "lease_expires_at"])
    op.create_index(op.f("ix_jobs_status_queued_at"), "jobs", ["status", "queued_at"])

    op.create_table(
        "checkpoints",
        _int("id", nullable=False),
        _int("job_id", nullable=False),
        *(_int(name, nullable=False) for name in ("attempt", "epoch", "step", "global_step")),
        sa.Column("storage_key", sa.String(length=512), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("is_best", sa.Boolean(), nullable=False),
        _time("created_at", nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_checkpoints_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkpoints")),
        sa.UniqueConstraint("storage_key", name=op.f("uq_checkpoints_storage_key")),
    )
    op.create_index(op.f("ix_checkpoints_job_id_global_step"), "checkpoints", ["job_id", "global_step"])

    op.create_table(
        "job_events",
        _int("id", nullable=False),
        _int("job_id", nullable=False),
        _int("attempt", nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=True),
        _time("created_at", nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_events_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_events")),
    )
    op.create_index(op.f("ix_job_events_job_id_id"), "job_events", ["job_id", "id"])


def downgrade() -> None:
    op.drop_table("job_events")
    op.drop_table("checkpoints")
    op.drop_table("jobs")
