"""The checkpoint format and where checkpoints live.

A checkpoint is a dict of tensors and primitives only, loadable with ``torch.load(weights_only=True)``.
Storage is behind :class:`BlobStore` (a local directory or S3). Writing is two-phase: the upload
completes first, then the checkpoint is *committed* (registered with its size and sha256); only
committed checkpoints are ever resumed from. Who records commits is a :class:`CheckpointRegistry`:
sidecar files beside the blobs when training stands alone, a fenced database row in the service.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

FORMAT_VERSION = 1
REQUIRED_KEYS = (
    "format_version", "model", "optimizer", "scheduler", "scaler", "epoch", "step", "sampler",
    "rng", "model_config", "train_config", "history", "best_metric",
)


class CheckpointError(RuntimeError):
    """A checkpoint is missing, corrupt or of an unknown format."""


def checkpoint_name(epoch: int, step: int) -> str:
    """File name for the position (epoch, step): `step` optimiser steps of `epoch` are done."""
    return f"epoch-{epoch:04d}-step-{step:08d}.pt"


def job_prefix(job_id: int | str, attempt: int) -> str:
    """The storage prefix of one attempt of one job; built from server-side ids only."""
    return f"jobs/{int(job_id)}/attempt-{int(attempt)}/"


@dataclass(frozen=True)
class CheckpointRef:
    """A committed checkpoint: where it is and how to verify it."""

    key: str
    epoch: int
    step: int
    size: int
    sha256: str
    metrics: dict[str, float] = field(default_factory=dict)
    is_best: bool = False
    global_step: int = 0


class BlobStore(Protocol):
    """Bytes by key. Implementations: :class:`LocalStore`, :class:`S3Store`."""

    def put(self, key: str, data: bytes) -> None: ...
    def get(self, key: str) -> bytes: ...
    def delete(self, key: str) -> None: ...
    def exists(self, key: str) -> bool: ...
    def list(self, prefix: str = "") -> list[str]: ...
    def describe(self) -> str: ...


class CheckpointRegistry(Protocol):
    """Records committed checkpoints. ``commit`` returns False when the writer lost ownership."""

    def commit(self, ref: CheckpointRef) -> bool: ...
    def committed(self) -> list[CheckpointRef]: ...  # oldest first
    def forget(self, ref: CheckpointRef) -> None: ...


class LocalStore:
    """A directory. Writes go to a temporary file renamed into place, so a reader never sees half."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root.resolve() not in path.parents:
            raise ValueError(f"storage key {key!r} escapes the store root {self.root}")
        return path

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(handle.name, path)

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as exc:
            raise CheckpointError(f"no object {key!r} in {self.root}") from exc

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str = "") -> list[str]:
        if not self.root.exists():
            return []
        keys = (p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file())
        return sorted(k for k in keys if k.startswith(prefix) and not Path(k).name.startswith(".tmp-"))

    def describe(self) -> str:
        return str(self.root)


class S3Store:
    """Any S3-compatible endpoint through an injected boto3 client, retried with backoff."""

    def __init__(self, client: Any, bucket: str, prefix: str = "", retries: int = 6,
                 backoff_s: float = 0.5, sleep: Callable[[float], None] = time.sleep) -> None:
        self.client, self.bucket = client, bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.retries, self.backoff_s, self.sleep = retries, backoff_s, sleep

    def _retry(self, action: Callable[[], Any]) -> Any:
        delay = self.backoff_s
        for attempt in range(self.retries + 1):
            try:
                return action()
            except Exception as exc:  # botocore raises many types for a down endpoint
                if _is_missing(exc) or attempt == self.retries:
                    raise
                self.sleep(delay)
                delay = min(delay * 2, 8.0)
        raise AssertionError("unreachable")

    def put(self, key: str, data: bytes) -> None:
        self._retry(lambda: self.client.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=data))

    def get(self, key: str) -> bytes:
        try:
            body = self._retry(lambda: self.client.get_object(Bucket=self.bucket, Key=self.prefix + key))
        except Exception as exc:
            if _is_missing(exc):
                raise CheckpointError(f"no object {key!r} in s3://{self.bucket}/{self.prefix}") from exc
            raise
        return bytes(body["Body"].read())

    def delete(self, key: str) -> None:
        self._retry(lambda: self.client.delete_object(Bucket=self.bucket, Key=self.prefix + key))

    def exists(self, key: str) -> bool:
        try:
            self._retry(lambda: self.client.head_object(Bucket=self.bucket, Key=self.prefix + key))
        except Exception as exc:
            if _is_missing(exc):
                return False
            raise
        return True

    def list(self, prefix: str = "") -> list[str]:
        keys: list[str] = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
            keys.extend(obj["Key"][len(self.prefix):] for obj in page.get("Contents", []))
        return sorted(keys)

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def presign(self, key: str, expires_s: int) -> str:
        return str(self.client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": self.prefix + key}, ExpiresIn=expires_s))


def _is_missing(exc: Exception) -> bool:
    code = str((getattr(exc, "response", None) or {}).get("Error", {}).get("Code", ""))
    return code in {"404", "NoSuchKey", "NotFound", "NoSuchBucket"}


class SidecarRegistry:
    """Commits recorded as ``<key>.json`` beside each blob: the registry of standalone training.

    The sidecar is written after the blob, so its presence is the commit.
    """

    def __init__(self, store: BlobStore, prefix: str = "") -> None:
        self.store, self.prefix = store, prefix

    def commit(self, ref: CheckpointRef) -> bool:
        self.store.put(ref.key + ".json", json.dumps(asdict(ref)).encode())
        return True

    def committed(self) -> list[CheckpointRef]:
        refs = []
        for key in self.store.list(self.prefix):
            if key.endswith(".pt.json"):
                try:
                    refs.append(CheckpointRef(**json.loads(self.store.get(key))))
                except (ValueError, TypeError, CheckpointError):
                    continue  # a torn sidecar is an uncommitted checkpoint
        return sorted(refs, key=lambda r: (r.global_step, r.key))

    def forget(self, ref: CheckpointRef) -> None:
        self.store.delete(ref.key + ".json")


def serialize(state: dict[str, Any]) -> tuple[bytes, str]:
    """Checkpoint dict -> (bytes, sha256 hex)."""
    missing = [k for k in REQUIRED_KEYS if k not in state]
    if missing:
        raise CheckpointError(f"checkpoint lacks {missing}")
    import torch  # here, not at the top: the API and the reaper use the stores and never load torch

    buffer = io.BytesIO()
    torch.save(state, buffer)
    data = buffer.getvalue()
    return data, hashlib.sha256(data).hexdigest()


def deserialize(data: bytes, expected_sha256: str | None = None) -> dict[str, Any]:
    """Bytes -> checkpoint dict, verifying the digest and loading with ``weights_only=True``."""
    if expected_sha256 is not None:
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected_sha256:
            raise CheckpointError(f"sha256 mismatch: expected {expected_sha256}, got {actual}")
    import torch

    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(f"unreadable checkpoint: {exc}") from exc
    if not isinstance(state, dict) or state.get("format_version") != FORMAT_VERSION:
        found = getattr(state, "get", dict[str, Any]().get)("format_version")
        raise CheckpointError(f"unknown checkpoint format {found!r}")
    return state


def load_latest(store: BlobStore, registry: CheckpointRegistry,
                on_skip: Callable[[CheckpointRef, str], None] | None = None,
                ) -> tuple[CheckpointRef, dict[str, Any]] | None:
    """The newest committed checkpoint that downloads and verifies; older ones if the newest is bad."""
    for ref in reversed(registry.committed()):
        try:
            return ref, deserialize(store.get(ref.key), ref.sha256)
        except CheckpointError as exc:
            if on_skip is not None:
                on_skip(ref, str(exc))
    return None


def prune(store: BlobStore, registry: CheckpointRegistry, keep_last: int) -> list[CheckpointRef]:
    """Delete all but the newest `keep_last` committed checkpoints and the best one.

    Called only after a newer checkpoint is committed, so a crash mid-prune never leaves nothing.
    """
    refs = registry.committed()
    best = [r for r in refs if r.is_best][-1:]
    keep = {r.key for r in refs[-keep_last:]} | {r.key for r in best}
    removed = []
    for ref in refs:
        if ref.key not in keep:
            registry.forget(ref)
            store.delete(ref.key)
            removed.append(ref)
    return removed
