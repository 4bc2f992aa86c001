"""Request and response bodies of POST /plan (and POST /jobs?dry_run=true)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.schemas import _train_config_schema


class TierIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    eur_per_month: float = Field(gt=0, le=10_000_000)


class PlanBody(BaseModel):
    """A training config and a target device; every other field has a stated default."""

    model_config = ConfigDict(extra="forbid")

    config: dict[str, Any] = Field(default_factory=dict, json_schema_extra=_train_config_schema)
    device_class: str | None = Field(None, min_length=1, max_length=200, description=(
        "A device class workers reported, e.g. 'cuda:NVIDIA A10G', or a GPU of the known-GPU table by any of its "
        "names ('A100 80GB', 'H100 PCIe', 'L4'): one nothing measured is planned from its datasheet, as an "
        "estimate (throughput.source 'gpu_table_estimate'). Omitted: the class with the most completed jobs."))
    gpu_memory_gb: float | None = Field(None, gt=0, le=1024, description=(
        "Plan for a GPU of this many GiB: a reported GPU class of that size, else the known-GPU table's card of "
        "that size (an estimate). With device_class, that class with this much memory. The memory model is the "
        "class's own if its workers measured this model config, else another class's (memory.extrapolated)."))
    window_hours: float = Field(12.0, gt=0, le=24 * 31, description="The window the run must finish in")
    interruptions: float | None = Field(None, ge=0, le=1000, description=(
        "k expected interruptions. Omitted: failure_rate_per_hour x compute time, else the class's measured rate"))
    failure_rate_per_hour: float | None = Field(None, ge=0, le=100, strict=True)  # true is no rate
    utilisation: float = Field(0.5, ge=0.01, le=1, description="Share of a month's hours the rented box does paid "
                               "work: hourly rate = monthly rent / (730.5 h x utilisation); at least 1 %")
    tiers: list[TierIn] = Field(default_factory=list, max_length=10, description=(
        "Tiers to cost besides the engagement's 750 and 1,800 EUR/month"))
    start_at: datetime | None = Field(None, description="When the run would start (ISO 8601); gives finish_at")
    probe: bool = Field(True, description=(
        "Where the fleet has not measured this model config on the target, queue a probe job for a training "
        "worker (never run in the API) and answer at once, saying it is pending (measurement.probe). "
        "false: queue none, and answer 409 when nothing measures or estimates the throughput"))

    @field_validator("start_at", mode="before")
    @classmethod
    def _a_date_time_string(cls, value: Any) -> Any:
        """The schema says a date-time string: a number (which pydantic would read as Unix seconds) is refused."""
        if value is not None and not isinstance(value, (str, datetime)):
            raise ValueError("must be an ISO 8601 date-time string, such as 2026-11-27T08:00:00Z")
        return value


class PlanOut(BaseModel):
    device_class: str
    window_s: float
    memory: dict[str, Any]  # memory model and where it was measured, pixel budget, widest log, batch per bucket
    data: dict[str, Any]  # steps per epoch, accumulation, padding waste, what was sampled
    # The next four are null when nothing measures or estimates the throughput (measurement says why).
    time: dict[str, Any] | None  # start-up, training, validation, checkpoints, compute total (seconds)
    interruptions: dict[str, Any] | None  # k, resume tax, redone work, finish_s, fits_window
    checkpointing: dict[str, Any] | None  # write time, interval, the interval balancing them for the failure rate
    costs: list[dict[str, Any]]
    throughput: dict[str, Any] | None  # the rates the times come from: source, detail, estimate (table GPUs)
    measurement: dict[str, Any] = Field(description=(
        "status: 'measured' (completed jobs or a probe job), 'estimated' (the known-GPU table) or 'none'; "
        "message: what that means; probe: the probe job this plan found or queued ({status, job_id, message}: "
        "pending, not_queued, failed, ran_elsewhere, measured), or null"))
    warnings: list[str]
    start_at: datetime | None
    finish_at: datetime | None
