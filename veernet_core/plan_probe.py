"""The planner's measured inputs on a device: the device class, its memory model and a short throughput probe.

The service never probes in the API process: a plan that needs a measurement queues a probe job,
which a training worker runs on its own device (``measure_device``, from worker.probe_runner) in the
fresh process it runs every job in. ``measure_here`` is the same probe for a notebook or a bench on
this machine.

The probe runs the real training code, not a model of it: the run's own dataset (or, on a CPU, for
large logs, the same synthetic generator at a smaller scale so that a probe step stays around
``PROBE_STEP_PIXELS`` padded pixels; a GPU is probed at the run's own sizes, which its rate depends
on), the real sampler, ``Trainer.train_step`` with collate and rendering inside the timing as in
``train()``, real validation passes and a real checkpoint save into a temporary directory. In a
fresh process its start-up (dataset sizes, the memory probe, the model build) and the warm-ups of
the first step and the first validation pass are what the run will pay, not what a process cached.

The memory model is the training loop's own probe on the device (float32, unscaled, as the loop
budgets with it). ``memory_fraction`` (0.8 by default) is the headroom for the CUDA context and
allocator fragmentation, as it is in the training loop.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any

import torch
from torch.utils.data import Dataset, Subset

from veernet_core.checkpoint import LocalStore, SidecarRegistry
from veernet_core.config import ModelConfig, TrainConfig
from veernet_core.data import align
from veernet_core.losses import LossWeights
from veernet_core.memory import MemoryModel
from veernet_core.memory_probe import available_bytes, probe_memory
from veernet_core.plan import SOURCE_PROBE, Throughput
from veernet_core.sampler import BucketBatchSampler, validation_batches
from veernet_core.train import batch_loader, build_dataset
from veernet_core.trainer import Trainer, amp_dtype

PROBE_STEPS = 3  # timed steps after the warm-up: enough to average, short enough to answer a request
PROBE_STEP_PIXELS = 2**20  # a probe step's padded pixels at most (about 1 s on one CPU core)
PROBE_EFFECTIVE_BATCH = 16  # larger effective batches are probed at 16: the rate is per pixel
FRESH_PROBE_TIMEOUT_S = 600  # a probe is a few steps; this only bounds a hung child


def device_class(device: str | torch.device) -> str:
    """What a worker reports about its device: the GPU's name, or the CPU's model and thread count."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return f"cpu:{_cpu_model()} x{torch.get_num_threads()}"


def device_memory_bytes(device: str | torch.device) -> int:
    """The memory the training loop plans its budget from (free CUDA memory, or physical RAM)."""
    return available_bytes(device)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def probe_config(config: TrainConfig, sizes: list[tuple[int, int]], shrink: bool = True) -> TrainConfig:
    """The config the probe trains: a few steps' worth of the run's images, smaller if steps would be large
    (and ``shrink``: a CPU's rate per pixel hardly depends on the step's size, a GPU's does)."""
    batch = min(config.effective_batch, PROBE_EFFECTIVE_BATCH)
    mean_px = sum(align(h) * align(w) for h, w in sizes) / len(sizes)
    scale = config.data.scale
    if shrink and config.data.kind == "synth" and batch * mean_px > PROBE_STEP_PIXELS:
        scale = max(0.01, scale * (PROBE_STEP_PIXELS / (batch * mean_px)) ** 0.5)
    images = batch * (PROBE_STEPS + 1)
    data = replace(config.data, scale=scale, dataset_size=images, val_fraction=0.0)
    return replace(config, data=data, effective_batch=batch, epochs=1, warmup_steps=0)


def probe_throughput(config: TrainConfig, device: str | torch.device, dataset: Dataset[dict[str, Any]],
                     sizes: list[tuple[int, int]], budget: int, startup_s: float, where: str = "") -> Throughput:
    """Padded pixels per second of real training steps and validation passes, and one checkpoint save.

    ``dataset``/``sizes`` are the probe's images (see ``probe_config``); ``startup_s`` is what the caller
    measured of the start-up the run will repeat (dataset sizes, memory probe); building the trainer is
    timed here and added. The first step and the first validation pass are warm-ups: their time beyond
    the steady rate (measured by the passes after them) is what a fresh process pays once for each.
    """
    device = torch.device(device)
    indices = list(range(len(sizes)))
    sampler = BucketBatchSampler(dict(enumerate(sizes)), config.effective_batch, budget,
                                 config.max_physical_batch, config.seed)
    t0 = time.perf_counter()
    trainer = Trainer(config, device, sampler, budget,
                      LossWeights(config.tversky_alpha, config.tversky_beta, config.pixel_loss_weight))
    startup_s += time.perf_counter() - t0
    steps = sampler.epoch_steps(0)[:PROBE_STEPS + 1]
    # Fed as the run feeds its steps: the loop's own DataLoader, with its workers (auto on CUDA), whose
    # start-up falls in the first step; without workers each step renders its own logs.
    loader = batch_loader(dataset, [mb for step in steps for mb in step.micro_batches], config, device, budget)
    times, pixels = [], []
    for step in steps:
        t0 = time.perf_counter()
        trainer.train_step(step, [next(loader) for _ in step.micro_batches])
        times.append(time.perf_counter() - t0)
        pixels.append(sum(_padded(sizes, mb) for mb in step.micro_batches))
    train_rate = sum(pixels[1:]) / sum(times[1:])
    val_idx = indices[:config.effective_batch]
    val_px = sum(_padded(sizes, b) for b in validation_batches(val_idx, sizes, budget, config.max_physical_batch))
    val_times = []
    for _ in range(2):
        t0 = time.perf_counter()
        trainer.validate(dataset, val_idx, sizes)
        val_times.append(time.perf_counter() - t0)
    with tempfile.TemporaryDirectory(prefix="veernet-plan-") as root:
        store = LocalStore(root)
        t0 = time.perf_counter()
        trainer.save(store, SidecarRegistry(store), "", None)
        checkpoint_s = time.perf_counter() - t0
    return Throughput(train_rate, val_px / val_times[1], checkpoint_s, startup_s, SOURCE_PROBE,
                      f"probe{where}: {PROBE_STEPS} training steps after a warm-up on {device_class(device)}",
                      step_warmup_s=max(0.0, times[0] - pixels[0] / train_rate),
                      validation_warmup_s=max(0.0, val_times[0] - val_times[1]))


def _padded(sizes: list[tuple[int, int]], batch: list[int]) -> int:
    return len(batch) * align(max(sizes[i][0] for i in batch)) * align(max(sizes[i][1] for i in batch))


@dataclass(frozen=True)
class Measured:
    """Everything the planner needs about a run on this machine, measured here."""

    sizes: list[tuple[int, int]]
    memory: MemoryModel
    memory_bytes: int
    device_class: str
    speed: Throughput | None  # None when the caller did not ask for a throughput probe


@lru_cache(maxsize=32)
def memory_model(model: ModelConfig, device: str) -> MemoryModel:
    """The training loop's memory probe, once per model config and device in this process."""
    with torch.random.fork_rng(devices=[]):  # as the loop does: probing must not move the run's RNG
        return probe_memory(model, device)


def measure_here(config: TrainConfig, device: str | torch.device = "cpu",
                 dataset: Dataset[dict[str, Any]] | None = None, *, throughput: bool = True) -> Measured:
    """Dataset sizes, the memory model, and (if asked) a throughput probe of `config` on `device` here.

    The throughput probe runs in a fresh Python process, as a worker trains every job (one child per
    job): its start-up and warm-ups are what the run's will be, whatever this process ran before.
    Given a ``dataset`` (which a fresh process cannot rebuild), it runs in this process instead.
    """
    device = torch.device(device)
    given = dataset
    dataset = dataset if dataset is not None else build_dataset(config)
    sizes = dataset.sizes()  # type: ignore[attr-defined]
    memory = memory_model(config.model, str(device))
    memory_bytes = device_memory_bytes(device)
    speed = None
    if throughput:
        speed = probe_here(config, device, given) if given is not None else probe_in_fresh_process(config, device)
    return Measured(sizes, memory, memory_bytes, device_class(device), speed)


def probe_here(config: TrainConfig, device: str | torch.device,
               dataset: Dataset[dict[str, Any]] | None = None, where: str = " in this process") -> Throughput:
    """The throughput probe in this process: start-up timed as the run does it (dataset sizes, memory probe)."""
    return measure_device(config, device, dataset, where).speed


@dataclass(frozen=True)
class DeviceMeasurement:
    """What a probe job records: the device, its memory model for the model config, and its throughput."""

    device_class: str
    memory_bytes: int
    memory: MemoryModel | None  # None when the config fixes the pixel budget (the loop then probes nothing)
    pixel_budget: int
    speed: Throughput


def measure_device(config: TrainConfig, device: str | torch.device, dataset: Dataset[dict[str, Any]] | None = None,
                   where: str = "", s3_client: Any = None) -> DeviceMeasurement:
    """The memory model, pixel budget and throughput of ``config`` on ``device``, measured as the run starts."""
    device = torch.device(device)
    t0 = time.perf_counter()
    dataset = dataset if dataset is not None else build_dataset(config, s3_client)
    sizes = dataset.sizes()  # type: ignore[attr-defined]
    budget, memory = config.pixel_budget, None
    if not budget:  # the loop probes memory at every start unless the config fixes a budget
        with torch.random.fork_rng(devices=[]):  # as the loop probes it, under the run's own autocast
            memory = probe_memory(config.model, device, amp_dtype(config, device))
        budget = memory.pixel_budget(device_memory_bytes(device) * config.memory_fraction)
    startup_s = time.perf_counter() - t0
    probe = probe_config(config, sizes, shrink=device.type != "cuda")
    if config.data.kind == "synth":  # logs (and pages, by data.page_share) drawn as the run draws them
        probe_set: Dataset[dict[str, Any]] = build_dataset(probe)
        probe_sizes = probe_set.sizes()  # type: ignore[attr-defined]
    else:
        count = min(len(sizes), probe.data.dataset_size)
        probe_set, probe_sizes = Subset(dataset, range(count)), sizes[:count]
    with torch.random.fork_rng(devices=[]):
        speed = probe_throughput(probe, device, probe_set, probe_sizes, budget, startup_s, where)
    return DeviceMeasurement(device_class(device), device_memory_bytes(device), memory, budget, speed)


def probe_in_fresh_process(config: TrainConfig, device: str | torch.device) -> Throughput:
    """``probe_here`` in a new interpreter with torch and veernet_core imported, as a worker's job child starts."""
    request = json.dumps({"config": config.to_dict(), "device": str(device)})
    done = subprocess.run([sys.executable, "-m", "veernet_core.plan_probe"], input=request, capture_output=True,
                          text=True, timeout=FRESH_PROBE_TIMEOUT_S, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the throughput probe process failed (exit {done.returncode}): {done.stderr[-2000:]}")
    fields = json.loads(lines[-1])
    return Throughput(**{**fields, "notes": tuple(fields.get("notes", ()))})


def _probe_main() -> None:
    """``python -m veernet_core.plan_probe``: a probe request (JSON) on stdin, its Throughput (JSON) on stdout."""
    request = json.loads(sys.stdin.read())
    speed = probe_here(TrainConfig.from_dict(request["config"]), request["device"], where=" in a fresh process")
    print(json.dumps(asdict(speed)))


if __name__ == "__main__":
    _probe_main()
