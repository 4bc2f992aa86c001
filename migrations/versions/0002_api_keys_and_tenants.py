"""API keys, and a tenant on every job.

Jobs that exist before this revision belong to tenant "local", the owner of every job while API keys
are off; an admin key sees them, and so would a key created for tenant "local".

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:  # SQLite adds a column with a default in place
        batch.add_column(sa.Column("tenant", sa.String(length=64), server_default="local", nullable=False))
    op.create_index(op.f("ix_jobs_tenant_status_id"), "jobs", ["tenant", "status", "id"])
    op.create_index(op.f("ix_jobs_tenant_id"), "jobs", ["tenant", "id"])

    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    op.create_index(op.f("ix_api_keys_tenant"), "api_keys", ["tenant"])


def downgrade() -> None:
    op.drop_table("api_keys")
    op.drop_index(op.f("ix_jobs_tenant_id"), table_name="jobs")
    op.drop_index(op.f("ix_jobs_tenant_status_id"), table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("tenant")
