"""Segment speed and memory: POST /segment end to end against the bare model forward; peak memory by width.

    python bench/segment_perf.py [--repeats 3] [--seed 2026]

Two full-scale synthetic scans (scale 1.0), found by size without rendering (`synth.log_size`): one
exactly 3,200 px wide and one exactly 12,800 px wide, both at least 600 px tall. Every request states the
scans at the bundled model's own scale (`scan_scale` 0.2, as its checkpoint records it), so the model
reads every pixel of them, as a model trained at full resolution does; told nothing, the service would
bring them to the bundled model's scale first (veernet_core.digitise.rescale) and the forward below would
not be the work it does. For each:

  forward     the bundled model's bare forward over the scan's pixels, best of `repeats` after a warm-up,
              in this process: whole (one call on the whole image, 32-px aligned) and tiled (the model calls
              over the windows `predict_probabilities` uses, summed; their overlap is extra work).
              `forward_s` is the faster of the two: the least the model itself needs.
  e2e         POST /segment?wait=true through the real service (`veernet up` on the embedded default:
              SQLite, embedded broker, local store, a temporary VEERNET_DATA_DIR), timed from the client
              from sending the upload to holding the result JSON; best and median of `repeats`, after one
              warm-up request per width (torch import, model load, first shapes). Interleaved with the
              forward runs so both see the same machine. For the best request: `queue_s` and `worker_s`
              (claimed to finished) from the job's times, `worker_predict_s`, the model's tiled inference
              as the worker itself timed it (the `seconds` of the job's result), and
              `e2e_beside_worker_predict_s`, the rest of the request beside it.
  stages      one in-process run of the segment worker's pipeline (`veernet_core.digitise.pipeline`, timed by
              its `StageTimer`), stage by stage (decode, tiled inference with blending, tracing, each export),
              to show where the time goes.
  e2e_resampled_s  one POST /segment?wait=true without scan_scale, as a user of the bundled model sends a
              full-resolution scan: read at the model's scale (information, beside the targets).
  rss         peak RSS (ru_maxrss) of a fresh process that runs the segment worker's own function
              (`worker.segment_runner.digitise_scan`) on the scan; `rss_base_mb` is the same process
              after imports, model load and the tracer's compiled loops (`tracer.compile_loops`, as a
              worker loads them before its pool forks), before the scan.

Prints one JSON line; `e2e_over_forward` is the larger of the two widths' best-e2e / forward ratios.
Targets: e2e_over_forward <= 1.3, rss_ratio_12800_vs_3200 <= 1.25.

On a shared 2-core machine the forward's own time swings 2-3x with other work (torch's two threads
stall when a core is taken), so the two bests can come from different minutes. `e2e_over_forward_paired`
(information, not the target) pairs each request with the forwards timed just before and after it
(the faster of the two kinds, each the better of its two neighbours) and takes the median ratio.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import torch
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import free_port  # noqa: E402
from veernet_core.data import align  # noqa: E402
from veernet_core.digitise.predict import (  # noqa: E402
    DEFAULT_OVERLAP,
    DEFAULT_TILE_WIDTH,
    _window_input,
    bundled_model_path,
    load_model,
    tile_layout,
)
from veernet_core.digitise.tracer import compile_loops  # noqa: E402
from veernet_core.synth import SynthLog, generate, log_size  # noqa: E402

WIDTHS = (3200, 12800)
MIN_HEIGHT = 600  # near the design's 640-px maximum
SERVICE_ENV = ("DATABASE_URL", "BROKER_URL", "CHECKPOINT_URL", "S3_ENDPOINT_URL", "DATASETS_URL",
               "VEERNET_ADMIN_KEY", "VEERNET_DATA_DIR")


def find_logs(seed: int) -> dict[int, int]:
    """Index of the first log of `seed` with each wanted width and at least MIN_HEIGHT rows."""
    found: dict[int, int] = {}
    index = 0
    while len(found) < len(WIDTHS):
        height, width = log_size(seed, index, 1.0)
        if width in WIDTHS and width not in found and height >= MIN_HEIGHT:
            found[width] = index
        index += 1
    return found


def png(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


# --- the bare forward -------------------------------------------------------------------------------

class Forward:
    """The model's own calls over one scan: whole, and over the service's tiles; inputs built once."""

    def __init__(self, model: torch.nn.Module, image: np.ndarray) -> None:
        self.model = model
        width = image.shape[1]
        self.whole = _window_input(image, 0, align(width))
        starts, window = tile_layout(width, DEFAULT_TILE_WIDTH, DEFAULT_OVERLAP)
        self.tiles = [_window_input(image, start, window) for start in starts]

    def time(self, inputs: list[torch.Tensor]) -> float:
        with torch.inference_mode():
            started = time.perf_counter()
            for x in inputs:
                self.model(x)
            return time.perf_counter() - started


# --- the service ------------------------------------------------------------------------------------

def start_service(data_dir: str, port: int) -> subprocess.Popen[bytes]:
    env = {key: value for key, value in os.environ.items() if key not in SERVICE_ENV}
    # wait=true may take longer than the default two minutes on a loaded machine at 12,800 px.
    env.update(VEERNET_DATA_DIR=data_dir, PYTHONPATH=str(ROOT), SEGMENT_WAIT_MAX_SECONDS="900")
    return subprocess.Popen([sys.executable, "-m", "api.cli", "up", "--port", str(port), "--loglevel", "WARNING"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_ready(client: httpx.Client) -> None:
    for _ in range(240):
        try:
            if client.get("/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit("the service did not become healthy in 120 s")


Stated = dict[str, float]  # the scan's scale as a request states it: {"scan_scale": ...}, or {} (nothing stated)


def read_every_pixel(model: Any) -> Stated:
    """The request options that state a scan at the bundled model's training scale (as its checkpoint records
    it and the service reads it), so that the model reads it pixel for pixel (no resampling)."""
    if model.trained_scale is None:
        raise SystemExit("the bundled checkpoint records no training scale")
    return {"scan_scale": float(model.trained_scale)}


def segment(client: httpx.Client, scan: bytes, log: SynthLog, stated: Stated) -> tuple[float, dict[str, Any]]:
    """One POST /segment?wait=true; (seconds from sending to holding the result, the job's timings)."""
    options = json.dumps({"calibration": log.calibration(), **stated})
    started = time.perf_counter()
    response = client.post("/segment", params={"wait": "true", "timeout": 900},
                           files={"file": ("scan.png", scan, "image/png")}, data={"options": options})
    elapsed = time.perf_counter() - started
    if response.status_code != 200 or "curves" not in response.json():
        raise SystemExit(f"POST /segment answered {response.status_code}: {response.text[:300]}")
    job = client.get(response.headers["Location"]).raise_for_status().json()
    return elapsed, job


def job_split(job: dict[str, Any]) -> dict[str, float]:
    """Queue wait (created to claimed) and worker time (claimed to finished), from the job's own times; and
    the model's tiled inference as the worker timed it (its `predict` stage, in the job's result)."""
    at = {k: datetime_s(job[k]) for k in ("created_at", "started_at", "finished_at")}
    return {"queue_s": at["started_at"] - at["created_at"], "worker_s": at["finished_at"] - at["started_at"],
            "worker_predict_s": job["result"]["seconds"]["predict"]}


def datetime_s(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# --- stages and memory ------------------------------------------------------------------------------

def stage_times(scan: bytes, log: SynthLog, stated: Stated) -> dict[str, float]:
    """The segment worker's pipeline, one stage at a time, in this process (model already warm)."""
    from api.settings import get_settings
    from veernet_core.digitise.pipeline import StageTimer
    from worker import segment_runner

    config = worker_config(log, stated)
    timer = StageTimer()
    started = time.perf_counter()
    segment_runner.digitise_scan(config, scan, None, get_settings(), timer)
    timings = {**timer.seconds, "total": time.perf_counter() - started}  # mask and overlay overlap earlier stages
    return {name: round(seconds, 3) for name, seconds in timings.items()}


def worker_config(log: SynthLog, stated: Stated) -> dict[str, Any]:
    """The job config POST /segment stores for this scan with the bundled model."""
    from veernet_core.digitise.calibration import Calibration

    calibration = Calibration.from_dict(log.calibration(), *log.image.shape).to_dict()
    return {"model": {"source": "bundled", "model_id": "bundled/veernet-small"}, "calibration": calibration,
            "rotate_portrait": False, "well": "", "scan": "scan.png", **stated}


def peak_rss(scan_path: Path, config_path: Path, data_dir: str) -> dict[str, float]:
    env = {key: value for key, value in os.environ.items() if key not in SERVICE_ENV}
    env.update(VEERNET_DATA_DIR=data_dir, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, __file__, "--rss-child", str(scan_path), str(config_path)], env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def rss_child(scan_path: str, config_path: str) -> None:
    """In a fresh process: load the model as the worker does, then digitise once; report RSS."""
    from api.settings import get_settings
    from worker import segment_runner

    config = json.loads(Path(config_path).read_text())
    segment_runner._model(config["model"], None)
    compile_loops()  # as the worker's parent does before its pool forks (worker.tasks._preload)
    base = rss_mb()
    segment_runner.digitise_scan(config, Path(scan_path).read_bytes(), None, get_settings())
    print(json.dumps({"rss_base_mb": round(base, 1), "rss_peak_mb": round(rss_mb(), 1)}))


# --- the run ----------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.rss_child:
        rss_child(*args.rss_child)
        return 0
    started = time.monotonic()
    logs = {width: generate(args.seed, index, 1.0, 3) for width, index in find_logs(args.seed).items()}
    scans = {width: png(log.image) for width, log in logs.items()}
    model, _ = load_model(bundled_model_path())
    # The tracer's compiled loops, loaded before the stages are timed, as a segment worker's parent loads them
    # before its pool forks (worker.tasks._preload): no job pays for loading them.
    compile_loops()
    stated = read_every_pixel(model)
    result: dict[str, Any] = {"threads": torch.get_num_threads(), "torch_version": torch.__version__,
                              "seed": args.seed, "repeats": args.repeats,
                              "loadavg_1min_before": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory() as data_dir:
        rss = {}
        for width in WIDTHS:
            scan_path, config_path = Path(data_dir) / f"scan-{width}.png", Path(data_dir) / f"config-{width}.json"
            scan_path.write_bytes(scans[width])
            config_path.write_text(json.dumps(worker_config(logs[width], stated)))
            rss[width] = peak_rss(scan_path, config_path, data_dir)
        timings = measure(model, logs, scans, str(Path(data_dir) / "service"), args.repeats, stated)
    for width in WIDTHS:
        log, t = logs[width], timings[width]
        forward = min(min(t["whole"]), min(t["tiled"]))
        e2e = min(t["e2e"])
        split = t["split"][t["e2e"].index(e2e)]
        result[f"w{width}"] = {
            "height": log.image.shape[0], "width": width, "curves": len(log.curves), "scan_bytes": len(scans[width]),
            "forward_whole_s": round(min(t["whole"]), 3), "forward_tiled_s": round(min(t["tiled"]), 3),
            "tiles": len(t["tiles"]), "tile_width": t["tiles"][0], "forward_s": round(forward, 3),
            "e2e_best_s": round(e2e, 3), "e2e_median_s": round(statistics.median(t["e2e"]), 3),
            "e2e_runs_s": [round(x, 3) for x in t["e2e"]],
            "queue_s": round(split["queue_s"], 3), "worker_s": round(split["worker_s"], 3),
            "worker_predict_s": split["worker_predict_s"],
            "e2e_beside_worker_predict_s": round(e2e - split["worker_predict_s"], 3),
            "e2e_over_forward": round(e2e / forward, 3), "stages_s": t["stages"], **rss[width],
            "forward_whole_runs_s": [round(x, 3) for x in t["whole"]],
            "forward_tiled_runs_s": [round(x, 3) for x in t["tiled"]],
            "e2e_over_forward_paired": round(paired_ratio(t), 3),
            "e2e_resampled_s": round(t["e2e_resampled_s"], 3),
        }
    result["e2e_over_forward_3200"] = result["w3200"]["e2e_over_forward"]
    result["e2e_over_forward_12800"] = result["w12800"]["e2e_over_forward"]
    result["e2e_over_forward"] = max(result["e2e_over_forward_3200"], result["e2e_over_forward_12800"])
    result["rss_ratio_12800_vs_3200"] = round(result["w12800"]["rss_peak_mb"] / result["w3200"]["rss_peak_mb"], 3)
    result["loadavg_1min_after"] = round(os.getloadavg()[0], 2)
    result["bench_seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(result))
    return 0


def paired_ratio(t: dict[str, Any]) -> float:
    """Median over repeats of e2e / the forward timed beside it: the whole-image call just before the
    request (and the next repeat's, just after the tiled one) or the tiled calls just after it."""
    ratios = []
    for i, e2e in enumerate(t["e2e"]):
        whole = min(t["whole"][i : i + 2])  # before this request, and after the tiled calls that follow it
        ratios.append(e2e / min(whole, t["tiled"][i]))
    return statistics.median(ratios)


def measure(model: torch.nn.Module, logs: dict[int, SynthLog], scans: dict[int, bytes], data_dir: str,
            repeats: int, stated: Stated) -> dict[int, dict[str, Any]]:
    """Forward and end-to-end runs, interleaved per width so that both see the same machine."""
    forwards = {width: Forward(model, log.image) for width, log in logs.items()}
    out: dict[int, dict[str, Any]] = {
        width: {"whole": [], "tiled": [], "e2e": [], "split": [],
                "tiles": [int(x.shape[-1]) for x in forwards[width].tiles]} for width in WIDTHS}
    port = free_port()
    service = start_service(data_dir, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=1200) as client:
            wait_ready(client)
            for width in WIDTHS:  # warm-ups: first shapes, torch import and model load in the worker
                forwards[width].time([forwards[width].whole])
                forwards[width].time(forwards[width].tiles)
                segment(client, scans[width], logs[width], stated)
                out[width]["stages"] = stage_times(scans[width], logs[width], stated)
            for _ in range(repeats):
                for width in WIDTHS:
                    f, t = forwards[width], out[width]
                    t["whole"].append(f.time([f.whole]))
                    elapsed, job = segment(client, scans[width], logs[width], stated)
                    t["e2e"].append(elapsed)
                    t["split"].append(job_split(job))
                    t["tiled"].append(f.time(f.tiles))
            for width in WIDTHS:
                elapsed, _ = segment(client, scans[width], logs[width], stated={})
                out[width]["e2e_resampled_s"] = elapsed
    finally:
        service.send_signal(signal.SIGTERM)  # `veernet up` forwards it to the API and the workers
        service.wait(timeout=120)
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=2026, help="synthetic set the two scans are taken from")
    p.add_argument("--rss-child", nargs=2, metavar=("SCAN", "CONFIG"), help=argparse.SUPPRESS)
    return p


if __name__ == "__main__":
    sys.exit(main())
