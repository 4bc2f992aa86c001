"""`veernet demo` (what `make run` runs): the main job end to end, over HTTP, on this machine.

Starts the service (`veernet up`), submits a small synthetic training run, shows its progress and
ETA until it succeeds, downloads its newest checkpoint, checks the sha256, digitises a synthetic
scan it has never seen with the bundled model (POST /segment, then the LAS and CSV results),
compares the curves with the scan's known truth, and says where everything is.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

import httpx

from api.settings import get_settings, redact_url

DEMO_CONFIG: dict[str, Any] = {
    # Small enough for two CPU cores in about a minute; the same code trains full-size logs on a GPU.
    "data": {"dataset_size": 48, "scale": 0.1, "classes": 3, "seed": 0},
    "epochs": 2,
    "effective_batch": 8,
    "warmup_steps": 2,
    "device": "auto",
}
START_TIMEOUT_S = 90.0
JOB_TIMEOUT_S = 600.0
# The scan to digitise: a held-out seed (the bundled model trained on seed 0) at the bundled model's scale.
DEMO_SCAN = {"seed": 424242, "index": 3, "scale": 0.1, "classes": 3}
SEGMENT_WAIT_S = 120.0


def _wait_healthy(client: httpx.Client, stack: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if stack.poll() is not None:
            raise RuntimeError(f"the service exited with {stack.returncode} while starting; see its log above")
        try:
            if client.get("/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the service was not healthy within {START_TIMEOUT_S:.0f} s")


def _describe(job: dict[str, Any]) -> str:
    progress = job.get("progress") or {}
    eta = job.get("eta") or {}
    parts = [f"job {job['id']} {job['status']}", f"attempt {job.get('attempt', 0)}"]
    if progress.get("total_steps"):
        parts.append(f"epoch {min((progress.get('epoch') or 0) + 1, DEMO_CONFIG['epochs'])}/{DEMO_CONFIG['epochs']}"
                     f" step {progress.get('global_step') or 0}/{progress['total_steps']}")
    if progress.get("loss") is not None:
        parts.append(f"loss {progress['loss']:.4f}")
    if progress.get("images_per_s"):
        parts.append(f"{progress['images_per_s']:.1f} img/s")
    if eta.get("seconds") is not None:
        at = str(eta.get("at") or "?")[11:19]
        parts.append(f"ETA {eta['seconds']:.0f} s (at {at} UTC)")
    return ", ".join(parts)


def _follow(client: httpx.Client, job_id: int) -> dict[str, Any]:
    deadline, last, printed_at = time.monotonic() + JOB_TIMEOUT_S, None, 0.0
    while time.monotonic() < deadline:
        job = client.get(f"/jobs/{job_id}").raise_for_status().json()
        state = (job["status"], job["attempt"], job["progress"].get("global_step"))
        if state != last or time.monotonic() - printed_at > 10:
            print(f"  {datetime.now(UTC):%H:%M:%S}  {_describe(job)}", flush=True)
            last, printed_at = state, time.monotonic()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return dict(job)
        time.sleep(1.0)
    raise RuntimeError(f"job {job_id} did not finish within {JOB_TIMEOUT_S:.0f} s")


def _download(client: httpx.Client, job_id: int, out_dir: str) -> tuple[dict[str, Any], str]:
    checkpoints = client.get(f"/jobs/{job_id}/checkpoints").raise_for_status().json()
    newest = max(checkpoints, key=lambda c: c["global_step"])
    response = client.get(f"/checkpoints/{newest['id']}/download", follow_redirects=True).raise_for_status()
    digest = hashlib.sha256(response.content).hexdigest()
    if digest != newest["sha256"] or digest != response.headers.get("x-checksum-sha256", digest):
        raise RuntimeError(f"checkpoint {newest['id']} downloaded with sha256 {digest}, registered {newest['sha256']}")
    path = os.path.join(out_dir, f"job-{job_id}-checkpoint-{newest['id']}.pt")
    with open(path, "wb") as handle:
        handle.write(response.content)
    return newest, path


def run_demo(port: int, keep: bool) -> int:
    settings = get_settings()
    base = f"http://127.0.0.1:{port}"
    print(f"starting the service on {base} (data in {settings.veernet_data_dir})", flush=True)
    stack = subprocess.Popen([sys.executable, "-m", "api.cli", "up", "--port", str(port), "--loglevel", "WARNING"])
    started = time.monotonic()
    try:
        admin_key = settings.veernet_admin_key  # keys on: the demo acts as the admin
        headers = {"Authorization": f"Bearer {admin_key.get_secret_value()}"} if admin_key else {}
        with httpx.Client(base_url=base, timeout=30.0, headers=headers) as client:
            _wait_healthy(client, stack)
            response = client.post("/jobs", json={"kind": "train", "config": DEMO_CONFIG}).raise_for_status()
            job_id = int(response.json()["id"])
            print(f"submitted job {job_id}: POST /jobs -> {response.status_code}, {response.headers['location']}")
            job = _follow(client, job_id)
            if job["status"] != "succeeded":
                print(f"job {job_id} ended {job['status']}: {job.get('error')}", file=sys.stderr)
                return 1
            checkpoint, path = _download(client, job_id, str(settings.veernet_data_dir))
            print(f"checkpoint {checkpoint['id']} downloaded, sha256 verified; digitising a scan (POST /segment)",
                  flush=True)
            scan = _digitise(client, str(settings.veernet_data_dir))
        _report(base, settings, job, checkpoint, path, scan, time.monotonic() - started)
        return 0
    finally:
        if keep:
            print(f"the service keeps running (pid {stack.pid}); stop it with: kill {stack.pid}")
        else:
            stack.send_signal(signal.SIGTERM)
            stack.wait(timeout=60)


def _digitise(client: httpx.Client, out_dir: str) -> dict[str, Any]:
    """Digitise a synthetic scan with the bundled model; save its LAS and CSV; measure it against the truth."""
    import io

    from PIL import Image

    from veernet_core.synth import generate

    log = generate(DEMO_SCAN["seed"], DEMO_SCAN["index"], DEMO_SCAN["scale"], DEMO_SCAN["classes"])
    png = io.BytesIO()
    Image.fromarray(log.image).save(png, format="PNG")
    options = {"calibration": log.calibration(), "model": "bundled"}
    response = client.post("/segment", params={"wait": "true", "timeout": SEGMENT_WAIT_S},
                           files={"file": ("demo-scan.png", png.getvalue(), "image/png")},
                           data={"options": json.dumps(options)}, timeout=SEGMENT_WAIT_S + 30)
    if response.status_code != 200:
        raise RuntimeError(f"POST /segment answered {response.status_code}: {response.text[:300]}")
    job_id = int(response.headers["location"].rsplit("/", 1)[1])
    result = response.json()
    paths = {}
    for suffix in ("las", "csv"):
        body = client.get(f"/jobs/{job_id}/result.{suffix}").raise_for_status().content
        paths[suffix] = os.path.join(out_dir, f"segment-{job_id}.{suffix}")
        with open(paths[suffix], "wb") as handle:
            handle.write(body)
    return {"job_id": job_id, "size": log.image.shape, "paths": paths, "curves": _against_truth(log, result)}


def _against_truth(log: Any, result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per curve: mean absolute error as a % of its track's range (decades on a log scale), and coverage."""
    import numpy as np

    top, bottom = log.depth.top, log.depth.bottom
    columns = np.rint((np.asarray(result["depth"]["values"]) - top) / (bottom - top) * (log.image.shape[1] - 1))
    columns = np.clip(columns.astype(int), 0, log.image.shape[1] - 1)
    rows = []
    for truth, curve in zip(log.curves, result["curves"], strict=False):
        values = np.array([np.nan if v is None else v for v in curve["values"]], dtype=float)
        expected = truth.values[columns]
        scale = truth.scale
        if scale.log:
            values, expected = np.log10(np.where(values > 0, values, np.nan)), np.log10(expected)
            span = abs(np.log10(scale.right) - np.log10(scale.left))
        else:
            span = abs(scale.right - scale.left)
        known = np.isfinite(expected)
        both = known & np.isfinite(values)
        mae = float(np.mean(np.abs(values[both] - expected[both])) / span * 100) if both.any() else float("nan")
        rows.append({"mnemonic": curve["mnemonic"], "mae_pct": mae,
                     "coverage": float(both.sum() / max(known.sum(), 1))})
    return rows


def _report(base: str, settings: Any, job: dict[str, Any], checkpoint: dict[str, Any], path: str,
            scan: dict[str, Any], elapsed: float) -> None:
    metrics = checkpoint.get("metrics") or {}
    print(f"\njob {job['id']} succeeded in {elapsed:.0f} s; validation IoU (curves, mean) "
          f"{metrics.get('iou_fg_mean', float('nan')):.3f}")
    print(f"checkpoint {checkpoint['id']} ({checkpoint['size']} bytes) downloaded, sha256 verified "
          f"{checkpoint['sha256']}")
    height, width = scan["size"]
    print(f"scan of {width} x {height} px digitised by segment job {scan['job_id']} (bundled model); "
          "against the scan's known curves:")
    for curve in scan["curves"]:
        print(f"  {curve['mnemonic']:<6} mean error {curve['mae_pct']:.2f} % of the track, "
              f"value found at {curve['coverage']:.1%} of the depths")
    print("where everything is:")
    print(f"  API             {base}  (OpenAPI docs at {base}/docs)")
    print(f"  job             {base}/jobs/{job['id']}")
    print(f"  database        {redact_url(settings.database_url)}")
    print(f"  broker          {redact_url(settings.broker_url)}")
    print(f"  checkpoints     {settings.checkpoint_url}/jobs/{job['id']}/")
    print(f"  downloaded      {path}")
    print(f"  digitised       {scan['paths']['las']} (LAS 2.0), {scan['paths']['csv']}")
