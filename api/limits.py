"""The service's limits, FastAPI-free: body size, training config bounds, queued jobs, submission rate.

Image bytes and pixels of POST /segment are checked in api.segment, where the image is decoded.
The rate limiter is a token bucket per tenant key in this process's memory: with several API
processes a key gets that many buckets, which bounds bursts per process, not exactly per cluster.
"""

from __future__ import annotations

import math
import re
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.auth import Principal
from api.errors import FieldErrors, ServiceError
from api.models import Job, JobStatus
from api.settings import Settings
from veernet_core.config import ConfigError, TrainConfig

UPLOAD_FORM_BYTES = 1024 * 1024  # multipart framing and the options field around a scan upload
SCAN_UPLOADS = ("/segment", "/scans/analyse")  # the routes that take a scan: MAX_UPLOAD_BYTES, not MAX_REQUEST_BYTES


class LimitExceeded(ServiceError):
    """A request over one of the service's limits (the body size is refused earlier, in api.middleware)."""

    def __init__(self, message: str, status: int, retry_after_s: int | None = None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message, status, None if retry_after_s is None else {"Retry-After": str(retry_after_s)})


def body_limit(method: str, path: str, settings: Settings) -> tuple[int, str]:
    """The most bytes a request body may have, and the setting that says so."""
    if method == "POST" and path.rstrip("/") in SCAN_UPLOADS:
        return settings.max_upload_bytes + UPLOAD_FORM_BYTES, "MAX_UPLOAD_BYTES plus 1 MiB for the form"
    return settings.max_request_bytes, "MAX_REQUEST_BYTES"


def body_too_large(size: int, method: str, path: str, settings: Settings, *, at_least: bool = False) -> str:
    limit, setting = body_limit(method, path, settings)
    amount = f"more than {limit}" if at_least else str(size)
    return f"the request body is {amount} bytes; the limit for {method} {path} is {limit} bytes ({setting})"


def train_bounds(settings: Settings) -> dict[str, tuple[float, str]]:
    """{dotted TrainConfig field: (this service's maximum, the setting that says so)}: the ``caps`` of
    TrainConfig.from_dict, so that a field has one allowed range, its own minimum to the lower maximum."""
    return {"epochs": (settings.max_epochs, "MAX_EPOCHS"),
            "data.dataset_size": (settings.max_dataset_size, "MAX_DATASET_SIZE"),
            "data.scale": (settings.max_scale, "MAX_SCALE")}


def train_config(raw: dict[str, Any], settings: Settings, tenant: str) -> TrainConfig:
    """The validated config within this service's bounds, or FieldErrors naming every bad field.

    A labelled dataset is named, not located: ``data.manifest_url`` becomes the tenant's own folder.
    """
    try:
        config = TrainConfig.from_dict(raw, caps=train_bounds(settings))
    except ConfigError as exc:
        raise FieldErrors({f"config.{name}": message for name, message in exc.errors.items()}) from exc
    if config.data.kind == "manifest":
        try:
            url = dataset_url(config.data.manifest_url, tenant, settings)
        except ValueError as exc:
            raise FieldErrors({"config.data.manifest_url": str(exc)}) from exc
        config = replace(config, data=replace(config.data, manifest_url=url))
    return config


DATASET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def dataset_url(name: str, tenant: str, settings: Settings) -> str:
    """Where a tenant's dataset ``name`` lives: under DATASETS_URL, in the tenant's own folder.

    ``name`` is a user string, so it may only be one plain path segment; the tenant comes from the key.
    Raises ValueError saying what a good name looks like.
    """
    if not DATASET_NAME.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"is {name!r}; name a dataset of yours: 1 to 100 letters, digits, '_', '.' or '-' "
                         f"(its manifest.json is read from DATASETS_URL/<your tenant>/<name>/)")
    root = settings.datasets_url.rstrip("/")
    return f"{root}/{tenant}/{name}" if root.startswith("s3://") else str(Path(root) / tenant / name)


def check_queued_jobs(session: Session, principal: Principal, settings: Settings) -> None:
    """LimitExceeded (429) if the caller's tenant already has MAX_QUEUED_JOBS_PER_TENANT queued jobs.

    Two submissions racing past the count may overshoot it by one each: a soft cap, enough to stop
    one tenant from filling the queue.
    """
    cap = settings.max_queued_jobs_per_tenant
    if not principal.limited or cap == 0:
        return
    queued = session.scalar(select(func.count()).select_from(Job).where(
        Job.tenant == principal.tenant, Job.status == JobStatus.QUEUED)) or 0
    if queued >= cap:
        raise LimitExceeded(f"tenant {principal.tenant!r} already has {queued} queued jobs, the most allowed "
                            f"(MAX_QUEUED_JOBS_PER_TENANT={cap}); wait for some to start, or cancel some with "
                            "POST /jobs/{id}/cancel", 429)


def check_submission(session: Session, principal: Principal, settings: Settings) -> None:
    """The limits of every submission (POST /jobs, POST /segment): the key's rate, then its tenant's queue."""
    submissions.check(principal, settings)
    check_queued_jobs(session, principal, settings)


@dataclass
class TokenBucket:
    """Holds up to ``capacity`` tokens, refilled at ``rate_per_s``; a submission takes one."""

    capacity: float
    rate_per_s: float
    tokens: float
    updated: float

    def take(self, now: float) -> float:
        """0.0 if a token was taken, else the seconds until one is there."""
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate_per_s)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate_per_s


class SubmissionLimiter:
    """A token bucket per (tenant, key): SUBMIT_BURST at once, then SUBMIT_RATE_PER_MINUTE."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, int], TokenBucket] = {}

    def check(self, principal: Principal, settings: Settings, now: float | None = None) -> None:
        """Take a token for one submission, or raise LimitExceeded (429) with the seconds to wait."""
        rate = settings.submit_rate_per_minute / 60.0
        if principal.key_id is None or rate == 0:  # not a tenant's key (see Principal.limited), or no limit
            return
        now = time.monotonic() if now is None else now
        burst = float(settings.submit_burst)
        with self._lock:
            bucket = self._buckets.get((principal.tenant, principal.key_id))
            if bucket is None or (bucket.capacity, bucket.rate_per_s) != (burst, rate):
                bucket = TokenBucket(burst, rate, burst, now)  # new key, or the settings changed
                self._buckets[(principal.tenant, principal.key_id)] = bucket
            wait_s = bucket.take(now)
        if wait_s > 0:
            retry = max(1, math.ceil(wait_s))
            raise LimitExceeded(f"too many submissions with this key: at most {settings.submit_burst} at once, "
                                f"then {settings.submit_rate_per_minute:g} a minute (SUBMIT_BURST, "
                                f"SUBMIT_RATE_PER_MINUTE); retry in {retry} s", 429, retry_after_s=retry)

    def reset(self) -> None:
        with self._lock:
            self._buckets.clear()


submissions = SubmissionLimiter()
