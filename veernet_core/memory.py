"""A measured memory model: peak training memory as a linear function of padded pixels.

Two probe sizes are run through one forward and backward pass on the real device; the peak bytes
of each fit ``peak = fixed + per_pixel * pixels``. On CUDA the peak is the allocator's own
``max_memory_allocated``; on CPU it is the peak of the tensor allocations the profiler records
(the CPU allocator keeps no statistics). The training loop's pixel budget and the planner both
come from this model.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import torch
from torch.profiler import ProfilerActivity, profile

from veernet_core.config import ModelConfig
from veernet_core.losses import step_loss
from veernet_core.model import VeerNet

PROBE_SIZES = ((64, 512), (64, 1024))  # small enough to run anywhere, far enough apart to fit a slope


@dataclass(frozen=True)
class MemoryModel:
    device: str
    fixed_bytes: float  # weights, gradients and what does not grow with the image
    bytes_per_pixel: float  # activations kept for backward and transient buffers, per padded pixel
    probe_pixels: tuple[int, int]
    probe_peaks: tuple[int, int]

    def peak_bytes(self, pixels: int) -> float:
        return self.fixed_bytes + self.bytes_per_pixel * pixels

    def pixel_budget(self, available_bytes: float) -> int:
        """The most padded pixels per physical batch that keep the peak within `available_bytes`."""
        return max(0, int((available_bytes - self.fixed_bytes) / self.bytes_per_pixel))

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _peak_cpu(model: VeerNet, image: torch.Tensor, target: torch.Tensor) -> int:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        _forward_backward(model, image, target)
    events = prof.profiler.kineto_results.events() if prof.profiler else []
    allocations = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    current = peak = 0
    for _, nbytes in allocations:
        current += nbytes
        peak = max(peak, current)
    return peak


def _peak_cuda(model: VeerNet, image: torch.Tensor, target: torch.Tensor, dtype: torch.dtype | None) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
        _forward_backward(model, image, target)
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated() - base)


def _forward_backward(model: VeerNet, image: torch.Tensor, target: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    logits = model(image)
    valid = torch.ones_like(target, dtype=torch.float32)
    step_loss(logits, target, valid, int(valid.numel()), image.shape[0]).backward()


def probe_memory(config: ModelConfig, device: str | torch.device = "cpu",
                 amp_dtype: torch.dtype | None = None,
                 sizes: tuple[tuple[int, int], tuple[int, int]] = PROBE_SIZES) -> MemoryModel:
    """Fit the memory model on `device` for a model of `config` (weights are random: size is all)."""
    device = torch.device(device)
    model = VeerNet(config).to(device).train()
    peaks, pixels = [], []
    for height, width in sizes:
        image = torch.rand(1, 1, height, width, device=device)
        target = torch.randint(0, max(2, config.out_channels), (1, height, width), device=device)
        if config.out_channels == 1:
            target = target.clamp(max=1)
        _forward_backward(model, image, target)  # warm-up: lazy allocations are not per-pixel
        if device.type == "cuda":
            peaks.append(_peak_cuda(model, image, target, amp_dtype))
        else:
            peaks.append(_peak_cpu(model, image, target))
        pixels.append(height * width)
    slope = (peaks[1] - peaks[0]) / (pixels[1] - pixels[0])
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    fixed = max(peaks[0] - slope * pixels[0], 0.0) + 3 * params  # + AdamW's two moments and grads
    return MemoryModel(device.type, float(fixed), float(slope), (pixels[0], pixels[1]), (peaks[0], peaks[1]))


def available_bytes(device: str | torch.device) -> int:
    """Memory the device has for training: free CUDA memory, or the machine's physical RAM."""
    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
