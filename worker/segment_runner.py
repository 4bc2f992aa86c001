"""Run one segment job: claim, digitise the uploaded scan, write the results, finish.

Segment workers keep their process between jobs (inference is short) and keep recently used models
loaded, so a scan costs its forward pass, not a Python start and a model load.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from api import jobs
from api.logs import job_context
from api.segment import input_key, result_key, result_paths
from api.settings import Settings, get_settings
from api.storage import get_store
from worker.attempt import fenced, job_failed, start_job

log = logging.getLogger(__name__)
MODELS_KEPT = 2
_models: OrderedDict[str, Any] = OrderedDict()
T = TypeVar("T")


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
                  timings: dict[str, float] | None = None) -> dict[str, bytes]:
    """The whole inference: the result files by name. `timings`, if given, gets seconds per stage."""
    import json

    from veernet_core.digitise.calibration import Calibration
    from veernet_core.digitise.export import ExportMeta, mask_png, overlay_png, to_csv, to_json, to_las
    from veernet_core.digitise.predict import load_image, predict_probabilities
    from veernet_core.digitise.rescale import plan, resample_image, scan_curves

    clock = _Stopwatch(timings)
    image = clock("decode", load_image, scan, settings.max_image_pixels, config["rotate_portrait"])
    model, sha256 = clock("model", _model, config["model"], store)
    calibration = Calibration.from_dict(config["calibration"], *image.shape)
    resampling = plan(image.shape, model.trained_scale, config.get("scan_scale"), settings.max_image_pixels)
    model_image = clock("resample", resample_image, image, resampling.model_size)
    probabilities = clock("predict", predict_probabilities, model, model_image)
    meta = ExportMeta(sha256, config["model"]["model_id"], config.get("scan", ""), config.get("well", ""),
                      read_at=resampling.read_at)
    # zlib and Pillow encode PNGs without holding the GIL: the mask is encoded beside the (pure Python)
    # tracing and the overlay beside the text formats, on the core the forward pass no longer needs; two
    # threads, so the overlay never waits behind a mask that is still compressing.
    with ThreadPoolExecutor(2, thread_name_prefix="png") as background:
        mask = background.submit(clock, "mask", mask_png, probabilities, image.shape)
        curves = clock("trace", scan_curves, probabilities, calibration, resampling)
        overlay = background.submit(clock, "overlay", overlay_png, image, curves)
        files = {
            "result": clock("json", lambda: json.dumps(to_json(curves, meta, resampling.to_dict())).encode()),
            "csv": clock("csv", lambda: to_csv(curves).encode()),
            "las": clock("las", lambda: to_las(curves, meta).encode()),
        }
        files["mask"], files["overlay"] = mask.result(), overlay.result()
    return files


class _Stopwatch:
    """Calls a stage and, when given a dict, adds its wall time under the stage's name (stages in the
    background thread overlap others)."""

    def __init__(self, timings: dict[str, float] | None) -> None:
        self.timings = timings

    def __call__(self, name: str, stage: Callable[..., T], *args: Any) -> T:
        started = time.perf_counter()
        try:
            return stage(*args)
        finally:
            if self.timings is not None:
                self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - started


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
    store = get_store()
    try:
        files = digitise_scan(job.config, store.get(input_key(job_id)), store, settings)
        if heartbeat.lost.is_set():
            return "lease lost"
        for name, data in files.items():
            store.put(result_key(job_id, name), data)
    except Exception as exc:  # the job's own failure: counted against its cap, then failed with the error
        log.exception("segment job %s failed", job_id)
        return job_failed(job_id, attempt, "segment", settings, f"{exc.__class__.__name__}: {exc}")
    finally:
        heartbeat.stop()
    summary = {"files": result_paths(job_id), "model_id": job.config["model"]["model_id"]}
    done = fenced(job_id, settings, lambda s: jobs.finish(s, job_id, attempt, "succeeded", result=summary), "finish")
    return "succeeded" if done else "lease lost"
