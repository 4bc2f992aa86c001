"""Inference: loading checkpoints and scans, tiled prediction equal to whole-image prediction, bounded tiles."""

from __future__ import annotations

import hashlib
import io
import json
import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from veernet_core.checkpoint import CheckpointError, deserialize, serialize
from veernet_core.config import ModelConfig, TrainConfig
from veernet_core.data import GRID, to_input
from veernet_core.digitise.curves import channel_plan
from veernet_core.digitise.predict import (
    CONTEXT_MARGIN,
    DEFAULT_OVERLAP,
    DEFAULT_TILE_WIDTH,
    ImageRejected,
    ImageTooLarge,
    _blend_weights,
    _window_input,
    bundled_model_path,
    class_probabilities,
    load_image,
    load_model,
    orient,
    predict_probabilities,
    read_checkpoint,
    tile_layout,
)
from veernet_core.digitise.tracer import trace_curves
from veernet_core.losses import LossWeights
from veernet_core.model import VeerNet
from veernet_core.sampler import BucketBatchSampler
from veernet_core.synth import generate
from veernet_core.trainer import Trainer

TINY = ModelConfig(num_classes=2, widths=(8, 8, 16, 16, 32, 32), transformer_heads=2, transformer_ff=64)


def checkpoint_bytes(model: ModelConfig) -> bytes:
    """A checkpoint written by the project's own trainer state (all keys, untrained weights)."""
    config = TrainConfig.from_dict({"model": TrainConfig(model=model).to_dict()["model"],
                                    "data": {"classes": model.num_classes, "dataset_size": 4, "scale": 0.1},
                                    "effective_batch": 2, "device": "cpu"})
    sampler = BucketBatchSampler({0: (32, 64), 1: (32, 64), 2: (32, 64)}, 2, 0, 2, 0)
    trainer = Trainer(config, torch.device("cpu"), sampler, 0, LossWeights())
    return serialize(trainer.state_dict())[0]


def tiny_model(config: ModelConfig = TINY) -> VeerNet:
    torch.manual_seed(0)
    return VeerNet(config).eval()


class _AffineOnly(nn.Module):
    """A GroupNorm with its statistics frozen (mean 0, variance 1): keeps the affine, drops the
    image-wide statistics, so only the receptive field links an output pixel to its inputs."""

    def __init__(self, norm: nn.GroupNorm) -> None:
        super().__init__()
        self.weight, self.bias = norm.weight, norm.bias

    def forward(self, x: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        return x * self.weight.view(1, -1, 1, 1) + self.bias.view(1, -1, 1, 1)


def local_only(model: VeerNet) -> VeerNet:
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.GroupNorm):
                setattr(parent, name, _AffineOnly(child))
    return model


def png_bytes(array: np.ndarray, mode: str | None = None) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array, mode=mode).save(buffer, format="PNG")
    return buffer.getvalue()


# --- checkpoints ---------------------------------------------------------------------------------

def test_load_model_rebuilds_from_the_checkpoint_config_alone() -> None:
    data = checkpoint_bytes(TINY)
    model, config = load_model(data, expected_sha256=hashlib.sha256(data).hexdigest())
    assert config == TINY
    assert not model.training
    reference = tiny_model()
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), reference.state_dict().values(),
                                                 strict=True))


def test_a_corrupt_checkpoint_is_refused() -> None:
    data = bytearray(checkpoint_bytes(TINY))
    with pytest.raises(CheckpointError, match="sha256 mismatch"):
        load_model(bytes(data), expected_sha256="0" * 64)
    with pytest.raises(CheckpointError, match="unreadable"):
        load_model(bytes(data[: len(data) // 2]))


def test_the_bundled_model_loads_and_matches_its_readme() -> None:
    path = bundled_model_path()
    data, sha256 = read_checkpoint(path)
    model, config = load_model(path)
    recipe = json.loads((path.parent / "bundled-config.json").read_text())
    assert config.num_classes == recipe["model"]["num_classes"] and not model.training
    trained_with = deserialize(data)["train_config"]
    # The same run once fields added since take their defaults (which leave a run as it was).
    assert TrainConfig.from_dict(recipe).to_dict() == TrainConfig.from_dict(trained_with).to_dict(), \
        "bundled-config.json is what it was trained with"
    assert model.trained_scale == recipe["data"]["scale"]
    readme = (path.parent / "README.md").read_text()
    assert sha256 in readme, "assets/README.md must state the bundled checkpoint's sha256"
    assert len(data) < 5_000_000
    assert re.search(r"python -m veernet_core train .*--config veernet_core/assets/bundled-config.json", readme)


# --- images --------------------------------------------------------------------------------------

def test_colour_scans_become_grayscale_and_transparency_reads_as_paper() -> None:
    rgb = np.zeros((40, 64, 3), np.uint8)
    rgb[..., 0] = 200
    rgb[..., 2] = 100
    gray = load_image(png_bytes(rgb))
    assert gray.dtype == np.uint8 and gray.shape == (40, 64)
    assert int(gray[0, 0]) == round(200 * 299 / 1000 + 100 * 114 / 1000)  # ITU-R 601-2 luma, as Pillow
    rgba = np.zeros((40, 64, 4), np.uint8)  # fully transparent black
    assert (load_image(png_bytes(rgba)) == 255).all()


def test_sixteen_bit_tiff_and_jpeg_scans_load() -> None:
    deep = (np.arange(40 * 64, dtype=np.uint16).reshape(40, 64) * 25).astype(np.uint16)
    buffer = io.BytesIO()
    Image.fromarray(deep).save(buffer, format="TIFF")
    gray = load_image(buffer.getvalue())
    assert gray.shape == (40, 64) and int(gray.max()) == round(int(deep.max()) * 255 / 65535)
    buffer = io.BytesIO()
    Image.fromarray(np.full((40, 64), 180, np.uint8)).save(buffer, format="JPEG")
    assert abs(int(load_image(buffer.getvalue()).mean()) - 180) <= 1


def test_portrait_scans_turn_so_depth_runs_along_the_width() -> None:
    portrait = np.zeros((200, 50), np.uint8)
    portrait[10, 3] = 255  # shallow (near the top), near the scale's left edge
    turned = load_image(png_bytes(portrait), rotate_portrait=True)
    assert turned.shape == (50, 200)
    assert turned[3, 10] == 255  # shallow at the left, the scale's left edge at the top
    assert orient(turned, rotate_portrait=True) is turned  # already landscape: untouched
    assert load_image(png_bytes(portrait)).shape == (200, 50)


def _png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header claims a huge size over a tiny body: a decompression bomb's signature."""
    data = png_bytes(np.zeros((1, 1), np.uint8))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return data[:8] + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk)) + data[33:]


@pytest.mark.parametrize(("data", "error", "message"), [
    (b"not an image at all", ImageRejected, "not an image"),
    (png_bytes(np.zeros((64, 64), np.uint8))[:60], ImageRejected, "corrupt or truncated"),
    (png_bytes(np.zeros((20, 300), np.uint8)), ImageRejected, "at least 32 px"),
    (_png_claiming(100_000, 100_000), ImageTooLarge, "10,000,000,000 px; the limit is 1,000,000 px"),
    (_png_claiming(3_000, 2_000), ImageTooLarge, "3000x2000 = 6,000,000 px; the limit is 1,000,000 px"),
    (png_bytes(np.zeros((1200, 1000), np.uint8)), ImageTooLarge, "1000x1200 = 1,200,000 px"),
])
def test_bad_scans_are_refused_with_a_clear_error(data: bytes, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message) as caught:
        load_image(data, max_pixels=1_000_000)
    assert isinstance(caught.value, ValueError)


def test_too_large_states_its_limit() -> None:
    with pytest.raises(ImageTooLarge) as caught:
        load_image(_png_claiming(50_000, 50_000), max_pixels=2_000_000)
    assert caught.value.max_pixels == 2_000_000 and caught.value.pixels == 2_500_000_000


# --- tiling --------------------------------------------------------------------------------------

@pytest.mark.parametrize("width", [32, 1000, 4096, 4097, 9000, 12_800, 40_000])
def test_windows_sit_on_the_grid_cover_the_log_and_overlap_enough(width: int) -> None:
    tile, overlap = 4096, 384
    starts, window = tile_layout(width, tile, overlap)
    padded = -(-width // GRID) * GRID
    assert window <= tile and window % GRID == 0 and all(s % GRID == 0 for s in starts)
    assert starts[0] == 0 and starts[-1] + window == padded
    if len(starts) > 1:
        assert min(window - (b - a) for a, b in zip(starts, starts[1:], strict=False)) >= overlap
    assert len(starts) * window - padded < len(starts) * (overlap + GRID)  # no wasted windows


def test_tiled_equals_whole_image_where_only_the_receptive_field_links_pixels() -> None:
    """With image-wide statistics frozen and no attention, every output pixel depends on its receptive
    field alone; the context margin keeps tile ends out of it, so tiling changes nothing."""
    model = local_only(tiny_model(ModelConfig(num_classes=2, widths=(8, 8, 16, 16, 32, 32),
                                              transformer_layers=0, transformer_heads=2, transformer_ff=64)))
    image = generate(7, 3, 0.25, classes=2).image
    whole = predict_probabilities(model, image, tile_width=-(-image.shape[1] // GRID) * GRID, overlap=0)
    tiled = predict_probabilities(model, image, tile_width=768, overlap=2 * CONTEXT_MARGIN)
    assert len(tile_layout(image.shape[1], 768, 2 * CONTEXT_MARGIN)[0]) >= 3
    np.testing.assert_allclose(tiled, whole, atol=2e-5)


def test_tiled_is_close_to_whole_image_with_the_bundled_model() -> None:
    """GroupNorm statistics and attention span the window, not the log: close, not identical."""
    model, config = load_model(bundled_model_path())
    log = next(g for g in (generate(424242, i, 0.1, classes=config.num_classes) for i in range(80))
               if g.image.shape[1] > 1100 and len(g.curves) == 1)  # one channel, one curve: traces pair up
    image = log.image
    whole = predict_probabilities(model, image)
    tiled = predict_probabilities(model, image, tile_width=512, overlap=192)
    assert len(tile_layout(image.shape[1], 512, 192)[0]) >= 3
    assert float(np.abs(tiled - whole).mean()) < 2e-3
    assert ((tiled[0] < 0.5) != (whole[0] < 0.5)).mean() < 1e-3  # curve vs paper agrees almost everywhere
    top, bottom = log.track
    for channel, members in channel_plan(config.num_classes, len(log.curves)):
        for a, b in zip(trace_curves(whole[channel], top, bottom, len(members)),
                        trace_curves(tiled[channel], top, bottom, len(members)), strict=True):
            both = np.isfinite(a.row) & np.isfinite(b.row)
            assert both.mean() > 0.9
            assert np.median(np.abs(a.row - b.row)[both]) < 0.05  # centrelines agree to a few hundredths of a px


def _weighted_average(model: VeerNet, image: np.ndarray, tile_width: int, overlap: int) -> np.ndarray:
    """Tiled prediction as the plain formula: every window's probabilities times its weights, summed
    in window order over all its columns, divided by the summed weights."""
    height, width = image.shape
    starts, window = tile_layout(width, tile_width, overlap)
    out = np.zeros((model.config.num_classes, height, width), dtype=np.float32)
    total = np.zeros(width, dtype=np.float32)
    with torch.inference_mode():
        for k, start in enumerate(starts):
            pixels = torch.from_numpy(image[:, start : start + window].astype(np.float32) / np.float32(255.0))
            x = torch.zeros(1, 1, -(-height // GRID) * GRID, window)
            x[0, 0, :height, : pixels.shape[1]] = to_input(pixels)
            probs = class_probabilities(model(x))[0, :, :height].numpy()
            cols = min(window, width - start)
            w = _blend_weights(window, overlap, k == 0, k == len(starts) - 1)[:cols]
            out[:, :, start : start + cols] += probs[:, :, :cols] * w
            total[start : start + cols] += w
    return out / total


@pytest.mark.parametrize(("width", "tile_width", "overlap"), [(1000, 4096, 384), (1500, 512, 192), (2000, 640, 256),
                                                             (3001, 1024, 384)])
def test_tiled_prediction_is_the_weighted_average_bit_for_bit(width: int, tile_width: int, overlap: int) -> None:
    """Inputs from a lookup table, columns a window has alone copied and zero weights skipped: the
    same float32 values as the plain weighted average, not merely close."""
    image = np.random.default_rng(width).integers(0, 256, (61, width), dtype=np.uint8)
    model = tiny_model(ModelConfig(num_classes=3, widths=(8, 8, 16, 16, 32, 32), transformer_heads=2,
                                   transformer_ff=64))
    starts, window = tile_layout(width, tile_width, overlap)
    assert len(starts) == 1 if width == 1000 else len(starts) >= 3  # one whole window, or seams
    for start in starts:
        pixels = image[:, start : start + window].astype(np.float32) / np.float32(255.0)
        assert torch.equal(_window_input(image, start, window)[0, 0, :61, : pixels.shape[1]],
                           to_input(torch.from_numpy(pixels)))
    expected = _weighted_average(model, image, tile_width, overlap)
    np.testing.assert_array_equal(predict_probabilities(model, image, tile_width, overlap), expected)


def test_memory_is_bounded_by_the_window_not_the_width() -> None:
    """The network only ever sees one window: more windows for a wider log, never a larger one."""
    model = tiny_model()
    shapes: list[tuple[int, ...]] = []
    hook = model.register_forward_hook(lambda _m, inputs, _o: shapes.append(tuple(inputs[0].shape)))
    try:
        counts = []
        for width in (2_000, 8_000, 20_000):
            shapes.clear()
            predict_probabilities(model, np.full((48, width), 230, np.uint8), tile_width=1024, overlap=384)
            assert all(s[0] == 1 and s[2] == 64 and s[3] <= 1024 for s in shapes)
            counts.append(len(shapes))
    finally:
        hook.remove()
    assert counts[0] < counts[1] < counts[2]


def test_probabilities_are_a_distribution_over_classes() -> None:
    model = tiny_model(ModelConfig(num_classes=3, widths=(8, 8, 16, 16, 32, 32), transformer_heads=2,
                                   transformer_ff=64))
    image = generate(3, 1, 0.1, classes=3).image
    probs = predict_probabilities(model, image, tile_width=512, overlap=128)
    assert probs.shape == (3, *image.shape) and probs.dtype == np.float32
    np.testing.assert_allclose(probs.sum(axis=0), 1.0, atol=1e-5)


def test_non_grayscale_input_is_refused() -> None:
    with pytest.raises(ValueError, match="uint8"):
        predict_probabilities(tiny_model(), np.zeros((64, 64, 3), np.uint8))
    with pytest.raises(ValueError, match="multiples of 32"):
        predict_probabilities(tiny_model(), np.zeros((64, 64), np.uint8), tile_width=100)


def test_bundled_model_path_is_inside_the_package() -> None:
    assert bundled_model_path().parent == Path(__file__).resolve().parents[2] / "veernet_core" / "assets"


def _activation_bytes_per_call(model: VeerNet, image: np.ndarray, tile_width: int, overlap: int) -> int:
    """Bytes of every module's output within one call of the network, the largest over the calls:
    what one forward pass holds at most (inference frees most of it sooner)."""
    per_call = [0]

    def count(module: nn.Module, _inputs: object, output: object) -> None:
        if module is model:
            per_call.append(0)
        elif isinstance(output, torch.Tensor):
            per_call[-1] += output.numel() * output.element_size()

    hooks = [m.register_forward_hook(count) for m in model.modules()]
    try:
        predict_probabilities(model, image, tile_width=tile_width, overlap=overlap)
    finally:
        for hook in hooks:
            hook.remove()
    return max(per_call)


def test_activation_memory_of_tiled_inference_does_not_grow_with_width() -> None:
    """Measured per network call: the same for a log 2.5x wider once it is tiled; whole-image inference
    of the wider log would hold proportionally more."""
    model = tiny_model()
    tiled = {width: _activation_bytes_per_call(model, np.full((48, width), 230, np.uint8), 1024, 384)
             for width in (8_000, 20_000)}
    assert tiled[20_000] <= tiled[8_000] * 1.05  # windows differ by a grid step or two at most
    whole = _activation_bytes_per_call(model, np.full((48, 8_000), 230, np.uint8), 8_000, 0)
    assert whole > 5 * tiled[20_000]


def test_tiled_equals_whole_at_the_default_tiles_where_only_the_receptive_field_links_pixels() -> None:
    """The service's own tile width and overlap (DEFAULT_*) on a log several windows wide."""
    model = local_only(tiny_model(ModelConfig(num_classes=2, widths=(8, 8, 16, 16, 32, 32),
                                              transformer_layers=0, transformer_heads=2, transformer_ff=64)))
    rng = np.random.default_rng(5)
    image = (255 - rng.integers(0, 2, (40, 9_000)) * rng.integers(0, 256, (40, 9_000))).astype(np.uint8)
    assert len(tile_layout(image.shape[1], DEFAULT_TILE_WIDTH, DEFAULT_OVERLAP)[0]) >= 3
    whole = predict_probabilities(model, image, tile_width=-(-image.shape[1] // GRID) * GRID, overlap=0)
    tiled = predict_probabilities(model, image)
    np.testing.assert_allclose(tiled, whole, atol=2e-5)
