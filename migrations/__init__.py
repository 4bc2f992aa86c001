"""Alembic migrations of the job service's tables; run them with ``api.db.migrate()``."""
