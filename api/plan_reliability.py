"""A plan's reliability inputs: the resume tax measured on job timelines, and the measured failure rate.

- **Resume tax.** From each job's timeline: a ``recovered`` event carries the job's cumulative
  recovery time; the part after the new attempt ``resumed`` (or was ``claimed``, if it started
  over) is redone work, the rest is the tax: noticing the loss, queueing, restarting. With none
  measured: one lease, one reaper pass and the start-up, stated as an estimate.
- **Interruptions.** k as given, else the failure rate given, else the class's measured rate:
  attempts lost to infrastructure per hour of its jobs' wall-clock.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from api.models import Job, JobEvent
from api.plan_fleet import HISTORY_JOBS
from api.settings import Settings
from veernet_core.plan import Reliability, Throughput


def reliability(session: Session, interruptions: float | None, failure_rate_per_hour: float | None,
                target: str | None, speed: Throughput | None, settings: Settings) -> Reliability:
    """Resume tax and failure rate: measured on the class's timelines where it has any, else stated estimates."""
    taxes = resume_taxes(session, target) if target else []
    rate = failure_rate_per_hour
    if rate is None and interruptions is None and target:
        rate = _measured_failure_rate(session, target)
    if taxes:
        return Reliability(interruptions, statistics.median(taxes),
                           f"median of {len(taxes)} measured recoveries on {target}", rate)
    restart_s = speed.restart_s if speed is not None else 0.0
    return Reliability(interruptions, settings.lease_seconds + settings.reaper_interval_seconds + restart_s,
                       "estimate, none measured: one lease to notice the loss, one reaper pass, and a fresh start-up",
                       rate)


def resume_taxes(session: Session, target: str) -> list[float]:
    """Seconds from each measured interruption to the new attempt resuming, from the jobs' timelines."""
    job_ids = session.scalars(select(Job.id).where(Job.device_class == target, Job.infra_failures > 0)
                              .order_by(Job.id.desc()).limit(HISTORY_JOBS)).all()
    taxes: list[float] = []
    for job_id in job_ids:
        events = session.scalars(select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id)).all()
        taxes += timeline_taxes(events)
    return taxes


def timeline_taxes(events: Sequence[JobEvent]) -> list[float]:
    """Resume tax per interruption in one job's timeline (see the module docstring)."""
    taxes, previous_total, claims, first_window = [], 0.0, 0, True
    started: dict[int, datetime] = {}
    for event in events:
        if event.kind == "claimed":
            claims += 1
            started[event.attempt] = event.created_at
        elif event.kind == "resumed":
            started[event.attempt] = event.created_at
        elif event.kind == "recovered" and event.attempt in started:
            total = float((event.data or {}).get("recovery_seconds", previous_total))
            redone = (event.created_at - started[event.attempt]).total_seconds()
            lost = claims - (1 if first_window else 0)
            if lost > 0:
                tax = max(0.0, total - previous_total - redone) / lost
                taxes += [tax] * lost
            previous_total, claims, first_window = total, 0, False
    return taxes


def _measured_failure_rate(session: Session, target: str) -> float | None:
    """Attempts lost to infrastructure per hour of wall-clock, over the class's recent finished jobs."""
    rows = cast("Sequence[tuple[int, datetime, datetime]]", session.execute(  # the query excludes NULL times
        select(Job.infra_failures, Job.started_at, Job.finished_at).where(
            Job.device_class == target, Job.finished_at.is_not(None), Job.started_at.is_not(None))
        .order_by(Job.id.desc()).limit(HISTORY_JOBS * 5)).all())
    hours = sum((end - start).total_seconds() for _, start, end in rows) / 3600.0
    return sum(lost for lost, _, _ in rows) / hours if hours > 0 else None
