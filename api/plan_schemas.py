"""Request and response bodies of POST /plan (and POST /jobs?dry_run=true)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

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
        "A device class workers reported (GET a plan without it to see the default), e.g. 'cuda:NVIDIA A10G'. "
        "Omitted: the class with the most completed jobs, or this machine's on a fresh fleet."))
    gpu_memory_gb: float | None = Field(None, gt=0, le=1024, description=(
        "Plan for a GPU of this many GiB instead of a measured device's memory. The memory model is the "
        "device_class's own if its workers measured this model config, else extrapolated from this machine's "
        "probe (float32, unscaled): memory.measured_on and memory.extrapolated say which."))
    window_hours: float = Field(12.0, gt=0, le=24 * 31, description="The window the run must finish in")
    interruptions: float | None = Field(None, ge=0, le=1000, description=(
        "k expected interruptions. Omitted: failure_rate_per_hour x compute time, else the class's measured rate"))
    failure_rate_per_hour: float | None = Field(None, ge=0, le=100)
    utilisation: float = Field(0.5, gt=0, le=1, description="Share of a month's hours the rented box does paid "
                               "work: hourly rate = monthly rent / (730.5 h x utilisation)")
    tiers: list[TierIn] = Field(default_factory=list, max_length=10, description=(
        "Tiers to cost besides the engagement's 750 and 1,800 EUR/month"))
    start_at: datetime | None = Field(None, description="When the run would start; gives finish_at")
    probe: bool = Field(True, description="With no completed jobs to calibrate from, measure on this machine "
                        "(a few seconds); false: answer 409 instead")


class PlanOut(BaseModel):
    device_class: str
    window_s: float
    memory: dict[str, Any]  # memory model and where it was measured, pixel budget, widest log, batch per bucket
    data: dict[str, Any]  # steps per epoch, accumulation, padding waste
    time: dict[str, Any]  # start-up, training, validation, checkpoints, compute total (seconds)
    interruptions: dict[str, Any]  # k, resume tax, redone work, finish_s, fits_window
    checkpointing: dict[str, Any]  # write time, interval, the interval balancing them for the failure rate
    costs: list[dict[str, Any]]
    throughput: dict[str, Any]  # the measured rates the times come from, and their source
    warnings: list[str]
    start_at: datetime | None
    finish_at: datetime | None
