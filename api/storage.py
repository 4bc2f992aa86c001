"""The checkpoint store as the service uses it: built from settings, probed, streamed to downloads."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typing_extensions import TypeIs

from api.errors import BlobMissing, StoreError
from api.settings import Settings, get_settings

if TYPE_CHECKING:  # veernet_core imports torch; only callers that build a store pay for it
    from veernet_core.checkpoint import LocalStore, S3Store

CHUNK_BYTES = 1 << 20
_stores: dict[tuple[str, str | None], Any] = {}


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> ("bucket", "some/prefix")."""
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    if not bucket:
        raise ValueError(f"CHECKPOINT_URL {url!r} names no bucket; use s3://bucket/prefix")
    return bucket, prefix.strip("/")


def make_s3_client(settings: Settings) -> Any:
    """A boto3 S3 client; credentials and region come from boto3's own environment."""
    import boto3
    from botocore.config import Config

    config = Config(
        signature_version="s3v4",
        s3={"addressing_style": "path"} if settings.s3_endpoint_url else {},  # MinIO and test servers
        retries={"max_attempts": 3, "mode": "standard"},
        connect_timeout=5,
        read_timeout=60,
    )
    return boto3.session.Session().client("s3", endpoint_url=settings.s3_endpoint_url, config=config)


def make_store(settings: Settings) -> LocalStore | S3Store:
    """``CHECKPOINT_URL`` s3://bucket/prefix -> S3Store; anything else is a local directory."""
    from veernet_core.checkpoint import LocalStore, S3Store

    url = settings.checkpoint_url
    if url.startswith("s3://"):
        bucket, prefix = parse_s3_url(url)
        return S3Store(make_s3_client(settings), bucket, prefix)
    return LocalStore(Path(url.removeprefix("file://")).expanduser())


def get_store() -> LocalStore | S3Store:
    """This process's store for the configured ``CHECKPOINT_URL`` (a boto3 client is costly to build)."""
    settings = get_settings()
    key = (settings.checkpoint_url, settings.s3_endpoint_url)
    if key not in _stores:
        _stores[key] = make_store(settings)
    return _stores[key]  # type: ignore[no-any-return]


def is_s3(store: object) -> TypeIs[S3Store]:
    from veernet_core.checkpoint import S3Store

    return isinstance(store, S3Store)


@dataclass
class Blob:
    """An object being read: its size up front, its bytes in chunks."""

    size: int
    chunks: Iterator[bytes]


def open_blob(store: LocalStore | S3Store, key: str, expected_size: int | None = None) -> Blob:
    """Open ``key`` for streaming; BlobMissing if absent, StoreError if unreachable or the wrong size."""
    blob = _open_s3(store, key) if is_s3(store) else _open_local(store, key)
    if expected_size is not None and blob.size != expected_size:
        raise StoreError(f"checkpoint file {key!r} holds {blob.size} bytes but {expected_size} were "
                         "registered: it is corrupt; use another checkpoint of the job")
    return blob


def _open_local(store: Any, key: str) -> Blob:
    root = Path(store.root).resolve()
    path = (root / key).resolve()
    if root not in path.parents:
        raise BlobMissing(key, str(root))
    try:
        handle = path.open("rb")
    except FileNotFoundError as exc:
        raise BlobMissing(key, str(root)) from exc
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc}") from exc
    size = path.stat().st_size

    def chunks() -> Iterator[bytes]:
        with handle:
            while chunk := handle.read(CHUNK_BYTES):
                yield chunk

    return Blob(size, chunks())


def _open_s3(store: Any, key: str) -> Blob:
    try:
        response = store.client.get_object(Bucket=store.bucket, Key=store.prefix + key)
    except Exception as exc:  # botocore raises many types for a missing key or a down endpoint
        code = str((getattr(exc, "response", None) or {}).get("Error", {}).get("Code", ""))
        if code in {"404", "NoSuchKey", "NotFound"}:
            raise BlobMissing(key, store.describe()) from exc
        raise StoreError(f"checkpoint store {store.describe()} unavailable: {exc}") from exc
    return Blob(int(response["ContentLength"]), response["Body"].iter_chunks(CHUNK_BYTES))


def probe_store(store: LocalStore | S3Store) -> None:
    """Raise StoreError unless the store can be reached (and, when local, written)."""
    if is_s3(store):
        try:
            store.client.head_bucket(Bucket=store.bucket)
        except Exception as exc:
            raise StoreError(f"{store.describe()} unreachable: {exc}") from exc
        return
    root = Path(store.root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create {root}: {exc}") from exc
    if not os.access(root, os.W_OK):
        raise StoreError(f"{root} is not writable by this process")
