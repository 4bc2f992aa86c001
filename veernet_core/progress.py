"""What the training loop reports, asks and announces: the callback contract and the ETA arithmetic."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from veernet_core.checkpoint import CheckpointRef

if TYPE_CHECKING:  # veernet_core.memory imports the model (torch); callers of this module may not need it
    from veernet_core.memory import MemoryModel

WARMUP_STEPS_EXCLUDED = 3  # first steps after a (re)start pay for allocation and caches, not training
EMA_WEIGHT = 0.1  # step-time smoothing: ~10 steps of memory, steady but quick to follow a slowdown


@dataclass
class Progress:
    phase: str  # "train", "validate" or "checkpoint"
    epoch: int  # 0-based epoch being trained
    epochs: int
    step: int  # optimiser steps done in this epoch
    steps_per_epoch: int
    global_step: int
    total_steps: int
    loss: float
    lr: float
    images_per_s: float
    step_time_s: float  # moving average, warm-up excluded; 0 until measured
    validate_time_s: float  # last measured validation pass; before the first, its expected cost
    checkpoint_time_s: float  # last measured checkpoint save
    elapsed_s: float
    eta_s: float | None  # None until a step time is measured
    metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


FORWARD_SHARE = 1 / 3  # a forward pass is about a third of a training step's forward + backward FLOPs


def expected_validation_s(val_images: int, step_time_s: float, images_per_step: int) -> float:
    """A validation pass not yet timed, from the training step time: forward only, on val_images."""
    return val_images / max(images_per_step, 1) * step_time_s * FORWARD_SHARE


def estimate_eta(remaining_steps: int, step_time_s: float, remaining_validations: int,
                 validate_time_s: float, remaining_checkpoints: int, checkpoint_time_s: float) -> float | None:
    """Seconds left: measured step time times the remaining steps, plus validation and checkpoints."""
    if step_time_s <= 0:
        return None
    return (remaining_steps * step_time_s + remaining_validations * validate_time_s
            + remaining_checkpoints * checkpoint_time_s)


class StepTimer:
    """A moving average of step time that ignores the first steps after every (re)start."""

    def __init__(self) -> None:
        self.seen = 0
        self.average = 0.0

    def add(self, seconds: float) -> None:
        self.seen += 1
        if self.seen <= WARMUP_STEPS_EXCLUDED:
            return
        self.average = seconds if self.average == 0 else (1 - EMA_WEIGHT) * self.average + EMA_WEIGHT * seconds


class TrainCallbacks:
    """Override what you need. The defaults report nothing and never stop."""

    def on_progress(self, progress: Progress) -> None:
        """Called after every optimiser step and around validation and checkpoints."""

    def should_stop(self) -> str | None:
        """A reason to stop now (e.g. "cancelled", "lease lost"), checked after every step."""
        return None

    def on_checkpoint(self, ref: CheckpointRef) -> None:
        """A checkpoint was uploaded and committed."""

    def on_budget(self, pixel_budget: int, memory: MemoryModel | None) -> None:
        """The pixel budget this (re)start trains with, and the memory model measured on the device for it
        (None when the config fixes the budget and nothing was measured)."""

    def on_resume(self, ref: CheckpointRef, skipped: list[tuple[CheckpointRef, str]]) -> None:
        """Training resumed from `ref`; `skipped` lists newer checkpoints that failed verification."""
