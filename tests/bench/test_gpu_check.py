"""bench/gpu_check.py on the CPU, small: the script that checks the training loop on a GPU runs, prints one
JSON line, and its lever comparison holds where it can be checked without a GPU (CI has none): autocast
stays off on the CPU whatever the mode asks, and gradient checkpointing changes no loss of the first
steps beyond float rounding (its recomputed forward is the same arithmetic)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_gpu_check_runs_on_the_cpu_and_checkpointing_keeps_the_losses() -> None:
    command = [sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--cpu", "--scale", "0.05", "--logs", "32",
               "--steps", "2", "--parts", "modes,profile", "--modes", "fp32,bf16_checkpointing"]
    # One intra-op thread (as the service's CPU workers train): on a shared 2-core machine OpenMP threads spinning
    # against each other make the memory probes and steps ~10x slower; nothing checked here depends on the count.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, "stdout holds the one JSON line, nothing else"
    figures = json.loads(lines[0])
    assert figures["device"].startswith("cpu")
    modes = figures["modes"]
    assert "error" not in modes, modes
    assert modes["micro_batches_per_step"] and len(modes["fp32"]["losses"]) == 2
    plain, checkpointed = modes["fp32"], modes["bf16_checkpointing"]
    assert plain["amp"] == "off" and checkpointed["amp"] == "off", "autocast is for CUDA only"
    for a, b in zip(plain["losses"], checkpointed["losses"], strict=True):
        assert math.isfinite(a) and abs(a - b) <= 1e-5 * abs(a)
    assert checkpointed["loss_rel_diff_vs_fp32_max"] <= 1e-5
    assert plain["images_per_s"] > 0 and plain["peak_gib"] is None  # the allocator's peak is CUDA's alone
    profiled = figures["profile"]
    assert "error" not in profiled, profiled
    assert profiled["busy_s"] > 0 and profiled["top"] and profiled["kernels"] == 0  # no kernels on a CPU
    assert sum(op["share"] for op in profiled["top"]) <= 1.0 + 1e-9
    assert any("convolution" in op["name"] for op in profiled["top"][:3]), "a step's time is its convolutions'"
