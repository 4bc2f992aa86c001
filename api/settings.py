"""Every environment setting of the service, in one class, each with an embedded default.

With nothing set the service runs on one machine with no services: SQLite for jobs, kombu's
SQLAlchemy transport as the broker, checkpoints in a local directory, all under
``VEERNET_DATA_DIR``. ``DATABASE_URL``, ``BROKER_URL``, ``CHECKPOINT_URL=s3://bucket/prefix`` and
``S3_ENDPOINT_URL`` switch it to Postgres, Redis and S3 or MinIO. AWS credentials and region are
read by boto3 from its own environment variables.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Field names are the environment variable names, lower-cased."""

    model_config = SettingsConfigDict(case_sensitive=False, extra="ignore")

    veernet_data_dir: Path = Path("var")  # root of every embedded default below
    database_url: str = ""  # "" = sqlite:///<data dir>/veernet.db
    broker_url: str = ""  # "" = sqla+sqlite:///<data dir>/broker.db (kombu's embedded transport)
    checkpoint_url: str = ""  # "" = <data dir>/checkpoints; s3://bucket/prefix selects S3
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
    # Uploads to POST /segment: the widest scans (12,800 x 640 px) fit four times over.
    max_upload_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    max_image_pixels: int = Field(default=4 * 12_800 * 640, ge=32 * 32)
    segment_wait_max_seconds: float = Field(default=120.0, gt=0)  # the longest POST /segment?wait=true
    # A polled job's status may be served from this process's cache for this long; 0 = always checked.
    status_cache_seconds: float = Field(default=1.0, ge=0)
    expected_workers: int = Field(default=1, ge=1)  # workers per queue, for the expected start of queued jobs

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
        if self.heartbeat_seconds >= self.lease_seconds:
            raise ValueError("HEARTBEAT_SECONDS must be shorter than LEASE_SECONDS, or every lease lapses")
        return self

    @property
    def uses_embedded_broker(self) -> bool:
        return self.broker_url.startswith("sqla+")


@cache
def get_settings() -> Settings:
    """The process's settings, read once from the environment (tests call ``cache_clear``)."""
    return Settings()
