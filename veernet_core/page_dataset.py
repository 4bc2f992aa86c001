"""Tracks cut out of generated full pages (`page_synth`) as training items, each as the service's page path
hands it to the model: the page made upright, the track cut out with its margin and turned so that depth
runs along the width (`SectionCalibration.crop`, `section.turned_crop`), its printed grid taken off and
the crop brought to the model's pixel scale (`pipeline.read_scan`: `grid.without_grid`,
`rescale.resampling_for`, `rescale.resample_image`).

The logs of `synth.py` are drawn at the model's scale by one drawing module; a page is drawn at 150-400 dpi
by another (`page_draw`: its own pens, grid, borders, header and depth column, blurred and scanned whole,
1-bit in 6 of 10) and reduced as a scan is. The bundled model never saw such a crop, and reads a curve
alone in a page's track several times worse than the tracer does with perfect probabilities
(bench/README.md, full pages).

The mask is each true curve's line on the model's grid (`page_truth.true_fractions`, joined column to
column) where the reduced crop shows ink: a broken style's gaps are paper, so they are background, as in
`synth.py`'s masks. Ink is what is darker than the paper's gray of its column by `ink.MIN_DARKNESS` /
`INK_SHARE`: a light pen reduced several times stays darker than the paper by a fraction of its own tone.

An item is a pure function of (seed, index, scale): page `index` of data seed `seed`, and one of its
sections' tracks picked from a stream of its own; the page's layout alone (`page_synth.sample_spec`) gives
its size without drawing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from veernet_core.digitise.grid import without_grid
from veernet_core.digitise.ink import MIN_DARKNESS, paper_gray
from veernet_core.digitise.rescale import resample_image, resampling_for
from veernet_core.digitise.section import turned_crop, upright_page
from veernet_core.digitise.section_calibration import Crop, track_crop
from veernet_core.page_spec import PageSpec
from veernet_core.page_synth import PAGE_STREAM, PageOptions, SynthPage, generate_page, sample_spec
from veernet_core.page_truth import stroke_line, true_fractions

PICK_STREAM = 0x7C0B  # the stream that picks an item's section and track
INK_SHARE = 3.0  # a mask pixel is darker than its column's paper by MIN_DARKNESS / INK_SHARE
ANY_PAGE = PageOptions()  # every option left to chance


@dataclass(frozen=True)
class TrackPlace:
    """Where an item lies on its page: the section, the track, and the track's crop of the upright page."""

    section: int
    track: int
    crop: Crop


def page_spec(seed: int, index: int, options: PageOptions = ANY_PAGE) -> PageSpec:
    """Page `index`'s layout without drawing it: `generate_page` samples it first from the same stream."""
    return sample_spec(np.random.default_rng([seed, index, PAGE_STREAM]), seed, index, options)


def track_place(spec: PageSpec, seed: int, index: int) -> TrackPlace:
    """The section and track item `index` is cut from, and its crop as the service cuts it
    (`section_calibration.track_crop`) from the true extents."""
    rng = np.random.default_rng([seed, index, PICK_STREAM])
    k = int(rng.integers(len(spec.sections)))
    section = spec.sections[k]
    j = int(rng.integers(len(section.tracks)))
    track = section.tracks[j]
    return TrackPlace(k, j, track_crop((section.top, section.bottom), track.left, track.right,
                                       (spec.height, spec.width)))


def item_size(seed: int, index: int, scale: float, options: PageOptions = ANY_PAGE) -> tuple[int, int]:
    """(height, width) of item `index` at the model's pixel scale, from its page's layout alone: its crop
    brought to `scale` as the service brings a page's track."""
    spec = page_spec(seed, index, options)
    return resampling_for(track_place(spec, seed, index).crop.size, scale, spec.dpi / 300).model_size


def upright(page: SynthPage) -> np.ndarray:
    """The page as drawn before its scan was turned and skewed: turned clockwise, the skew taken off, as the
    service makes a page upright (`section.upright_page`)."""
    return upright_page(page.image, page.spec.scan.turn, page.spec.scan.skew_deg)


def crop_item(page: SynthPage, place: TrackPlace, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(image uint8 (h, w), mask uint8 (h, w)) of a track's crop at the model's scale (module docstring)."""
    spec = page.spec
    crop = place.crop
    row0, col0 = crop.row0, crop.col0
    gray = turned_crop(upright(page), crop)
    track = spec.sections[place.section].tracks[place.track]
    resampling = resampling_for(gray.shape, scale, spec.dpi / 300)
    if resampling.reduced:
        gray, _ = without_grid(gray, None, track.left - col0, track.right - col0)
    image = resample_image(gray, resampling.model_size)
    height, width = image.shape
    # Each model column's depth: the crop's rows it averages, at their centre.
    rows = row0 + (np.arange(width) + 0.5) * gray.shape[1] / width - 0.5
    line = np.zeros((height, width), dtype=np.float32)
    for fraction in true_fractions(page, place.section, place.track, rows):
        across = track.left + fraction * (track.right - track.left) - col0  # crop row
        stroke_line(line, (across + 0.5) * height / gray.shape[0] - 0.5)
    inked = image.astype(np.float32) <= paper_gray(image)[None, :] - MIN_DARKNESS / INK_SHARE
    return image, ((line > 0) & inked).astype(np.uint8)


class PageCropDataset(Dataset[dict[str, Any]]):
    """`size` page tracks at the model's `scale`, item i from page i of data seed `seed`."""

    def __init__(self, size: int, scale: float, seed: int = 0, options: PageOptions = ANY_PAGE) -> None:
        if size < 0:
            raise ValueError(f"dataset size must be non-negative, got {size}")
        if not 0 < scale <= 1:
            raise ValueError(f"scale must be in (0, 1], got {scale}")
        if seed < 0:
            raise ValueError(f"seed must be non-negative, got {seed}")
        self.size, self.scale, self.seed, self.options = size, scale, seed, options
        self._sizes: list[tuple[int, int]] | None = None

    def __len__(self) -> int:
        return self.size

    def sizes(self) -> list[tuple[int, int]]:
        """(height, width) of every item, from the pages' layouts alone."""
        if self._sizes is None:
            self._sizes = [item_size(self.seed, i, self.scale, self.options) for i in range(self.size)]
        return list(self._sizes)

    def __getitem__(self, i: int) -> dict[str, Any]:
        if not 0 <= i < self.size:
            raise IndexError(f"index {i} out of range for a page dataset of {self.size}")
        page = generate_page(self.seed, i, self.options)
        image, mask = crop_item(page, track_place(page.spec, self.seed, i), self.scale)
        pixels = torch.from_numpy(image).to(torch.float32).div_(255.0).unsqueeze(0)
        return {"image": pixels, "mask": torch.from_numpy(mask.astype(np.int64)), "index": i}


class LogsAndPages(Dataset[dict[str, Any]]):
    """Synthetic logs, then page tracks: item i is log i below `len(logs)`, else page item i - len(logs)."""

    def __init__(self, logs: Any, pages: PageCropDataset) -> None:
        self.logs, self.pages = logs, pages

    def __len__(self) -> int:
        return len(self.logs) + len(self.pages)

    def sizes(self) -> list[tuple[int, int]]:
        return [*self.logs.sizes(), *self.pages.sizes()]

    def __getitem__(self, i: int) -> dict[str, Any]:
        if not 0 <= i < len(self):
            raise IndexError(f"index {i} out of range for {len(self)} logs and pages")
        if i < len(self.logs):
            return dict(self.logs[i])
        item = dict(self.pages[i - len(self.logs)])
        item["index"] = i
        return item
