from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from veernet_core.config import ModelConfig
from veernet_core.model import VeerNet, half_or_16


@pytest.mark.parametrize(("height", "width"), [(32, 32), (64, 320), (96, 1024), (64, 2080)])
def test_output_shape_follows_input(small_model_config: ModelConfig, height: int, width: int) -> None:
    model = VeerNet(small_model_config)
    out = model(torch.rand(2, 1, height, width))
    assert out.shape == (2, 3, height, width)


def test_binary_model_has_one_logit(small_model_config: ModelConfig) -> None:
    model = VeerNet(dataclasses.replace(small_model_config, num_classes=2))
    assert model(torch.rand(1, 1, 64, 64)).shape == (1, 1, 64, 64)


@pytest.mark.parametrize(("height", "width"), [(50, 64), (64, 100), (16, 64)])
def test_sizes_off_the_grid_are_refused(small_model_config: ModelConfig, height: int, width: int) -> None:
    with pytest.raises(ValueError, match="multiple of 32"):
        VeerNet(small_model_config)(torch.rand(1, 1, height, width))


def test_half_or_16_rule() -> None:
    assert [half_or_16(c) for c in (4, 8, 16, 24, 32, 48, 64, 128, 256)] == [2, 4, 8, 12, 16, 16, 16, 16, 16]
    for channels in range(2, 300):
        assert channels % half_or_16(channels) == 0


def test_groupnorm_everywhere_batchnorm_nowhere() -> None:
    model = VeerNet(ModelConfig())
    norms = [m for m in model.modules() if isinstance(m, nn.GroupNorm)]
    assert norms, "the model must normalise with GroupNorm"
    assert all(m.num_groups == half_or_16(m.num_channels) for m in norms)
    batch_norms = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)
    assert not any(isinstance(m, batch_norms) for m in model.modules())


def test_five_stride_two_stages_and_two_layer_transformer() -> None:
    model = VeerNet(ModelConfig())
    assert [stage.first.conv.stride for stage in model.stages] == [(2, 2)] * 5
    assert model.bottleneck.encoder is not None and len(model.bottleneck.encoder.layers) == 2
    assert model.bottleneck.encoder.layers[0].self_attn.embed_dim == 128


def test_gradient_checkpointing_changes_nothing_but_memory(small_model_config: ModelConfig) -> None:
    image = torch.rand(2, 1, 64, 128)
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(1)
        model = VeerNet(dataclasses.replace(small_model_config, grad_checkpointing=checkpointing))
        model(image).square().mean().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-5, atol=1e-6)
