from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
import torch
from moto.server import ThreadedMotoServer
from PIL import Image

from veernet_core.manifest import write_manifest
from veernet_core.manifest_dataset import ManifestDataset

BUCKET = "veernet-data"


def _gray(height: int, width: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width), dtype=np.uint8)


def _labels(height: int, width: int, seed: int, classes: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, classes, (height, width), dtype=np.uint8)


def _encode(array: np.ndarray, fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format=fmt)
    return buffer.getvalue()


def _dataset_files() -> dict[str, bytes]:
    """A small labelled set: gray PNG, gray TIFF with a TIFF mask, an RGB PNG."""
    rgb = np.random.default_rng(3).integers(0, 256, (40, 96, 3), dtype=np.uint8)
    return {
        "scans/a.png": _encode(_gray(48, 160, 1), "PNG"),
        "masks/a.png": _encode(_labels(48, 160, 1), "PNG"),
        "scans/b.tif": _encode(_gray(64, 200, 2), "TIFF"),
        "masks/b.tif": _encode(_labels(64, 200, 2), "TIFF"),
        "scans/c.png": _encode(rgb, "PNG"),
        "masks/c.png": _encode(_labels(40, 96, 3), "PNG"),
    }


ITEMS: list[dict[str, Any]] = [
    {"image": "scans/a.png", "mask": "masks/a.png", "height": 48, "width": 160},
    {"image": "scans/b.tif", "mask": "masks/b.tif"},  # size read from the header
    {"image": "scans/c.png", "mask": "masks/c.png"},
]


def _write(root: Path, files: dict[str, bytes], items: list[dict[str, Any]]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    write_manifest(root, items)
    return root


def _expected_gray(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("L"), np.float32) / 255.0


def _check_items(dataset: ManifestDataset, files: dict[str, bytes]) -> None:
    assert len(dataset) == 3
    assert dataset.sizes() == [(48, 160), (64, 200), (40, 96)]
    for i, item in enumerate(ITEMS):
        got = dataset[i]
        height, width = dataset.sizes()[i]
        assert got["index"] == i
        assert got["image"].dtype == torch.float32 and got["image"].shape == (1, height, width)
        assert got["mask"].dtype == torch.int64 and got["mask"].shape == (height, width)
        np.testing.assert_allclose(got["image"][0].numpy(), _expected_gray(files[item["image"]]))
        labels = np.asarray(Image.open(io.BytesIO(files[item["mask"]])))
        np.testing.assert_array_equal(got["mask"].numpy(), labels)


def test_local_folder_with_png_tiff_and_rgb(tmp_path: Path) -> None:
    files = _dataset_files()
    dataset = ManifestDataset(str(_write(tmp_path, files, ITEMS)))
    _check_items(dataset, files)
    assert json.loads((tmp_path / "manifest.json").read_text())["items"] == ITEMS


def test_rgb_is_converted_to_gray_not_dropped_to_a_channel(tmp_path: Path) -> None:
    rgb = np.zeros((40, 40, 3), np.uint8)
    rgb[..., 1] = 200  # pure green: luma 0.587 * 200
    files = {"c.png": _encode(rgb, "PNG"), "m.png": _encode(np.zeros((40, 40), np.uint8), "PNG")}
    dataset = ManifestDataset(str(_write(tmp_path, files, [{"image": "c.png", "mask": "m.png"}])))
    assert dataset[0]["image"].mean().item() == pytest.approx(round(0.587 * 200) / 255, abs=1 / 255)


def test_sixteen_bit_gray_and_jpeg_images(tmp_path: Path) -> None:
    deep = (np.arange(48 * 64, dtype=np.uint16).reshape(48, 64) * 20).astype(np.uint16)
    files = {
        "deep.png": _encode(deep, "PNG"),
        "photo.jpg": _encode(_gray(48, 64, 5), "JPEG"),
        "m.png": _encode(_labels(48, 64, 5), "PNG"),
    }
    items = [{"image": "deep.png", "mask": "m.png"}, {"image": "photo.jpg", "mask": "m.png"}]
    dataset = ManifestDataset(str(_write(tmp_path, files, items)))
    np.testing.assert_allclose(dataset[0]["image"][0].numpy(), deep / 65535.0, atol=1e-6)
    assert dataset.sizes()[1] == (48, 64) and dataset[1]["image"].shape == (1, 48, 64)


def test_declared_sizes_are_trusted_until_the_image_disagrees(tmp_path: Path) -> None:
    files = {"a.png": _encode(_gray(48, 64, 1), "PNG"), "m.png": _encode(_labels(48, 64, 1), "PNG")}
    root = _write(tmp_path, files, [{"image": "a.png", "mask": "m.png", "height": 50, "width": 64}])
    dataset = ManifestDataset(str(root))
    assert dataset.sizes() == [(50, 64)]
    with pytest.raises(ValueError, match=r"a\.png is 48x64 px but the manifest says 50x64"):
        dataset[0]


@pytest.mark.parametrize("classes, bad", [(3, 3), (2, 2)])
def test_mask_values_at_or_above_classes_name_the_file(tmp_path: Path, classes: int, bad: int) -> None:
    labels = _labels(40, 40, 1, classes)
    labels[5, 7] = bad
    files = {"a.png": _encode(_gray(40, 40, 1), "PNG"), "bad-mask.png": _encode(labels, "PNG")}
    root = _write(tmp_path, files, [{"image": "a.png", "mask": "bad-mask.png"}])
    dataset = ManifestDataset(str(root), classes=classes)
    with pytest.raises(ValueError, match=rf"bad-mask\.png holds label {bad}; with classes={classes}"):
        dataset[0]


def test_colour_and_jpeg_masks_are_refused(tmp_path: Path) -> None:
    files = {
        "a.png": _encode(_gray(40, 40, 1), "PNG"),
        "rgb-mask.png": _encode(np.zeros((40, 40, 3), np.uint8), "PNG"),
    }
    dataset = ManifestDataset(str(_write(tmp_path, files, [{"image": "a.png", "mask": "rgb-mask.png"}])))
    with pytest.raises(ValueError, match=r"rgb-mask\.png is a RGB image"):
        dataset[0]
    write_manifest(tmp_path, [{"image": "a.png", "mask": "mask.jpg"}])
    with pytest.raises(ValueError, match="JPEG"):
        ManifestDataset(str(tmp_path))


def test_too_small_image_is_refused(tmp_path: Path) -> None:
    files = {"tiny.png": _encode(_gray(20, 300, 1), "PNG"), "m.png": _encode(_labels(20, 300, 1), "PNG")}
    with pytest.raises(ValueError, match=r"tiny\.png is 20x300 px .* at least 32 px"):
        ManifestDataset(str(_write(tmp_path, files, [{"image": "tiny.png", "mask": "m.png"}])))


def test_mismatched_image_and_mask_name_both_files(tmp_path: Path) -> None:
    files = {"a.png": _encode(_gray(40, 64, 1), "PNG"), "m.png": _encode(_labels(40, 60, 1), "PNG")}
    dataset = ManifestDataset(str(_write(tmp_path, files, [{"image": "a.png", "mask": "m.png"}])))
    with pytest.raises(ValueError, match=r"mask .*m\.png is 40x60 px but image .*a\.png is 40x64"):
        dataset[0]


def test_bad_manifests_are_explained(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="needs a manifest.json"):
        ManifestDataset(str(tmp_path))
    (tmp_path / "manifest.json").write_text('{"items": []}')
    with pytest.raises(ValueError, match="non-empty"):
        ManifestDataset(str(tmp_path))
    escaping = [{"image": "../outside.png", "mask": "m.png"}]
    with pytest.raises(ValueError, match="relative path inside the dataset"):
        write_manifest(tmp_path, escaping)
    (tmp_path / "manifest.json").write_text(json.dumps({"items": escaping}))
    with pytest.raises(ValueError, match="relative path inside the dataset"):
        ManifestDataset(str(tmp_path))
    write_manifest(tmp_path, [{"image": "missing.png", "mask": "m.png"}])
    with pytest.raises(FileNotFoundError, match=r"missing\.png does not exist"):
        ManifestDataset(str(tmp_path))


@pytest.fixture(scope="module")
def s3() -> Iterator[Any]:
    """A real S3-compatible HTTP server (moto's server mode) on a free loopback port."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    client = boto3.client(
        "s3",
        endpoint_url=f"http://{host}:{port}",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    client.create_bucket(Bucket=BUCKET)
    yield client
    server.stop()


def test_s3_prefix_through_a_real_server(s3: Any) -> None:
    files = _dataset_files()
    for rel, data in files.items():
        s3.put_object(Bucket=BUCKET, Key=f"sets/run-1/{rel}", Body=data)
    s3.put_object(Bucket=BUCKET, Key="sets/run-1/manifest.json", Body=json.dumps({"items": ITEMS}).encode())
    _check_items(ManifestDataset(f"s3://{BUCKET}/sets/run-1/", s3_client=s3), files)


def test_s3_needs_an_injected_client_and_existing_keys(s3: Any) -> None:
    with pytest.raises(ValueError, match="pass an S3 client"):
        ManifestDataset(f"s3://{BUCKET}/sets/run-1")
    with pytest.raises(FileNotFoundError, match=f"s3://{BUCKET}/sets/nothing-here/manifest.json"):
        ManifestDataset(f"s3://{BUCKET}/sets/nothing-here", s3_client=s3)
