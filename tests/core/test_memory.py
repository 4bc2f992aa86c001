"""The memory model per micro-batch (its path, its CPU runs), and that the masked probe measures the masked path."""

from __future__ import annotations

import pytest
import torch

from veernet_core.config import ModelConfig
from veernet_core.data import CPU_PART_PIXELS
from veernet_core.memory import MemoryModel
from veernet_core.memory_probe import _probe_peak, probe_memory
from veernet_core.model import VeerNet

MEMORY = MemoryModel("cpu", fixed_bytes=1000.0, bytes_per_pixel=10.0, probe_pixels=(1, 2), probe_peaks=(1, 2),
                     masked_bytes_per_pixel=8.0)
TINY = ModelConfig(widths=(4, 4, 8, 8, 8, 16), transformer_heads=1, transformer_ff=16)


def test_a_batch_that_fills_its_tensor_runs_unmasked_and_a_mixed_one_masked() -> None:
    assert MEMORY.batch_peak_bytes([(32, 640)] * 4) == pytest.approx(1000 + 10 * 4 * 32 * 640)
    assert MEMORY.batch_peak_bytes([(32, 608), (32, 640)]) == pytest.approx(1000 + 8 * 2 * 32 * 640)


def test_the_budget_and_the_plain_peak_use_the_larger_slope() -> None:
    assert MEMORY.peak_bytes(100) == pytest.approx(1000 + 10 * 100)
    assert MEMORY.pixel_budget(1000 + 10 * 100) == 100
    wide_mask = MemoryModel("cpu", 0.0, 8.0, (1, 2), (1, 2), masked_bytes_per_pixel=10.0)
    assert wide_mask.pixel_budget(1000) == 100
    assert MemoryModel("cpu", 0.0, 10.0, (1, 2), (1, 2)).batch_peak_bytes([(32, 32), (32, 64)]) == 10 * 2 * 32 * 64


def test_a_large_cpu_batch_counts_its_cropped_runs_not_its_padded_tensor() -> None:
    # Two runs, each within CPU_PART_PIXELS: four 64x512 images that fill theirs, then two 64x1024 (mixed) ones.
    extents = [(64, 512)] * 4 + [(64, 1024), (64, 992)]
    assert 4 * 64 * 512 <= CPU_PART_PIXELS < 5 * 64 * 1024
    expected = 1000 + 10 * 4 * 64 * 512 + 8 * 2 * 64 * 1024
    assert MEMORY.batch_peak_bytes(extents) == pytest.approx(expected)
    on_gpu = MemoryModel("cuda", 1000.0, 10.0, (1, 2), (1, 2), masked_bytes_per_pixel=8.0)
    assert on_gpu.batch_peak_bytes(extents) == pytest.approx(1000 + 8 * 6 * 64 * 1024)  # one masked pass


def test_the_probed_model_predicts_a_mixed_batch_of_another_shape() -> None:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        memory = probe_memory(TINY, "cpu")
        assert memory.masked_bytes_per_pixel is not None
        assert memory.masked_bytes_per_pixel < memory.bytes_per_pixel  # the masked norm keeps fewer tensors
        extents = [(32, 1280), (32, 1248), (32, 1216), (32, 1280)]  # four images, one height, mixed widths
        model = VeerNet(TINY).train()
        measured = _probe_peak(model, TINY, torch.device("cpu"), None, extents)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    predicted = memory.batch_peak_bytes(extents) - 3 * params  # the probe's peak excludes weights and moments
    assert predicted == pytest.approx(measured, rel=0.1)
    unmasked = memory.peak_bytes(4 * 32 * 1280) - 3 * params
    assert abs(unmasked - measured) > abs(predicted - measured)  # the single-image slope would miss it
