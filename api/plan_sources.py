"""Where a plan's speed and memory model come from, best first; every one of them says what it is.

- **Throughput** of a device class: its completed jobs of the model config (median), else the newest
  probe job's measurement of it there (api.plan_fleet), else, for a GPU of the known-GPU table
  (veernet_core.plan_gpus), an estimate from the card's datasheet FLOP/s and an efficiency that the
  fleet measured on a table GPU (the median over such classes) or, where none has run this model, the
  stated assumption. Never a rate measured on another kind of device: a CPU's rate is no GPU's.
- **Memory model**: the class's own for the model config, else the newest of the model config on
  another class (GPU classes first for a GPU), which the plan calls extrapolated, else none.
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass, replace

from sqlalchemy.orm import Session

from api.plan_fleet import RecordedMemory, calibrated, calibration_rows, dataset_sizes, probed_speed, recorded_memory
from api.settings import Settings
from veernet_core.config import TrainConfig
from veernet_core.memory import MemoryModel
from veernet_core.plan import SOURCE_GPU_TABLE, Throughput
from veernet_core.plan_gpus import (
    ASSUMED_CHECKPOINT_BYTES_PER_S,
    ASSUMED_STARTUP_S,
    Efficiency,
    KnownGpu,
    assumed_checkpoint_s,
    assumed_efficiency,
    efficiency_of,
    estimate_rates,
    find_gpu,
    model_flops,
)

GPU_PREFIX = "cuda:"
EFFICIENCY_CLASSES = 4  # GPU classes of the fleet whose measurements give the measured efficiency, at most


def measured_speed(session: Session, target: str, config: TrainConfig, settings: Settings,
                   memory: MemoryModel | None, memory_bytes: float | None) -> tuple[Throughput | None, list[str]]:
    """The class's measured throughput for the model config (completed jobs, else a probe), and what was skipped."""
    calibration = calibrated(calibration_rows(session, target), target, config, memory, memory_bytes,
                             lambda cfg: dataset_sizes(cfg, settings))
    if calibration.speed is not None:
        return calibration.speed, calibration.skipped
    probed = probed_speed(session, target, config)
    if probed is None:
        return None, calibration.skipped
    speed, job_id = probed
    return replace(speed, detail=f"{speed.detail}, probe job {job_id}" if str(job_id) not in speed.detail
                   else speed.detail, notes=(*calibration.skipped, *speed.notes)), calibration.skipped


@dataclass(frozen=True)
class ChosenMemory:
    model: MemoryModel | None
    source: str
    measured_on: str | None  # the device class whose probe the model is
    extrapolated: bool  # True: it stands for another device than the one it was measured on


def choose_memory(session: Session, target: str | None, stands_for: str, config: TrainConfig) -> ChosenMemory:
    """The target's own recorded memory model for this model config, else another class's, else none."""
    if target is not None and (own := recorded_memory(session, target, config)) is not None:
        return ChosenMemory(own.model, f"measured on {target} by the worker of job {own.job_id} "
                            "(the training loop's own probe there)", target, False)
    prefer = GPU_PREFIX if stands_for.startswith(GPU_PREFIX) or find_gpu(stands_for) else ""
    other: RecordedMemory | None = recorded_memory(session, None, config, prefer)
    if other is None:
        why = ("the config fixes its pixel budget, so the training loop measures none" if config.pixel_budget
               else "no worker has run this model config yet")
        return ChosenMemory(None, f"none measured: {why}", None, False)
    why = f"; no job of this model config on {target} has recorded its memory model yet" if target else ""
    return ChosenMemory(other.model, f"extrapolated from the measurement on {other.device_class} by the worker of "
                        f"job {other.job_id}, standing for {stands_for} (float32 activations, unscaled: AMP would "
                        f"peak lower){why}", other.device_class, True)


def fleet_efficiency(session: Session, config: TrainConfig, classes: dict[str, int],
                     settings: Settings) -> tuple[Efficiency, Throughput | None]:
    """The efficiency of this model config measured on the fleet's known GPUs (median), and one of those
    measurements (for its start-up and checkpoint times); else the assumption and None."""
    found: list[tuple[float, str, Throughput]] = []
    gpu_classes = [c for c in sorted(classes, key=lambda c: -classes[c]) if find_gpu(c)][:EFFICIENCY_CLASSES]
    for name in gpu_classes:
        memory = recorded_memory(session, name, config)
        speed, _ = measured_speed(session, name, config, settings, memory.model if memory else None, None)
        gpu = find_gpu(name)
        if speed is not None and gpu is not None:
            found.append((efficiency_of(speed.train_px_per_s, gpu, config.model), name, speed))
    if not found:
        return assumed_efficiency(), None
    value = statistics.median(e for e, _, _ in found)
    where = ", ".join(f"{e:.3f} on {name} ({speed.detail})" for e, name, speed in found)
    return Efficiency(value, f"measured on this fleet: {where}", False), found[0][2]


def table_estimate(session: Session, gpu: KnownGpu, config: TrainConfig, classes: dict[str, int],
                   settings: Settings) -> Throughput:
    """The GPU table's estimate of ``config`` on ``gpu``: a labelled estimate, with its assumptions spelled out."""
    efficiency, measured = fleet_efficiency(session, config, classes, settings)
    rates = estimate_rates(gpu, config.model, efficiency)
    assumptions = [f"peak {gpu.peak_tflops:g} TFLOP/s dense 16-bit ({gpu.source})",
                   f"efficiency {efficiency.value:.3g}: {efficiency.source}",
                   f"{rates['train_flops_per_px']:,.0f} FLOPs per padded pixel of a training step, "
                   f"{rates['forward_flops_per_px']:,.0f} of a validation pass (counted on this model config)"]
    if measured is not None:
        startup_s, checkpoint_s = measured.startup_s, measured.checkpoint_s
        assumptions.append(f"start-up and checkpoint saves as measured there ({measured.detail})")
    else:
        startup_s, checkpoint_s = ASSUMED_STARTUP_S, assumed_checkpoint_s(config.model)
        assumptions.append(f"start-up {ASSUMED_STARTUP_S:g} s and checkpoint saves at "
                           f"{ASSUMED_CHECKPOINT_BYTES_PER_S / 1e6:g} MB/s: assumed, nothing measured them")
    if not gpu.bf16 and config.amp == "bf16":
        assumptions.append(f"the {gpu.name} has no bf16 tensor cores: amp=bf16 runs without them, far slower "
                           "than this; use amp=auto (fp16 there)")
    label = "assumed" if efficiency.assumed else "measured"
    detail = (f"ESTIMATE for {gpu.name} from its datasheet: {efficiency.value:.3g} ({label}) of "
              f"{gpu.peak_tflops:g} TFLOP/s over this model's FLOPs per pixel; no job or probe measured it")
    return Throughput(rates["train_px_per_s"], rates["val_px_per_s"], checkpoint_s, startup_s, SOURCE_GPU_TABLE,
                      detail, estimate={**rates, "assumptions": assumptions})


def warm_up_planner() -> threading.Thread:
    """Count the default model's FLOPs once, in the background: the FLOP counter's first use in a process costs
    seconds (torch loads its meta kernels and their imports), which no plan should wait for; later model
    configs cost 0.2-0.5 s. Not a daemon: a process exiting with it inside torch would abort; join it."""
    thread = threading.Thread(target=model_flops, args=(TrainConfig().model,), name="plan-warm-up")
    thread.start()
    return thread
