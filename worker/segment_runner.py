"""Run one segment job: claim, digitise the uploaded scan, write the results, finish.

Segment workers keep their process between jobs (inference is short) and keep recently used models
loaded, so a scan costs its forward pass, not a Python start and a model load.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from api import jobs
from api.logs import job_context
from api.segment import input_key, result_key, result_paths
from api.settings import Settings, get_settings
from api.storage import get_store
from worker.attempt import fenced, job_failed, start_job

if TYPE_CHECKING:
    from veernet_core.digitise.pipeline import StageTimer

log = logging.getLogger(__name__)
MODELS_KEPT = 2
_models: OrderedDict[str, Any] = OrderedDict()


def _model(spec: dict[str, Any], store: Any) -> tuple[Any, str]:
    """The model a job asked for, from this process's cache when possible; (model, sha256)."""
    from veernet_core.digitise.predict import bundled_model_path, load_model, read_checkpoint

    if spec["source"] == "bundled":
        data, sha256 = read_checkpoint(bundled_model_path())
    else:
        sha256 = spec["sha256"]
        if sha256 in _models:
            _models.move_to_end(sha256)
            return _models[sha256], sha256
        data = store.get(spec["storage_key"])
    if sha256 not in _models:
        _models[sha256] = load_model(data, sha256)[0]
        while len(_models) > MODELS_KEPT:
            _models.popitem(last=False)
    _models.move_to_end(sha256)
    return _models[sha256], sha256


def digitise_scan(config: dict[str, Any], scan: bytes, store: Any, settings: Settings,
                  timer: StageTimer | None = None) -> dict[str, bytes]:
    """The whole inference, veernet_core's pipeline with this process's models: the result files by name, of
    one cropped track (`calibration`) or of one section of a full page (`page_calibration`). `timer`, if
    given, gets seconds per stage."""
    from veernet_core.digitise import pipeline

    options = pipeline.ScanOptions(scan_scale=config.get("scan_scale"), rotate_portrait=config["rotate_portrait"],
                                   scan_name=config.get("scan", ""), well=config.get("well", ""),
                                   max_pixels=settings.max_image_pixels)
    def model() -> tuple[Any, str]:  # called once the scan has decoded
        return _model(config["model"], store)

    if "page_calibration" in config:  # one section of a full page: every track, one result
        from veernet_core.digitise import section

        return section.digitise_section(scan, config["page_calibration"], model, config["model"]["model_id"],
                                        options, timer).files
    return pipeline.digitise_scan(scan, config["calibration"], model, config["model"]["model_id"], options,
                                  timer).files


def run_segment_job(job_id: int) -> str:
    """Claim and digitise a segment job; log lines name the job and attempt during the call only (a segment
    worker keeps its process between scans)."""
    with job_context(job_id):
        return _run_segment_job(job_id)


def _run_segment_job(job_id: int) -> str:
    settings = get_settings()
    started = start_job(job_id, settings)
    if started is None:
        return "ignored"
    attempt, job, heartbeat = started
    from veernet_core.digitise.pipeline import StageTimer

    store = get_store()
    timer = StageTimer()
    try:
        files = digitise_scan(job.config, store.get(input_key(job_id)), store, settings, timer)
        if heartbeat.lost.is_set():
            return "lease lost"
        for name, data in files.items():
            store.put(result_key(job_id, name), data)
    except Exception as exc:  # the job's own failure: counted against its cap, then failed with the error
        log.exception("segment job %s failed", job_id)
        return job_failed(job_id, attempt, "segment", settings, f"{exc.__class__.__name__}: {exc}", heartbeat)
    finally:
        heartbeat.stop()
    # Seconds per stage of the pipeline (decode, model, predict, trace, ...; the PNG stages overlap others).
    seconds = {stage: round(spent, 3) for stage, spent in timer.seconds.items()}
    summary = {"files": result_paths(job_id), "model_id": job.config["model"]["model_id"], "seconds": seconds}
    done = fenced(job_id, settings, lambda s: jobs.finish(s, job_id, attempt, "succeeded", result=summary), "finish")
    return "succeeded" if done else "lease lost"
