"""Postgres tells listening API processes which job changed (NOTIFY veernet_job_changed, payload: the id).

A job's row and its timeline are what a status poll shows; every insert, update or delete of either
notifies at commit, whichever process writes it (api.changes). SQLite has no NOTIFY: nothing to do there.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHANNEL = "veernet_job_changed"  # api.changes.CHANNEL
TRIGGERS = {"jobs": "id", "job_events": "job_id"}  # table: the column holding the job's id


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column in TRIGGERS.items():
        op.execute(f"""
            CREATE FUNCTION {table}_notify_job_changed() RETURNS trigger AS $$
            BEGIN
                PERFORM pg_notify('{CHANNEL}', (CASE WHEN TG_OP = 'DELETE' THEN OLD.{column}
                                                     ELSE NEW.{column} END)::text);
                RETURN NULL;
            END $$ LANGUAGE plpgsql""")
        op.execute(f"""
            CREATE TRIGGER {table}_notify_job_changed AFTER INSERT OR UPDATE OR DELETE ON {table}
            FOR EACH ROW EXECUTE FUNCTION {table}_notify_job_changed()""")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_notify_job_changed ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS {table}_notify_job_changed()")
