"""Bucketed, resumable, sharded batching: each epoch's optimiser steps.

An epoch's steps are a pure function of (seed, epoch): a list of optimiser steps, each holding
exactly ``effective_batch`` images of similar size (sorted by aligned height, then aligned width,
random order within a grid cell), split across data-parallel ranks and then into physical
micro-batches whose padded pixels fit the pixel budget. Resuming at (epoch, step) replays the
same steps from that step.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from veernet_core.data import align, padded_pixels


@dataclass(frozen=True)
class Step:
    """One optimiser step for this rank: its micro-batches and the whole group's totals."""

    micro_batches: list[list[int]]
    group_images: int  # images in the step over all ranks: the effective batch
    group_pixels: int  # real pixels in the step over all ranks: the loss divides by this


class BucketBatchSampler:
    def __init__(self, sizes: dict[int, tuple[int, int]], effective_batch: int = 16,
                 pixel_budget: int = 0, max_physical_batch: int = 16, seed: int = 0,
                 rank: int = 0, world_size: int = 1) -> None:
        if effective_batch % world_size:
            raise ValueError(f"effective_batch {effective_batch} must be divisible by world_size {world_size}")
        if len(sizes) < effective_batch:
            raise ValueError(f"{len(sizes)} images cannot fill one step of {effective_batch}")
        self.sizes = dict(sizes)
        self.indices = sorted(self.sizes)
        self.effective_batch, self.pixel_budget = effective_batch, pixel_budget
        self.max_physical_batch, self.seed = max_physical_batch, seed
        self.rank, self.world_size = rank, world_size
        self.epoch, self.step = 0, 0
        self._steps_cache: tuple[int, list[Step]] | None = None

    @property
    def steps_per_epoch(self) -> int:
        """Whole steps only: the few images left over are different ones every epoch."""
        return len(self.indices) // self.effective_batch

    def groups(self, epoch: int) -> list[list[int]]:
        """The epoch's groups of `effective_batch` similar-size images, in shuffled order."""
        rng = np.random.default_rng([self.seed, epoch])
        idx = np.array(self.indices)
        spare = len(idx) - self.steps_per_epoch * self.effective_batch
        if spare:
            idx = np.delete(idx, rng.choice(len(idx), size=spare, replace=False))
        heights = np.array([align(self.sizes[i][0]) for i in idx])
        widths = np.array([align(self.sizes[i][1]) for i in idx])
        order = np.lexsort((rng.random(len(idx)), widths, heights))
        groups = idx[order].reshape(-1, self.effective_batch)
        return [groups[g].tolist() for g in rng.permutation(len(groups))]

    def split(self, images: list[int]) -> list[list[int]]:
        """Contiguous micro-batches of the size-sorted images: as few as the pixel budget and
        `max_physical_batch` allow, and among those the cut with the least padding (a small DP)."""
        n = len(images)
        hs = [align(self.sizes[i][0]) for i in images]
        ws = [align(self.sizes[i][1]) for i in images]
        inf = (n + 1, 0)
        best: list[tuple[int, int]] = [(0, 0)] + [inf] * n  # best[j]: (batches, padded px) for images[:j]
        cut = [0] * (n + 1)
        for j in range(1, n + 1):
            max_h = max_w = 0
            for i in range(j - 1, max(-1, j - 1 - self.max_physical_batch), -1):
                max_h, max_w = max(max_h, hs[i]), max(max_w, ws[i])
                padded = (j - i) * max_h * max_w
                if self.pixel_budget and padded > self.pixel_budget and j - i > 1:
                    break
                candidate = (best[i][0] + 1, best[i][1] + padded)
                if candidate < best[j]:
                    best[j], cut[j] = candidate, i
        batches, j = [], n
        while j:
            batches.append(images[cut[j]:j])
            j = cut[j]
        return batches[::-1]

    def epoch_steps(self, epoch: int) -> list[Step]:
        if self._steps_cache and self._steps_cache[0] == epoch:
            return self._steps_cache[1]
        steps = []
        for group in self.groups(epoch):
            mine = group[self.rank::self.world_size]
            pixels = sum(self.sizes[i][0] * self.sizes[i][1] for i in group)
            steps.append(Step(self.split(mine), len(group), pixels))
        self._steps_cache = (epoch, steps)
        return steps

    def padded_pixels(self, step: Step) -> int:
        """Pixels of this rank's padded micro-batches in `step`: what its forward and backward passes process."""
        return sum(padded_pixels(self.sizes, mb) for mb in step.micro_batches)

    def set_position(self, epoch: int, step: int) -> None:
        self.epoch, self.step = epoch, step

    def __iter__(self) -> Iterator[list[int]]:
        """Micro-batches from the current position to the end of the current epoch."""
        for step in self.epoch_steps(self.epoch)[self.step:]:
            yield from step.micro_batches

    def __len__(self) -> int:
        return sum(len(s.micro_batches) for s in self.epoch_steps(self.epoch)[self.step:])

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "step": self.step, "seed": self.seed,
                "effective_batch": self.effective_batch, "world_size": self.world_size}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state["seed"] != self.seed or state["effective_batch"] != self.effective_batch:
            raise ValueError("checkpoint's sampler was built with another seed or effective batch")
        self.set_position(int(state["epoch"]), int(state["step"]))


def validation_batches(indices: list[int], sizes: list[tuple[int, int]], pixel_budget: int,
                       max_batch: int) -> list[list[int]]:
    """Size-sorted, budget-bounded batches in a fixed order."""
    ordered = sorted(indices, key=lambda i: (align(sizes[i][0]), align(sizes[i][1]), i))
    batches: list[list[int]] = []
    for i in ordered:
        h, w = align(sizes[i][0]), align(sizes[i][1])  # sorted: the newest image is the largest
        if batches and len(batches[-1]) < max_batch and (
                not pixel_budget or (len(batches[-1]) + 1) * h * w <= pixel_budget):
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches
