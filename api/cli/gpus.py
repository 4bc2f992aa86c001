"""Which GPUs `veernet worker --gpus` runs on: the indices given, or with ``all`` every GPU this machine shows.

Found without torch or CUDA, which the worker's parent process never loads (DESIGN.md), in this order:
``CUDA_VISIBLE_DEVICES`` when it is set (the operator's own choice), else the driver's ``nvidia-smi -L``,
else the GPUs' device files ``/dev/nvidia0``, ``/dev/nvidia1``, ... In a container the NVIDIA Container
Toolkit mounts only the reserved GPUs' device files and its ``nvidia-smi`` lists only them, numbered from
0 whatever their numbers on the host, so ``all`` is the GPUs the container was given.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

NVIDIA_SMI_TIMEOUT_S = 60.0  # with persistence mode off the driver may take many seconds to wake every GPU
GPU_LINE = re.compile(r"GPU (\d+): ")  # `nvidia-smi -L`: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)"
DEVICE_FILE = re.compile(r"nvidia(\d+)")  # not nvidiactl, nvidia-uvm, nvidia-modeset
NO_GPU_HELP = ("On a GPU box, install the NVIDIA driver (in a container: the NVIDIA Container Toolkit, and a GPU "
               "reservation for the service); on a machine without one, run `veernet worker --cpu`.")


def parse_gpus(text: str, environ: Mapping[str, str] | None = None, dev: Path = Path("/dev")) -> list[str]:
    """``"0,1"`` -> ``["0", "1"]``; ``"all"`` -> every GPU visible here. ValueError says what to give instead."""
    if text.strip() == "all":
        return visible_gpus(os.environ if environ is None else environ, dev)
    gpus = [g.strip() for g in text.split(",") if g.strip()]
    if not gpus or any(not g.isdigit() for g in gpus) or len(set(gpus)) != len(gpus):
        raise ValueError(f"--gpus takes distinct GPU indices like 0,1, or all; got {text!r}")
    return gpus


def visible_gpus(environ: Mapping[str, str], dev: Path = Path("/dev")) -> list[str]:
    """The CUDA indices of every GPU visible to a process started with ``environ``; ValueError if none."""
    if "CUDA_VISIBLE_DEVICES" in environ:
        return _from_cuda_visible_devices(environ["CUDA_VISIBLE_DEVICES"])
    listed = _from_nvidia_smi(environ.get("PATH", os.defpath))
    if listed is None:
        listed = _from_device_files(dev)
    if not listed:
        raise ValueError(f"--gpus all found no GPU: nvidia-smi lists none (or is not on PATH) and {dev} holds no "
                         f"nvidiaN device file. {NO_GPU_HELP}")
    return listed


def _from_cuda_visible_devices(value: str) -> list[str]:
    gpus = [g.strip() for g in value.split(",") if g.strip()]
    if not gpus:
        raise ValueError(f"--gpus all found no GPU: CUDA_VISIBLE_DEVICES is {value!r}, which hides every GPU; unset "
                         f"it to use every GPU. {NO_GPU_HELP}")
    if any(not g.isdigit() for g in gpus) or len(set(gpus)) != len(gpus):
        raise ValueError(f"--gpus all runs one worker per GPU of CUDA_VISIBLE_DEVICES, which is {value!r}: set it to "
                         "distinct GPU indices like 0,1, or unset it to use every GPU")
    return gpus


def _from_nvidia_smi(path: str) -> list[str] | None:
    """GPU indices as the driver lists them; None without nvidia-smi; ValueError if it fails."""
    nvidia_smi = shutil.which("nvidia-smi", path=path)
    if nvidia_smi is None:
        return None
    try:
        result = subprocess.run([nvidia_smi, "-L"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise ValueError(f"--gpus all: `{nvidia_smi} -L` did not answer in {NVIDIA_SMI_TIMEOUT_S:.0f} s; check "
                         "the GPUs with nvidia-smi, or give their indices with --gpus 0,1") from exc
    found = [m[1] for line in result.stdout.splitlines() if (m := GPU_LINE.match(line))]
    if result.returncode != 0 and not found:
        said = " ".join((result.stdout + result.stderr).split()) or f"exit status {result.returncode}"
        if "No devices were found" in said:
            return []
        raise ValueError(f"--gpus all: `{nvidia_smi} -L` failed: {said}. Fix the NVIDIA driver, or give the GPUs' "
                         "indices with --gpus 0,1")
    return found


def _from_device_files(dev: Path) -> list[str]:
    """0 .. n-1 for n GPU device files: CUDA numbers the GPUs it sees from 0, whatever the files' numbers."""
    try:
        count = sum(1 for path in dev.iterdir() if DEVICE_FILE.fullmatch(path.name))
    except OSError:
        return []
    return [str(index) for index in range(count)]
