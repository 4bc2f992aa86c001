"""A manifest's image/mask pairs as the training loop's dataset (see ``veernet_core.manifest`` for the format)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import torch
from torch.utils.data import Dataset

from veernet_core.manifest import (
    S3Client,
    _check_side,
    _decode_image,
    _decode_mask,
    _load_entries,
    _open_store,
    _relative,
)


@dataclass(frozen=True)
class ManifestItem:
    image: str
    mask: str
    height: int
    width: int


class ManifestDataset(Dataset[dict[str, Any]]):
    """Image/mask pairs from a manifest.

    Items are {"image": (1, H, W) float32 in [0, 1] (pixel / 255, paper bright), "mask": (H, W) int64,
    "index": i}, like `SynthDataset`'s.
    """

    def __init__(self, root: str, s3_client: S3Client | None = None, classes: int = 3) -> None:
        if classes < 2:
            raise ValueError(f"classes must be at least 2 (background and one curve), got {classes}")
        self.classes = classes
        self.store = _open_store(root, s3_client)
        entries = _load_entries(self.store)
        self.items = [self._item(k, entry) for k, entry in enumerate(entries)]

    def _item(self, k: int, entry: Mapping[str, Any]) -> ManifestItem:
        image, mask = _relative(entry, "image", k), _relative(entry, "mask", k)
        if PurePosixPath(mask).suffix.lower() in (".jpg", ".jpeg"):
            raise ValueError(f"mask {self.store.name(mask)} is a JPEG; masks must be lossless PNG or TIFF")
        height, width = entry.get("height"), entry.get("width")
        if not (isinstance(height, int) and isinstance(width, int)):
            height, width = self.store.header_size(image)
        _check_side(self.store.name(image), height, width)
        return ManifestItem(image, mask, height, width)

    def __len__(self) -> int:
        return len(self.items)

    def sizes(self) -> list[tuple[int, int]]:
        """(height, width) of every item, from the manifest or the image headers; nothing decoded."""
        return [(item.height, item.width) for item in self.items]

    def __getitem__(self, i: int) -> dict[str, Any]:
        if not 0 <= i < len(self.items):
            raise IndexError(f"index {i} out of range for a manifest of {len(self.items)} items")
        item = self.items[i]
        image_name, mask_name = self.store.name(item.image), self.store.name(item.mask)
        pixels = _decode_image(self.store.read(item.image), image_name)
        if pixels.shape != (item.height, item.width):
            raise ValueError(
                f"{image_name} is {pixels.shape[0]}x{pixels.shape[1]} px but the manifest says "
                f"{item.height}x{item.width}; fix or drop height/width in the manifest"
            )
        labels = _decode_mask(self.store.read(item.mask), mask_name, self.classes)
        if labels.shape != pixels.shape:
            raise ValueError(
                f"mask {mask_name} is {labels.shape[0]}x{labels.shape[1]} px but image {image_name} is "
                f"{pixels.shape[0]}x{pixels.shape[1]}; a mask must match its image pixel for pixel"
            )
        return {"image": torch.from_numpy(pixels).unsqueeze(0), "mask": torch.from_numpy(labels), "index": i}
