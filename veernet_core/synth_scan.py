"""Paper, ink and the scanner for `veernet_core.synth`: tone, stains, blur, noise, 1-bit scans, JPEG.

Inks combine as absorbers: a pixel's tone is the paper's times (1 - absorbance) of every layer over
it, so a light-gray curve crossing a black one stays black, and a gray level `ink` (on white paper of
tone `WHITE`) absorbs 1 - ink / WHITE. Every function draws from the caller's
`numpy.random.Generator`.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

WHITE = 235.0  # the paper tone at which an ink's gray level is stated
BAYER_8 = np.array([[0, 32, 8, 40, 2, 34, 10, 42], [48, 16, 56, 24, 50, 18, 58, 26],
                    [12, 44, 4, 36, 14, 46, 6, 38], [60, 28, 52, 20, 62, 30, 54, 22],
                    [3, 35, 11, 43, 1, 33, 9, 41], [51, 19, 59, 27, 49, 17, 57, 25],
                    [15, 47, 7, 39, 13, 45, 5, 37], [63, 31, 55, 23, 61, 29, 53, 21]], np.float32)


def absorbance(ink: float) -> float:
    """How much of the paper's light an ink of this gray level takes away."""
    return 1.0 - ink / WHITE


def paper(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """Off-white paper whose tone drifts slowly across the sheet."""
    coarse = rng.normal(0.0, rng.uniform(2, 8), (4, max(2, width // 800))).astype(np.float32)
    drift = Image.fromarray(coarse).resize((width, height), Image.Resampling.BILINEAR)
    return np.float32(rng.uniform(200, 242)) + np.asarray(drift, np.float32)


def stain(rng: np.random.Generator, tone: np.ndarray, count: int) -> None:
    """Darken the paper in place with `count` soft blotches, each with the darker rim of a dried drop."""
    height, width = tone.shape
    rows, cols = np.ogrid[:height, :width]
    for _ in range(count):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        ry = rng.uniform(0.2, 1.2) * height
        rx = ry * rng.uniform(0.6, 3.0)
        r = np.sqrt(((rows - cy) / ry) ** 2 + ((cols - cx) / rx) ** 2).astype(np.float32)
        body = np.clip(1.0 - r, 0.0, 1.0) * np.float32(rng.uniform(0.02, 0.08))
        rim = np.exp(-(((r - 1.0) / 0.06) ** 2)) * np.float32(rng.uniform(0.02, 0.1))
        tone *= 1.0 - (body + rim)


def blur(image: np.ndarray, a: float) -> np.ndarray:
    """Separable 3-tap blur [a, 1 - 2a, a] along both axes, edges replicated."""
    for axis in (0, 1):
        padded = np.pad(image, [(1, 1) if ax == axis else (0, 0) for ax in (0, 1)], mode="edge")
        lead = padded[:-2] if axis == 0 else padded[:, :-2]
        trail = padded[2:] if axis == 0 else padded[:, 2:]
        image = np.float32(1 - 2 * a) * image + np.float32(a) * (lead + trail)
    return image


def finish(rng: np.random.Generator, tone: np.ndarray, transmit: np.ndarray, bilevel: str) -> np.ndarray:
    """Scan a page of paper `tone` under inks letting through `transmit` of its light: dust specks,
    blur and sensor noise, then a 1-bit scan when `bilevel` says so; returns uint8."""
    height, width = transmit.shape
    specks = int(rng.poisson(height * width / 50000))
    ys, xs = rng.integers(0, height, specks), rng.integers(0, width, specks)
    transmit[ys, xs] = np.minimum(transmit[ys, xs], rng.uniform(0.3, 0.8, specks).astype(np.float32))
    image = tone * transmit
    image = blur(image, rng.uniform(0.0, 0.06) if bilevel != "none" else rng.uniform(0.04, 0.2))
    image += rng.standard_normal((height, width), dtype=np.float32) * np.float32(rng.uniform(1.5, 6))
    if bilevel == "threshold":
        # Adaptive, as archive scanners threshold: halfway from the paper to the faintest ink (absorbing
        # at least a quarter), so every stroke survives and stains mostly do not.
        image = np.where(image < tone * np.float32(1 - rng.uniform(0.08, 0.12)), 0.0, 255.0)
    elif bilevel == "dither":
        darkness = 1.0 - image / tone
        gain = np.float32(rng.uniform(2.0, 3.0))  # the scanner's contrast before the dither
        cells = np.tile(BAYER_8, (height // 8 + 1, width // 8 + 1))[:height, :width]
        image = np.where(darkness * gain > (cells + 0.5) / 64, 0.0, 255.0)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def jpeg(image: np.ndarray, quality: int) -> np.ndarray:
    """The image after a round trip through JPEG at this quality."""
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=quality)
    return np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("L"), dtype=np.uint8).copy()
