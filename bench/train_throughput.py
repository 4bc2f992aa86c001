"""Training speed and padding waste of VeerNet on this machine; prints one JSON line on stdout.

Three measurements, all in one process (logs go to stderr):

1. Padding waste at the full-scale size distribution (15,000 synthetic logs, from sizes alone):
   random batches of 16; the sampler's bucketed micro-batches for one epoch under the pixel budget
   that the memory model measured in this run gives a stated 24 GiB device at memory_fraction 0.8;
   the same sampler with one physical batch of 16 per step (no budget: the worst case); and the
   floor, each image alone padded to the 32-px grid.
2. Throughput on a scaled synthetic set (scale 0.1, 160 logs rendered once beforehand, so data
   generation is excluded from both paths), the default ModelConfig, real (unpadded) pixels per
   second. Naive: batch 1 in random order, a forward, backward and AdamW step per image. Ours: the
   real `Trainer.train_step` (bucketed sampler, physical batch adapted to the pixel budget the
   training loop measures for this device, accumulation to 16), collate included. Both warm up
   untimed (ours one step, naive two images), then are timed step by step on the same 16 images,
   interleaved, so that load from other processes on the machine falls on both alike.
3. MFU: model FLOPs of our timed steps' forward and backward (``torch.utils.flop_counter``) per
   second of those steps, over the fp32 matmul rate (2048 x 2048 ``torch.mm``, same threads) measured
   in the same run, the best of several rounds before and after the training steps. Beside it, what
   bounds it on this device: the convolutions' FLOPs per second of time inside the convolution
   kernels (``torch.profiler``, one more pass over the same steps) over the same matmul rate, the MFU
   a step would reach if everything but its convolutions took no time, and the convolutions' share of
   the profiled step.

Run: ``.venv/bin/python bench/train_throughput.py`` (1-2 minutes on an idle 2-core machine; every
figure is wall-clock, so `loadavg_1min_before_after` is reported: other processes slow it down).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np
import torch
from benchio import log, stdout_to_stderr
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from veernet_core.config import DataConfig, ModelConfig, TrainConfig
from veernet_core.data import model_extents, pad_collate, padding_waste
from veernet_core.losses import LossWeights, step_loss
from veernet_core.memory_probe import probe_memory
from veernet_core.sampler import BucketBatchSampler, Step
from veernet_core.synth import log_size
from veernet_core.synth_dataset import SynthDataset
from veernet_core.train import pixel_budget_for
from veernet_core.trainer import Trainer, build_for_training

FULL_SCALE_LOGS = 15_000  # the engagement's multiclass set
DEVICE_GB = 24  # the stated device for the bucketed waste: a 24 GiB GPU
BATCH = 16  # the effective batch
SCALE = 0.1  # throughput images: 48-64 x 320-1,280 px, small enough for a CPU
DATASET = 160  # rendered once; ten size-sorted groups, so buckets are as tight as a small set allows
TIMED_STEPS = 8  # two size groups' worth of steps: fewer left the ratio to one or two outliers
SEED = 0
MATMUL_SIDE = 2048


def padding_figures() -> dict[str, Any]:
    sizes = [log_size(SEED, i, 1.0) for i in range(FULL_SCALE_LOGS)]
    order = np.random.default_rng(SEED).permutation(len(sizes)).tolist()
    random_batches = [order[i:i + BATCH] for i in range(0, len(order), BATCH)]
    memory = probe_memory(ModelConfig(), "cpu")
    device_bytes = DEVICE_GB * 2**30
    budget = memory.pixel_budget(device_bytes * TrainConfig().memory_fraction)
    by_index = dict(enumerate(sizes))
    bucketed = list(BucketBatchSampler(by_index, BATCH, budget, BATCH, SEED))
    batch16 = list(BucketBatchSampler(by_index, BATCH, 0, BATCH, SEED))
    return {
        "pad_waste_random": padding_waste(sizes, random_batches),
        "pad_waste_bucketed": padding_waste(sizes, bucketed),
        "pad_waste_bucketed_batch16": padding_waste(sizes, batch16),
        "pad_waste_floor": padding_waste(sizes, [[i] for i in range(len(sizes))]),
        "bucketed_pixel_budget": budget,
        "bucketed_device_gb": DEVICE_GB,
        "bucketed_memory_fraction": TrainConfig().memory_fraction,
        "bucketed_mean_physical_batch": sum(map(len, bucketed)) / len(bucketed),
        "memory_bytes_per_pixel": memory.bytes_per_pixel,
    }


def matmul_flops_per_s(rounds: int = 3) -> float:
    """fp32 torch.mm of two 2048x2048 matrices with this process's threads: the best of `rounds`."""
    a, b = torch.randn(MATMUL_SIDE, MATMUL_SIDE), torch.randn(MATMUL_SIDE, MATMUL_SIDE)
    torch.mm(a, b)
    best = 0.0
    for _ in range(rounds):
        reps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 0.5:
            torch.mm(a, b)
            reps += 1
        best = max(best, 2 * MATMUL_SIDE**3 * reps / (time.perf_counter() - t0))
    return best


class Naive:
    """Batch 1 in random order, an AdamW step after every image: the baseline."""

    def __init__(self, config: TrainConfig, items: list[dict[str, Any]], weights: LossWeights) -> None:
        self.items, self.weights = items, weights
        self.model = build_for_training(config.model, config.seed, torch.device("cpu")).train()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.scaled_lr,
                                           weight_decay=config.weight_decay)

    def train(self, indices: list[int]) -> float:
        """Train one image at a time; returns the seconds taken."""
        t0 = time.perf_counter()
        for i in indices:
            batch = pad_collate([self.items[i]])
            logits = self.model(batch["image"], model_extents(batch))
            pixels = int(batch["sizes"][0].prod())
            step_loss(logits, batch["target"], batch["valid"], pixels, 1, self.weights).backward()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - t0


def collated(step: Step, items: list[dict[str, Any]]) -> list[dict[str, torch.Tensor]]:
    """The step's micro-batches, padded as the training loop's DataLoader gives them."""
    return [pad_collate([items[i] for i in mb]) for mb in step.micro_batches]


def ours_step(trainer: Trainer, step: Step, items: list[dict[str, Any]]) -> float:
    """One real optimiser step of the training loop (collate included); returns the seconds taken."""
    t0 = time.perf_counter()
    trainer.train_step(step, collated(step, items))
    return time.perf_counter() - t0


def forward_backward(trainer: Trainer, step: Step, batches: list[dict[str, torch.Tensor]]) -> None:
    """The step's forward and backward passes, its gradients dropped: no optimiser update."""
    trainer.accumulate(step, batches)
    trainer.optimizer.zero_grad(set_to_none=True)


# Model FLOPs are what torch.utils.flop_counter counts in the step: convolutions and matmuls (it has
# no formula for CPU attention, a negligible share at 1/32 resolution). torch.bmm is left out:
# in VeerNet it only computes MaskedGroupNorm's statistics as the diagonal of a C x C Gram matrix,
# which executes C times the multiply-adds the statistics need; counting those would inflate the MFU.
NOT_MODEL_FLOPS = {"aten.bmm"}


def step_flops(trainer: Trainer, step: Step, items: list[dict[str, Any]]) -> dict[str, int]:
    """FLOPs by operator that the step's forward and backward passes execute."""
    batches = collated(step, items)
    counter = FlopCounterMode(display=False)
    with counter:
        forward_backward(trainer, step, batches)
    return {str(op): int(n) for op, n in counter.get_flop_counts()["Global"].items()}


# The operators that run the convolution kernels (forward; backward to input and weight), in the
# profiler's names and in the FLOP counter's.
CONV_EVENTS = {"aten::mkldnn_convolution", "aten::convolution_backward", "aten::_convolution"}
CONV_FLOPS = {"aten.convolution", "aten.convolution_backward"}


def conv_kernel_seconds(trainer: Trainer, steps: list[Step], items: list[dict[str, Any]]) -> tuple[float, float]:
    """Seconds inside convolution kernels, and seconds of all operators, over the steps' forward and backward."""
    batches = [collated(step, items) for step in steps]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for step, step_batches in zip(steps, batches, strict=True):
            forward_backward(trainer, step, step_batches)
    events = prof.key_averages()
    conv = sum(e.self_cpu_time_total for e in events if e.key in CONV_EVENTS) / 1e6
    return conv, sum(e.self_cpu_time_total for e in events if e.key.startswith("aten::")) / 1e6


def side_by_side(trainer: Trainer, naive: Naive, steps: list[Step],
                 items: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """Seconds per step of ours and of naive over the same 16 images, interleaved step by step."""
    rng = np.random.default_rng(SEED)
    ours_times, naive_times = [], []
    for k, step in enumerate(steps):
        images = [i for mb in step.micro_batches for i in mb]
        shuffled = rng.permutation(images).tolist()
        first_ours = k % 2 == 0  # alternate the order, so drifts in machine load even out
        t_ours = ours_step(trainer, step, items) if first_ours else 0.0
        t_naive = naive.train(shuffled)
        t_ours = t_ours if first_ours else ours_step(trainer, step, items)
        log(f"timed step {k}: ours {t_ours:.2f} s in {len(step.micro_batches)} micro-batch(es), naive {t_naive:.2f} s")
        ours_times.append(t_ours)
        naive_times.append(t_naive)
    return ours_times, naive_times


def throughput_figures() -> dict[str, Any]:
    config = TrainConfig(data=DataConfig(dataset_size=DATASET, scale=SCALE), device="cpu", seed=SEED)
    weights = LossWeights(config.tversky_alpha, config.tversky_beta, config.pixel_loss_weight)
    dataset = SynthDataset(DATASET, scale=SCALE, classes=config.data.classes, seed=SEED)
    t0 = time.perf_counter()
    items = [dataset[i] for i in range(DATASET)]
    log(f"rendered {DATASET} logs at scale {SCALE} in {time.perf_counter() - t0:.1f} s (not timed)")
    sizes = dataset.sizes()
    device = torch.device("cpu")
    budget = pixel_budget_for(config, device, None)
    sampler = BucketBatchSampler(dict(enumerate(sizes)), BATCH, budget, config.max_physical_batch, SEED)
    trainer, naive = Trainer(config, device, sampler, budget, weights), Naive(config, items, weights)
    warmup, timed = sampler.epoch_steps(0)[0], sampler.epoch_steps(0)[1:1 + TIMED_STEPS]
    ours_step(trainer, warmup, items)  # optimiser state, first kernels: not timed
    naive.train(warmup.micro_batches[0][:2])
    ours_times, naive_times = side_by_side(trainer, naive, timed, items)
    micro_batches = [mb for step in timed for mb in step.micro_batches]
    timed_images = [i for mb in micro_batches for i in mb]
    real_pixels = sum(sizes[i][0] * sizes[i][1] for i in timed_images)
    by_op: dict[str, int] = {}
    for step in timed:  # counted again after the timing: the counter's own overhead is not timed
        for op, n in step_flops(trainer, step, items).items():
            by_op[op] = by_op.get(op, 0) + n
    log("FLOPs of the timed steps by operator: " + ", ".join(f"{op} {n:.3g}" for op, n in sorted(by_op.items())))
    flops = sum(n for op, n in by_op.items() if op not in NOT_MODEL_FLOPS)
    conv_s, ops_s = conv_kernel_seconds(trainer, timed, items)
    return {
        "naive_px_per_s": real_pixels / sum(naive_times),
        "ours_px_per_s": real_pixels / sum(ours_times),
        "ours_over_naive_by_step": [round(n / o, 3) for o, n in zip(ours_times, naive_times, strict=True)],
        "ours_pixel_budget": budget,
        "ours_mean_physical_batch": len(timed_images) / len(micro_batches),
        "ours_pad_waste": padding_waste(sizes, micro_batches),
        "ours_pad_waste_floor": padding_waste(sizes, [[i] for i in timed_images]),
        "model_flops_per_s": flops / sum(ours_times),
        "model_flops_per_real_pixel": flops / real_pixels,
        "conv_flops_per_s_in_kernels": sum(n for op, n in by_op.items() if op in CONV_FLOPS) / conv_s,
        "model_flops_per_s_of_conv_kernels": flops / conv_s,
        "conv_share_of_profiled_ops": conv_s / ops_s,
        "scale": SCALE,
        "images": DATASET,
        "images_timed": len(timed_images),
        "steps_timed": len(timed),
    }


def main() -> None:
    with stdout_to_stderr():
        load_before = os.getloadavg()[0]
        if load_before > 0.5:
            log(f"warning: 1-minute load average is {load_before:.2f} before starting; other processes will "
                "slow every wall-clock figure (naive batch-1 steps most)")
        t0 = time.perf_counter()
        figures: dict[str, Any] = {"threads": torch.get_num_threads(), "torch_version": torch.__version__}
        figures.update(padding_figures())
        log(f"padding waste done in {time.perf_counter() - t0:.1f} s")
        reference = matmul_flops_per_s()
        figures.update(throughput_figures())
        reference = max(reference, matmul_flops_per_s())  # measured either side of the training steps
        figures["matmul_gflops"] = reference / 1e9
        figures["mfu"] = figures["model_flops_per_s"] / reference
        figures["conv_kernels_over_matmul"] = figures["conv_flops_per_s_in_kernels"] / reference
        figures["mfu_if_only_convolutions_took_time"] = figures["model_flops_per_s_of_conv_kernels"] / reference
        figures["ours_over_naive"] = figures["ours_px_per_s"] / figures["naive_px_per_s"]
        figures["bucketed_over_floor"] = figures["pad_waste_bucketed"] / figures["pad_waste_floor"]
        figures["loadavg_1min_before_after"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
        figures["bench_seconds"] = time.perf_counter() - t0
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}))


if __name__ == "__main__":
    main()
