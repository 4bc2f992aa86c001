"""The memory model's probes: a forward and backward pass of the real network at two sizes on the device
(see ``veernet_core.memory``, whose ``MemoryModel`` they fit), and the memory a device has for training."""

from __future__ import annotations

import os

import torch
from torch.profiler import ProfilerActivity, profile

from veernet_core.config import ModelConfig
from veernet_core.losses import step_loss
from veernet_core.memory import MemoryModel
from veernet_core.model import VeerNet

PROBE_SIZES = ((64, 512), (64, 1024))  # small enough to run anywhere, far enough apart to fit a slope


def _peak_cpu(model: VeerNet, image: torch.Tensor, target: torch.Tensor, extents: torch.Tensor | None) -> int:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        _forward_backward(model, image, target, extents)
    events = prof.profiler.kineto_results.events() if prof.profiler else []
    allocations = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    current = peak = 0
    for _, nbytes in allocations:
        current += nbytes
        peak = max(peak, current)
    return peak


def _peak_cuda(model: VeerNet, image: torch.Tensor, target: torch.Tensor, extents: torch.Tensor | None,
               dtype: torch.dtype | None) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
        _forward_backward(model, image, target, extents)
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated() - base)


def _forward_backward(model: VeerNet, image: torch.Tensor, target: torch.Tensor,
                      extents: torch.Tensor | None = None) -> None:
    model.zero_grad(set_to_none=True)
    logits = model(image, extents)
    valid = torch.ones_like(target, dtype=torch.float32)
    step_loss(logits, target, valid, int(valid.numel()), image.shape[0]).backward()


def _probe_peak(model: VeerNet, config: ModelConfig, device: torch.device, amp_dtype: torch.dtype | None,
                extents: list[tuple[int, int]]) -> int:
    """Peak bytes of one forward and backward of images padded to the largest of `extents`."""
    height, width = max(h for h, _ in extents), max(w for _, w in extents)
    image = torch.rand(len(extents), 1, height, width, device=device)
    target = torch.randint(0, max(2, config.out_channels), (len(extents), height, width), device=device)
    if config.out_channels == 1:
        target = target.clamp(max=1)
    fills = all(size == (height, width) for size in extents)
    given = None if fills else torch.tensor(extents, dtype=torch.int64, device=device)
    _forward_backward(model, image, target, given)  # warm-up: lazy allocations are not per-pixel
    if device.type == "cuda":
        return _peak_cuda(model, image, target, given, amp_dtype)
    return _peak_cpu(model, image, target, given)


def probe_memory(config: ModelConfig, device: str | torch.device = "cpu",
                 amp_dtype: torch.dtype | None = None,
                 sizes: tuple[tuple[int, int], tuple[int, int]] = PROBE_SIZES) -> MemoryModel:
    """Fit the memory model on `device` for a model of `config` (weights are random: size is all)."""
    device = torch.device(device)
    model = VeerNet(config).to(device).train()
    peaks = [_probe_peak(model, config, device, amp_dtype, [size]) for size in sizes]
    pixels = [height * width for height, width in sizes]
    slope = (peaks[1] - peaks[0]) / (pixels[1] - pixels[0])
    intercept = peaks[0] - slope * pixels[0]
    height, width = sizes[1]  # two images, one a grid column narrower: the masked path, same fixed part
    masked = _probe_peak(model, config, device, amp_dtype, [(height, width), (height, width - 32)])
    masked_slope = (masked - intercept) / (2 * height * width)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    fixed = max(intercept, 0.0) + 3 * params  # + AdamW's two moments and grads
    return MemoryModel(device.type, float(fixed), float(slope), (pixels[0], pixels[1]), (peaks[0], peaks[1]),
                       float(masked_slope))


def available_bytes(device: str | torch.device) -> int:
    """Memory the device has for training: free CUDA memory, or the machine's physical RAM."""
    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
