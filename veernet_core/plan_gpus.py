"""Known GPUs, for planning on a GPU no job or probe has measured: an estimate, and said to be one.

The estimate: training runs at ``efficiency x peak`` FLOP/s, and one padded pixel of a training step
costs the model's own FLOPs per pixel (the forward counted by torch's FLOP counter on the meta device:
no memory, no compute; the backward twice that); validation costs the forward's. ``peak`` is the card's dense
16-bit tensor-core rate (bf16, or fp16 on cards without bf16; FP32 accumulate, which autocast uses),
from the vendor's datasheet, sparsity excluded (datasheets print the 2:4-sparse figure, twice the
dense one, with an asterisk).

``efficiency`` (model FLOPs utilisation) is measured where a GPU of this table has run this model
(a completed job or a probe job of the fleet: its measured training rate times the FLOPs per pixel,
over its peak); otherwise it is ``ASSUMED_EFFICIENCY``, and the plan says it is not this fleet's.
That share was measured once, on one NVIDIA H100 80GB HBM3 (bench/gpu_check.py, 2026-11-26,
bench/README.md): the planner's own probe of the default training config at full scale, which
renders its synthetic logs inside the timed steps as a run with no DataLoader workers does, reached
0.18 % of the card's bf16 peak (14.2 M padded px/s). The GPU's own steps, with the logs rendered
beforehand, reached 0.47 % in bf16: the network is narrow (16 to 128 channels) and works mostly at
full resolution, far from what peak figures are made of. So the estimate is what a default run got
on an H100 then; on another card it scales with the card's peak, which is pessimistic where rendering
on the host, not the card, bounds the run. Runs on CUDA have since rendered in DataLoader workers by
default (``num_workers`` auto), which should bring a run towards the GPU's own 0.47 %; that has not
been measured end to end on a GPU yet, so the share stays at what was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from veernet_core.config import ModelConfig

# The planner's probe of the default config on one H100 (module docstring); it was 0.10, an assumption,
# 55 times faster than that measurement.
ASSUMED_EFFICIENCY = 0.0018
ASSUMED_STARTUP_S = 60.0  # CUDA context, dataset sizes, memory probe, model build: assumed when nothing measured it
ASSUMED_CHECKPOINT_BYTES_PER_S = 50e6  # serialise and upload a checkpoint: an assumed 50 MB/s to the store
FLOP_COUNT_SIZE = (256, 1024)  # FLOPs grow with pixels: counted at one size, per pixel


@dataclass(frozen=True)
class KnownGpu:
    name: str  # how the plan names it
    patterns: tuple[str, ...]  # regular expressions, all of which match the normalised device name
    peak_tflops: float  # dense 16-bit tensor TFLOP/s, FP32 accumulate
    memory_gb: float
    bf16: bool  # False: fp16 tensor cores only (amp=auto picks fp16 with a grad scaler there)
    source: str  # where the two figures come from


# Order matters: the first entry whose patterns all match names the device (specific variants first).
KNOWN_GPUS: tuple[KnownGpu, ...] = (
    KnownGpu("NVIDIA H200 NVL", (r"\bH200\b", r"\bNVL\b"), 835.5, 141, True,
             "NVIDIA H200 datasheet, H200 NVL: BF16 Tensor Core 1,671 TFLOPS with sparsity; 141 GB HBM3e"),
    KnownGpu("NVIDIA H200 SXM", (r"\bH200\b",), 989.5, 141, True,
             "NVIDIA H200 datasheet, H200 SXM: BF16 Tensor Core 1,979 TFLOPS with sparsity; 141 GB HBM3e"),
    KnownGpu("NVIDIA H100 NVL", (r"\bH100\b", r"\bNVL\b"), 835.5, 94, True,
             "NVIDIA H100 datasheet, H100 NVL: BF16 Tensor Core 1,671 TFLOPS with sparsity; 94 GB HBM3"),
    KnownGpu("NVIDIA H100 PCIe", (r"\bH100\b", r"\bPCIE\b"), 756.5, 80, True,
             "NVIDIA H100 datasheet, H100 PCIe: BF16 Tensor Core 1,513 TFLOPS with sparsity; 80 GB HBM2e"),
    KnownGpu("NVIDIA H100 SXM", (r"\bH100\b",), 989.5, 80, True,
             "NVIDIA H100 datasheet, H100 SXM: BF16 Tensor Core 1,979 TFLOPS with sparsity; 80 GB HBM3"),
    KnownGpu("NVIDIA A100 80GB", (r"\bA100\b", r"\b80 ?GB\b"), 312, 80, True,
             "NVIDIA A100 datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity), SXM and PCIe; 80 GB HBM2e"),
    KnownGpu("NVIDIA A100 40GB", (r"\bA100\b",), 312, 40, True,
             "NVIDIA A100 datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity), SXM and PCIe; 40 GB HBM2"),
    KnownGpu("NVIDIA L40S", (r"\bL40S\b",), 362.05, 48, True,
             "NVIDIA L40S datasheet: BF16 Tensor Core 362.05 TFLOPS (733 with sparsity); 48 GB GDDR6"),
    KnownGpu("NVIDIA A10G", (r"\bA10G\b",), 70, 24, True,
             "AWS EC2 G5 (A10G) publishes no tensor figure; 70 TFLOPS BF16 as Baseten's A10 vs A10G comparison "
             "lists it (third-party; the A10 datasheet's 125 is an upper bound); 24 GB GDDR6"),
    KnownGpu("NVIDIA A10", (r"\bA10\b",), 125, 24, True,
             "NVIDIA A10 datasheet: BF16 Tensor Core 125 TFLOPS (250 with sparsity); 24 GB GDDR6"),
    KnownGpu("NVIDIA L4", (r"\bL4\b",), 121, 24, True,
             "NVIDIA L4 datasheet: BF16 Tensor Core 242 TFLOPS with sparsity; 24 GB GDDR6"),
    KnownGpu("NVIDIA GeForce RTX 4090", (r"\b4090\b",), 165.2, 24, True,
             "NVIDIA Ada Lovelace architecture whitepaper, RTX 4090: peak BF16 Tensor TFLOPS with FP32 "
             "accumulate 165.2 (330.4 with sparsity); 24 GB GDDR6X"),
    KnownGpu("NVIDIA V100 SXM2 32GB", (r"\bV100\b", r"\bSXM2\b", r"\b32 ?GB\b"), 125, 32, False,
             "NVIDIA V100 datasheet, SXM2: Tensor Performance 125 TFLOPS (fp16; no bf16); 32 GB HBM2"),
    KnownGpu("NVIDIA V100 SXM2 16GB", (r"\bV100\b", r"\bSXM2\b"), 125, 16, False,
             "NVIDIA V100 datasheet, SXM2: Tensor Performance 125 TFLOPS (fp16; no bf16); 16 GB HBM2"),
    KnownGpu("NVIDIA V100 PCIe 32GB", (r"\bV100\b", r"\b32 ?GB\b"), 112, 32, False,
             "NVIDIA V100 datasheet, PCIe: Tensor Performance 112 TFLOPS (fp16; no bf16); 32 GB HBM2"),
    KnownGpu("NVIDIA V100 PCIe 16GB", (r"\bV100\b",), 112, 16, False,
             "NVIDIA V100 datasheet, PCIe: Tensor Performance 112 TFLOPS (fp16; no bf16); 16 GB HBM2"),
    KnownGpu("NVIDIA T4", (r"\bT4\b",), 65, 16, False,
             "NVIDIA T4 datasheet: Mixed Precision (FP16/FP32) 65 TFLOPS (no bf16); 16 GB GDDR6"),
)


def normalise(name: str) -> str:
    """A device name as the patterns read it: upper case, a ``cuda:`` prefix dropped, '-' and '_' as spaces."""
    return re.sub(r"[-_]+", " ", name.upper().removeprefix("CUDA:")).strip()


def find_gpu(name: str) -> KnownGpu | None:
    """The table's GPU ``name`` is (a worker's device class, or what a user typed: 'A100 80GB', 'h100-pcie')."""
    text = normalise(name)
    return next((gpu for gpu in KNOWN_GPUS if all(re.search(p, text) for p in gpu.patterns)), None)


def gpu_for_memory(memory_gb: float) -> KnownGpu | None:
    """The card a plan for a GPU of ``memory_gb`` stands on: of the cards with about that much memory or more,
    those with the least, and of those the slowest (an estimate should not promise more speed than the size
    buys). None when no card has that much."""
    fitting = [gpu for gpu in KNOWN_GPUS if gpu.memory_gb >= memory_gb * 0.95]  # '24 GB' cards show ~23 GiB
    if not fitting:
        return None
    least = min(gpu.memory_gb for gpu in fitting)
    return min((gpu for gpu in fitting if gpu.memory_gb == least), key=lambda gpu: (gpu.peak_tflops, gpu.name))


@dataclass(frozen=True)
class ModelFlops:
    train_per_px: float  # forward and backward FLOPs of one padded pixel of a training step
    forward_per_px: float  # forward only: a validation pass
    parameters: int


@lru_cache(maxsize=256)
def model_flops(model: ModelConfig) -> ModelFlops:
    """FLOPs per padded pixel of ``model``: its forward counted on the meta device (no memory, no arithmetic;
    0.2-0.5 s, seconds the first time in a process), and a training step as three forwards (the backward of a
    convolution or a matmul costs two: the input's gradient and the weights'; counted, 2.99 on the default)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from veernet_core.model import build_model

    height, width = FLOP_COUNT_SIZE
    with torch.device("meta"):
        network = build_model(model)
    with FlopCounterMode(display=False) as forward:  # outside the device context: it costs every op a hook
        network(torch.zeros(1, 1, height, width, device="meta"))
    forward_per_px = float(forward.get_total_flops()) / (height * width)
    return ModelFlops(3 * forward_per_px, forward_per_px, sum(p.numel() for p in network.parameters()))


def efficiency_of(train_px_per_s: float, gpu: KnownGpu, model: ModelConfig) -> float:
    """The model FLOPs utilisation a measured training rate on ``gpu`` means."""
    return train_px_per_s * model_flops(model).train_per_px / (gpu.peak_tflops * 1e12)


@dataclass(frozen=True)
class Efficiency:
    value: float
    source: str  # which measurements it is the median of, or that it is assumed
    assumed: bool


def assumed_efficiency() -> Efficiency:
    return Efficiency(ASSUMED_EFFICIENCY, f"assumed ({ASSUMED_EFFICIENCY:g} of peak): no GPU of the table has run "
                      "this model on this fleet yet; the share is what the planner's probe of the default config "
                      "measured on one H100 80GB HBM3 (bench/README.md)", True)


def estimate_rates(gpu: KnownGpu, model: ModelConfig, efficiency: Efficiency) -> dict[str, Any]:
    """Training and validation padded pixels per second on ``gpu``, and the figures they come from."""
    flops = model_flops(model)
    rate = efficiency.value * gpu.peak_tflops * 1e12
    return {"gpu": gpu.name, "peak_tflops": gpu.peak_tflops, "memory_gb": gpu.memory_gb, "datasheet": gpu.source,
            "efficiency": efficiency.value, "efficiency_source": efficiency.source,
            "efficiency_assumed": efficiency.assumed, "train_flops_per_px": flops.train_per_px,
            "forward_flops_per_px": flops.forward_per_px, "train_px_per_s": rate / flops.train_per_px,
            "val_px_per_s": rate / flops.forward_per_px}


def assumed_checkpoint_s(model: ModelConfig) -> float:
    """A checkpoint's save at the assumed store rate: weights and AdamW's two moments in float32, plus a second."""
    return 1.0 + 3 * 4 * model_flops(model).parameters / ASSUMED_CHECKPOINT_BYTES_PER_S
