"""User-labelled datasets: image/mask pairs listed in manifest.json, in a local folder or under an S3 prefix.

manifest.json: {"items": [{"image": "scans/a.png", "mask": "masks/a.png", "height": H, "width": W}, ...]}.
Paths are relative to the manifest. height/width are optional; without them the size is read from
the image header (no pixels decoded). Images are PNG, TIFF or JPEG, colour converted to gray; masks
are single-channel PNG or TIFF label images with values below `classes`.

The dataset a run reads is ``veernet_core.manifest_dataset.ManifestDataset``; this module (the stores, the
sizes, the decoding) does without torch, so that the planner in the API process can list a manifest's sizes.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import numpy as np
from PIL import Image, UnidentifiedImageError

from veernet_core.data import MIN_SIDE

MANIFEST_NAME = "manifest.json"
IMAGE_FORMATS = frozenset({"PNG", "TIFF", "JPEG"})
MASK_FORMATS = frozenset({"PNG", "TIFF"})  # lossless only: JPEG would smear the labels
LABEL_MODES = frozenset({"1", "L", "P", "I", "I;16", "I;16L", "I;16B"})
SIXTEEN_BIT_MODES = frozenset({"I", "I;16", "I;16L", "I;16B"})
# Enough for PNG, JPEG and most TIFF headers; a header past it falls back to reading the whole object.
HEADER_BYTES = 65536


class S3Client(Protocol):
    """The part of a boto3 S3 client this module uses."""

    def get_object(self, **kwargs: Any) -> Any: ...


class _LocalStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def name(self, rel: str) -> str:
        return str(self.root / rel)

    def read(self, rel: str) -> bytes:
        path = self.root / rel
        if not path.is_file():
            raise FileNotFoundError(_missing(self.name(rel), self.name(MANIFEST_NAME)))
        return path.read_bytes()

    def header_size(self, rel: str) -> tuple[int, int]:
        path = self.root / rel
        if not path.is_file():
            raise FileNotFoundError(_missing(self.name(rel), self.name(MANIFEST_NAME)))
        return _size_of(path, self.name(rel))  # Pillow opens lazily: the header only


class _S3Store:
    def __init__(self, client: S3Client, bucket: str, prefix: str) -> None:
        self.client, self.bucket, self.prefix = client, bucket, prefix

    def _key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def name(self, rel: str) -> str:
        return f"s3://{self.bucket}/{self._key(rel)}"

    def read(self, rel: str, first_bytes: int | None = None) -> bytes:
        request: dict[str, Any] = {"Bucket": self.bucket, "Key": self._key(rel)}
        if first_bytes is not None:
            request["Range"] = f"bytes=0-{first_bytes - 1}"
        try:
            return bytes(self.client.get_object(**request)["Body"].read())
        except Exception as exc:  # botocore's ClientError, without importing botocore here
            code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
            if code in ("NoSuchKey", "404"):
                raise FileNotFoundError(_missing(self.name(rel), self.name(MANIFEST_NAME))) from exc
            raise

    def header_size(self, rel: str) -> tuple[int, int]:
        try:
            with Image.open(io.BytesIO(self.read(rel, HEADER_BYTES))) as image:
                if image.format in IMAGE_FORMATS:
                    return image.height, image.width
        except (UnidentifiedImageError, OSError, SyntaxError):
            pass  # the header runs past the first bytes (a TIFF may keep it at the end): read it all
        return _size_of(io.BytesIO(self.read(rel)), self.name(rel))


def _missing(name: str, manifest: str) -> str:
    if name == manifest:
        return f"{manifest} does not exist; a dataset folder or prefix needs a manifest.json"
    return f"{name} does not exist; check its path in {manifest}"


def _size_of(source: Path | io.BytesIO, name: str) -> tuple[int, int]:
    try:
        with Image.open(source) as image:
            if image.format not in IMAGE_FORMATS:
                expected = ", ".join(sorted(IMAGE_FORMATS))
                raise ValueError(f"{name} is {image.format}; expected one of {expected}")
            return image.height, image.width
    except UnidentifiedImageError as exc:
        raise ValueError(f"{name} is not a readable image ({', '.join(sorted(IMAGE_FORMATS))})") from exc


@dataclass(frozen=True)
class ListedSizes:
    """A manifest's sizes as a planner reads them: ``sizes`` per item; ``stood_in`` items did not list theirs
    and took, in turn, the sizes of the ``sampled`` headers read."""

    sizes: list[tuple[int, int]]
    stood_in: int
    sampled: int


def listed_sizes(root: str, s3_client: S3Client | None = None, header_reads: int = 32, seed: int = 0) -> ListedSizes:
    """(height, width) per item for planning, from the manifest alone where it lists them (no image opened,
    no path checked: ``ManifestDataset`` checks what a run reads). Of the items that list no size, at most
    ``header_reads`` (a seeded random sample) have their image header read, and the rest stand in with those."""
    store = _open_store(root, s3_client)
    entries = _load_entries(store)
    sizes: list[tuple[int, int] | None] = []
    for entry in entries:
        height, width = entry.get("height"), entry.get("width")
        listed = isinstance(height, int) and isinstance(width, int)
        sizes.append((height, width) if listed else None)  # type: ignore[arg-type]
    missing = [k for k, size in enumerate(sizes) if size is None]
    if not missing:
        return ListedSizes(sizes, 0, 0)  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    picked = sorted(rng.choice(missing, min(header_reads, len(missing)), replace=False).tolist())
    read = {k: store.header_size(_relative(entries[k], "image", k)) for k in picked}
    in_turn = list(read.values())
    for n, k in enumerate(missing):
        sizes[k] = read.get(k, in_turn[n % len(in_turn)])
    return ListedSizes(sizes, len(missing) - len(picked), len(picked))  # type: ignore[arg-type]


def _open_store(root: str, s3_client: S3Client | None) -> _LocalStore | _S3Store:
    if not root.startswith("s3://"):
        return _LocalStore(Path(root))
    if s3_client is None:
        raise ValueError(f"{root} is on S3: pass an S3 client (e.g. boto3.client('s3')) as s3_client")
    bucket, _, prefix = root.removeprefix("s3://").partition("/")
    if not bucket:
        raise ValueError(f"{root} names no bucket; expected s3://bucket/prefix")
    return _S3Store(s3_client, bucket, prefix.strip("/"))


def _load_entries(store: _LocalStore | _S3Store) -> list[Mapping[str, Any]]:
    name = store.name(MANIFEST_NAME)
    try:
        manifest = json.loads(store.read(MANIFEST_NAME))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} is not valid JSON: {exc}") from exc
    entries = manifest.get("items") if isinstance(manifest, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError(f'{name} must be an object with a non-empty "items" list of image/mask pairs')
    if not all(isinstance(entry, Mapping) for entry in entries):
        raise ValueError(f'every entry of "items" in {name} must be an object with "image" and "mask"')
    return entries


def _relative(entry: Mapping[str, Any], key: str, k: int) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f'manifest item {k} has no "{key}" path')
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f'manifest item {k}: "{value}" must be a relative path inside the dataset')
    return str(path)


def _check_side(name: str, height: int, width: int) -> None:
    if height < MIN_SIDE or width < MIN_SIDE:
        raise ValueError(
            f"image {name} is {height}x{width} px (height x width); images must be at least "
            f"{MIN_SIDE} px on each side: drop it or use a larger scan"
        )


def _open(data: bytes, name: str, formats: frozenset[str]) -> Image.Image:
    try:
        image = Image.open(io.BytesIO(data))
    except UnidentifiedImageError as exc:
        raise ValueError(f"{name} is not a readable image ({', '.join(sorted(formats))})") from exc
    if image.format not in formats:
        raise ValueError(f"{name} is {image.format}; expected one of {', '.join(sorted(formats))}")
    return image


def _decode_image(data: bytes, name: str) -> np.ndarray:
    """Gray pixels as float32 in [0, 1], paper bright."""
    with _open(data, name, IMAGE_FORMATS) as image:
        if image.mode in SIXTEEN_BIT_MODES:
            return np.clip(np.asarray(image, dtype=np.float32) / 65535.0, 0.0, 1.0)
        if image.mode == "F":
            raise ValueError(f"{name} holds floating-point pixels; save the scan as 8- or 16-bit gray or RGB")
        return np.asarray(image.convert("L"), dtype=np.float32) / 255.0


def _decode_mask(data: bytes, name: str, classes: int) -> np.ndarray:
    """Integer labels (H, W) int64, each below `classes`."""
    with _open(data, name, MASK_FORMATS) as image:
        if image.mode not in LABEL_MODES:
            raise ValueError(f"mask {name} is a {image.mode} image; masks must be single-channel labels")
        labels = np.asarray(image).astype(np.int64)
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= classes:
        bad = high if high >= classes else low
        raise ValueError(
            f"mask {name} holds label {bad}; with classes={classes} labels must be 0..{classes - 1} "
            "(0 background, k for curve k)"
        )
    return labels


def write_manifest(root_dir: str | Path, items: Iterable[Mapping[str, Any]]) -> Path:
    """Write root_dir/manifest.json listing `items` (image, mask, optional height/width); returns its path."""
    entries = [dict(item) for item in items]
    for k, entry in enumerate(entries):
        _relative(entry, "image", k)
        _relative(entry, "mask", k)
    path = Path(root_dir) / MANIFEST_NAME
    path.write_text(json.dumps({"items": entries}, indent=2) + "\n")
    return path
