"""What the training loop reports, asks and announces: the callback contract and the ETA arithmetic."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from veernet_core.checkpoint import CheckpointRef

if TYPE_CHECKING:  # veernet_core.memory imports the model (torch); callers of this module may not need it
    from veernet_core.memory import MemoryModel

WARMUP_STEPS_EXCLUDED = 3  # first steps after a (re)start pay for allocation and caches, not training
EMA_WEIGHT = 0.1  # step-time smoothing: ~10 steps of memory, steady but quick to follow a slowdown
MIN_SIZE_SPREAD = 0.05  # recent steps' pixels must vary by this (coefficient of variation) to fit a line


class StopReason(StrEnum):
    """Why a training run stopped before its last epoch."""

    CANCELLED = "cancelled"  # its user asked; its checkpoints are kept
    LEASE_LOST = "lease lost"  # another attempt owns the job now: write nothing more
    SIGTERM = "sigterm"  # the process is being stopped: saved, to resume on another worker


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
    step_time_s: float  # the mean time of a step still to come (see StepTimer.step_time); 0 until measured
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


def seconds_left(remaining_steps: int, step_time_s: float, remaining_validations: int,
                 validate_time_s: float, remaining_checkpoints: int, checkpoint_time_s: float) -> float | None:
    """Seconds left: measured step time times the remaining steps, plus validation and checkpoints."""
    if step_time_s <= 0:
        return None
    return (remaining_steps * step_time_s + remaining_validations * validate_time_s
            + remaining_checkpoints * checkpoint_time_s)


class StepTimer:
    """Step time as a function of padded pixels over the recent steps, ignoring the first steps after every
    (re)start.

    Bucketed steps differ in size (at full scale a step of the widest logs has 4x the pixels of one of
    the narrowest), so their times differ as much: an average over the last steps swings with the buckets
    they came from. A step's time is a fixed part (the optimiser, per-batch work) plus a part per padded
    pixel; both are fitted by least squares over the recent steps (exponentially weighted, EMA_WEIGHT),
    and the sampler's epoch steps say how many steps and pixels are left. Until the recent steps differ
    enough in size to fit a line, time is taken as proportional to pixels.
    """

    def __init__(self) -> None:
        self.seen = 0
        # Exponentially weighted sums over timed steps: weight, pixels, seconds, pixels^2, pixels * seconds.
        self._sums = [0.0] * 5

    def add(self, seconds: float, padded_pixels: int) -> None:
        self.seen += 1
        if self.seen <= WARMUP_STEPS_EXCLUDED:
            return
        if padded_pixels > 0:
            x = float(padded_pixels)
            weight = 1.0 if self._sums[0] == 0 else EMA_WEIGHT
            keep = 1.0 - weight
            terms = (1.0, x, seconds, x * x, x * seconds)
            self._sums = [keep * old + weight * new for old, new in zip(self._sums, terms, strict=True)]

    def line(self) -> tuple[float, float] | None:
        """(seconds per step, seconds per padded pixel) fitted to the recent steps; None before any."""
        w, sx, sy, sxx, sxy = self._sums
        if w <= 0 or sx <= 0:
            return None
        mean_x, mean_y = sx / w, sy / w
        var_x = sxx / w - mean_x * mean_x
        if var_x > (MIN_SIZE_SPREAD * mean_x) ** 2:
            per_pixel = (sxy / w - mean_x * mean_y) / var_x
            fixed = mean_y - per_pixel * mean_x
            if per_pixel > 0 and fixed >= 0:
                return fixed, per_pixel
        return 0.0, sy / sx

    def step_time(self, remaining_pixels: int, remaining_steps: int, mean_step_pixels: float) -> float:
        """The mean time of a step still to come: the fitted line at the remaining steps' mean padded
        pixels (at a typical step's, `mean_step_pixels`, when none is left). 0 until measured. Times the
        remaining steps, it is the training time left."""
        fitted = self.line()
        if fitted is None:
            return 0.0
        fixed, per_pixel = fitted
        pixels = remaining_pixels / remaining_steps if remaining_steps > 0 else mean_step_pixels
        return fixed + per_pixel * pixels


class TrainCallbacks:
    """Override what you need. The defaults report nothing and never stop."""

    def on_progress(self, progress: Progress) -> None:
        """Called after every optimiser step and around validation and checkpoints."""

    def should_stop(self) -> StopReason | None:
        """A reason to stop now, checked after every step."""
        return None

    def on_checkpoint(self, ref: CheckpointRef) -> None:
        """A checkpoint was uploaded and committed."""

    def on_budget(self, pixel_budget: int, memory: MemoryModel | None) -> None:
        """The pixel budget this (re)start trains with, and the memory model measured on the device for it
        (None when the config fixes the budget and nothing was measured)."""

    def on_resume(self, ref: CheckpointRef, skipped: list[tuple[CheckpointRef, str]]) -> None:
        """Training resumed from `ref`; `skipped` lists newer checkpoints that failed verification."""
