"""POST /scans/analyse over HTTP: a page's proposed calibration, and a clear 4xx for every bad upload."""

from __future__ import annotations

import io
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from api import scans
from api.settings import Settings
from veernet_core.digitise.layout.ocr import find_tesseract
from veernet_core.page_spec import PageSpec
from veernet_core.page_synth import PageOptions, generate_page

OPTIONS = PageOptions(dpi=150, turn=90, bitonal=False, sections=2, unit="ft", first_section_in=(4.0, 5.0),
                      second_section_in=(2.0, 2.5))


@cache
def _page() -> tuple[np.ndarray, PageSpec]:
    page = generate_page(5, 3, OPTIONS)
    return page.image, page.spec


def _tiff(image: Image.Image, **params: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, format="TIFF", **params)
    return out.getvalue()


def _post(client: TestClient, data: bytes, name: str = "page.tif", **form: Any) -> Any:
    return client.post("/scans/analyse", files={"file": (name, data, "image/tiff")},
                       data={k: str(v) for k, v in form.items()})


def _extents(proposal: dict[str, Any]) -> list[list[tuple[float, float]]]:
    return [[(t["extent"]["value"]["left"], t["extent"]["value"]["right"]) for t in s["tracks"]]
            for s in proposal["sections"]]


def test_a_page_gets_its_layout_proposed(client: TestClient) -> None:
    image, spec = _page()
    response = _post(client, _tiff(Image.fromarray(image), dpi=(150, 150), compression="tiff_lzw"))
    assert response.status_code == 200, response.text
    proposal = response.json()
    assert proposal["format"] == "veernet.page-calibration/1"
    assert proposal["orientation"]["turn"]["value"] == 90
    assert proposal["image"] == {"height": image.shape[0], "width": image.shape[1], "dpi": 150.0}
    found = _extents(proposal)
    truth = [[(t.left, t.right) for t in s.tracks] for s in spec.sections]
    assert len(found) == len(truth)
    for got, want in zip(found, truth, strict=True):
        assert np.allclose(got, want, atol=2.0), (got, want)
    for field in ("value", "confidence", "evidence"):
        assert field in proposal["sections"][0]["rows"]
    if find_tesseract() is not None:
        assert proposal["sections"][0]["scale"]["value"] == spec.sections[0].scale_name
        assert proposal["sections"][0]["depth"]["ticks"]["value"] is not None


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the decoding's subject, not the database's
@pytest.mark.parametrize("mode", ["1", "I;16", "P", "CMYK"])
def test_one_bit_sixteen_bit_palette_and_cmyk_tiffs_read_as_the_same_page(client: TestClient, mode: str) -> None:
    image, _ = _page()
    gray = Image.fromarray(image)
    if mode == "1":
        converted, params = gray.point(lambda v: 255 if v >= 160 else 0).convert("1"), {"compression": "group4"}
    elif mode == "I;16":
        converted, params = Image.fromarray(image.astype(np.uint16) * 257), {}
    else:
        converted, params = gray.convert(mode), {}
    assert converted.mode == mode
    reference = _post(client, _tiff(gray, dpi=(150, 150))).json()
    response = _post(client, _tiff(converted, dpi=(150, 150), **params))
    assert response.status_code == 200, response.text
    got, want = _extents(response.json()), _extents(reference)
    assert len(got) == len(want) and all(np.allclose(a, b, atol=1.5) for a, b in zip(got, want, strict=True))


def test_a_multi_page_tiff_is_422_naming_its_page_count(client: TestClient) -> None:
    page = Image.fromarray(np.full((200, 100), 240, np.uint8))
    out = io.BytesIO()
    page.save(out, format="TIFF", save_all=True, append_images=[page, page, page])
    response = _post(client, out.getvalue())
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["field"] == "file" and "4 pages" in error["message"] and "one page per request" in error["message"]


@pytest.mark.parametrize("size", [(900, 600), (40, 40)])
def test_a_page_without_a_grid_is_answered_with_empty_sections_and_what_to_supply(client: TestClient,
                                                                                  size: tuple[int, int]) -> None:
    blank = np.full(size, 240, np.uint8)
    blank[size[0] // 9:size[0] // 7, 5:size[1] - 5] = 20
    response = _post(client, _tiff(Image.fromarray(blank)))
    assert response.status_code == 200, response.text
    proposal = response.json()
    assert proposal["sections"] == []
    assert any("no log grid found" in m for m in proposal["messages"])
    assert any("states no resolution" in m for m in proposal["messages"])


@pytest.mark.parametrize(("data", "fragment"), [(b"not an image", "not an image"),
                                                (b"\x89PNG\r\n\x1a\n" + b"\0" * 20, "not an image")])
def test_unreadable_uploads_are_422(client: TestClient, data: bytes, fragment: str) -> None:
    response = _post(client, data, "scan.png")
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "file" and fragment in response.json()["detail"][0]["message"]


def test_pixel_and_byte_limits_are_413(client: TestClient, reconfigure: Callable[..., Settings]) -> None:
    image, _ = _page()
    data = _tiff(Image.fromarray(image))
    reconfigure(MAX_IMAGE_PIXELS=10_000)
    response = _post(client, data)
    assert response.status_code == 413 and "MAX_IMAGE_PIXELS" in response.json()["detail"][0]["message"]
    reconfigure(MAX_UPLOAD_BYTES=2048)
    small = _tiff(Image.fromarray(np.random.default_rng(0).integers(0, 255, (300, 200), dtype=np.uint8)))
    assert 2048 < len(small) < 1024 * 1024, "past the upload limit, within the form's allowance"
    response = _post(client, small)
    assert response.status_code == 413 and "MAX_UPLOAD_BYTES" in response.json()["detail"][0]["message"]
    response = _post(client, data)  # over the whole body's limit: refused before the route
    assert response.status_code == 413 and "MAX_UPLOAD_BYTES" in response.text


@pytest.mark.parametrize("dpi", ["10", "1e9", "nan", "three hundred"])
def test_a_bad_dpi_is_422(client: TestClient, dpi: str) -> None:
    image, _ = _page()
    response = _post(client, _tiff(Image.fromarray(image)), dpi=dpi)
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "dpi"


def test_a_stated_dpi_overrides_a_missing_one(client: TestClient) -> None:
    image, spec = _page()
    proposal = _post(client, _tiff(Image.fromarray(image)), dpi=150).json()
    assert not any("states no resolution" in m for m in proposal["messages"])
    if find_tesseract() is not None:
        assert [s["scale"]["value"] for s in proposal["sections"]] == [s.scale_name for s in spec.sections]


def test_when_every_slot_is_busy_it_is_503_with_retry_after(client: TestClient, service: Settings,
                                                             reconfigure: Callable[..., Settings]) -> None:
    settings = reconfigure(ANALYSE_CONCURRENCY=1)
    scans._take_slot(settings)  # an analysis in progress
    try:
        response = _post(client, _tiff(Image.fromarray(_page()[0])))
    finally:
        scans._give_slot()
    assert response.status_code == 503
    assert response.headers["retry-after"] == str(scans.RETRY_AFTER_S)
    assert "ANALYSE_CONCURRENCY" in response.json()["detail"]
    assert _post(client, _tiff(Image.fromarray(_page()[0]))).status_code == 200
