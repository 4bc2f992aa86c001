"""ETA accuracy: the finish time the service predicted at 10 % progress against the actual finish.

Runs the whole service on the embedded default (`veernet up` in a temporary data directory),
submits one training job over HTTP, polls GET /jobs/{id}, and records the predicted finish
(`eta.at`) the first time progress reaches 10 %. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import free_port  # noqa: E402

CONFIG = {
    "data": {"dataset_size": 120, "scale": 0.1, "seed": 5},
    "epochs": 3, "effective_batch": 8, "warmup_steps": 4, "device": "cpu",
}


def _at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main() -> None:
    with tempfile.TemporaryDirectory() as data:
        port = free_port()
        env = {key: value for key, value in os.environ.items()
               if key not in ("DATABASE_URL", "BROKER_URL", "CHECKPOINT_URL", "S3_ENDPOINT_URL")}
        env.update(VEERNET_DATA_DIR=data, PYTHONPATH=str(ROOT))
        stack = subprocess.Popen([sys.executable, "-m", "api.cli", "up", "--port", str(port),
                                  "--loglevel", "WARNING"], env=env, stderr=subprocess.DEVNULL)
        try:
            result = _measure(f"http://127.0.0.1:{port}")
        finally:
            stack.send_signal(signal.SIGTERM)
            stack.wait(timeout=60)
    print(json.dumps(result))


def _measure(base: str) -> dict[str, object]:
    with httpx.Client(base_url=base, timeout=30) as client:
        for _ in range(200):
            try:
                if client.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        job_id = client.post("/jobs", json={"kind": "train", "config": CONFIG}).raise_for_status().json()["id"]
        predicted_at = predicted_fraction = None
        while True:
            job = client.get(f"/jobs/{job_id}").raise_for_status().json()
            progress = job["progress"]
            fraction = progress.get("fraction") or 0.0
            if predicted_at is None and fraction >= 0.1 and job["eta"].get("at"):
                predicted_at, predicted_fraction = _at(job["eta"]["at"]), fraction
            if job["status"] in ("succeeded", "failed", "cancelled"):
                break
            time.sleep(0.5)
    if job["status"] != "succeeded" or predicted_at is None:
        raise SystemExit(f"job ended {job['status']} ({job.get('error')}); no ETA at 10 %")
    started, finished = _at(job["started_at"]), _at(job["finished_at"])
    duration = finished - started
    return {
        "total_steps": progress["total_steps"], "duration_s": round(duration, 1),
        "predicted_at_fraction": round(predicted_fraction, 3),
        "predicted_finish_error_s": round(predicted_at - finished, 1),
        "predicted_finish_error_pct_of_run": round(100 * (predicted_at - finished) / duration, 1),
    }


if __name__ == "__main__":
    main()
