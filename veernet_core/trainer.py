"""The training state and its single steps: everything a checkpoint holds lives here."""

from __future__ import annotations

import math
import random
import time
from contextlib import AbstractContextManager, nullcontext
from typing import Any, cast

import numpy as np
import torch
from torch.utils.data import Dataset

from veernet_core.checkpoint import (
    FORMAT_VERSION,
    BlobStore,
    CheckpointError,
    CheckpointRef,
    CheckpointRegistry,
    checkpoint_name,
    prune,
    serialize,
)
from veernet_core.config import ModelConfig, TrainConfig
from veernet_core.data import model_extents, pad_collate
from veernet_core.losses import LossWeights, SegmentationCounts, class_names, predict_labels, step_loss
from veernet_core.model import VeerNet
from veernet_core.sampler import BucketBatchSampler, Step, validation_batches


def amp_dtype(config: TrainConfig, device: torch.device) -> torch.dtype | None:
    """Autocast on CUDA only (on CPU it is slower): bf16 where supported, else fp16 with a scaler."""
    if device.type != "cuda" or config.amp == "off":
        return None
    if config.amp == "bf16" or (config.amp == "auto" and torch.cuda.is_bf16_supported()):
        return torch.bfloat16
    return torch.float16


def lr_factor(step: int, warmup: int, total: int, floor: float) -> float:
    """Linear warm-up to 1, then cosine down to `floor`."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def build_for_training(config: ModelConfig, seed: int, device: torch.device, init: str = "random") -> VeerNet:
    """The network a fresh run starts from: weights drawn from `seed` alone, or with init "bundled" the
    shipped model's (the config checks that the networks are one)."""
    torch.manual_seed(seed)  # initial weights are a function of the seed alone
    model = VeerNet(config)
    if init == "bundled":
        from veernet_core.checkpoint import deserialize
        from veernet_core.digitise.predict import bundled_model_path

        model.load_state_dict(deserialize(bundled_model_path().read_bytes())["model"])
    return model.to(device)


class Trainer:
    def __init__(self, config: TrainConfig, device: torch.device, sampler: BucketBatchSampler,
                 pixel_budget: int, weights: LossWeights) -> None:
        self.config, self.device, self.sampler = config, device, sampler
        self.pixel_budget, self.weights = pixel_budget, weights
        self.model = build_for_training(config.model, config.seed, device, config.init)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.scaled_lr,
                                           weight_decay=config.weight_decay)
        total = sampler.steps_per_epoch * config.epochs
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: lr_factor(s, config.warmup_steps, total, config.min_lr_ratio))
        self.amp = amp_dtype(config, device)
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.amp == torch.float16)
        self.epoch = self.step = self.global_step = 0
        self.history: list[dict[str, float]] = []
        self.best_metric: float | None = None
        self.last_loss = float("nan")
        self.epoch_loss_sum = 0.0
        self.validate_time_s = self.checkpoint_time_s = 0.0

    def _autocast(self) -> AbstractContextManager[Any]:
        if self.amp is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp)

    def current_lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def train_step(self, step: Step, batches: list[dict[str, torch.Tensor]]) -> None:
        """Accumulate gradients over the step's micro-batches, then one optimiser update."""
        total = self.accumulate(step, batches)
        if not math.isfinite(total):
            raise FloatingPointError(f"loss became {total} at epoch {self.epoch} step {self.step}; "
                                     "lower lr or check the data")
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        self.global_step += 1
        self.last_loss = total
        self.epoch_loss_sum += total

    def accumulate(self, step: Step, batches: list[dict[str, torch.Tensor]]) -> float:
        """Forward and backward every micro-batch; the summed gradients are the step's mean gradient."""
        self.model.train()
        total = 0.0
        for batch in batches:
            b = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
            with self._autocast():
                logits = self.model(b["image"], model_extents(b))
            loss = step_loss(logits, b["target"], b["valid"], step.group_pixels, step.group_images, self.weights)
            self.scaler.scale(loss).backward()
            total += float(loss.detach())
        return total

    @torch.inference_mode()
    def validate(self, dataset: Dataset[dict[str, Any]], val_idx: list[int],
                 sizes: list[tuple[int, int]]) -> dict[str, float]:
        """Per-class IoU and Dice from counts summed over the whole validation split."""
        t0 = time.monotonic()
        self.model.eval()
        names = class_names(self.config.model.num_classes)
        counts = SegmentationCounts(len(names))
        for batch_idx in validation_batches(val_idx, sizes, self.pixel_budget, self.config.max_physical_batch):
            batch = pad_collate([dataset[i] for i in batch_idx])
            b = {k: v.to(self.device) for k, v in batch.items()}
            with self._autocast():
                logits = self.model(b["image"], model_extents(b))
            counts.update(predict_labels(logits.float()), b["target"], b["valid"])
        self.validate_time_s = time.monotonic() - t0
        return counts.metrics(names)

    def end_epoch(self, metrics: dict[str, float] | None) -> None:
        # "epoch" counts epochs done, as a checkpoint's epoch does: the first epoch's record is epoch 1.
        record = {"epoch": float(self.epoch + 1), "train_loss": self.epoch_loss_sum / max(1, self.step)}
        record.update(metrics or {})
        self.history.append(record)
        self.epoch += 1
        self.step = 0
        self.epoch_loss_sum = 0.0

    def state_dict(self) -> dict[str, Any]:
        self.sampler.set_position(self.epoch, self.step)
        return {
            "format_version": FORMAT_VERSION,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "epoch": self.epoch,
            "step": self.step,
            "global_step": self.global_step,
            "epoch_loss_sum": self.epoch_loss_sum,
            "sampler": self.sampler.state_dict(),
            "rng": rng_state(),
            "model_config": self.config.to_dict()["model"],
            "train_config": self.config.to_dict(),
            "history": self.history,
            "best_metric": self.best_metric,
            "pixel_budget": self.pixel_budget,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["model_config"] != self.config.to_dict()["model"]:
            raise CheckpointError("the checkpoint's model config differs from this run's; "
                                  "train into a new directory or job to change the architecture")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.epoch, self.step, self.global_step = int(state["epoch"]), int(state["step"]), int(state["global_step"])
        self.epoch_loss_sum = float(state["epoch_loss_sum"])
        self.sampler.load_state_dict(state["sampler"])
        set_rng_state(state["rng"])
        self.history = list(state["history"])
        self.best_metric = state["best_metric"]

    def save(self, store: BlobStore, registry: CheckpointRegistry, key_prefix: str,
             metrics: dict[str, float] | None) -> CheckpointRef | None:
        """Upload, then commit; None when the registry refuses (ownership lost). Prunes old ones after."""
        t0 = time.monotonic()
        metric = (metrics or {}).get("iou_fg_mean")
        is_best = metric is not None and (self.best_metric is None or metric > self.best_metric)
        if is_best:
            self.best_metric = metric
        data, digest = serialize(self.state_dict())
        key = key_prefix + checkpoint_name(self.epoch, self.step)
        store.put(key, data)
        ref = CheckpointRef(key, self.epoch, self.step, len(data), digest, dict(metrics or {}), is_best,
                            self.global_step)
        if not registry.commit(ref):
            return None
        prune(store, registry, self.config.keep_last)
        self.checkpoint_time_s = time.monotonic() - t0
        return ref


def rng_state() -> dict[str, Any]:
    """Every RNG the process has, as tensors and primitives (loadable with weights_only=True)."""
    _, internal, gauss = random.getstate()
    # np.random's global RandomState is MT19937, so the legacy state is the tuple, never the dict
    legacy_state = cast("tuple[str, np.ndarray[Any, np.dtype[np.uint32]], int, int, float]", np.random.get_state())
    _, keys, pos, has_gauss, cached = legacy_state
    return {
        "python": torch.tensor(internal, dtype=torch.int64),
        "python_gauss": float("nan") if gauss is None else float(gauss),
        "numpy": torch.from_numpy(keys.astype(np.int64)),
        "numpy_extra": [int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
        "cuda": torch.stack(torch.cuda.get_rng_state_all()) if torch.cuda.is_available() else torch.empty(0),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    gauss = float(state["python_gauss"])
    internal = tuple(int(x) for x in state["python"])
    random.setstate((3, internal, None if math.isnan(gauss) else gauss))
    pos, has_gauss, cached = state["numpy_extra"]
    np.random.set_state(("MT19937", state["numpy"].numpy().astype(np.uint32), int(pos), int(has_gauss),
                         float(cached)))
    torch.set_rng_state(state["torch"])
    if torch.cuda.is_available() and state["cuda"].numel():
        torch.cuda.set_rng_state_all(list(state["cuda"]))
