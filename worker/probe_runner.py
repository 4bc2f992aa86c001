"""Run one probe job: claim, measure its model config on this worker's device, record what was measured, finish.

A plan that needs a measurement the fleet lacks queues a probe job (api.plan_probes) instead of probing
in the API process. A training worker runs it in the fresh process it runs every job in, so the
start-up and warm-ups it measures are a run's (veernet_core.plan_probe.measure_device). It records
what it measured where the planner reads a training attempt's measurements: the device class on the
job row, a MEMORY_EVENT (the memory model and pixel budget, as a training attempt records at its start)
and a PROBE_EVENT (the throughput), all fenced by its attempt and committed with the job's finish.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from api import jobs
from api.logs import job_context
from api.models import MEMORY_EVENT, PROBE_EVENT
from api.settings import Settings, get_settings
from api.storage import get_store, is_s3
from worker.attempt import fenced, job_failed, start_job

if TYPE_CHECKING:
    from veernet_core.config import TrainConfig
    from veernet_core.plan_probe import DeviceMeasurement

log = logging.getLogger(__name__)


def run_probe_job(job_id: int) -> str:
    """Claim and run a probe job; returns what happened (for logs and tests)."""
    with job_context(job_id):
        return _run_probe_job(job_id)


def _run_probe_job(job_id: int) -> str:
    settings = get_settings()
    started = start_job(job_id, settings)
    if started is None:
        return "ignored"
    attempt, job, heartbeat = started
    from veernet_core.config import ConfigError, TrainConfig
    from veernet_core.plan_probe import measure_device
    from worker.runner import allow_loader_workers

    try:
        config = TrainConfig.from_dict(job.config.get("train"))
        device = _record_device(job_id, attempt, settings, config.device)
        store = get_store()
        allow_loader_workers()  # the probe feeds its steps as the run does, through the loop's DataLoader
        measured = measure_device(config, device, where=f" (probe job {job_id})",
                                  s3_client=store.client if is_s3(store) else None)
    except ConfigError as exc:
        return job_failed(job_id, attempt, "probe", settings, f"invalid config: {exc}", heartbeat)
    except Exception as exc:  # the probe's own failure (out of memory, an unreadable dataset): counted, retried
        log.exception("probe job %s attempt %s failed", job_id, attempt)
        return job_failed(job_id, attempt, "probe", settings, f"{exc.__class__.__name__}: {exc}", heartbeat)
    finally:
        heartbeat.stop()
    if heartbeat.lost.is_set():
        return "lease lost"
    done = fenced(job_id, settings, lambda s: record_measurement(s, job_id, attempt, config, measured), "record")
    return "succeeded" if done else "lease lost"


def _record_device(job_id: int, attempt: int, settings: Settings, device_name: str) -> Any:
    """The device this attempt probes, recorded on the row at once (a plan shows where its probe runs)."""
    from veernet_core.plan_probe import device_class, device_memory_bytes
    from veernet_core.train import resolve_device

    device = resolve_device(device_name)
    name, memory = device_class(device), device_memory_bytes(device)
    fenced(job_id, settings, lambda s: jobs.record_device(s, job_id, attempt, name, memory), "device")
    return device


def record_measurement(session: Session, job_id: int, attempt: int, config: TrainConfig,
                       measured: DeviceMeasurement) -> bool:
    """The memory and throughput events and the finish, in one transaction; False if the attempt lost the job."""
    memory = {"device_class": measured.device_class, "pixel_budget": measured.pixel_budget,
              "memory_model": measured.memory.to_dict() if measured.memory is not None else None}
    if not jobs.record_event(session, job_id, attempt, MEMORY_EVENT,
                             f"pixel budget {measured.pixel_budget:,} px on {measured.device_class}", memory):
        return False
    speed = measured.speed
    throughput = {"device_class": measured.device_class, "model": config.to_dict()["model"],
                  "throughput": asdict(speed)}
    jobs.record_event(session, job_id, attempt, PROBE_EVENT,
                      f"{speed.train_px_per_s:,.0f} padded px/s training on {measured.device_class}", throughput)
    result = {"device_class": measured.device_class, "device_memory_bytes": measured.memory_bytes,
              "pixel_budget": measured.pixel_budget, "train_px_per_s": speed.train_px_per_s,
              "val_px_per_s": speed.val_px_per_s, "checkpoint_s": speed.checkpoint_s, "startup_s": speed.startup_s}
    return jobs.finish(session, job_id, attempt, "succeeded", result=result)
