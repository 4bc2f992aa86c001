"""The planner's bounded layout: what sampling costs in accuracy against the exact layout, and that the work
it does (sizes read, steps split) stays bounded however large the run."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import veernet_core.plan_layout as plan_layout
from veernet_core.config import TrainConfig
from veernet_core.plan_layout import MAX_STRATA, SIZE_SAMPLE, Size, SynthSizes, layout
from veernet_core.synth import log_size

N = 20_000  # large enough to sample, small enough to lay out exactly as well
SIZES = [log_size(0, i, 1.0) for i in range(N)]


def exact_layout(config: TrainConfig, sizes: list[Size], budget: int,
                 monkeypatch: pytest.MonkeyPatch) -> plan_layout.Layout:
    with monkeypatch.context() as patch:
        for name in ("SPLIT_WORK", "EXACT_PLAN_IMAGES", "STAND_IN_IMAGES"):
            patch.setattr(plan_layout, name, 10**12)
        return layout(config, sizes, budget)


@pytest.mark.parametrize(("batch", "physical", "budget"), [
    (16, 16, 14_000_000),  # a 24 GiB GPU's budget at full scale
    (16, 16, 0),  # no budget: whole groups
    (64, 8, 5_000_000),  # accumulation over many micro-batches
    (256, 64, 60_000_000),  # few, large steps: few strata
])
def test_a_sampled_layout_is_within_its_documented_error_of_the_exact_one(
        batch: int, physical: int, budget: int, monkeypatch: pytest.MonkeyPatch) -> None:
    config = TrainConfig.from_dict({"epochs": 1, "effective_batch": batch, "max_physical_batch": physical,
                                    "data": {"dataset_size": N}})
    exact = exact_layout(config, SIZES, budget, monkeypatch)
    assert exact.exact and exact.sampled_steps == 0
    for sampled in (layout(config, SynthSizes(N, 1.0, 0), budget), layout(config, SIZES, budget)):
        assert sampled.sampled_steps > 0 or sampled.sampled_sizes == 0
        assert (sampled.steps_per_epoch, sampled.train_images, sampled.val_images) == (
            exact.steps_per_epoch, exact.train_images, exact.val_images)
        assert sampled.train_padded_px == pytest.approx(exact.train_padded_px, rel=0.01)
        assert sampled.train_real_px == pytest.approx(exact.train_real_px, rel=0.01)
        assert sampled.micro_batches == pytest.approx(exact.micro_batches, rel=0.02)
        assert sampled.val_padded_px == pytest.approx(exact.val_padded_px, rel=0.015)
        assert sampled.largest_micro_batch_px == pytest.approx(exact.largest_micro_batch_px, rel=0.01)


class CountedSizes:
    """SynthSizes that counts the sizes read."""

    def __init__(self, images: int) -> None:
        self.sizes, self.read_count = SynthSizes(images, 1.0, 0), 0

    def __len__(self) -> int:
        return len(self.sizes)

    def read(self, indices: Sequence[int]) -> list[Size]:
        self.read_count += len(indices)
        return self.sizes.read(indices)


@pytest.mark.parametrize(("images", "batch", "physical"), [(1_000_000, 16, 16), (100_000, 1024, 1024),
                                                           (100_000, 1, 1), (100_000, 2, 1024)])
def test_the_work_is_bounded_whatever_the_run(images: int, batch: int, physical: int) -> None:
    config = TrainConfig.from_dict({"epochs": 1000, "effective_batch": batch, "max_physical_batch": physical,
                                    "data": {"dataset_size": images}})
    sizes = CountedSizes(images)
    found = layout(config, sizes, 0)
    assert sizes.read_count <= SIZE_SAMPLE and found.sampled_sizes == SIZE_SAMPLE
    assert 1 <= found.sampled_steps <= MAX_STRATA and not found.exact
    assert found.steps_per_epoch == (images - round(images * 0.2)) // batch
    assert found.micro_batches >= found.steps_per_epoch * 1000
