"""Every environment setting of the service, in one class, each with an embedded default.

With nothing set the service runs on one machine with no services: SQLite for jobs, kombu's
SQLAlchemy transport as the broker, checkpoints in a local directory, all under
``VEERNET_DATA_DIR``. ``DATABASE_URL``, ``BROKER_URL``, ``CHECKPOINT_URL=s3://bucket/prefix`` and
``S3_ENDPOINT_URL`` switch it to Postgres, Redis and S3 or MinIO. AWS credentials and region are
read by boto3 from its own environment variables.

``VEERNET_ADMIN_KEY`` turns API keys on: once it is set every endpoint but health, docs and the
OpenAPI schema needs ``Authorization: Bearer <key>``. Unset (the embedded default), no key is asked
for, every job belongs to tenant "local", and the API only binds a loopback address.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Field names are the environment variable names, lower-cased."""

    model_config = SettingsConfigDict(case_sensitive=False, extra="ignore")

    veernet_data_dir: Path = Path("var")  # root of every embedded default below
    database_url: str = ""  # "" = sqlite:///<data dir>/veernet.db
    broker_url: str = ""  # "" = sqla+sqlite:///<data dir>/broker.db (kombu's embedded transport)
    checkpoint_url: str = ""  # "" = <data dir>/checkpoints; s3://bucket/prefix selects S3
    # Labelled datasets (data.kind "manifest"): a job names one, and it is read from
    # <DATASETS_URL>/<tenant>/<name>/manifest.json, so no tenant can point a worker at another's files.
    datasets_url: str = ""  # "" = <data dir>/datasets; s3://bucket/prefix selects S3
    s3_endpoint_url: str | None = None  # MinIO or a test server; None = AWS
    s3_presign: bool = False  # False: downloads stream through the API; True: 307 to a presigned URL
    presign_seconds: int = Field(default=300, ge=1)  # a presigned URL is a bearer token: short-lived
    # A dropped box is noticed within one lease; each heartbeat is one small UPDATE per running job.
    lease_seconds: float = Field(default=60.0, gt=0)
    heartbeat_seconds: float = Field(default=10.0, gt=0)  # six chances to renew before the lease runs out
    queued_resend_seconds: float = Field(default=60.0, gt=0)  # unclaimed this long: message lost, re-send
    max_infra_attempts: int = Field(default=5, ge=1)  # the job fails when this many attempts were lost
    max_job_failures: int = Field(default=2, ge=1)  # the job fails at its own Nth failure (N - 1 retries)
    reaper_interval_seconds: float = Field(default=10.0, gt=0)  # how often leases and the queue are checked
    # A job message a worker took and no pool process started within this long restarts the worker
    # (worker/handoff.py): a fresh process takes the job from the reaper's re-sent message.
    worker_handoff_seconds: float = Field(default=30.0, gt=0)
    # A training job that, after its first progress report, made none for this long (nor for 3x the expected
    # length of the step, validation or checkpoint it is in) has stalled: a hung device call or data read,
    # while its heartbeat thread still renews the lease. The process records it, hands the job back (one
    # attempt lost to infrastructure) and ends itself (worker/attempt.py). 0 = never.
    stall_seconds: float = Field(default=1800.0, ge=0)
    # Uploads to POST /segment: the widest scans (12,800 x 640 px) fit four times over.
    max_upload_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    max_image_pixels: int = Field(default=4 * 12_800 * 640, ge=32 * 32)
    segment_wait_max_seconds: float = Field(default=120.0, gt=0)  # the longest POST /segment?wait=true
    # POST /scans/analyse runs in the request (api/scans.py): page analyses at once per API process.
    analyse_concurrency: int = Field(default=2, ge=1)
    # A polled job's status may be served from this process's cache for this long; 0 = always checked.
    status_cache_seconds: float = Field(default=1.0, ge=0)
    # "json": one JSON object per log line, with job_id and attempt while a worker runs a job (api/logs.py).
    veernet_log_format: Literal["text", "json"] = "text"

    # API keys and limits. The admin key sees every tenant; it is a SecretStr so that it never prints.
    veernet_admin_key: SecretStr | None = None  # None or "" = keys off: tenant "local", loopback only
    # A tenant key is read from the database at most once per this many seconds per API process (each
    # request would otherwise cost a query): a revocation takes effect within it. 0 = read on every request.
    api_key_cache_seconds: float = Field(default=1.0, ge=0)
    max_request_bytes: int = Field(default=1024 * 1024, ge=1024)  # any body but a POST /segment upload
    # Training config bounds, tighter than what veernet_core accepts: one job's share of the GPUs.
    max_epochs: int = Field(default=200, ge=1)  # 4x the engagement's 50-epoch schedule
    max_dataset_size: int = Field(default=100_000, ge=2)  # ~7x the 15,000-instance multiclass set
    max_scale: float = Field(default=1.0, gt=0, le=1.0)  # 1.0 = full-size synthetic logs
    # Per tenant key (never the admin key, nor the keys-off local user): queued jobs and submissions.
    max_queued_jobs_per_tenant: int = Field(default=100, ge=0)  # 0 = no cap
    submit_rate_per_minute: float = Field(default=60.0, ge=0)  # POST /jobs and /segment; 0 = no limit
    submit_burst: int = Field(default=20, ge=1)  # submissions a key may make at once after idling

    @model_validator(mode="after")
    def _fill_embedded_defaults(self) -> Settings:
        data_dir = self.veernet_data_dir.expanduser().absolute()
        self.veernet_data_dir = data_dir
        if not self.database_url:
            self.database_url = f"sqlite:///{data_dir / 'veernet.db'}"
        if not self.broker_url:
            self.broker_url = f"sqla+sqlite:///{data_dir / 'broker.db'}"
        if not self.checkpoint_url:
            self.checkpoint_url = str(data_dir / "checkpoints")
        if not self.datasets_url:
            self.datasets_url = str(data_dir / "datasets")
        if self.veernet_admin_key is not None and not self.veernet_admin_key.get_secret_value():
            self.veernet_admin_key = None  # VEERNET_ADMIN_KEY= (empty) is unset, as in docker-compose
        if self.heartbeat_seconds >= self.lease_seconds:
            raise ValueError("HEARTBEAT_SECONDS must be shorter than LEASE_SECONDS, or every lease lapses")
        if 0 < self.stall_seconds <= self.heartbeat_seconds:
            raise ValueError("STALL_SECONDS must be 0 (off) or longer than HEARTBEAT_SECONDS, which checks it")
        return self

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """repr() and str() (what a log line would show) hide the passwords in the service URLs."""
        for name, value in super().__repr_args__():
            yield name, redact_url(value) if name in ("database_url", "broker_url") else value

    @property
    def uses_embedded_broker(self) -> bool:
        return self.broker_url.startswith("sqla+")

    @property
    def uses_embedded_database(self) -> bool:
        """The default SQLite file under the data dir: `veernet api` migrates it itself."""
        return self.database_url == f"sqlite:///{self.veernet_data_dir / 'veernet.db'}"

    @property
    def keys_required(self) -> bool:
        return self.veernet_admin_key is not None


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***``: the only form of a service URL fit for a log."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


@cache
def get_settings() -> Settings:
    """The process's settings, read once from the environment (tests call ``cache_clear``)."""
    return Settings()
