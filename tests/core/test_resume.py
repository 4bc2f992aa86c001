"""A run killed with SIGKILL mid-epoch and restarted ends bit-identical to an uninterrupted run (CPU)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from veernet_core.checkpoint import LocalStore, SidecarRegistry, deserialize

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {
    "model": {"widths": [8, 8, 16, 16, 32, 32], "transformer_heads": 2, "transformer_ff": 64},
    "data": {"dataset_size": 32, "scale": 0.1, "seed": 3},  # eight steps an epoch: killed after the fourth
    "epochs": 2, "effective_batch": 4, "warmup_steps": 2, "device": "cpu",
    "checkpoint_every_steps": 2, "keep_last": 2,
}


def _command(out: Path, config: Path) -> list[str]:
    return [sys.executable, "-m", "veernet_core", "train", "--out", str(out), "--config", str(config)]


def _env() -> dict[str, str]:
    # One intra-op thread, as the service's workers and the e2e reference run train: on a shared 2-core machine
    # OpenMP threads spinning against each other make a step ~10x slower. Both runs compared use the same.
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _final_weights(out: Path) -> dict[str, torch.Tensor]:
    store = LocalStore(out)
    final = [r for r in SidecarRegistry(store).committed() if r.epoch == 2 and r.step == 0]
    assert len(final) == 1, "the run must end with its epoch-2 checkpoint"
    state = deserialize(store.get(final[0].key), final[0].sha256)
    return state["model"]


def test_sigkill_mid_epoch_then_resume_is_bit_identical(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    # The uninterrupted run trains beside the interrupted one (one core each): they share nothing but the config.
    straight_log = tmp_path / "straight.log"
    with straight_log.open("wb") as log:
        reference = subprocess.Popen(_command(straight, config), env=_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        _kill_mid_epoch_and_resume(interrupted, config)
        assert reference.wait(timeout=300) == 0, straight_log.read_text(errors="replace")[-2000:]
    finally:
        if reference.poll() is None:
            reference.kill()
            reference.wait()

    expected, actual = _final_weights(straight), _final_weights(interrupted)
    assert expected.keys() == actual.keys()
    for name, tensor in expected.items():
        assert torch.equal(tensor, actual[name]), f"{name} differs after resume"


def _kill_mid_epoch_and_resume(interrupted: Path, config: Path) -> None:
    victim = subprocess.Popen(_command(interrupted, config), env=_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    marker = interrupted / "epoch-0000-step-00000004.pt.json"
    deadline = time.monotonic() + 240
    while not marker.exists() and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), "the run should have committed a mid-epoch checkpoint"
    victim.send_signal(signal.SIGKILL)
    assert victim.wait(timeout=30) == -signal.SIGKILL
    committed = SidecarRegistry(LocalStore(interrupted)).committed()
    assert max((r.epoch, r.step) for r in committed) < (1, 0), "killed before the first epoch ended"

    resumed = subprocess.run(_command(interrupted, config), env=_env(), capture_output=True, text=True,
                             timeout=300, check=True)
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["status"] == "completed"
    newest = max(committed, key=lambda r: r.global_step)
    said = [line.strip() for line in resumed.stderr.splitlines() if "resumed from" in line]
    assert said == [f"resumed from {newest.key} (epoch 0, step {newest.step})"], "must resume, not restart"


def test_dataloader_workers_change_no_bit_of_the_run(tmp_path: Path) -> None:
    """Workers (auto on CUDA) render the same logs in the same order: the same weights as with none."""
    from veernet_core.config import TrainConfig
    from veernet_core.train import train

    weights = []
    for workers in (0, 2):
        out = tmp_path / f"workers-{workers}"
        config = TrainConfig.from_dict({**CONFIG, "data": {**CONFIG["data"], "dataset_size": 15}, "epochs": 1,
                                        "num_workers": workers, "checkpoint_every_steps": 0})
        result = train(config, LocalStore(out))
        assert result.status == "completed" and result.last_checkpoint is not None
        weights.append(deserialize(LocalStore(out).get(result.last_checkpoint.key))["model"])
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_auto_workers_feed_a_gpu_within_shared_memory_and_leave_a_cpu_run_its_cores() -> None:
    from dataclasses import replace

    from veernet_core.config import TrainConfig
    from veernet_core.train import (
        AUTO_WORKERS_MAX,
        LOADER_BYTES_PER_PIXEL,
        SHM_SHARE,
        loader_workers,
        shared_memory_bytes,
    )

    auto, cuda = TrainConfig(), torch.device("cuda")
    assert auto.num_workers == -1
    assert loader_workers(auto, torch.device("cpu"), 10**6) == 0
    cpus = len(os.sched_getaffinity(0))
    assert loader_workers(auto, cuda) == max(0, min(AUTO_WORKERS_MAX, cpus - 1))  # no budget: no shm bound
    shm = shared_memory_bytes()
    assert shm is not None and shm > 0, "/dev/shm, where DataLoader workers hand their batches over"
    # A micro-batch so large that one worker's batches in flight would fill over a quarter of /dev/shm.
    per_worker = int(SHM_SHARE * shm) // (auto.prefetch_factor * LOADER_BYTES_PER_PIXEL)
    assert loader_workers(auto, cuda, per_worker + 1) == 0
    assert loader_workers(auto, cuda, per_worker) == min(1, AUTO_WORKERS_MAX, cpus - 1)
    assert loader_workers(auto, cuda, per_worker // 2) == min(2, AUTO_WORKERS_MAX, cpus - 1)
    assert loader_workers(replace(auto, num_workers=3), torch.device("cpu")) == 3  # a stated count is kept
    assert loader_workers(replace(auto, num_workers=5), cuda, per_worker + 1) == 5
    assert loader_workers(replace(auto, num_workers=0), cuda) == 0
