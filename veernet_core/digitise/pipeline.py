"""One scan to its result files: decode, read at the model's pixel scale, predict, trace, export.

The service's segment worker and `python -m veernet_core digitise` both run `digitise_scan`; callers that
want the curves rather than files (`bench/digitise_eval.py`) run its stages, `read_scan` (the grid taken
off a reduced scan, then `predict_scan`'s reading) and then `rescale.scan_curves`. A `StageTimer` passed in
gets the seconds of every stage (`bench/segment_perf.py`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from veernet_core.digitise.bilevel import one_bit_kind
from veernet_core.digitise.calibration import Calibration
from veernet_core.digitise.curves import Digitised
from veernet_core.digitise.export import ExportMeta, mask_png, overlay_png, to_csv, to_json, to_las
from veernet_core.digitise.grid import without_grid
from veernet_core.digitise.ink import ScanPixels
from veernet_core.digitise.predict import (
    DEFAULT_MAX_PIXELS,
    DEFAULT_OVERLAP,
    DEFAULT_TILE_WIDTH,
    load_colour,
    load_image,
    predict_probabilities,
)
from veernet_core.digitise.rescale import Resampling, resample_image, resampling_for, scan_curves
from veernet_core.model import VeerNet

T = TypeVar("T")
# Called once the scan has decoded (a scan that cannot be read never costs a model load): (model, checkpoint sha256).
ModelSource = Callable[[], tuple[VeerNet, str]]


class StageTimer:
    """Calls a stage and adds its wall time to `seconds` under the stage's name (the PNG stages run in
    background threads, so their seconds overlap those of others)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def __call__(self, name: str, stage: Callable[..., T], *args: Any) -> T:
        started = time.perf_counter()
        try:
            return stage(*args)
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started


@dataclass(frozen=True)
class ScanOptions:
    """How a scan is read and what its results record besides the model."""

    scan_scale: float | None = None  # the scan's pixel scale (1.0 = full resolution); None: from its height
    rotate_portrait: bool = False  # turn a portrait scan so that depth runs along the width
    scan_name: str = ""  # recorded in the results
    well: str = ""  # recorded in the LAS header
    max_pixels: int = DEFAULT_MAX_PIXELS  # the most a scan may decode to, and an enlargement for the model reach
    tile_width: int = DEFAULT_TILE_WIDTH
    overlap: int = DEFAULT_OVERLAP


DEFAULT_OPTIONS = ScanOptions()  # frozen, so one shared default is safe


@dataclass(frozen=True)
class ScanResult:
    """The result files by `export.RESULT_FILES` name, and what they were written from."""

    files: dict[str, bytes]
    curves: Digitised  # on the scan's own columns and the calibration's depth step
    probabilities: np.ndarray  # float32 (classes, H, W) on the grid the model read the scan at
    resampling: Resampling
    model_sha256: str


def digitise_scan(scan: bytes, calibration: dict[str, Any], model: ModelSource, model_id: str,
                  options: ScanOptions = DEFAULT_OPTIONS, timer: StageTimer | None = None) -> ScanResult:
    """Scan bytes (PNG, TIFF, JPEG) and a calibration (as `Calibration.from_dict` reads it, checked against
    the decoded scan) -> every result file; `model_id` is recorded in them beside the checkpoint's sha256."""
    clock = timer or StageTimer()
    image = clock("decode", load_image, scan, options.max_pixels, options.rotate_portrait)
    checked = Calibration.from_dict(calibration, *image.shape)
    colour = clock("decode", load_colour, scan, options.rotate_portrait)  # inks' colours, for naming curves
    network, sha256 = clock("model", model)
    pixels, probabilities, resampling = read_scan(network, ScanPixels(image, colour), checked, options.scan_scale,
                                                  options.max_pixels, options.tile_width, options.overlap, clock)
    meta = ExportMeta(sha256, model_id, options.scan_name, options.well, read_at=resampling.read_at)
    curves, files = trace_and_export(pixels, checked, probabilities, resampling, meta, clock, shown=image)
    return ScanResult(files, curves, probabilities, resampling, sha256)


def readable_scan(scan: ScanPixels, calibration: Calibration, resampling: Resampling,
                  page_kind: str | None = None) -> ScanPixels:
    """The scan as the model and the tracer read it: one reduced for the model (a full-resolution scan)
    marked where it is 1-bit (`bilevel.one_bit_kind`) and with its printed grid taken off
    (`grid.without_grid`, about the calibration's track); any other as it is. `page_kind`: the 1-bit kind of
    the page the scan is a track's crop of (`section.read_section`), taken as the crop's: a thresholded page's
    track with a broken light grid and specks of dirt reads as dithered on its own (isolated dots 0.31-0.52 of
    its black on four of the independent renderer's pages, bench/README.md, 2026-12-07)."""
    if not resampling.reduced:
        return scan
    one_bit = None if scan.colour is not None else page_kind or one_bit_kind(scan.gray)
    gray, colour = without_grid(scan.gray, scan.colour, calibration.track_top, calibration.track_bottom, page_kind)
    if gray is scan.gray and one_bit is None:
        return scan
    return ScanPixels(gray, colour, one_bit)


def predict_scan(model: VeerNet, image: np.ndarray, scan_scale: float | None = None,
                 max_pixels: int = DEFAULT_MAX_PIXELS, tile_width: int = DEFAULT_TILE_WIDTH,
                 overlap: int = DEFAULT_OVERLAP, timer: StageTimer | None = None) -> tuple[np.ndarray, Resampling]:
    """uint8 (H, W) scan -> (class probabilities on the grid the model read it at, how it was resampled): at
    the model's training scale when the scan's differs (`rescale.resampling_for`; an enlargement stops at
    `max_pixels`)."""
    resampling = resampling_for(image.shape, model.trained_scale, scan_scale, max_pixels)
    return _predict_at(model, image, resampling, tile_width, overlap, timer or StageTimer()), resampling


def read_scan(model: VeerNet, scan: ScanPixels, calibration: Calibration, scan_scale: float | None = None,
              max_pixels: int = DEFAULT_MAX_PIXELS, tile_width: int = DEFAULT_TILE_WIDTH,
              overlap: int = DEFAULT_OVERLAP, timer: StageTimer | None = None,
              page_kind: str | None = None) -> tuple[ScanPixels, np.ndarray, Resampling]:
    """`predict_scan` on the scan as the model and the tracer read it (`readable_scan`, with `page_kind`): (that
    scan, the class probabilities, how it was resampled)."""
    clock = timer or StageTimer()
    resampling = resampling_for(scan.gray.shape, model.trained_scale, scan_scale, max_pixels)
    pixels = clock("grid", readable_scan, scan, calibration, resampling, page_kind)
    return pixels, _predict_at(model, pixels.gray, resampling, tile_width, overlap, clock), resampling


def _predict_at(model: VeerNet, image: np.ndarray, resampling: Resampling, tile_width: int, overlap: int,
                clock: StageTimer) -> np.ndarray:
    model_image = clock("resample", resample_image, image, resampling.model_size)
    return clock("predict", predict_probabilities, model, model_image, tile_width, overlap)


def trace_and_export(scan: ScanPixels, calibration: Calibration, probabilities: np.ndarray, resampling: Resampling,
                     meta: ExportMeta, timer: StageTimer | None = None,
                     shown: np.ndarray | None = None) -> tuple[Digitised, dict[str, bytes]]:
    """Probabilities -> (the scan's curves, named on its pixels; the result files by name), every file on
    the scan's own grid; the overlay drawn on `shown` (the scan as the user sent it) where given."""
    clock = timer or StageTimer()
    image = scan.gray if shown is None else shown
    # zlib and Pillow encode PNGs without holding the GIL: the mask is encoded beside the (pure Python)
    # tracing and the overlay beside the text formats, on the core the forward pass no longer needs; two
    # threads, so the overlay never waits behind a mask that is still compressing.
    with ThreadPoolExecutor(2, thread_name_prefix="png") as background:
        mask = background.submit(clock, "mask", mask_png, probabilities, image.shape)
        curves = clock("trace", scan_curves, probabilities, calibration, resampling, None, scan)
        overlay = background.submit(clock, "overlay", overlay_png, image, curves)
        files = {
            "result": clock("json", lambda: json.dumps(to_json(curves, meta, resampling.to_dict()),
                                                       allow_nan=False).encode()),
            "csv": clock("csv", lambda: to_csv(curves).encode()),
            "las": clock("las", lambda: to_las(curves, meta).encode()),
        }
        files["mask"], files["overlay"] = mask.result(), overlay.result()
    return curves, files
