"""One scan to its result files (veernet_core.digitise.pipeline), as the worker and the command line run it."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from veernet_core.digitise.export import RESULT_FILES, ExportMeta, to_json
from veernet_core.digitise.pipeline import ScanOptions, StageTimer, digitise_scan
from veernet_core.digitise.predict import ImageRejected, bundled_model_path, load_model, read_checkpoint
from veernet_core.model import VeerNet
from veernet_core.synth import generate

HELD_OUT_SEED = 616_161  # the bundled model trained on data seed 0


def _bundled() -> tuple[VeerNet, str]:
    data, sha256 = read_checkpoint(bundled_model_path())
    return load_model(data)[0], sha256


def _png(log_seed: int, index: int) -> tuple[bytes, dict[str, object]]:
    log = generate(log_seed, index, scale=0.1)
    buffer = io.BytesIO()
    Image.fromarray(log.image).save(buffer, format="PNG")
    return buffer.getvalue(), log.calibration()


def test_a_scan_becomes_every_result_file_with_each_stage_timed() -> None:
    scan, calibration = _png(HELD_OUT_SEED, 0)
    timer = StageTimer()
    result = digitise_scan(scan, calibration, _bundled, "bundled/veernet-small", ScanOptions(scan_name="s.png"), timer)
    assert list(result.files) == list(RESULT_FILES)
    meta = ExportMeta(result.model_sha256, "bundled/veernet-small", "s.png")
    assert json.loads(result.files["result"]) == json.loads(json.dumps(to_json(result.curves, meta,
                                                                               result.resampling.to_dict())))
    assert not result.resampling.resampled, "a scan at the model's own scale is read as it is"
    stages = {"decode", "model", "resample", "predict", "mask", "trace", "overlay", "json", "csv", "las"}
    assert set(timer.seconds) == stages and all(s >= 0 for s in timer.seconds.values())


def test_the_pixel_limit_caps_an_enlargement_for_the_model() -> None:
    scan, calibration = _png(HELD_OUT_SEED, 1)
    height, width = Image.open(io.BytesIO(scan)).size[::-1]

    def finer_model() -> tuple[VeerNet, str]:  # trained at full resolution: a scale-0.1 scan wants 8x enlarging
        model, sha256 = _bundled()
        model.trained_scale = 1.0
        return model, sha256

    options = ScanOptions(max_pixels=4 * height * width)
    result = digitise_scan(scan, calibration, finer_model, "test", options)
    assert result.resampling.model_size == (2 * height, 2 * width), "enlarged only as far as the limit allows"
    assert result.probabilities.shape[1:] == (2 * height, 2 * width)
    assert Image.open(io.BytesIO(result.files["mask"])).size == (width, height), "files stay on the scan's grid"


def test_an_unreadable_scan_is_refused_before_any_model_loads() -> None:
    def no_model() -> tuple[VeerNet, str]:
        raise AssertionError("the model was loaded for a scan that cannot be read")

    with pytest.raises(ImageRejected):
        digitise_scan(b"not an image", {}, no_model, "test")
