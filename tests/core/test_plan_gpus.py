"""The known-GPU table: a worker's device name or a user's finds its card, a memory size finds the card that
stands for it, and an estimate is the datasheet's FLOP/s times the efficiency over the model's FLOPs per pixel."""

from __future__ import annotations

import pytest

from veernet_core.config import ModelConfig, TrainConfig
from veernet_core.plan_gpus import (
    KNOWN_GPUS,
    Efficiency,
    efficiency_of,
    estimate_rates,
    find_gpu,
    gpu_for_memory,
    model_flops,
)


@pytest.mark.parametrize(("name", "card"), [
    ("cuda:NVIDIA A10G", "NVIDIA A10G"), ("cuda:NVIDIA A10", "NVIDIA A10"), ("cuda:NVIDIA L4", "NVIDIA L4"),
    ("cuda:NVIDIA L40S", "NVIDIA L40S"), ("cuda:Tesla T4", "NVIDIA T4"),
    ("cuda:NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB"), ("cuda:NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB"),
    ("cuda:NVIDIA A100-PCIE-40GB", "NVIDIA A100 40GB"), ("cuda:NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),
    ("cuda:NVIDIA H100 PCIe", "NVIDIA H100 PCIe"), ("cuda:NVIDIA H100 NVL", "NVIDIA H100 NVL"),
    ("cuda:NVIDIA H200", "NVIDIA H200 SXM"), ("cuda:NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
    ("cuda:Tesla V100-SXM2-16GB", "NVIDIA V100 SXM2 16GB"), ("cuda:Tesla V100-PCIE-32GB", "NVIDIA V100 PCIe 32GB"),
    ("a100 80gb", "NVIDIA A100 80GB"), ("h100-pcie", "NVIDIA H100 PCIe"), ("4090", "NVIDIA GeForce RTX 4090"),
])
def test_device_names_find_their_card(name: str, card: str) -> None:
    found = find_gpu(name)
    assert found is not None and found.name == card


@pytest.mark.parametrize("name", ["cpu:AMD EPYC x2", "cuda:Test GPU 24GB", "cuda:NVIDIA L40", "A1000"])
def test_other_devices_are_not_guessed(name: str) -> None:
    assert find_gpu(name) is None


def test_a_memory_size_stands_on_the_slowest_card_of_the_least_memory_that_holds_it() -> None:
    assert [getattr(gpu_for_memory(gb), "name", None) for gb in (16, 23, 24, 40, 48, 80, 141, 200)] == [
        "NVIDIA T4", "NVIDIA A10G", "NVIDIA A10G", "NVIDIA A100 40GB", "NVIDIA L40S", "NVIDIA A100 80GB",
        "NVIDIA H200 NVL", None]
    assert all(gpu.peak_tflops > 0 and gpu.memory_gb > 0 and gpu.source for gpu in KNOWN_GPUS)


def test_an_estimate_is_the_efficiency_of_the_peak_over_the_models_flops_per_pixel() -> None:
    model, gpu = TrainConfig().model, find_gpu("H100 SXM")
    assert gpu is not None
    flops = model_flops(model)
    assert flops.train_per_px > 2 * flops.forward_per_px > 0  # backward costs about twice the forward
    assert model_flops(ModelConfig(widths=(32, 48, 64, 96, 128, 256))).train_per_px > flops.train_per_px
    rates = estimate_rates(gpu, model, Efficiency(0.2, "given", False))
    assert rates["train_px_per_s"] == pytest.approx(0.2 * 989.5e12 / flops.train_per_px)
    assert rates["val_px_per_s"] == pytest.approx(0.2 * 989.5e12 / flops.forward_per_px)
    assert efficiency_of(rates["train_px_per_s"], gpu, model) == pytest.approx(0.2)
