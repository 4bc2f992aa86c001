"""Reading a page scan for layout analysis: any TIFF mode, one page only, its resolution, its skew."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from PIL import Image

from veernet_core.digitise.layout.page import load_scan, measure_skew
from veernet_core.digitise.predict import ImageRejected, ImageTooLarge


def _page_pixels() -> np.ndarray:
    """Paper with three dark vertical lines and a dark block: enough to tell every mode's ink from paper."""
    pixels = np.full((120, 80), 240, np.uint8)
    pixels[:, [10, 40, 70]] = 0
    pixels[50:60, 20:30] = 0
    return pixels


def _tiff(image: Image.Image, **params: object) -> bytes:
    out = io.BytesIO()
    image.save(out, format="TIFF", **params)
    return out.getvalue()


@pytest.mark.parametrize("mode", ["1", "L", "I;16", "P", "RGB", "CMYK"])
def test_every_tiff_mode_reads_as_the_same_gray_page(mode: str) -> None:
    gray = Image.fromarray(_page_pixels())
    if mode == "I;16":
        image = Image.fromarray(_page_pixels().astype(np.uint16) * 257)  # 16-bit gray, full range
    elif mode == "1":
        image = gray.point(lambda v: 255 if v > 128 else 0).convert("1")
    else:
        image = gray.convert(mode)
    scan = load_scan(_tiff(image, dpi=(300, 300), compression="group4" if mode == "1" else "tiff_lzw"))
    ink = scan.image < 128
    assert ink.shape == (120, 80)
    assert np.array_equal(ink, _page_pixels() < 128), f"{mode}: ink where the page has ink, paper elsewhere"
    assert scan.dpi == 300


def test_a_multi_page_tiff_is_refused_naming_its_page_count() -> None:
    pages = [Image.fromarray(_page_pixels()) for _ in range(3)]
    out = io.BytesIO()
    pages[0].save(out, format="TIFF", save_all=True, append_images=pages[1:])
    with pytest.raises(ImageRejected, match="3 pages"):
        load_scan(out.getvalue())


def test_no_resolution_or_a_placeholder_one_is_none() -> None:
    assert load_scan(_tiff(Image.fromarray(_page_pixels()))).dpi is None
    assert load_scan(_tiff(Image.fromarray(_page_pixels()), dpi=(1, 1))).dpi is None


def test_too_many_pixels_and_not_an_image_are_refused() -> None:
    with pytest.raises(ImageTooLarge):
        load_scan(_tiff(Image.fromarray(_page_pixels())), max_pixels=1000)
    with pytest.raises(ImageRejected):
        load_scan(b"not an image at all")


@pytest.mark.parametrize("degrees", [-1.5, -0.3, 0.0, 0.45, 2.0])
def test_skew_is_measured_from_long_vertical_lines(degrees: float) -> None:
    pixels = np.full((3000, 900), 255, np.uint8)
    for col in (100, 300, 310, 620, 800):
        pixels[200:2800, col:col + 3] = 0
    turned = np.asarray(Image.fromarray(pixels).rotate(degrees, Image.Resampling.BILINEAR, fillcolor=255))
    skew = measure_skew(turned < 128)
    assert skew is not None
    assert skew.degrees == pytest.approx(degrees, abs=0.01)
    assert math.tan(math.radians(skew.degrees)) == pytest.approx(skew.slope)


def test_a_page_without_lines_has_no_skew() -> None:
    rng = np.random.default_rng(0)
    assert measure_skew(rng.random((2000, 600)) < 0.001) is None
