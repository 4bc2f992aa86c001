"""Probe jobs: a plan that needs a measurement the fleet lacks queues one for a worker (api.plan_probes).

Only the kind's CHECK constraint changes; a probe job's row is a job's like any other.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _kinds(kinds: str) -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint(op.f("ck_jobs_kind"), type_="check")
        batch.create_check_constraint(op.f("ck_jobs_kind"), f"kind IN ({kinds})")


def upgrade() -> None:
    _kinds("'train', 'segment', 'probe'")


def downgrade() -> None:
    op.execute("DELETE FROM jobs WHERE kind = 'probe'")  # their events and checkpoints go with them (cascade)
    _kinds("'train', 'segment'")
