"""POST /plan and POST /plan/chart.svg latency over a set of configs, the fuzzer's worst among them; one JSON line.

Starts the API (`veernet api`, one process) on the embedded default (SQLite, the embedded broker), seeds a
fleet in its database as workers leave it: HISTORY succeeded jobs of the default model on a 24 GiB
'cuda:NVIDIA A10G' class, each of a 100,000-log dataset (so calibration replays ten large layouts) with the
memory model its worker recorded, one interruption measured on a timeline, and a few jobs of a small model
on a CPU class. Then, from this process over loopback HTTP, each config of CONFIGS (named: the largest
runs the service allows, the costliest sampler settings, a new model of the largest shape, a table GPU,
a GPU size, a 100,000-image manifest) and RANDOM configs drawn as a fuzzer would (every field across its
allowed range, a random device or GPU size) is planned REPEATS times, alternating /plan and /plan/chart.svg.
The first request of a config is 'cold' (its model's FLOPs counted, its layouts computed); the rest are
warm. Figures: p50/p99/max over all requests, over cold ones, and the slowest configs. No worker runs:
the probe jobs plans queue stay queued.

Run: ``.venv/bin/python bench/plan_latency.py [--random N] [--repeats R]`` (a few minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from benchio import log  # noqa: E402

from tests.conftest import free_port  # noqa: E402

A10G, CPU = "cuda:NVIDIA A10G", "cpu:bench x2"
HISTORY = 10
SMALL_MODEL = {"widths": [8, 8, 16, 16, 32, 32], "transformer_heads": 2, "transformer_ff": 32}
LARGEST = {"epochs": 200, "data": {"dataset_size": 100_000, "scale": 1.0}}  # the service's default bounds
CONFIGS: dict[str, dict[str, Any]] = {
    "default_on_measured_gpu": {"config": {}, "device_class": A10G},
    "largest_run_measured_gpu": {"config": LARGEST, "device_class": A10G},
    "largest_run_no_budget_batch_1024": {"config": {**LARGEST, "effective_batch": 1024, "max_physical_batch": 1024},
                                         "device_class": A10G},
    "largest_run_batch_1024_physical_512": {"config": {**LARGEST, "effective_batch": 1024,
                                                       "max_physical_batch": 512}, "device_class": A10G},
    "largest_run_batch_1": {"config": {**LARGEST, "effective_batch": 1, "max_physical_batch": 1}},
    "largest_model_new": {"config": {"model": {"widths": [1024] * 6, "transformer_layers": 8,
                                               "transformer_heads": 16, "transformer_ff": 4096}}},
    "table_gpu_h100": {"config": LARGEST, "device_class": "H100 PCIe"},
    "gpu_size_80": {"config": LARGEST, "gpu_memory_gb": 80},
    "gpu_size_24_measured": {"config": {}, "gpu_memory_gb": 24},
    "fresh_model_small_cpu": {"config": {"model": SMALL_MODEL, "data": {"dataset_size": 2000, "scale": 0.1}},
                              "device_class": CPU},
    "manifest_100k": {"config": {"epochs": 200, "data": {"kind": "manifest", "manifest_url": "bench-100k"}},
                      "device_class": A10G},
}


def service_env(data: Path) -> dict[str, str]:
    from api.settings import Settings

    env = {k: v for k, v in os.environ.items() if k.upper() not in {n.upper() for n in Settings.model_fields}}
    return {**env, "VEERNET_DATA_DIR": str(data), "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
            "MAX_QUEUED_JOBS_PER_TENANT": "0"}


def seed_fleet(data: Path) -> None:
    """The fleet's history, written as workers write it (api.jobs), and a 100,000-image manifest."""
    from api import jobs
    from api.db import migrate, session_scope
    from api.models import MEMORY_EVENT, Job, JobEvent, utcnow
    from api.settings import get_settings
    from veernet_core.config import TrainConfig
    from veernet_core.manifest import write_manifest
    from veernet_core.memory import MemoryModel

    migrate(get_settings().database_url)
    gpu_memory = MemoryModel("cuda", 4e8, 1400.0, (32768, 65536), (0, 0), 1150.0)
    runs = [(A10G, TrainConfig.from_dict({"data": {"dataset_size": 100_000}}), 24 * 2**30, gpu_memory)] * HISTORY
    runs += [(CPU, TrainConfig.from_dict({"model": SMALL_MODEL, "data": {"dataset_size": 500, "scale": 0.1}}),
              8 * 2**30, MemoryModel("cpu", 1e7, 90.0, (1, 2), (1, 2), 80.0))] * 3
    now = utcnow()
    for k, (device, config, memory_bytes, memory) in enumerate(runs):
        with session_scope() as session:
            job_id = jobs.create_job(session, "train", config.to_dict()).id
        with session_scope() as session:
            start = now - timedelta(hours=10 - k * 0.1)
            jobs.claim(session, job_id, "bench", 60, now=start)
            jobs.record_device(session, job_id, 1, device, memory_bytes, now=start)
            session.add(JobEvent(job_id=job_id, attempt=1, kind=MEMORY_EVENT, data={
                "device_class": device, "pixel_budget": memory.pixel_budget(memory_bytes * 0.8),
                "memory_model": memory.to_dict()}))
            job = session.get(Job, job_id)
            assert job is not None
            job.status, job.started_at, job.finished_at = "succeeded", start, start + timedelta(hours=9)
            job.step_time_s, job.validation_time_s, job.checkpoint_time_s = 0.8 + 0.01 * k, 60.0, 2.0
    datasets = Path(data) / "datasets" / "local" / "bench-100k"
    datasets.mkdir(parents=True)
    rng = np.random.default_rng(0)
    write_manifest(datasets, [{"image": f"s/{k}.png", "mask": f"m/{k}.png", "height": int(h), "width": int(w)}
                              for k, (h, w) in enumerate(zip(rng.integers(480, 641, 100_000),
                                                             rng.integers(3200, 12801, 100_000), strict=True))])


def random_body(rng: random.Random) -> dict[str, Any]:
    """A plan request as a fuzzer draws one: every field somewhere in its allowed range (a valid config)."""
    size = int(10 ** rng.uniform(0.5, 5))
    val = rng.choice([0.0, 0.1, 0.2, 0.5])
    train = size - round(size * val)
    if train < 1:
        size, train = 2, 2 - round(2 * val)
    batch = max(1, min(train, int(10 ** rng.uniform(0, 3.01))))
    heads = rng.choice([1, 2, 4, 8, 16])
    widths = [rng.choice([4, 8, 16, 32, 64, 128, 256, 512, 1024]) for _ in range(5)]
    widths.append(heads * rng.choice([w for w in (1, 2, 8, 64) if 4 <= heads * w <= 1024]))  # heads divide it
    classes = rng.choice([2, 3])
    config = {"epochs": rng.randint(1, 200), "effective_batch": batch,
              "max_physical_batch": max(1, int(10 ** rng.uniform(0, 3.01))),
              "pixel_budget": rng.choice([0, int(10 ** rng.uniform(3, 10))]),
              "amp": rng.choice(["auto", "bf16", "fp16", "off"]), "seed": rng.randint(0, 2**31 - 1),
              "checkpoint_every_steps": rng.choice([0, rng.randint(1, 1000)]),
              "model": {"widths": widths, "transformer_layers": rng.randint(0, 8), "transformer_heads": heads,
                        "transformer_ff": rng.choice([8, 64, 256, 4096]), "num_classes": classes},
              "data": {"dataset_size": size, "scale": rng.uniform(0.01, 1.0), "val_fraction": val,
                       "classes": classes, "seed": rng.randint(0, 2**31 - 1)}}
    body: dict[str, Any] = {"config": config, "window_hours": rng.uniform(0.1, 744),
                            "interruptions": rng.choice([None, rng.uniform(0, 1000)])}
    device = rng.choice(["none", "a10g", "cpu", "table", "size"])
    if device == "a10g":
        body["device_class"] = A10G
    elif device == "cpu":
        body["device_class"] = CPU
    elif device == "table":
        body["device_class"] = rng.choice(["H100", "A100 80GB", "L4", "T4", "RTX 4090", "V100"])
    elif device == "size":
        body["gpu_memory_gb"] = rng.uniform(0.5, 141)
    return body


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def run(bodies: dict[str, dict[str, Any]], base: str, repeats: int) -> dict[str, Any]:
    timings: dict[str, list[float]] = {}
    statuses: dict[int, int] = {}
    with httpx.Client(base_url=base, timeout=60) as client:
        for name, body in bodies.items():
            for k in range(repeats):
                path = "/plan" if k % 2 == 0 else "/plan/chart.svg"
                started = time.perf_counter()
                response = client.post(path, json=body)
                timings.setdefault(name, []).append(time.perf_counter() - started)
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                if response.status_code >= 500:
                    raise SystemExit(f"{name}: {response.status_code} {response.text[:500]}")
    every = [t for ts in timings.values() for t in ts]
    cold, warm = [ts[0] for ts in timings.values()], [t for ts in timings.values() for t in ts[1:]]
    slowest = sorted(timings, key=lambda n: -max(timings[n]))[:5]
    return {"requests": len(every), "configs": len(timings), "statuses": statuses,
            "p50_s": percentile(every, 50), "p99_s": percentile(every, 99), "max_s": max(every),
            "cold_p50_s": percentile(cold, 50), "cold_p99_s": percentile(cold, 99), "warm_p99_s": percentile(warm, 99),
            "slowest": {n: round(max(timings[n]), 3) for n in slowest},
            "named": {n: round(max(timings[n]), 3) for n in CONFIGS if n in timings}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--random", type=int, default=150, help="random configs, as a fuzzer draws them")
    parser.add_argument("--repeats", type=int, default=4, help="requests per config (alternating /plan and chart)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="veernet-plan-latency-") as root:
        data = Path(root) / "data"
        env = service_env(data)
        for name in [k for k in os.environ if k not in env]:
            del os.environ[name]  # the developer's service settings: this process seeds the bench's database
        os.environ.update(env)
        seed_fleet(data)
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "api.cli", "api", "--host", "127.0.0.1", "--port", str(port),
                                   "--loglevel", "warning"], env=env, cwd=ROOT)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"{base}/livez", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)
            rng = random.Random(18)
            bodies = {**CONFIGS, **{f"random_{k}": random_body(rng) for k in range(args.random)}}
            load = os.getloadavg()[0]
            log(f"planning {len(bodies)} configs x {args.repeats} requests")
            figures = run(bodies, base, args.repeats)
        finally:
            server.terminate()
            server.wait(timeout=30)
    figures["loadavg_1min_before"] = round(load, 2)
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}))


if __name__ == "__main__":
    main()
