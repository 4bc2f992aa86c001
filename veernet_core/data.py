"""From dataset items to padded batches: the 32-px grid, the validity mask, the train/val split."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from torch import Tensor

GRID = 32  # every side padded to a multiple of it: VeerNet's total downsample (five stride-2 stages)
MIN_SIDE = 32
# On CPU a batch with more padded pixels than this runs as several smaller ones (see
# VeerNet._forward_in_parts): an activation above glibc's 32 MB mmap threshold is fresh pages on
# every allocation, whose page faults cost more than the elementwise work on them, and each run is
# cropped to its own images. 2**17 px keeps the widest activation (the 40-channel concatenation of the
# last decoder block, float32: 20 MiB) under 32 MiB; 2**18 px made it 40 MiB, fresh pages every step.
CPU_PART_PIXELS = 2**17


def align(n: int, grid: int = GRID) -> int:
    """Round up to the grid: the network halves every side five times."""
    return -(-n // grid) * grid


def to_input(pixels: Tensor) -> Tensor:
    """Gray pixels in [0, 1] (paper bright) -> network input where paper is ~0 and ink ~1.

    Padding with zeros then reads as blank paper.
    """
    return 1.0 - pixels


def check_image(height: int, width: int) -> None:
    if height < MIN_SIDE or width < MIN_SIDE:
        raise ValueError(f"image is {height}x{width} px; both sides must be at least {MIN_SIDE} px")


def pad_collate(items: list[dict[str, Any]]) -> dict[str, Tensor]:
    """Pad a mini-batch to its own max height and width rounded up to 32.

    Returns image (N,1,H,W) network input, target (N,H,W) int64, valid (N,H,W) float 0/1 over real
    pixels (the loss multiplies by it), extents (N,2) each image's aligned size (the model masks
    outside it), sizes (N,2) real sizes and index (N,).
    """
    import torch  # here, not at the top: the planner (in the API) uses this module's arithmetic without torch

    sizes = [(int(it["image"].shape[-2]), int(it["image"].shape[-1])) for it in items]
    for h, w in sizes:
        check_image(h, w)
    height = align(max(h for h, _ in sizes))
    width = align(max(w for _, w in sizes))
    n = len(items)
    image = torch.zeros(n, 1, height, width)
    target = torch.zeros(n, height, width, dtype=torch.int64)
    valid = torch.zeros(n, height, width)
    for i, (item, (h, w)) in enumerate(zip(items, sizes, strict=True)):
        image[i, :, :h, :w] = to_input(item["image"].reshape(1, h, w))
        if "mask" in item:
            target[i, :h, :w] = item["mask"]
        valid[i, :h, :w] = 1.0
    extents = torch.tensor([(align(h), align(w)) for h, w in sizes], dtype=torch.int64)
    return {
        "image": image,
        "target": target,
        "valid": valid,
        "extents": extents,
        "sizes": torch.tensor(sizes, dtype=torch.int64),
        "index": torch.tensor([int(it.get("index", -1)) for it in items], dtype=torch.int64),
    }


def model_extents(batch: dict[str, Tensor]) -> Tensor | None:
    """The extents to give the model, or None when every image fills the padded tensor (faster)."""
    _, _, height, width = batch["image"].shape
    extents = batch["extents"]
    if bool((extents[:, 0] == height).all()) and bool((extents[:, 1] == width).all()):
        return None
    return extents


def split_indices(n: int, val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """A fixed train/validation split, a pure function of (n, val_fraction, seed)."""
    train, val = split_arrays(n, val_fraction, seed)
    return sorted(train.tolist()), sorted(val.tolist())


def split_arrays(n: int, val_fraction: float, seed: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``split_indices``'s split as arrays, unsorted: what a planner of a large set samples from cheaply."""
    order = np.random.default_rng([seed, 0x5EED]).permutation(n)
    n_val = round(n * val_fraction)
    return order[n_val:], order[:n_val]


def padded_pixels(sizes: dict[int, tuple[int, int]] | list[tuple[int, int]], batch: list[int]) -> int:
    """Pixels of the batch's padded tensor: its images times their largest height and width, each aligned."""
    return len(batch) * align(max(sizes[i][0] for i in batch)) * align(max(sizes[i][1] for i in batch))


def padding_waste(sizes: dict[int, tuple[int, int]] | list[tuple[int, int]],
                  batches: list[list[int]]) -> float:
    """Share of padded pixels that are not image pixels, over the given physical batches."""
    real = sum(sizes[i][0] * sizes[i][1] for batch in batches for i in batch)
    padded = sum(padded_pixels(sizes, batch) for batch in batches)
    return 1.0 - real / padded if padded else 0.0


def batch_parts(sizes: list[tuple[int, int]], max_pixels: int) -> list[tuple[int, int, int, int]]:
    """Runs [start, end) of consecutive images whose padded size (count x max height x max width)
    stays within `max_pixels` (a single image may exceed it), with each run's max height and width."""
    runs: list[tuple[int, int, int, int]] = []
    start = 0
    while start < len(sizes):
        end, (part_h, part_w) = start + 1, sizes[start]
        while end < len(sizes):
            grown_h, grown_w = max(part_h, sizes[end][0]), max(part_w, sizes[end][1])
            if (end + 1 - start) * grown_h * grown_w > max_pixels:
                break
            end, part_h, part_w = end + 1, grown_h, grown_w
        runs.append((start, end, part_h, part_w))
        start = end
    return runs
