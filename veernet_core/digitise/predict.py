"""Inference: scan bytes -> grayscale image -> per-class probabilities, for a log of any width.

Depth runs along the width. Wide logs are cut into overlapping windows on the 32-px grid, run one at
a time and cross-faded into one preallocated output, so memory is the output arrays plus one tile,
whatever the width. A window starting on the 32-px grid sees the same pixels at the same phase of
the five stride-2 stages as the whole image does, so away from its ends it computes the same
convolutions; only GroupNorm statistics and the bottleneck's attention, which span the window
instead of the whole log, differ slightly. The overlap keeps each window's zero-padded ends (where
the convolutions do differ) out of the blend.

torch is imported where the network runs, not at the top: the API process loads scans with this module
(`load_image`, the layout analysis) and never runs the network.
"""

from __future__ import annotations

import hashlib
import io
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from veernet_core.checkpoint import deserialize
from veernet_core.config import ModelConfig, TrainConfig
from veernet_core.data import GRID, MIN_SIDE, align

if TYPE_CHECKING:
    import torch

    from veernet_core.model import VeerNet

ASSETS = Path(__file__).resolve().parents[1] / "assets"  # veernet_core/assets
BUNDLED_MODEL = "veernet-small.pt"
# The largest design scan is 12,800 x 640 px (8.2 Mpx); four times that leaves room for
# higher-resolution scans while refusing decompression bombs long before they exhaust memory.
DEFAULT_MAX_PIXELS = 4 * 12_800 * 640
# Reach of a window's zero-padded end into VeerNet's output: the five-stage U-Net's receptive
# field spans 129 px to one side (measured by perturbing one input column); rounded up to the grid.
CONTEXT_MARGIN = 160
DEFAULT_TILE_WIDTH = 4096  # wide windows keep GroupNorm statistics close to the whole log's
DEFAULT_OVERLAP = 384  # two context margins plus a 64-px cross-fade


class ImageRejected(ValueError):
    """The upload is not a usable scan: not an image, corrupt, or too small."""


class ImageTooLarge(ImageRejected):
    """The image has more pixels than allowed (a decompression bomb, or simply too big a scan)."""

    def __init__(self, pixels: int, max_pixels: int, size: tuple[int, int] | None = None) -> None:
        self.pixels, self.max_pixels, self.size = pixels, max_pixels, size
        shape = f"{size[0]}x{size[1]} = " if size else ""
        super().__init__(f"image is {shape}{pixels:,} px; the limit is {max_pixels:,} px "
                         "(scan at a lower resolution or crop the log)")


def bundled_model_path() -> Path:
    """The small VeerNet shipped with the package (see assets/README.md for how it was trained)."""
    return ASSETS / BUNDLED_MODEL


def read_checkpoint(source: bytes | str | Path) -> tuple[bytes, str]:
    """Checkpoint bytes and their sha256 (the model's identity in results) from bytes or a path."""
    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    return data, hashlib.sha256(data).hexdigest()


def load_model(source: bytes | str | Path, expected_sha256: str | None = None) -> tuple[VeerNet, ModelConfig]:
    """Rebuild VeerNet from a checkpoint's own `model_config` and weights, in eval mode on the CPU, with the
    pixel scale it was trained at (`VeerNet.trained_scale`)."""
    from veernet_core.model import VeerNet

    data, _ = read_checkpoint(source)
    state = deserialize(data, expected_sha256)
    raw = dict(state["model_config"])
    # The project's one validator for model configs; data.classes must agree with num_classes.
    config = TrainConfig.from_dict({"model": raw, "data": {"classes": raw.get("num_classes", 3)}}).model
    model = VeerNet(config)
    model.load_state_dict(state["model"])
    model.trained_scale = training_scale(state)
    return model.eval(), config


def training_scale(state: dict[str, Any]) -> float | None:
    """The pixel scale a checkpoint's model learned at: its synthetic logs' scale; None for labelled scans
    (manifest data), whose resolution the checkpoint does not record."""
    data = (state.get("train_config") or {}).get("data") or {}
    if data.get("kind", "synth") != "synth" or "scale" not in data:
        return None
    return float(data["scale"])


def load_image(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS, rotate_portrait: bool = False) -> np.ndarray:
    """PNG/TIFF/JPEG bytes -> uint8 (H, W) grayscale, paper bright; the first frame of a multi-page file.

    The size is checked from the header before any pixel is decoded. With `rotate_portrait`, a scan
    taller than wide is turned so that depth runs along the width (see `orient`).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our own limit applies below
            image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as exc:  # Pillow's own guard, far above any sensible limit
        claimed = re.search(r"\((\d+) pixels\)", str(exc))
        raise ImageTooLarge(int(claimed.group(1)) if claimed else max_pixels + 1, max_pixels) from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise ImageRejected("not an image Pillow can read (send a PNG, TIFF or JPEG scan)") from exc
    width, height = image.size
    if width * height > max_pixels:
        raise ImageTooLarge(width * height, max_pixels, (width, height))
    if width < MIN_SIDE or height < MIN_SIDE:
        raise ImageRejected(f"image is {width}x{height} px; both sides must be at least {MIN_SIDE} px")
    try:
        gray = _to_gray(image)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise ImageRejected(f"corrupt or truncated image file: {exc}") from exc
    return orient(gray, rotate_portrait)


def load_colour(data: bytes, rotate_portrait: bool = False) -> np.ndarray | None:
    """uint8 (H, W, 3) RGB of a colour scan, oriented as `load_image` orients its gray, for the naming step
    to see ink colours; None for a gray scan (or a colour file whose pixels are all gray). Call it after
    `load_image` has checked the file and its size."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # load_image has held it to the limit
        image: Image.Image = Image.open(io.BytesIO(data))
        if image.mode not in ("RGB", "RGBA", "P", "PA", "CMYK", "YCbCr", "LAB", "HSV"):
            return None
        image.load()
    image = ImageOps.exif_transpose(image)
    if image.mode in ("RGBA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        image = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba)
    rgb = np.array(image.convert("RGB"), dtype=np.uint8)
    if (rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all():
        return None
    if rotate_portrait and rgb.shape[0] > rgb.shape[1]:
        return np.ascontiguousarray(rgb.transpose(1, 0, 2))  # the same turn as `orient`: the transpose
    return rgb


def _to_gray(image: Image.Image) -> np.ndarray:
    image.load()
    image = ImageOps.exif_transpose(image)  # a camera's "rotate on display" tag, applied
    if image.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        pixels = np.asarray(image, dtype=np.float64)
        top = 255.0 if pixels.max(initial=0) <= 255 else 65535.0  # 8-bit data stored wide, else 16-bit
        return np.clip(np.rint(pixels * (255.0 / top)), 0, 255).astype(np.uint8)
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, rgba)  # transparent areas read as blank paper
    return np.array(image.convert("L"), dtype=np.uint8)


def orient(image: np.ndarray, rotate_portrait: bool) -> np.ndarray:
    """Turn a portrait scan (height > width) so depth runs along the width.

    A portrait log reads depth top to bottom and values left to right. Turning it a quarter so the
    shallow end is at the left (90 degrees counter-clockwise) would put the scale's left value at
    the bottom; the turn used here also keeps the scale's left value at the top, as on the paper,
    so a curve's left/right calibration means the same before and after. That turn is the transpose.
    """
    if rotate_portrait and image.shape[0] > image.shape[1]:
        return np.ascontiguousarray(image.T)
    return image


def tile_layout(width: int, tile_width: int, overlap: int) -> tuple[list[int], int]:
    """(start columns, window width) of the windows covering `width` aligned to 32.

    As few windows as `tile_width` allows, evenly spaced on the grid and narrowed to what they need,
    each overlapping the next by at least `overlap`; one window when the whole image fits.
    """
    if tile_width % GRID or overlap % GRID or tile_width < GRID or overlap < 0:
        raise ValueError(f"tile_width ({tile_width}) and overlap ({overlap}) must be multiples of {GRID}, "
                         f"tile_width at least {GRID}")
    if 2 * overlap >= tile_width:
        raise ValueError(f"overlap ({overlap}) must be less than half of tile_width ({tile_width})")
    padded = align(width)
    if padded <= tile_width:
        return [0], padded
    n = -(-(padded - overlap) // (tile_width - overlap))
    window = align(-(-(padded + (n - 1) * overlap) // n))  # n * window >= padded + (n - 1) * overlap
    # Spacing (padded - window) / (n - 1) <= window - overlap, so flooring starts to the grid keeps
    # every overlap at least `overlap`; the last window ends flush with the padded width.
    starts = [k * (padded - window) // (n - 1) // GRID * GRID for k in range(n)]
    return starts, window


def _blend_weights(window: int, overlap: int, first: bool, last: bool) -> np.ndarray:
    """Column weights of one window: zero within CONTEXT_MARGIN of a seam-side end (where the
    window's zero padding reaches the output), then a linear ramp up to 1; 1 at the log's own ends."""
    margin = min(CONTEXT_MARGIN, overlap // 2)
    ramp = np.float32(max(overlap - 2 * margin, 1))
    x = np.arange(window, dtype=np.float32) + np.float32(0.5)
    w = np.ones(window, dtype=np.float32)
    if not first:
        w = np.minimum(w, np.clip((x - margin) / ramp, 0, 1))
    if not last:
        w = np.minimum(w, np.clip((window - x - margin) / ramp, 0, 1))
    return w


# The network input of every gray level, as data.to_input computes it from g / 255 in float32: paper ~0,
# ink ~1. A table lookup gives the same values as the arithmetic, in one pass over the window.
_INPUT_OF_GRAY = 1.0 - np.arange(256, dtype=np.float32) / np.float32(255.0)


def _window_input(image: np.ndarray, start: int, window: int) -> torch.Tensor:
    """Network input (1, 1, H aligned, window) for columns [start, start + window), zero (blank
    paper) past the image, built from the uint8 image for this window only."""
    import torch

    height, width = image.shape
    stop = min(start + window, width)
    tensor = torch.zeros(1, 1, align(height), window)
    tensor[0, 0, :height, : stop - start] = torch.from_numpy(_INPUT_OF_GRAY[image[:, start:stop]])
    return tensor


def class_probabilities(logits: torch.Tensor) -> torch.Tensor:
    """Logits (N, out_channels, H, W) -> probabilities (N, num_classes, H, W); channel 0 is background."""
    import torch

    if logits.shape[1] == 1:
        curve = torch.sigmoid(logits)
        return torch.cat([1.0 - curve, curve], dim=1)
    return torch.softmax(logits, dim=1)


def predict_probabilities(model: VeerNet, image: np.ndarray, tile_width: int = DEFAULT_TILE_WIDTH,
                          overlap: int = DEFAULT_OVERLAP) -> np.ndarray:
    """uint8 (H, W) scan -> float32 (num_classes, H, W) class probabilities (channel 0 background).

    Windows of `tile_width` columns overlapping by `overlap`, run one at a time and cross-faded; an
    image no wider than one window runs whole.
    """
    import torch

    if image.ndim != 2 or image.dtype != np.uint8:
        raise ValueError(f"image must be uint8 (H, W) grayscale, got {image.dtype} {image.shape}; "
                         "convert colour scans with load_image")
    height, width = image.shape
    if height < MIN_SIDE or width < MIN_SIDE:
        raise ValueError(f"image is {width}x{height} px; both sides must be at least {MIN_SIDE} px")
    starts, window = tile_layout(width, tile_width, overlap)
    model.eval()
    if len(starts) == 1:  # one window: its probabilities are the answer (no blending, no copy into a sum)
        with torch.inference_mode():
            whole = class_probabilities(model(_window_input(image, 0, window)))[0, :, :height, :width]
        return np.ascontiguousarray(whole.numpy())
    weights = [_blend_weights(window, overlap, k == 0, k == len(starts) - 1)[: min(window, width - start)]
               for k, start in enumerate(starts)]
    total = np.zeros(width, dtype=np.float32)
    for start, w in zip(starts, weights, strict=True):
        total[start : start + w.size] += w
    out = np.zeros((model.config.num_classes, height, width), dtype=np.float32)
    with torch.inference_mode():
        for start, w in zip(starts, weights, strict=True):
            probs = class_probabilities(model(_window_input(image, start, window)))[0, :, :height].numpy()
            _blend(out, probs, w, total, start)
    shared = np.flatnonzero(total != 1.0)
    out[:, :, shared] /= total[shared]
    return out


def _blend(out: np.ndarray, probs: np.ndarray, w: np.ndarray, total: np.ndarray, start: int) -> None:
    """Add one window's probabilities times its weights to `out` from column `start`. The same sums as
    adding probs * w everywhere: a column this window has alone (weight 1 of a total 1) is copied, one
    it weighs 0 is skipped (adding +0.0 to a sum of probabilities changes nothing)."""
    alone = (w == 1.0) & (total[start : start + w.size] == 1.0)
    kind = np.where(alone, 1, np.where(w == 0.0, 0, 2))  # 1 copy, 0 skip, 2 weighted sum
    edges = np.flatnonzero(np.diff(kind)) + 1
    for a, b in zip([0, *edges.tolist()], [*edges.tolist(), w.size], strict=True):
        if kind[a] == 1:
            out[:, :, start + a : start + b] = probs[:, :, a:b]
        elif kind[a] == 2:
            out[:, :, start + a : start + b] += probs[:, :, a:b] * w[a:b]
