"""Padding never changes an image's loss or gradients; accumulation never changes the update."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from veernet_core.config import ModelConfig, TrainConfig
from veernet_core.data import model_extents, pad_collate
from veernet_core.losses import LossWeights, step_loss
from veernet_core.model import VeerNet
from veernet_core.sampler import BucketBatchSampler, Step
from veernet_core.trainer import Trainer


def _item(index: int, height: int, width: int, classes: int = 3) -> dict[str, object]:
    g = torch.Generator().manual_seed(index)
    image = torch.rand(1, height, width, generator=g)
    mask = torch.randint(0, classes, (height, width), generator=g) * (torch.rand(height, width, generator=g) < 0.1)
    return {"image": image, "mask": mask, "index": index}


def _loss_and_grads(model: VeerNet, items: list[dict[str, object]], weights: LossWeights) -> tuple[float, torch.Tensor]:
    """Loss and gradients of the FIRST item only, whatever else is padded into its batch."""
    batch = pad_collate(items)
    valid = batch["valid"].clone()
    valid[1:] = 0  # the companions are in the batch, but not in the loss
    h, w = batch["sizes"][0].tolist()
    model.zero_grad()
    logits = model(batch["image"], model_extents(batch))
    loss = step_loss(logits, batch["target"], valid, h * w, 1, weights)
    loss.backward()
    return float(loss.detach()), torch.cat([p.grad.flatten() for p in model.parameters()])


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize(("size", "wider"), [((64, 320), (96, 704)), ((50, 333), (64, 1000))])
def test_padding_invariance(small_model_config: ModelConfig, classes: int,
                            size: tuple[int, int], wider: tuple[int, int]) -> None:
    model = VeerNet(dataclasses.replace(small_model_config, num_classes=classes))
    weights = LossWeights()
    item = _item(1, *size, classes=classes)
    alone = _loss_and_grads(model, [item], weights)
    padded = _loss_and_grads(model, [item, _item(2, *wider, classes=classes)], weights)
    assert padded[0] == pytest.approx(alone[0], rel=1e-5)
    # float32 sums over differently shaped tensors reorder additions: compare at 1e-4 of the largest gradient
    scale = float(alone[1].abs().max())
    torch.testing.assert_close(padded[1], alone[1], rtol=1e-3, atol=1e-4 * scale)


def test_padded_pixels_get_exactly_zero_gradient(small_model_config: ModelConfig) -> None:
    model = VeerNet(small_model_config)
    batch = pad_collate([_item(1, 64, 320), _item(2, 64, 640)])
    image = batch["image"].requires_grad_(True)
    step_loss(model(image, model_extents(batch)), batch["target"], batch["valid"], 64 * 960, 2).backward()
    assert image.grad is not None
    assert torch.count_nonzero(image.grad[0, :, :, 320:]) == 0
    assert torch.count_nonzero(image.grad[0, :, :, :320]) > 0


class _Items(torch.utils.data.Dataset):
    def __init__(self, sizes: list[tuple[int, int]]) -> None:
        self._sizes = sizes

    def __len__(self) -> int:
        return len(self._sizes)

    def sizes(self) -> list[tuple[int, int]]:
        return self._sizes

    def __getitem__(self, i: int) -> dict[str, object]:
        return _item(i, *self._sizes[i])


def _gradient(config: TrainConfig, sizes: list[tuple[int, int]], split: list[list[int]]) -> tuple[float, torch.Tensor]:
    """Loss and accumulated gradient of one step over images 0..15 cut into the given micro-batches."""
    sampler = BucketBatchSampler(dict(enumerate(sizes)), 16, 0, 16, 0)
    trainer = Trainer(config, torch.device("cpu"), sampler, 0, LossWeights())
    step = Step(split, 16, sum(h * w for h, w in sizes))
    loss = trainer.accumulate(step, [pad_collate([_Items(sizes)[i] for i in mb]) for mb in split])
    return loss, torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])


@pytest.mark.usefixtures("one_intra_op_thread")
def test_accumulation_equivalence(small_model_config: ModelConfig) -> None:
    sizes = [(48 + (i % 3) * 8, 256 + 32 * i) for i in range(16)]
    config = TrainConfig(model=small_model_config)
    loss_16, one_by_16 = _gradient(config, sizes, [list(range(16))])
    loss_4, four_by_4 = _gradient(config, sizes, [list(range(i, i + 4)) for i in range(0, 16, 4)])
    loss_1, sixteen_by_1 = _gradient(config, sizes, [[i] for i in range(16)])
    assert loss_4 == pytest.approx(loss_16, rel=1e-5) and loss_1 == pytest.approx(loss_16, rel=1e-5)
    scale = float(one_by_16.abs().max())
    assert scale > 0
    torch.testing.assert_close(four_by_4, one_by_16, rtol=1e-3, atol=1e-4 * scale)
    torch.testing.assert_close(sixteen_by_1, one_by_16, rtol=1e-3, atol=1e-4 * scale)


def test_the_loss_is_the_mean_over_real_pixels(small_model_config: ModelConfig) -> None:
    """Doubling one image's padding changes nothing; the pixel term weighs images by their real pixels."""
    model = VeerNet(dataclasses.replace(small_model_config, num_classes=2))
    items = [_item(1, 64, 320, classes=2), _item(2, 64, 640, classes=2)]
    batch = pad_collate(items)
    logits = model(batch["image"], model_extents(batch))
    weights = LossWeights(pixel_weight=1.0)
    joint = step_loss(logits, batch["target"], batch["valid"], 64 * 960, 2, weights)
    per_image = []
    for i in range(2):
        single = pad_collate([items[i]])
        out = model(single["image"], model_extents(single))
        per_image.append(step_loss(out, single["target"], single["valid"], 64 * 960, 2, weights))
    assert joint.item() == pytest.approx((per_image[0] + per_image[1]).item(), rel=1e-5)
