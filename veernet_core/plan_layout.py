"""What a run's data and the sampler make of it: steps, micro-batches, padded pixels. No speed involved.

The layout is the training loop's own: the run's split (``split_indices``) and the sampler's own
groups and micro-batches (``BucketBatchSampler``). Its cost grows with the run, so the planner
bounds the work and says when it sampled:

- **Every epoch** is planned when the run has at most ``EXACT_PLAN_IMAGES`` training images over all
  epochs; otherwise the first two epochs stand for all (epochs differ only in their grouping).
- **Every step** of those epochs is split into micro-batches when that costs at most ``SPLIT_WORK``
  (the sampler's split is a small dynamic programme of about images x min(effective batch, max
  physical batch) steps). Otherwise a stratified sample of the first epoch's steps is split: the
  steps in order of their images' pixels, cut into equal strata, each represented by its middle
  step, and the step of the most pixels split besides (for the peak micro-batch only). Totals are the sample's means
  times the run's steps, which are exact.
- **Sizes**: a synthetic set's sizes cost a seeded generator each (``LazySizes``). Past
  ``SIZE_SAMPLE`` images, the set's first ``SIZE_SAMPLE`` are read, and they, repeated in turn,
  stand for the set (the generator draws each image's size independently, so they are a random
  sample of the set's distribution, and the same one, cached, for every run of that seed and scale;
  repeating it keeps the density of sizes that decides how much a group of neighbours in size order
  pads). A set of known sizes past ``STAND_IN_IMAGES`` training images is
  grouped from a random subset of that many (the sampler's grouping is Python over every image);
  at that density a group's neighbours in size order sit within one 32-px cell of width as they do
  in the whole set. Validation is laid out over a stand-in the same way and scaled to its images.

What sampling costs in accuracy: steps and images are always exact. Pixels carry the size sample's
error, one standard error 0.4 % (a log's pixels vary by 35 % about their mean, over 8,192 logs);
against the exact layout of 20,000-log runs (tests/core/test_plan_layout.py asserts 1 %) padded and
real pixels came within 0.6 %, micro-batches within 1 % (asserted 2 %), validation within 0.5 %.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

import numpy as np

from veernet_core.config import TrainConfig
from veernet_core.data import align, padded_pixels, split_arrays
from veernet_core.memory import MemoryModel
from veernet_core.sampler import BucketBatchSampler, validation_batches
from veernet_core.synth import log_size

EXACT_PLAN_IMAGES = 20_000  # above this many training images over all epochs, two epochs stand for all
SAMPLED_EPOCHS = 2
SPLIT_WORK = 250_000  # the split's inner steps the planner may spend (about 0.4 s on one loaded core)
SIZE_SAMPLE = 8192  # sizes read at most from a lazy set (a seeded generator each: about 30 us), cached
STAND_IN_IMAGES = 16_384  # images a sampled layout groups (the sampler's grouping is Python over every image)
MAX_STRATA = 256  # steps split at most to stand for an epoch's
WIDTH_BUCKETS = 8  # size buckets of the report: equal ranges of aligned width (depth) over the dataset
MIB = 2**20
Size = tuple[int, int]


@runtime_checkable
class LazySizes(Protocol):
    """A dataset's (height, width) per image, each computed on demand (too costly to read them all)."""

    def __len__(self) -> int: ...

    def read(self, indices: Sequence[int]) -> list[Size]: ...


@dataclass(frozen=True)
class SynthSizes:
    """The synthetic set's sizes, from the generator's own ``log_size`` (no log rendered); its last `pages`
    items are page tracks (`data.page_share`), sized from their pages' layouts (no page drawn)."""

    images: int
    scale: float
    seed: int
    pages: int = 0

    def __len__(self) -> int:
        return self.images

    def read(self, indices: Sequence[int]) -> list[Size]:
        logs = self.images - self.pages
        return [_synth_size(self.seed, int(i), self.scale) if i < logs
                else _page_size(self.seed, int(i) - logs, self.scale) for i in indices]


@lru_cache(maxsize=65536)
def _synth_size(seed: int, index: int, scale: float) -> Size:
    return log_size(seed, index, scale)


@lru_cache(maxsize=65536)
def _page_size(seed: int, index: int, scale: float) -> Size:
    from veernet_core.page_dataset import item_size

    return item_size(seed, index, scale)


def synth_sizes(config: TrainConfig) -> SynthSizes:
    data = config.data
    return SynthSizes(data.dataset_size, data.scale, data.seed, data.page_items)


@dataclass(frozen=True)
class Bucket:
    width_from: int  # the bucket's range of aligned widths starts here, px
    width_to: int  # the widest aligned width in it
    height_max: int
    images: int
    physical_batch: int  # images of the bucket's largest size that fit the pixel budget in one pass
    accumulation_steps: int  # passes per optimiser step at that physical batch
    peak_mb: float | None  # predicted peak at that physical batch


@dataclass(frozen=True)
class Layout:
    """What the config's data and the sampler make of one run: no speed involved."""

    train_images: int
    val_images: int
    steps_per_epoch: int
    micro_batches: int  # over the whole run
    train_padded_px: int  # over the whole run
    train_real_px: int
    val_padded_px: int  # one validation pass
    largest_micro_batch_px: int
    micro_batch_extents: frozenset[tuple[tuple[int, int], ...]]  # each distinct micro-batch's aligned sizes, in order
    accumulation_mean: float
    accumulation_max: int
    widest: tuple[int, int]  # (height, width) of the widest log read, as it is
    exact: bool  # every epoch's plan was computed (else two epochs, or a sample of steps, stand for all)
    sizes_read: tuple[Size, ...] = ()  # the sizes the layout read: all of them, or the sample
    sampled_steps: int = 0  # steps split to stand for all (0: every planned step was split)
    sampled_sizes: int = 0  # sizes read to stand for the set (0: every image's size was read)

    @property
    def padding_waste(self) -> float:
        return 1.0 - self.train_real_px / self.train_padded_px if self.train_padded_px else 0.0


def pixel_budget(config: TrainConfig, memory: MemoryModel | None, memory_bytes: float | None) -> int:
    """The training loop's rule: the config's budget, else the memory model's for memory_fraction."""
    if config.pixel_budget or memory is None or memory_bytes is None:
        return config.pixel_budget
    return memory.pixel_budget(memory_bytes * config.memory_fraction)


def layout(config: TrainConfig, sizes: Sequence[Size] | LazySizes, budget: int) -> Layout:
    """The run's steps, micro-batches and padded pixels, from the same split and sampler as train()."""
    train, val = split_arrays(len(sizes), config.data.val_fraction, config.data.seed)
    exact = config.epochs * len(train) <= EXACT_PLAN_IMAGES
    epochs = config.epochs if exact else min(SAMPLED_EPOCHS, config.epochs)
    work = epochs * len(train) * _split_width(config)
    lazy = isinstance(sizes, LazySizes)
    if (lazy and len(sizes) > SIZE_SAMPLE) or work > SPLIT_WORK or len(train) > STAND_IN_IMAGES:
        return _sampled_layout(config, sizes, budget, train, val)
    known = sizes.read(range(len(sizes))) if isinstance(sizes, LazySizes) else list(sizes)
    return _full_layout(config, known, budget, sorted(train.tolist()), sorted(val.tolist()), epochs, exact)


def _split_width(config: TrainConfig) -> int:
    """Inner steps of the sampler's split per image, at most."""
    return min(config.effective_batch, config.max_physical_batch)


def _full_layout(config: TrainConfig, sizes: list[Size], budget: int, train_idx: list[int], val_idx: list[int],
                 epochs: int, exact: bool) -> Layout:
    sampler = BucketBatchSampler({i: sizes[i] for i in train_idx}, config.effective_batch, budget,
                                 config.max_physical_batch, config.seed)
    steps = [step for e in range(epochs) for step in sampler.epoch_steps(e)]
    micro = [mb for step in steps for mb in step.micro_batches]
    per_step = [len(step.micro_batches) for step in steps]
    factor = config.epochs / epochs
    padded = [padded_pixels(sizes, mb) for mb in micro]
    real = sum(sizes[i][0] * sizes[i][1] for mb in micro for i in mb)
    val_padded = sum(padded_pixels(sizes, b) for b in validation_batches(val_idx, sizes, budget,
                                                                          config.max_physical_batch))
    return Layout(len(train_idx), len(val_idx), sampler.steps_per_epoch, round(len(micro) * factor),
                  round(sum(padded) * factor), round(real * factor), val_padded, max(padded), _extents(sizes, micro),
                  sum(per_step) / len(per_step), max(per_step), _widest(sizes), exact, tuple(sizes))


def _sampled_layout(config: TrainConfig, sizes: Sequence[Size] | LazySizes, budget: int, train: np.ndarray[Any, Any],
                    val: np.ndarray[Any, Any]) -> Layout:
    """As ``_full_layout``, from stand-ins for the set and a stratified sample of steps (module docstring)."""
    rng = np.random.default_rng([config.data.seed, 0x51A3])
    train_sizes, read = _stand_in(sizes, train, rng)
    val_sizes = _stand_in(sizes, val, rng, read if isinstance(sizes, LazySizes) else None)[0]
    sampler = BucketBatchSampler(train_sizes, config.effective_batch, budget, config.max_physical_batch, config.seed)
    groups = sorted(sampler.groups(0), key=lambda group: sum(train_sizes[i][0] * train_sizes[i][1] for i in group))
    strata = max(1, min(len(groups), MAX_STRATA, SPLIT_WORK // (config.effective_batch * _split_width(config)) - 1))
    splits = [_fast_split(sampler, groups[(2 * k + 1) * len(groups) // (2 * strata)]) for k in range(strata)]
    largest = _fast_split(sampler, groups[-1])  # for the peak micro-batch, not the means
    steps = len(train) // config.effective_batch * config.epochs
    padded = np.mean([sum(padded_pixels(train_sizes, mb) for mb in split) for split in splits])
    real = np.mean([sum(train_sizes[i][0] * train_sizes[i][1] for mb in split for i in mb) for split in splits])
    counts = [len(split) for split in splits]
    every = [mb for split in (*splits, largest) for mb in split]
    val_batches = validation_batches(list(val_sizes), val_sizes, budget, config.max_physical_batch)  # type: ignore[arg-type]
    val_padded = sum(padded_pixels(val_sizes, b) for b in val_batches) * len(val) / max(1, len(val_sizes))
    known = read if isinstance(sizes, LazySizes) else list(sizes)
    return Layout(len(train), len(val), len(train) // config.effective_batch, round(float(np.mean(counts)) * steps),
                  round(float(padded) * steps), round(float(real) * steps), round(val_padded),
                  max(padded_pixels(train_sizes, mb) for mb in every), _extents(train_sizes, every),
                  float(np.mean(counts)), max(len(split) for split in (*splits, largest)), _widest(known), False,
                  tuple(known), strata, len(read) if isinstance(sizes, LazySizes) else 0)


def _stand_in(sizes: Sequence[Size] | LazySizes, indices: np.ndarray[Any, Any], rng: np.random.Generator,
              sample: list[Size] | None = None) -> tuple[dict[int, Size], list[Size]]:
    """{label: size} standing for the images ``indices`` (at most STAND_IN_IMAGES), and the sizes read for it.

    Known sizes: a random subset of the images, as they are. Lazy sizes: the set's first SIZE_SAMPLE (or the
    ``sample`` given, from the same set), repeated in turn; labels are then positions, not the images' indices.
    """
    count = min(len(indices), STAND_IN_IMAGES)
    if not isinstance(sizes, LazySizes):
        chosen = sorted((indices if len(indices) <= count else rng.choice(indices, count, replace=False)).tolist())
        return {i: sizes[i] for i in chosen}, [sizes[i] for i in chosen]
    if sample is None:  # the set's first images: a lazy set draws every image's size independently, so they
        sample = sizes.read(range(min(len(sizes), SIZE_SAMPLE)))  # are a random sample, and the same for every run
    if not sample:
        return {}, sample
    return {k: sample[k % len(sample)] for k in range(count)}, sample


def _fast_split(sampler: BucketBatchSampler, group: list[int]) -> list[list[int]]:
    """The sampler's split of one group; a group that fits one micro-batch is one (the split's own answer,
    fewest micro-batches first), without the quadratic search."""
    if len(group) <= sampler.max_physical_batch and (
            not sampler.pixel_budget or padded_pixels(sampler.sizes, group) <= sampler.pixel_budget):
        return [list(group)]
    return sampler.split(group)


def _aligned(size: Size) -> tuple[int, int]:
    return align(size[0]), align(size[1])


def _extents(sizes: Sequence[Size] | dict[int, Size], micro: list[list[int]]) -> frozenset[tuple[Size, ...]]:
    return frozenset(tuple(_aligned(sizes[i]) for i in mb) for mb in micro)


def _widest(sizes: Sequence[Size]) -> Size:
    return max(sizes, key=lambda hw: (hw[1], hw[0]))


def buckets(config: TrainConfig, sizes: Sequence[Size], budget: int, memory: MemoryModel | None,
            images: int | None = None) -> list[Bucket]:
    """Equal ranges of aligned width over the dataset, each with the physical batch its largest size allows.

    ``sizes`` may be a sample of a set of ``images`` images: the counts are scaled up to it.
    """
    aligned = np.array([_aligned(hw) for hw in sizes], dtype=np.int64).reshape(-1, 2)
    low, high = int(aligned[:, 1].min()), int(aligned[:, 1].max())
    step = max(32, align(-(-(high - low) // WIDTH_BUCKETS)))
    scale = (images or len(sizes)) / len(sizes)
    found = []
    for start in range(low, high + 1, step):
        inside = aligned[(aligned[:, 1] >= start) & (aligned[:, 1] < start + step)]
        if not len(inside):
            continue
        height, width = int(inside[:, 0].max()), int(inside[:, 1].max())
        cap = min(config.max_physical_batch, config.effective_batch)
        batch = cap if not budget else max(0, min(cap, budget // (height * width)))
        accumulation = math.ceil(config.effective_batch / batch) if batch else 0
        peak = memory.peak_bytes(max(batch, 1) * height * width) / MIB if memory else None
        found.append(Bucket(start, width, height, round(len(inside) * scale), batch, accumulation, peak))
    return found
