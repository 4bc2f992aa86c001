"""Helpers shared by the API tests: a small valid config, checkpoints uploaded like a worker's, and the
messages waiting on a broker's queue."""

from __future__ import annotations

import hashlib
from typing import Any

import torch
from kombu import Connection

from veernet_core.checkpoint import CheckpointRef, LocalStore, S3Store, job_prefix, serialize

SMALL_CONFIG: dict[str, Any] = {"epochs": 2, "effective_batch": 2, "data": {"dataset_size": 8, "scale": 0.05}}


def checkpoint_bytes(epoch: int, seed: int = 0) -> bytes:
    """A real checkpoint in veernet_core's format (small tensors, every required key)."""
    generator = torch.Generator().manual_seed(seed)
    state = {"format_version": 1, "model": {"w": torch.randn(64, 64, generator=generator)}, "optimizer": {},
             "scheduler": {}, "scaler": {}, "epoch": epoch, "step": 0, "sampler": {}, "rng": {},
             "model_config": {}, "train_config": {}, "history": [], "best_metric": 0.0}
    return serialize(state)[0]


def upload_checkpoint(store: LocalStore | S3Store, job_id: int, attempt: int, epoch: int,
                      steps_per_epoch: int = 4, is_best: bool = False) -> tuple[CheckpointRef, bytes]:
    """Upload a checkpoint the way a worker does (before registering it) and describe it."""
    data = checkpoint_bytes(epoch, seed=job_id * 100 + epoch)
    key = f"{job_prefix(job_id, attempt)}epoch-{epoch:04d}-step-{0:08d}.pt"
    store.put(key, data)
    ref = CheckpointRef(key=key, epoch=epoch, step=0, size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                        metrics={"val_iou": 0.5 + epoch / 100}, is_best=is_best,
                        global_step=epoch * steps_per_epoch)
    return ref, data


def take_messages(broker_url: str, queue: str) -> list[tuple[str, list[Any]]]:
    """Consume and acknowledge every message waiting on ``queue``, as workers would: [(task name, args)]."""
    messages = []
    with Connection(broker_url) as connection:
        simple = connection.SimpleQueue(queue)
        try:
            while True:
                try:
                    message = simple.get_nowait()
                except simple.Empty:
                    break
                messages.append((message.headers["task"], message.payload[0]))  # payload: (args, kwargs, embed)
                message.ack()
        finally:
            simple.close()
    return messages
