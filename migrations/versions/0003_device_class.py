"""The device class a job trained on, and that device's memory: the planner's fleet calibration.

Both are nullable: jobs that ran before this revision, and jobs that never started, have none.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("device_class", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("device_memory_bytes", sa.BigInteger(), nullable=True))
    op.create_index(op.f("ix_jobs_device_class_status"), "jobs", ["device_class", "status"])


def downgrade() -> None:
    op.drop_index(op.f("ix_jobs_device_class_status"), table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("device_memory_bytes")
        batch.drop_column("device_class")
