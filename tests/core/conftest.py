from __future__ import annotations

import pytest
import torch

from veernet_core.config import ModelConfig

# A narrow VeerNet: the same architecture at a fraction of the compute, so core tests stay fast.
SMALL = ModelConfig(widths=(8, 8, 16, 16, 32, 32), transformer_heads=2, transformer_ff=64)


@pytest.fixture
def small_model_config() -> ModelConfig:
    return SMALL


@pytest.fixture(autouse=True)
def _deterministic() -> None:
    torch.manual_seed(0)
