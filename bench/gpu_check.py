"""Training on one CUDA GPU as a worker runs it; prints one JSON line of figures.

    python bench/gpu_check.py                      on a machine with a CUDA device (about 3 minutes on an H100;
                                                   without one it prints only that it skipped)
    python bench/gpu_check.py --cpu --scale 0.05 --logs 12 --steps 2 --run-logs 12
                                                   the same code on the CPU, small: the script's own check

Every GPU-only path of the training loop (autocast in bf16 and fp16, the fp16 grad scaler, gradient
checkpointing, the CUDA memory probe, pinned memory, CUDA RNG state in checkpoints) runs here on real
hardware. Five parts, in one process (the command-line runs in their own):

1. probe: the planner's probe job (``plan_probe.measure_device``) of the default training config at
   full scale (``--scale``) on this device, as a probe job runs it: memory model, pixel budget, padded
   px/s of training and validation steps, one checkpoint save, and the model FLOPs utilisation that
   training rate means on this card (``plan_gpus.efficiency_of``), where the planner otherwise assumes
   ``ASSUMED_EFFICIENCY``. Its steps render their logs inside the timed step, as a run with
   ``num_workers`` 0 does.
2. loader: images per second the training loop's own DataLoader (``train.batch_loader``: rendering, padded
   collate, pinned memory) delivers at this scale, with no workers, with ``--workers`` and with the
   config's auto count (``train.loader_workers``): overall, the first batch's wait, and the steady rate
   after it.
3. modes: ``--logs`` logs at ``--scale``, rendered once beforehand (so rendering is not timed); the
   first ``--steps`` optimiser steps of the bucketed sampler (effective batch 16, the pixel budget the
   loop measures) from the same initial weights, under each lever: fp32 (amp off), bf16 autocast, fp16
   autocast with the grad scaler, and bf16 with gradient checkpointing. Per mode: the steady step time
   (the steps after the first, GPU synchronised), real px/s, images/s, the allocator's peak, the
   memory model's prediction of the largest micro-batch's peak (probed as the loop probes it, under the
   mode's autocast), and every step's loss. The levers must
   not change what the model learns beyond numerical tolerance: each step's loss against fp32's.
4. run: ``python -m veernet_core train`` on this device (``--run-logs`` logs at scale 0.25, classes 2):
   two epochs straight; one epoch, then resumed to two on this device; then that run resumed to three
   epochs on the CPU with no GPU visible, as a job whose GPU box dropped resumes on another worker.
   The two-epoch weights of the straight and the resumed run are compared (bit-identical on the CPU by
   design; on a GPU, where convolution kernels may not be deterministic, the largest difference is
   reported).
5. profile: one bf16 step under torch.profiler after a warm-up step: its wall time, the kernels' own
   GPU time summed (how busy the card was), kernels launched, and the kernels that took the most.

The parts run in ``--parts`` order (default: modes, profile, run, probe, loader, the most needed
first), and each part's figures are logged to stderr as it ends ("partial: ..."), so a run stopped at
its time limit keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch
from benchio import log, stdout_to_stderr
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from veernet_core.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from veernet_core.data import align, pad_collate  # noqa: E402
from veernet_core.losses import LossWeights  # noqa: E402
from veernet_core.memory_probe import probe_memory  # noqa: E402
from veernet_core.plan_gpus import (  # noqa: E402
    ASSUMED_EFFICIENCY,
    assumed_efficiency,
    efficiency_of,
    estimate_rates,
    find_gpu,
)
from veernet_core.plan_probe import device_class, measure_device  # noqa: E402
from veernet_core.sampler import BucketBatchSampler  # noqa: E402
from veernet_core.synth_dataset import SynthDataset  # noqa: E402
from veernet_core.train import batch_loader, budget_and_memory, loader_workers  # noqa: E402
from veernet_core.trainer import Trainer, amp_dtype  # noqa: E402

MODES: dict[str, tuple[str, bool]] = {  # name: (TrainConfig.amp, ModelConfig.grad_checkpointing)
    "fp32": ("off", False),
    "bf16": ("bf16", False),
    "fp16": ("fp16", False),
    "bf16_checkpointing": ("bf16", True),
}
RUN_SCALE = 0.25
SEED = 0


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_info(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {"device": device_class(device), "torch": torch.__version__,
                            "cpu_count": os.cpu_count()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(memory_gib=round(props.total_memory / 2**30, 1), multiprocessors=props.multi_processor_count,
                    bf16_supported=torch.cuda.is_bf16_supported(), cuda=torch.version.cuda,
                    cudnn=torch.backends.cudnn.version(), cudnn_allow_tf32=torch.backends.cudnn.allow_tf32,
                    matmul_allow_tf32=torch.backends.cuda.matmul.allow_tf32)
    return info


def base_config(scale: float, size: int, device: torch.device) -> TrainConfig:
    """The default training config (network, effective batch 16, budget from the memory model), on ``device``."""
    return TrainConfig(model=ModelConfig(), data=DataConfig(dataset_size=size, scale=scale, seed=SEED),
                       device=device.type)


def mfu(px_per_s: float, device: torch.device, model: ModelConfig) -> float | None:
    gpu = find_gpu(device_class(device)) if device.type == "cuda" else None
    return round(efficiency_of(px_per_s, gpu, model), 4) if gpu else None


# --- 1. the planner's probe ------------------------------------------------------------------------

def probe_part(config: TrainConfig, device: torch.device) -> dict[str, Any]:
    started = time.perf_counter()
    measured = measure_device(config, device, where=" (bench/gpu_check.py)")
    speed = measured.speed
    return {"wall_s": round(time.perf_counter() - started, 1), "pixel_budget": measured.pixel_budget,
            "memory": measured.memory.to_dict() if measured.memory else None,
            "train_px_per_s": round(speed.train_px_per_s), "val_px_per_s": round(speed.val_px_per_s),
            "checkpoint_s": round(speed.checkpoint_s, 3), "startup_s": round(speed.startup_s, 2),
            "step_warmup_s": round(speed.step_warmup_s, 2),
            "efficiency": mfu(speed.train_px_per_s, device, config.model),
            "assumed_efficiency": ASSUMED_EFFICIENCY, "planner_estimate_train_px_per_s": estimate(device, config.model)}


def estimate(device: torch.device, model: ModelConfig) -> float | None:
    """The planner's training rate for this card where nothing measured it (the datasheet at the assumed share)."""
    gpu = find_gpu(device_class(device)) if device.type == "cuda" else None
    return round(estimate_rates(gpu, model, assumed_efficiency())["train_px_per_s"]) if gpu else None


# --- 2. the loader ---------------------------------------------------------------------------------

def loader_part(config: TrainConfig, device: torch.device, images: int, workers: list[int]) -> dict[str, Any]:
    dataset = SynthDataset(images, config.data.scale, config.data.classes, config.data.seed)
    sizes = dataset.sizes()
    sampler = BucketBatchSampler(dict(enumerate(sizes)), config.effective_batch, 0, 4, config.seed)
    batches = [mb for step in sampler.epoch_steps(0) for mb in step.micro_batches]
    budget, _ = budget_and_memory(config, device, None)
    auto = loader_workers(config, device, budget)
    out: dict[str, Any] = {"images": images, "auto_workers": auto, "pixel_budget": budget}
    for count in sorted(set(workers) | {auto}):
        loader_config = replace(config, num_workers=count)
        started = time.perf_counter()
        seen, first = 0, 0.0
        for batch in batch_loader(dataset, batches, loader_config, device, budget):
            if not seen:
                first = time.perf_counter()
            seen += int(batch["image"].shape[0])
        ended = time.perf_counter()
        out[f"workers_{count}"] = {
            "images_per_s": round(seen / (ended - started), 2),  # start-up included
            "first_batch_s": round(first - started, 2),
            # after the first micro-batch: what a run's later steps see
            "steady_images_per_s": round((seen - len(batches[0])) / max(ended - first, 1e-9), 2)}
    return out


# --- 3. the levers ---------------------------------------------------------------------------------

def render_all(config: TrainConfig) -> list[dict[str, Any]]:
    """Every log of ``config``'s data, rendered in this process (a forked pool hung here once CUDA and torch's
    CPU threads had started)."""
    data = config.data
    dataset = SynthDataset(data.dataset_size, data.scale, data.classes, SEED)
    return [dataset[i] for i in range(data.dataset_size)]


def modes_part(config: TrainConfig, device: torch.device, items: list[dict[str, Any]], steps: int,
               modes: list[str]) -> dict[str, Any]:
    sizes = [tuple(item["image"].shape[-2:]) for item in items]
    budget, memory = budget_and_memory(config, device, None)
    sampler = BucketBatchSampler(dict(enumerate(sizes)), config.effective_batch, budget,
                                 config.max_physical_batch, config.seed)
    plan = sampler.epoch_steps(0)[:steps]
    batches = [[pad_collate([items[i] for i in mb]) for mb in step.micro_batches] for step in plan]
    largest = max((mb for step in plan for mb in step.micro_batches),
                  key=lambda mb: len(mb) * align(max(sizes[i][0] for i in mb)) * align(max(sizes[i][1] for i in mb)))
    extents = [(align(sizes[i][0]), align(sizes[i][1])) for i in largest]
    real_px = [sum(sizes[i][0] * sizes[i][1] for mb in step.micro_batches for i in mb) for step in plan]
    images = [sum(len(mb) for mb in step.micro_batches) for step in plan]
    out: dict[str, Any] = {"pixel_budget": budget, "steps": steps,
                           "micro_batches_per_step": [len(step.micro_batches) for step in plan],
                           "largest_micro_batch": [len(extents), max(h for h, _ in extents),
                                                   max(w for _, w in extents)],
                           "memory_model_peak_gib": round(memory.batch_peak_bytes(extents) / 2**30, 2)
                           if memory else None}  # the loop's own model (the config's autocast: bf16 on CUDA)
    for name in modes:
        amp, checkpointing = MODES[name]
        mode_config = replace(config, amp=amp, model=replace(config.model, grad_checkpointing=checkpointing))
        predicted = probe_memory(mode_config.model, device, amp_dtype(mode_config, device)).batch_peak_bytes(extents)
        trainer = Trainer(mode_config, device, sampler, budget, LossWeights(
            mode_config.tversky_alpha, mode_config.tversky_beta, mode_config.pixel_loss_weight))
        times, losses = [], []
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        for step, step_batches in zip(plan, batches, strict=True):
            sync(device)
            started = time.perf_counter()
            trainer.train_step(step, step_batches)
            sync(device)
            times.append(time.perf_counter() - started)
            losses.append(trainer.last_loss)
        steady = times[1:] or times
        steady_px, steady_images = real_px[1:] or real_px, images[1:] or images
        out[name] = {
            "amp": str(trainer.amp).replace("torch.", "") if trainer.amp else "off",
            "step_s": round(sum(steady) / len(steady), 4), "first_step_s": round(times[0], 3),
            "real_px_per_s": round(sum(steady_px) / sum(steady)),
            "images_per_s": round(sum(steady_images) / sum(steady), 2),
            "peak_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if device.type == "cuda" else None,
            "memory_model_peak_gib": round(predicted / 2**30, 2),  # probed as the loop does, under this mode's autocast
            "losses": [round(loss, 5) for loss in losses]}
        del trainer
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if "fp32" in out:
        reference = out["fp32"]["losses"]
        for name in modes:
            out[name]["loss_rel_diff_vs_fp32_max"] = round(max(
                abs(a - b) / abs(b) for a, b in zip(out[name]["losses"], reference, strict=True)), 5)
    return out


# --- 5. where a step's time goes ------------------------------------------------------------------

def profile_part(config: TrainConfig, device: torch.device, items: list[dict[str, Any]],
                 top: int = 15) -> dict[str, Any]:
    """One training step (the config's autocast: bf16 on CUDA) under torch.profiler, after a warm-up step:
    the step's wall time, the time the device was busy (on CUDA the kernels' own time, summed; on the CPU
    the operators' own time), kernels launched, and the kernels (operators) that took the most of it."""
    sizes = [tuple(item["image"].shape[-2:]) for item in items]
    budget, _ = budget_and_memory(config, device, None)
    sampler = BucketBatchSampler(dict(enumerate(sizes)), config.effective_batch, budget,
                                 config.max_physical_batch, config.seed)
    plan = sampler.epoch_steps(0)[:2]
    if len(plan) < 2:
        raise ValueError(f"{len(items)} logs give {len(plan)} step; the profile needs two (--logs)")
    batches = [[pad_collate([items[i] for i in mb]) for mb in step.micro_batches] for step in plan]
    trainer = Trainer(config, device, sampler, budget, LossWeights(
        config.tversky_alpha, config.tversky_beta, config.pixel_loss_weight))
    trainer.train_step(plan[0], batches[0])
    sync(device)
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    with profile(activities=activities) as prof:
        started = time.perf_counter()
        trainer.train_step(plan[1], batches[1])
        sync(device)
        wall = time.perf_counter() - started
    events = prof.key_averages()

    def own(event: Any) -> float:  # microseconds on the device (CUDA) or the CPU
        if cuda:
            return float(getattr(event, "self_device_time_total", getattr(event, "self_cuda_time_total", 0)))
        return float(event.self_cpu_time_total)

    # On CUDA the kernels alone: an operator's own device time is its kernels' again.
    counted = [e for e in events if str(e.device_type).endswith("CUDA")] if cuda else list(events)
    busy = sum(own(e) for e in counted)
    kernels = sum(e.count for e in counted) if cuda else 0
    ranked = sorted(counted, key=own, reverse=True)[:top]
    return {"step_wall_s": round(wall, 3), "busy_s": round(busy / 1e6, 3),
            "busy_share": round(busy / 1e6 / wall, 3) if wall else None, "kernels": kernels,
            "top": [{"name": e.key[:90], "ms": round(own(e) / 1e3, 2), "calls": e.count,
                     "share": round(own(e) / busy, 3) if busy else None} for e in ranked]}


# --- 4. the command line -------------------------------------------------------------------------

def train_cli(out: Path, epochs: int, logs: int, device: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    command = [sys.executable, "-m", "veernet_core", "train", "--out", str(out), "--epochs", str(epochs),
               "--dataset-size", str(logs), "--scale", str(RUN_SCALE), "--classes", "2", "--device", device]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    result: dict[str, Any] = {"rc": done.returncode, "wall_s": round(time.perf_counter() - started, 1)}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        result["stderr_tail"] = done.stderr[-1500:]
        return result
    summary = json.loads(lines[-1])
    result.update(status=summary["status"], epoch=summary["epoch"], global_step=summary["global_step"],
                  train_loss=[round(h["train_loss"], 5) for h in summary["history"]],
                  iou_fg_mean=[round(h.get("iou_fg_mean", float("nan")), 4) for h in summary["history"]])
    return result


def newest_weights(root: Path, epoch: int) -> dict[str, torch.Tensor]:
    path = sorted(root.rglob(f"epoch-{epoch:04d}-step-*.pt"))[-1]
    state = torch.load(path, map_location="cpu", weights_only=True)
    return dict(state["model"])


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k].float() - b[k].float()).abs().max()) if a[k].numel() else 0.0 for k in a)


def run_part(device: torch.device, logs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="veernet-gpu-check-") as root:
        straight, resumed = Path(root, "straight"), Path(root, "resumed")
        out: dict[str, Any] = {"logs": logs, "scale": RUN_SCALE}
        out["straight_2"] = train_cli(straight, 2, logs, device.type)
        out["resumed_1"] = train_cli(resumed, 1, logs, device.type)
        out["resumed_2"] = train_cli(resumed, 2, logs, device.type)
        if out["straight_2"]["rc"] == 0 and out["resumed_2"]["rc"] == 0:
            out["weights_max_abs_diff_straight_vs_resumed"] = max_difference(
                newest_weights(straight, 2), newest_weights(resumed, 2))
        out["resumed_3_on_cpu"] = train_cli(resumed, 3, logs, "cpu", {"CUDA_VISIBLE_DEVICES": ""})
        return out


def timed(name: str, part: Callable[[], dict[str, Any]], figures: dict[str, Any]) -> None:
    log(f"{name} ...")
    started = time.perf_counter()
    try:
        figures[name] = part()
    except Exception as exc:  # a part that fails on this hardware is a finding; the other parts still run
        figures[name] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
    log(f"{name}: {time.perf_counter() - started:.1f} s")
    log("partial: " + json.dumps(figures))  # a run stopped at its time limit keeps the parts done


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu", action="store_true", help="run on the CPU (the script's own check)")
    p.add_argument("--scale", type=float, default=1.0, help="synthetic log scale of parts 1-3 (1.0 = full size)")
    p.add_argument("--logs", type=int, default=64, help="logs rendered for part 3")
    p.add_argument("--steps", type=int, default=4, help="optimiser steps per mode in part 3 (the first untimed)")
    p.add_argument("--loader-images", type=int, default=32)
    p.add_argument("--workers", type=int, default=0, help="part 2's workers besides none (default: CPUs - 2)")
    p.add_argument("--run-logs", type=int, default=48, help="logs of part 4's training runs")
    p.add_argument("--parts", default="modes,profile,run,probe,loader")
    p.add_argument("--modes", default=",".join(MODES))
    args = p.parse_args(argv)
    if not args.cpu and not torch.cuda.is_available():  # `make bench` on a machine without one: said, not failed
        print(json.dumps({"bench": "gpu_check", "skipped": "no CUDA device is visible; --cpu runs the same code "
                          "on the CPU, small (see the docstring)"}))
        return 0
    device = torch.device("cpu" if args.cpu else "cuda")
    parts = args.parts.split(",")
    figures: dict[str, Any] = {"bench": "gpu_check", **device_info(device)}
    config = base_config(args.scale, args.logs, device)
    workers = args.workers or max(1, (os.cpu_count() or 2) - 2)
    rendered: list[list[dict[str, Any]]] = []

    def logs() -> list[dict[str, Any]]:  # rendered once, for the modes and the profile alike
        if not rendered:
            rendered.append(render_all(config))
        return rendered[0]

    runs: dict[str, Callable[[], dict[str, Any]]] = {
        "probe": lambda: probe_part(config, device),
        "loader": lambda: loader_part(config, device, args.loader_images, [0, workers]),
        "modes": lambda: modes_part(config, device, logs(), args.steps, args.modes.split(",")),
        "run": lambda: run_part(device, args.run_logs),
        "profile": lambda: profile_part(config, device, logs()),
    }
    with stdout_to_stderr():
        for part in parts:  # in the order given
            timed(part, runs[part], figures)
    figures["config"] = {"model": asdict(config.model), "effective_batch": config.effective_batch,
                         "memory_fraction": config.memory_fraction, "max_physical_batch": config.max_physical_batch}
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
