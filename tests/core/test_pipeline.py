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
    """A log drawn at the bundled model's own scale, as PNG bytes, and its calibration."""
    scale = _bundled()[0].trained_scale
    assert scale is not None, "the bundled model records the scale it was trained at"
    log = generate(log_seed, index, scale=scale)
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
    stages = {"decode", "model", "grid", "resample", "predict", "mask", "trace", "overlay", "json", "csv", "las"}
    assert set(timer.seconds) == stages and all(s >= 0 for s in timer.seconds.values())


def test_the_pixel_limit_caps_an_enlargement_for_the_model() -> None:
    scan, calibration = _png(HELD_OUT_SEED, 1)
    height, width = Image.open(io.BytesIO(scan)).size[::-1]

    def finer_model() -> tuple[VeerNet, str]:  # trained at full resolution: this scan wants 5x enlarging
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


def test_a_full_resolution_scan_is_read_without_its_grid_and_overlaid_on_the_scan_as_sent() -> None:
    """The model and the tracer read a reduced scan without its printed grid (`readable_scan`); the overlay
    the user gets back is drawn on their scan, grid and all."""
    import numpy as np

    from tests.core.test_grid import BOTTOM, TOP, _calibration, _page
    from veernet_core.digitise.export import _FADE
    from veernet_core.digitise.ink import ScanPixels
    from veernet_core.digitise.pipeline import readable_scan
    from veernet_core.digitise.rescale import resampling_for

    image, grid, _, _ = _page(0.6)
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    calibration = {"track_top": TOP, "track_bottom": BOTTOM, "depth": {"top": 1000.0, "bottom": 1100.0, "unit": "ft"},
                   "step": 0.5, "curves": [{"mnemonic": "GR", "left": 0, "right": 150}]}
    result = digitise_scan(buffer.getvalue(), calibration, _bundled, "bundled/veernet-small",
                           ScanOptions(scan_scale=1.0))
    assert result.resampling.resampled
    read = readable_scan(ScanPixels(image), _calibration(), resampling_for(image.shape, 0.1, 1.0))
    overlay = np.asarray(Image.open(io.BytesIO(result.files["overlay"])))
    rows = np.arange(image.shape[0])[:, None]
    drawn = np.zeros(image.shape, dtype=bool)  # the trace and the dotted track borders drawn over the scan
    for curve in result.curves.curves:
        drawn |= np.abs(rows - np.nan_to_num(curve.trace.row, nan=-99.0)[None, :]) <= 4
    for border in (TOP, BOTTOM):
        drawn |= np.abs(rows - border) <= 2
    seen = grid & (read.gray != image) & ~drawn
    assert seen.sum() > 0.5 * (grid & ~drawn).sum(), "the grid is taken off for the model and the tracer"
    assert (_FADE[read.gray] != _FADE[image])[seen].mean() > 0.5  # the two scans would show apart there
    assert (overlay[seen] == _FADE[image][seen]).mean() > 0.99  # (the curve's name is written over a few)
