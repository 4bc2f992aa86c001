"""The generator's logs as the training loop's dataset: each item rendered on demand from (seed, index)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from veernet_core import synth_factors as factors
from veernet_core.synth import _check_arguments, _check_classes, generate, log_size


class SynthDataset(Dataset[dict[str, Any]]):
    """`size` synthetic logs, each rendered on demand from (seed, index), none with a level in `exclude`."""

    def __init__(self, size: int, scale: float = 1.0, classes: int = 2, seed: int = 0,
                 exclude: tuple[str, ...] = ()) -> None:
        if size < 0:
            raise ValueError(f"dataset size must be non-negative, got {size}")
        _check_arguments(seed, 0, scale)
        _check_classes(classes)
        factors.check_exclude(exclude)
        self.size, self.scale, self.classes, self.seed = size, scale, classes, seed
        self.exclude = tuple(exclude)
        self._sizes: list[tuple[int, int]] | None = None

    def __len__(self) -> int:
        return self.size

    def sizes(self) -> list[tuple[int, int]]:
        """(height, width) of every item, without rendering any."""
        if self._sizes is None:
            self._sizes = [log_size(self.seed, i, self.scale) for i in range(self.size)]
        return list(self._sizes)

    def __getitem__(self, i: int) -> dict[str, Any]:
        if not 0 <= i < self.size:
            raise IndexError(f"index {i} out of range for a synthetic dataset of {self.size}")
        log = generate(self.seed, i, self.scale, self.classes, self.exclude)
        image = torch.from_numpy(log.image).to(torch.float32).div_(255.0).unsqueeze(0)
        return {"image": image, "mask": torch.from_numpy(log.mask.astype(np.int64)), "index": i}
