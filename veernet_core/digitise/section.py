"""One section of a full-page scan to its result files: the page made upright as the analysis made it, each
track cut out, turned so that depth runs along the width and digitised as a track is (`pipeline.read_scan`:
its printed grid taken off where it is reduced for the model, then read at the model's pixel scale; then
`rescale.scan_curves`: traced and named on the track's own pixels), its depth from the section's fit; then
every track's curves on one depth grid, in one JSON, CSV and LAS file, with a mask and an overlay of the
whole section (`section_export`).

Every track's crop spans the same rows of the page, so every track's depth grid is the same one: the
multiples of the step within the section's rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PIL import Image

from veernet_core.digitise.bilevel import one_bit_kind
from veernet_core.digitise.export import ExportMeta
from veernet_core.digitise.ink import ScanPixels
from veernet_core.digitise.layout.page import Skew, deskew, ink_threshold, paper_level, turn_clockwise
from veernet_core.digitise.pipeline import ModelSource, ScanOptions, StageTimer, read_scan
from veernet_core.digitise.predict import load_colour, load_image
from veernet_core.digitise.rescale import Resampling, scan_curves
from veernet_core.digitise.section_calibration import Crop, SectionCalibration
from veernet_core.digitise.section_export import SectionDigitised, TrackRead, section_files
from veernet_core.digitise.tracer import TraceOptions
from veernet_core.model import VeerNet

DEFAULT_OPTIONS = ScanOptions()


@dataclass(frozen=True)
class SectionResult:
    files: dict[str, bytes]  # by export.RESULT_FILES name
    section: SectionDigitised
    model_sha256: str


def upright_page(image: np.ndarray, turn: int, skew_deg: float) -> np.ndarray:
    """A scan as stored -> the upright page the analysis measured (`layout.analyse.make_upright`): turned
    clockwise, then rotated back by the skew about its centre, the corners filled with the paper's gray."""
    gray = turn_clockwise(image, turn)
    if abs(skew_deg) < 1e-3:
        return gray
    paper = paper_level(gray, ink_threshold(gray))
    return deskew(gray, Skew(math.tan(math.radians(skew_deg)), 0, 0.0), paper)


def upright_colour(rgb: np.ndarray | None, turn: int, skew_deg: float) -> np.ndarray | None:
    """The colour scan made upright alike (for the naming step's inks); white corners."""
    if rgb is None:
        return None
    turned = np.ascontiguousarray(np.rot90(rgb, -(turn // 90) % 4)) if turn % 360 else rgb
    if abs(skew_deg) < 1e-3:
        return turned
    image = Image.fromarray(turned).rotate(-skew_deg, Image.Resampling.NEAREST, fillcolor=(255, 255, 255))
    return np.asarray(image, dtype=np.uint8)


def turned_crop(page: np.ndarray, crop: Crop) -> np.ndarray:
    """The crop of an upright page (gray (H, W) or colour (H, W, 3)), turned so that depth runs along the
    width: the transpose, which puts the track's left border at the top."""
    cut = page[crop.row0:crop.row1 + 1, crop.col0:crop.col1 + 1]
    return np.ascontiguousarray(cut.transpose(1, 0, *range(2, cut.ndim)))


def digitise_section(scan: bytes, page_calibration: object, model: ModelSource, model_id: str,
                     options: ScanOptions = DEFAULT_OPTIONS, timer: StageTimer | None = None) -> SectionResult:
    """Scan bytes and a page calibration (as `SectionCalibration.from_dict` reads it, checked against the
    decoded scan) -> every result file of the section. `options.rotate_portrait` is not used: the page
    calibration's `orientation` says how the page is turned. `options.scan_scale`, if given, overrides the
    pixel scale the calibration implies (its dpi over 300)."""
    clock = timer or StageTimer()
    image = clock("decode", load_image, scan, options.max_pixels, False)
    calibration = SectionCalibration.from_dict(page_calibration, *image.shape)
    colour = clock("decode", load_colour, scan, False)
    page = clock("upright", upright_page, image, calibration.turn, calibration.skew_deg)
    colour_page = clock("upright", upright_colour, colour, calibration.turn, calibration.skew_deg)
    network, sha256 = clock("model", model)
    section = read_section(page, colour_page, calibration, network, options, clock)
    meta = ExportMeta(sha256, model_id, options.scan_name, options.well)
    files = section_files(section, meta, clock)
    return SectionResult(files, section, sha256)


# A page track's border rows are paper for the joint tracer's paths (`TraceOptions.border_bins_paper`): the model
# marks the remnants of its border lines, and a faint curve along one edge was read on its backup scale over most
# of its length, its path taking the other edge's border ink through the wrap. The independent renderer's pages,
# held out (seed 4, 20 pages): 12.361 -> 11.647 %, worst curve position 20.4 -> 17.2 %; the generator's (5150)
# 7.730 -> 7.587 %. On strips it read the independent renderer's tuning logs worse (7777: 9.258 -> 9.722 %), so
# it is the page path's alone (bench/README.md, 2026-12-07).
PAGE_TRACE = TraceOptions(border_bins_paper=True)


def read_section(page: np.ndarray, colour: np.ndarray | None, calibration: SectionCalibration, network: VeerNet,
                 options: ScanOptions = DEFAULT_OPTIONS, timer: StageTimer | None = None,
                 probabilities: list[np.ndarray] | None = None) -> SectionDigitised:
    """Every track of the section digitised and merged. `probabilities`, if given, are each track's class
    probabilities on its turned crop (a perfect reading, to measure the tracing alone); else the model's."""
    clock = timer or StageTimer()
    scale = options.scan_scale or calibration.scan_scale
    tracks = []
    # the page's 1-bit kind, not each crop's (`readable_scan`), where the model reads the tracks
    kind = None if colour is not None or probabilities is not None else one_bit_kind(page)
    for j in range(len(calibration.tracks)):
        crop = calibration.crop(j)
        gray = turned_crop(page, crop)
        track = calibration.track_calibration(j)
        pixels = ScanPixels(gray, None if colour is None else turned_crop(colour, crop))
        if probabilities is None:
            pixels, probs, resampling = read_scan(network, pixels, track, scale, options.max_pixels,
                                                  options.tile_width, options.overlap, clock, kind)
        else:
            probs = probabilities[j]
            resampling = Resampling(None, scale, False, gray.shape, gray.shape)
        curves = clock("trace", scan_curves, probs, track, resampling, PAGE_TRACE, pixels)
        tracks.append(TrackRead(crop, track, curves, probs, resampling))
    return merge(tracks, calibration, page)


def merge(tracks: list[TrackRead], calibration: SectionCalibration, page: np.ndarray) -> SectionDigitised:
    """The tracks' curves side by side: their depth grids are one (the same rows, fit and step)."""
    first = tracks[0].curves
    for j, track in enumerate(tracks[1:], start=1):
        if track.curves.depth.shape != first.depth.shape or not np.allclose(track.curves.depth, first.depth):
            raise ValueError(f"track {j}'s depth grid differs from track 0's: a section's tracks share its rows")
    curves = [curve for track in tracks for curve in track.curves.curves]
    track_of = [j for j, track in enumerate(tracks) for _ in track.curves.curves]
    return SectionDigitised(first.depth, calibration.depth.unit, calibration.step, curves, track_of, tracks,
                            calibration, page)
