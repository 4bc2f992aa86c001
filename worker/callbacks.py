"""The training loop's callbacks in the service: progress rows, stop requests, the job's timeline.

Each checkpoint's timeline event also carries how long its upload took (``TimedStore``) and, at an
epoch's end, the epoch's record (train loss, validation IoU and Dice): the job page's curves and the
metrics' upload histogram are read from there, written in the same transaction as the checkpoint.
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any

from api import jobs
from api.models import MEMORY_EVENT
from api.settings import Settings
from veernet_core.checkpoint import BlobStore, CheckpointRef
from veernet_core.progress import Progress, StopReason, TrainCallbacks
from worker.attempt import Heartbeat, fenced

if TYPE_CHECKING:
    from veernet_core.memory import MemoryModel

log = logging.getLogger(__name__)
PROGRESS_INTERVAL_S = 1.0  # at most one progress row update a second per job: cheap, still live


class TimedStore:
    """The checkpoint store, timing each upload (``put``) by key; every other call passes through."""

    def __init__(self, store: BlobStore) -> None:
        self.store = store
        self.put_seconds: dict[str, float] = {}

    def put(self, key: str, data: bytes) -> None:
        started = time.monotonic()
        self.store.put(key, data)
        self.put_seconds[key] = time.monotonic() - started

    def get(self, key: str) -> bytes:
        return self.store.get(key)

    def delete(self, key: str) -> None:
        self.store.delete(key)

    def exists(self, key: str) -> bool:
        return self.store.exists(key)

    def list(self, prefix: str = "") -> list[str]:
        return self.store.list(prefix)

    def describe(self) -> str:
        return self.store.describe()


class ServiceCallbacks(TrainCallbacks):
    def __init__(self, job_id: int, attempt: int, settings: Settings, heartbeat: Heartbeat,
                 store: TimedStore | None = None, device_class: str | None = None) -> None:
        self.job_id, self.attempt, self.settings, self.heartbeat = job_id, attempt, settings, heartbeat
        self.store = store
        self.device_class = device_class  # what this attempt recorded at its claim (api.jobs.record_device)
        self._last_write = 0.0
        self._last_phase = ""
        self._epoch_record: dict[str, float | None] = {}  # the newest epoch's, as the loop reported it

    def _write(self, what: str, write: Any) -> bool:
        if self.heartbeat.lost.is_set():
            return False
        ok = bool(fenced(self.job_id, self.settings, write, what))
        if not ok:
            self.heartbeat.lost.set()
        return ok

    def on_progress(self, p: Progress) -> None:
        # Every report is progress, throttled or not; what the phase now begun is expected to take is the
        # run's own measure of it (before the first validation, an estimate from the step time).
        expected = {"train": p.step_time_s, "validate": p.validate_time_s, "checkpoint": p.checkpoint_time_s}
        self.heartbeat.progressed(p.phase, expected.get(p.phase, 0.0))
        if p.phase == "checkpoint" and p.step == 0 and p.metrics:  # an epoch ended; its save follows
            self._epoch_record = {name: value if math.isfinite(value) else None for name, value in p.metrics.items()}
        now = time.monotonic()
        if p.phase == self._last_phase and now - self._last_write < PROGRESS_INTERVAL_S:
            return
        self._last_write, self._last_phase = now, p.phase
        fields: dict[str, Any] = {
            "epoch": p.epoch, "step": p.step, "steps_per_epoch": p.steps_per_epoch,
            "total_steps": p.total_steps, "global_step": p.global_step,
            "images_per_s": p.images_per_s or None, "step_time_s": p.step_time_s or None,
            "validation_time_s": p.validate_time_s or None, "checkpoint_time_s": p.checkpoint_time_s or None,
            "loss": p.loss if p.loss == p.loss else None, "metrics": p.metrics or None,
        }
        self._write("progress", lambda s: jobs.record_progress(s, self.job_id, self.attempt, **fields))

    def should_stop(self) -> StopReason | None:
        if self.heartbeat.lost.is_set():
            return StopReason.LEASE_LOST
        if self.heartbeat.cancel_requested.is_set():
            return StopReason.CANCELLED
        return None

    def checkpoint_event_data(self, ref: CheckpointRef) -> dict[str, Any]:
        """What the checkpoint's event records beside its key and size: the upload time, and at an
        epoch's end the epoch's record ("epoch" = epochs done, as in the checkpoint)."""
        data: dict[str, Any] = {}
        seconds = self.store.put_seconds.get(ref.key) if self.store is not None else None
        if seconds is not None:
            data["upload_seconds"] = round(seconds, 6)
        record = self._epoch_record
        if ref.step == 0 and record.get("epoch") is not None and int(record["epoch"] or 0) == ref.epoch:
            data["history"] = {**record, "epoch": ref.epoch}
        return data

    def on_checkpoint(self, ref: CheckpointRef) -> None:
        self.heartbeat.progressed("checkpoint committed")
        log.info("job %s attempt %s: checkpoint %s committed (%d bytes)", self.job_id, self.attempt, ref.key,
                 ref.size)

    def on_budget(self, pixel_budget: int, memory: MemoryModel | None) -> None:
        """The planner reads a device class's own memory model and each job's budget from this event."""
        self.heartbeat.progressed("budget set")  # the data is open and the memory probe done
        data = {"device_class": self.device_class, "pixel_budget": pixel_budget,
                "memory_model": memory.to_dict() if memory is not None else None}
        message = f"pixel budget {pixel_budget:,} px" + (" (measured memory model)" if memory is not None else "")
        self._write("event", lambda s: jobs.record_event(s, self.job_id, self.attempt, MEMORY_EVENT, message, data))

    def on_resume(self, ref: CheckpointRef, skipped: list[tuple[CheckpointRef, str]]) -> None:
        self.heartbeat.progressed("resumed")
        for bad, why in skipped:
            self._write("event", lambda s, bad=bad, why=why: jobs.record_event(
                s, self.job_id, self.attempt, "checkpoint_skipped", f"{bad.key}: {why}", {"key": bad.key}))
        message = f"resumed from {ref.key} (epoch {ref.epoch}, step {ref.step})"
        self._write("event", lambda s: jobs.record_event(
            s, self.job_id, self.attempt, "resumed", message, {"key": ref.key, "global_step": ref.global_step}))
