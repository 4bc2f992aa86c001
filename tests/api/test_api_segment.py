"""POST /segment: bad input is a clear 4xx naming what to fix; a good scan is queued on its own queue."""

from __future__ import annotations

import io
import json
import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from api.settings import Settings

CALIBRATION = {"depth": {"top": 1000.0, "bottom": 1010.0, "unit": "m"},
               "curves": [{"mnemonic": "GR", "unit": "API", "left": 0, "right": 150}],
               "track_top": 2, "track_bottom": 61, "step": 0.5}


def _png(width: int = 320, height: int = 64, mode: str = "L") -> bytes:
    pixels = np.full((height, width, 3) if mode == "RGB" else (height, width), 230, np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode).save(buffer, format="PNG")
    return buffer.getvalue()


def _bomb(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims width x height pixels (a decompression bomb)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(
        b"IEND", b"")


def _post(client: TestClient, data: bytes, options: Any = None, name: str = "scan.png") -> Any:
    form = {} if options is None else {"options": options if isinstance(options, str) else json.dumps(options)}
    return client.post("/segment", files={"file": (name, data, "image/png")}, data=form)


def test_a_good_scan_is_queued_on_the_inference_queue(client: TestClient, store: Any,
                                                       broker_messages: Callable[[str], list[Any]]) -> None:
    scan = _png(mode="RGB")
    response = _post(client, scan, {"calibration": CALIBRATION, "well": "A-1"})
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["kind"] == "segment" and job["status"] == "queued"
    assert response.headers["location"] == f"/jobs/{job['id']}"
    assert job["config"]["model"] == {"source": "bundled", "model_id": "bundled/veernet-small"}
    assert broker_messages("segment") == [("veernet.segment", [job["id"]])]
    assert broker_messages("train") == []
    assert store.get(f"segments/{job['id']}/input") == scan, "the scan is stored under the job's own id"


@pytest.mark.parametrize(("data", "field", "fragment"), [
    (b"definitely not an image", "file", "not a readable image"),
    (_png()[:60], "file", "not a readable image"),
    (_png(20, 64), "file", "at least 32 px"),
])
def test_unreadable_or_tiny_scans_are_422(client: TestClient, data: bytes, field: str, fragment: str) -> None:
    response = _post(client, data, {"calibration": CALIBRATION})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["field"] == field and fragment in error["message"]


def test_too_many_pixels_is_413_stating_the_limit(client: TestClient, reconfigure: Callable[..., Settings]) -> None:
    response = _post(client, _bomb(100_000, 100_000), {"calibration": CALIBRATION})
    assert response.status_code == 413
    assert "32768000 pixels" in response.json()["detail"][0]["message"]
    reconfigure(MAX_IMAGE_PIXELS=10_000)
    assert _post(client, _png(320, 64), {"calibration": CALIBRATION}).status_code == 413


def test_too_many_bytes_is_413(client: TestClient, reconfigure: Callable[..., Settings]) -> None:
    reconfigure(MAX_UPLOAD_BYTES=2048)
    noisy = np.random.default_rng(0).integers(0, 255, (64, 640), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(noisy).save(buffer, format="PNG")
    response = _post(client, buffer.getvalue(), {"calibration": CALIBRATION})
    assert response.status_code == 413 and "2048 bytes" in response.json()["detail"][0]["message"]


@pytest.mark.parametrize(("calibration", "field"), [
    ({**CALIBRATION, "depth": {"top": 1010.0, "bottom": 1000.0, "unit": "m"}}, "options.calibration.depth.bottom"),
    ({**CALIBRATION, "curves": [{"mnemonic": "RES", "unit": "ohmm", "left": 0, "right": 2000, "log": True}]},
     "options.calibration.curves[0].left"),
    ({**CALIBRATION, "step": -1}, "options.calibration.step"),
    ({"curves": CALIBRATION["curves"]}, "options.calibration.depth"),
])
def test_calibration_that_makes_no_sense_is_422_naming_the_field(client: TestClient, calibration: dict[str, Any],
                                                                 field: str) -> None:
    response = _post(client, _png(), {"calibration": calibration})
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == field


def _errors(response: Any) -> dict[str, str]:
    assert response.status_code == 422, response.text
    return {e["field"]: e["message"] for e in response.json()["detail"]}


def test_every_bad_calibration_field_is_reported_at_once(client: TestClient) -> None:
    bad = {**CALIBRATION, "step": -1, "depth": {"top": 1000.0, "bottom": 1010.0},
           "curves": [{"mnemonic": "GR", "left": 0, "right": 150, "wrap": True, "style": "wavy", "weight": "heavy"},
                      {"mnemonic": "SP", "left": "low", "right": 20, "ink": "grey", "colour": "red"}]}
    errors = _errors(_post(client, _png(), {"calibration": bad}))
    prefix = "options.calibration."
    assert set(errors) == {prefix + name for name in ("depth.unit", "curves[0].wrap", "curves[0].style",
                                                       "curves[0].weight", "curves[1].left", "curves[1].ink",
                                                       "curves[1].colour")}
    assert "none, right, left, both" in errors[prefix + "curves[0].wrap"]
    assert "solid, dashed, dotted, dash-dot" in errors[prefix + "curves[0].style"]
    assert "dark, light, red" in errors[prefix + "curves[1].ink"]
    assert errors[prefix + "curves[0].weight"] == "must be one of thin, thick, got 'heavy'"
    assert "allowed: mnemonic, unit, left, right, log, wrap, style, ink, weight, anchors" in \
        errors[prefix + "curves[1].colour"]


def test_a_good_calibration_with_a_bad_step_reports_the_step_too(client: TestClient) -> None:
    errors = _errors(_post(client, _png(), {"calibration": {**CALIBRATION, "step": -1, "track_top": 90}}))
    assert set(errors) == {"options.calibration.step", "options.calibration.track_top"}


@pytest.mark.parametrize("missing", ["track_top", "track_bottom", "step"])
def test_track_rows_and_step_are_required(client: TestClient, missing: str) -> None:
    calibration = {k: v for k, v in CALIBRATION.items() if k != missing}
    errors = _errors(_post(client, _png(), {"calibration": calibration}))
    assert errors == {f"options.calibration.{missing}": "is required"}


@pytest.mark.parametrize(("where", "extra", "field"), [
    ("top", {"dpi": 300}, "options.calibration.dpi"),
    ("depth", {"scale": 1}, "options.calibration.depth.scale"),
    ("anchor", {"confidence": 1}, "options.calibration.curves[0].anchors[0].confidence"),
])
def test_an_unknown_calibration_field_at_any_level_is_422_naming_it(client: TestClient, where: str,
                                                                    extra: dict[str, Any], field: str) -> None:
    calibration: dict[str, Any] = json.loads(json.dumps(CALIBRATION))
    calibration["curves"][0]["anchors"] = [{"depth": 1005.0, "value": 75.0}]
    target = {"top": calibration, "depth": calibration["depth"], "anchor": calibration["curves"][0]["anchors"][0]}
    target[where].update(extra)
    errors = _errors(_post(client, _png(), {"calibration": calibration}))
    assert list(errors) == [field] and "unknown field; allowed:" in errors[field]


def test_hints_and_named_wraps_are_accepted_and_kept(client: TestClient) -> None:
    curves = [{"mnemonic": "GR", "left": 0, "right": 150, "wrap": "both", "style": "dash-dot", "ink": "light",
               "anchors": [{"depth": 1004.0, "value": 80}]},
              {"mnemonic": "SP", "left": -80, "right": 20, "wrap": -1, "style": "solid", "ink": "red",
               "weight": "Thick"}]
    response = _post(client, _png(), {"calibration": {**CALIBRATION, "curves": curves}})
    assert response.status_code == 202, response.text
    kept = response.json()["config"]["calibration"]["curves"]
    assert [c["wrap"] for c in kept] == ["both", "left"]  # the older integer form, named
    assert kept[0]["anchors"] == [{"depth": 1004.0, "value": 80.0}] and kept[1]["ink"] == "red"
    assert (kept[0]["weight"], kept[1]["weight"]) == (None, "thick")


@pytest.mark.parametrize(("options", "field"), [
    (None, "options"), ("{not json", "options"), ({"calibration": CALIBRATION, "colour": 1}, "options.colour"),
    ({}, "options.calibration"), ({"calibration": CALIBRATION, "model": {"checkpoint_id": "x"}}, "options.model"),
    ({"calibration": CALIBRATION, "scan_scale": 0}, "options.scan_scale"),
    ({"calibration": CALIBRATION, "scan_scale": -1.0}, "options.scan_scale"),
    ({"calibration": CALIBRATION, "scan_scale": "300dpi"}, "options.scan_scale"),
    ({"calibration": CALIBRATION, "scan_scale": True}, "options.scan_scale"),
    ({"calibration": CALIBRATION, "scan_scale": 1e9}, "options.scan_scale"),
])
def test_bad_options_are_422(client: TestClient, options: Any, field: str) -> None:
    response = _post(client, _png(), options)
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == field


def test_a_stated_scan_scale_is_kept_with_the_job(client: TestClient) -> None:
    response = _post(client, _png(), {"calibration": CALIBRATION, "scan_scale": 0.5})
    assert response.status_code == 202, response.text
    assert response.json()["config"]["scan_scale"] == 0.5
    assert _post(client, _png(), {"calibration": CALIBRATION}).json()["config"]["scan_scale"] is None


def test_an_unknown_model_is_404(client: TestClient) -> None:
    assert _post(client, _png(), {"calibration": CALIBRATION, "model": {"checkpoint_id": 999}}).status_code == 404
    assert _post(client, _png(), {"calibration": CALIBRATION, "model": {"job_id": 999}}).status_code == 404


def test_results_of_unknown_unfinished_or_training_jobs(client: TestClient) -> None:
    assert client.get("/jobs/999/result").status_code == 404
    job = _post(client, _png(), {"calibration": CALIBRATION}).json()
    response = client.get(f"/jobs/{job['id']}/result.las")
    assert response.status_code == 409 and "queued" in response.json()["detail"]
    train = client.post("/jobs", json={"kind": "train", "config": {"data": {"dataset_size": 40}}}).json()
    assert client.get(f"/jobs/{train['id']}/result").status_code == 404


def test_the_openapi_schema_describes_every_calibration_and_train_config_field(client: TestClient) -> None:
    from veernet_core.digitise.calibration_fields import CALIBRATION_FIELDS
    from veernet_core.reference import config_descriptions

    schema = client.get("/openapi.json").json()
    form = next(iter(schema["paths"]["/segment"]["post"]["requestBody"]["content"].values()))["schema"]
    ref = form["$ref"].rsplit("/", 1)[-1] if "$ref" in form else None
    options = (schema["components"]["schemas"][ref] if ref else form)["properties"]["options"]
    assert all(f"`{f.path}` ({f.summary}): {f.description}" in options["description"] for f in CALIBRATION_FIELDS)
    config = schema["components"]["schemas"]["JobCreate"]["properties"]["config"]
    assert config["properties"]["epochs"]["description"] == config_descriptions()["epochs"]
    assert config["properties"]["model"]["properties"]["num_classes"]["description"]


# A section of a 400 x 600 px portrait page (stored as is: turn 0), written by hand with plain values.
PAGE_CALIBRATION = {"orientation": {"turn": 0, "skew_deg": 0.0},
                    "sections": [{"rows": {"top": 100, "bottom": 560},
                                  "depth": {"unit": "ft", "ticks": [[100, 1000.0], [560, 1150.0]]},
                                  "tracks": [{"extent": {"left": 20, "right": 180},
                                              "curves": [{"mnemonic": "GR", "unit": "API", "left": 0, "right": 150}]},
                                             {"extent": {"left": 220, "right": 380},
                                              "curves": [{"mnemonic": "ILD", "unit": "OHMM", "left": 0.2,
                                                          "right": 2000, "log": True}]}]}]}


def _triples(value: Any) -> Any:
    """The page calibration as the proposal writes it: every leaf field a {value, confidence, evidence} triple."""
    return {"value": value, "confidence": 0.9, "evidence": "read"}


def test_a_page_calibration_is_queued_in_its_plain_checked_form(client: TestClient) -> None:
    response = _post(client, _png(400, 600), {"page_calibration": PAGE_CALIBRATION})
    assert response.status_code == 202, response.text
    kept = response.json()["config"]["page_calibration"]
    assert kept["section"] == 0 and kept["image"] == {"height": 600, "width": 400, "dpi": None}
    assert kept["step"] == 0.5, "default: the least round step at or above one row (0.33 ft)"
    assert [c["mnemonic"] for t in kept["sections"][0]["tracks"] for c in t["curves"]] == ["GR", "ILD"]
    assert "calibration" not in response.json()["config"]


def test_a_proposal_with_nulls_left_is_422_naming_each_value_to_fill_in(client: TestClient) -> None:
    proposal = json.loads(json.dumps(PAGE_CALIBRATION))
    proposal["format"] = "veernet.page-calibration/1"
    proposal["orientation"] = {"turn": _triples(0), "skew_deg": _triples(0.0)}
    curve = proposal["sections"][0]["tracks"][1]["curves"][0]
    proposal["sections"][0]["tracks"][1]["curves"][0] = {**{k: _triples(v) for k, v in curve.items()},
                                                         "right": _triples(None), "style": _triples(None),
                                                         "header_row": 80.0}
    proposal["sections"][0]["depth"]["ticks"] = _triples(None)
    errors = _errors(_post(client, _png(400, 600), {"page_calibration": proposal}))
    prefix = "options.page_calibration.sections[0]."
    assert set(errors) == {prefix + "tracks[1].curves[0].right", prefix + "depth.ticks"}
    assert "not filled in" in errors[prefix + "tracks[1].curves[0].right"]


@pytest.mark.parametrize(("change", "field", "fragment"), [
    (lambda c: c["sections"][0]["tracks"][1]["curves"][0].update(mnemonic="gr"),
     "sections[0].tracks[1].curves[0].mnemonic", "own mnemonic"),
    (lambda c: c["sections"][0]["tracks"][0]["curves"][0].update(right=0),
     "sections[0].tracks[0].curves[0].right", "must differ from left"),
    (lambda c: c["sections"][0]["tracks"][1]["extent"].update(right=400),
     "sections[0].tracks[1].extent.right", "inside the page"),
    (lambda c: c["sections"][0]["depth"].update(ticks=[[100, 1150.0], [560, 1000.0]]),
     "sections[0].depth.ticks", "deepen down the page"),
    (lambda c: c["sections"][0]["tracks"][0].update(width=3), "sections[0].tracks[0].width", "unknown field"),
    (lambda c: c.update(image={"height": 601, "width": 400}), "image.height", "another scan"),
    (lambda c: c.update(sections=[c["sections"][0], {}]), "section", "give the index"),
    (lambda c: c["orientation"].update(turn=90), "sections[0].rows.bottom", "inside the page"),  # 400 rows tall
    (lambda c: c.update(step=1000), "step", "depth span"),
])
def test_a_bad_page_calibration_is_422_naming_the_field(client: TestClient, change: Callable[[dict[str, Any]], None],
                                                        field: str, fragment: str) -> None:
    calibration = json.loads(json.dumps(PAGE_CALIBRATION))
    change(calibration)
    errors = _errors(_post(client, _png(400, 600), {"page_calibration": calibration}))
    assert fragment in errors[f"options.page_calibration.{field}"], errors


@pytest.mark.parametrize(("options", "field"), [
    ({"page_calibration": PAGE_CALIBRATION, "calibration": CALIBRATION}, "options.page_calibration"),
    ({"page_calibration": PAGE_CALIBRATION, "rotate_portrait": True}, "options.rotate_portrait"),
    ({"page_calibration": [PAGE_CALIBRATION]}, "options.page_calibration.page_calibration"),
])
def test_page_calibration_options_that_conflict_are_422(client: TestClient, options: dict[str, Any],
                                                        field: str) -> None:
    assert field in _errors(_post(client, _png(400, 600), options))
