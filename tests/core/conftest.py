from __future__ import annotations

from collections.abc import Iterator

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


@pytest.fixture
def one_intra_op_thread() -> Iterator[None]:
    """Torch's CPU ops on one thread for the test, as the service's workers train (OMP_NUM_THREADS=1): on a shared
    2-core machine OpenMP threads spinning against each other make a training step ~10x slower. What such a test
    compares is computed in this process, all of it with the same one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
