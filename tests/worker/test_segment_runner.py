"""A scan through the whole segment path: POST /segment, the worker's runner, every result format."""

from __future__ import annotations

import io
import json
from typing import Any

import lasio
import numpy as np
from PIL import Image

from api.settings import Settings
from veernet_core.synth import generate
from worker.segment_runner import run_segment_job


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def test_a_synthetic_scan_is_digitised_into_every_format(client: Any, service: Settings) -> None:
    # One curve: two curves drawn alike still swap identity at crossings (issue 5), which this
    # pipeline test is not about.
    log = next(g for g in (generate(seed=90_210, index=i, scale=0.12, classes=3) for i in range(50))
               if len(g.curves) == 1)
    options = {"calibration": log.calibration(), "well": "SYNTH-1"}
    response = client.post("/segment", files={"file": ("log.png", _png(log.image), "image/png")},
                           data={"options": json.dumps(options)})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]

    assert run_segment_job(job_id) == "succeeded"
    assert run_segment_job(job_id) == "ignored", "a duplicate delivery of a finished job changes nothing"
    job = client.get(f"/jobs/{job_id}").json()
    assert job["status"] == "succeeded" and job["attempt"] == 1

    result = client.get(f"/jobs/{job_id}/result").json()
    mnemonics = [c.scale.mnemonic for c in log.curves]
    assert [curve["mnemonic"] for curve in result["curves"]] == mnemonics
    height, width = log.image.shape
    las = lasio.read(client.get(f"/jobs/{job_id}/result.las").text)
    assert [c.mnemonic for c in las.curves][1:] == mnemonics
    assert las.well["STEP"].value > 0 and las.well["NULL"].value == -999.25
    csv_lines = client.get(f"/jobs/{job_id}/result.csv").text.splitlines()
    header = csv_lines[0].split(",")
    assert header[1::3] == [f"{c.scale.mnemonic} [{c.scale.unit}]" for c in log.curves]
    assert len(csv_lines) == len(las.index) + 1
    for name in ("mask.png", "overlay.png"):
        picture = Image.open(io.BytesIO(client.get(f"/jobs/{job_id}/{name}").content))
        assert picture.size == (width, height)

    # The bundled model reads the curves it was trained for: compare where the truth is inked and not wrapped.
    for truth, column in zip(log.curves, las.curves[1:], strict=True):
        depth_cols = np.round((las.index - log.depth.top) / (log.depth.bottom - log.depth.top) * (width - 1))
        cols = depth_cols.astype(int)
        keep = truth.inked[cols] & ~truth.wrapped[cols] & ~np.isnan(column.data)
        span = abs(truth.scale.right - truth.scale.left)
        if truth.scale.log:
            error = np.abs(np.log10(column.data[keep]) - np.log10(truth.values[cols][keep]))
            span = abs(np.log10(truth.scale.right) - np.log10(truth.scale.left))
        else:
            error = np.abs(column.data[keep] - truth.values[cols][keep])
        assert keep.sum() > 0.5 * len(cols), f"{truth.scale.mnemonic}: too few samples read"
        assert float(np.median(error)) < 0.05 * span, f"{truth.scale.mnemonic}: median error too large"


def test_a_full_resolution_scan_is_read_at_the_bundled_model_scale(client: Any, service: Settings) -> None:
    # A scan of the design's full resolution (480-640 px tall) given to the bundled model, trained at scale 0.1:
    # the service reads it at the model's scale and gives every output on the scan's own grid and depths.
    log = next(g for g in (generate(seed=90_210, index=i, scale=1.0, classes=3) for i in range(50))
               if len(g.curves) == 1 and g.image.shape[1] <= 6000)
    height, width = log.image.shape
    response = client.post("/segment", files={"file": ("full.png", _png(log.image), "image/png")},
                           data={"options": json.dumps({"calibration": log.calibration()})})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    assert run_segment_job(job_id) == "succeeded"

    result = client.get(f"/jobs/{job_id}/result").json()
    inference = result["inference"]
    assert inference["resampled"] and inference["model_scale"] == 0.1 and inference["scan_scale_estimated"]
    assert inference["scan_size"] == [height, width]
    assert inference["model_size"] == [56, round(width * 56 / height)], "estimated scale: height / 560 px"
    las = lasio.read(client.get(f"/jobs/{job_id}/result.las").text)
    assert las.params["READAT"].value == "x".join(map(str, inference["model_size"]))
    for name in ("mask.png", "overlay.png"):
        assert Image.open(io.BytesIO(client.get(f"/jobs/{job_id}/{name}").content)).size == (width, height)

    truth, curve = log.curves[0], las.curves[1]
    cols = np.round((las.index - log.depth.top) / (log.depth.bottom - log.depth.top) * (width - 1)).astype(int)
    keep = truth.inked[cols] & ~truth.wrapped[cols] & ~np.isnan(curve.data)
    assert keep.sum() > 0.8 * len(cols), "most depth samples read"
    span = abs(truth.scale.right - truth.scale.left)
    if truth.scale.log:
        error = np.abs(np.log10(curve.data[keep]) - np.log10(truth.values[cols][keep]))
        span = abs(np.log10(truth.scale.right) - np.log10(truth.scale.left))
    else:
        error = np.abs(curve.data[keep] - truth.values[cols][keep])
    assert float(np.median(error)) < 0.02 * span, "median error within 2 % of the track"
