"""`veernet worker --gpus`: the indices given, or `all` found the way a GPU box or container shows them.

The discovery reads real inputs: an `nvidia-smi` executable on PATH (here a script printing what the driver's
prints, since this machine has no GPU), device files in a directory, and the environment.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from api.cli.gpus import parse_gpus
from api.cli.processes import celery_node, worker_processes

# `nvidia-smi -L` on an 8-GPU box, the last GPU split into MIG instances (listed under their GPU).
EIGHT_GPUS = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08x}-1b2c-3d4e-5f60-718293a4b5c6)\n"
                     for i in range(8))
EIGHT_GPUS += "  MIG 3g.40gb     Device  0: (UUID: MIG-5c1b1a2e-90d5-5b0a-a3a1-1ee2c6b4d0f1)\n"
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
             "latest NVIDIA driver is installed and running.\n")


def nvidia_smi(tmp_path: Path, stdout: str, exit_status: int = 0) -> dict[str, str]:
    """An environment whose PATH has only an `nvidia-smi` that prints ``stdout`` for `-L`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "stdout").write_text(stdout)
    script = bin_dir / "nvidia-smi"
    script.write_text(f'#!/bin/sh\n[ "$1" = "-L" ] || exit 2\ncat "{bin_dir / "stdout"}"\nexit {exit_status}\n')
    script.chmod(0o755)
    return {"PATH": str(bin_dir)}


def device_files(tmp_path: Path, *names: str) -> Path:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in names:
        (dev / name).touch()
    return dev


def test_indices_given_are_taken_as_they_are() -> None:
    assert parse_gpus("0,1") == ["0", "1"]
    assert parse_gpus(" 3 , 5 ") == ["3", "5"]


@pytest.mark.parametrize("text", ["", "0,0", "a", "0;1", "-1"])
def test_bad_indices_say_what_to_give(text: str) -> None:
    with pytest.raises(ValueError, match=r"distinct GPU indices like 0,1, or all"):
        parse_gpus(text)


def test_all_is_every_gpu_nvidia_smi_lists(tmp_path: Path) -> None:
    env = nvidia_smi(tmp_path, EIGHT_GPUS)
    assert parse_gpus("all", env, device_files(tmp_path)) == [str(i) for i in range(8)]


def test_all_on_a_one_gpu_container(tmp_path: Path) -> None:
    """Inside a container the toolkit's nvidia-smi lists the reserved GPU as 0, whatever its host number."""
    env = nvidia_smi(tmp_path, "GPU 0: NVIDIA A10G (UUID: GPU-3f5e0f14-62e8-5d5c-2b3d-9d6f1c0e7a21)\n")
    assert parse_gpus("all", env, device_files(tmp_path, "nvidia5", "nvidiactl")) == ["0"]


def test_a_failing_driver_is_reported_with_nvidia_smis_own_words(tmp_path: Path) -> None:
    env = nvidia_smi(tmp_path, NO_DRIVER, exit_status=9)
    with pytest.raises(ValueError, match=r"nvidia-smi -L` failed: NVIDIA-SMI has failed because it couldn't "
                                         r"communicate with the NVIDIA driver.*--gpus 0,1"):
        parse_gpus("all", env, device_files(tmp_path, "nvidia0"))


def test_a_box_whose_driver_sees_no_gpu_is_told_to_use_the_cpu(tmp_path: Path) -> None:
    env = nvidia_smi(tmp_path, "No devices were found\n", exit_status=6)
    with pytest.raises(ValueError, match=r"found no GPU.*veernet worker --cpu"):
        parse_gpus("all", env, device_files(tmp_path))


def test_without_nvidia_smi_the_device_files_are_counted(tmp_path: Path) -> None:
    """A container given GPUs 2 and 6 of its host, without the toolkit's utility capability: CUDA numbers them 0, 1."""
    dev = device_files(tmp_path, "nvidia2", "nvidia6", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
                       "nvidia-modeset", "null")
    assert parse_gpus("all", {"PATH": str(tmp_path / "empty")}, dev) == ["0", "1"]


def test_a_machine_with_no_gpu_at_all_is_told_to_use_the_cpu(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"found no GPU.*NVIDIA Container Toolkit.*veernet worker --cpu"):
        parse_gpus("all", {"PATH": str(tmp_path / "empty")}, device_files(tmp_path, "null", "nvidiactl"))


def test_cuda_visible_devices_set_by_the_operator_wins(tmp_path: Path) -> None:
    env = nvidia_smi(tmp_path, EIGHT_GPUS)
    assert parse_gpus("all", {**env, "CUDA_VISIBLE_DEVICES": "2,3"}, device_files(tmp_path)) == ["2", "3"]


@pytest.mark.parametrize(("value", "message"), [
    ("", r"CUDA_VISIBLE_DEVICES is '', which hides every GPU; unset it"),
    ("GPU-0000aaaa-1b2c", r"CUDA_VISIBLE_DEVICES, which is 'GPU-0000aaaa-1b2c': set it to distinct GPU indices"),
    ("-1", r"set it to distinct GPU indices like 0,1, or unset it"),
])
def test_a_cuda_visible_devices_that_names_no_gpu_index_says_what_to_fix(tmp_path: Path, value: str,
                                                                          message: str) -> None:
    env = nvidia_smi(tmp_path, EIGHT_GPUS)
    with pytest.raises(ValueError, match=message):
        parse_gpus("all", {**env, "CUDA_VISIBLE_DEVICES": value}, device_files(tmp_path))


def test_one_celery_worker_per_gpu_found_each_seeing_only_its_own(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    gpus = parse_gpus("all", nvidia_smi(tmp_path, EIGHT_GPUS), device_files(tmp_path))
    children = worker_processes(gpus, "train")
    assert [child.env["CUDA_VISIBLE_DEVICES"] for child in children] == [str(i) for i in range(8)]
    # index i is the GPU nvidia-smi calls i: CUDA's own default order puts the fastest first
    assert {child.env["CUDA_DEVICE_ORDER"] for child in children} == {"PCI_BUS_ID"}
    host = socket.gethostname()
    assert [celery_node(child) for child in children] == [f"train-gpu{i}@{host}" for i in range(8)]
    # Training workers preload torch and the library; only inference workers also load the compiled tracer.
    assert {child.env["VEERNET_PRELOAD"] for child in children} == {"1"}
    assert [child.env["VEERNET_PRELOAD"] for child in worker_processes(None, "segment")] == ["segment"]
