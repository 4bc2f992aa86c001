"""What a full-page synthetic log is: its header, sections, tracks, curves and scan, in the upright page's
pixels (see `veernet_core.page_synth`). Plain data; `page_draw` draws it and `page_synth` samples it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from veernet_core.digitise.layout.scales import DepthScale, scale_named
from veernet_core.synth_truth import legend_weights


@dataclass(frozen=True)
class CurveSpec:
    mnemonic: str
    unit: str
    left: float  # value at the track's left border
    right: float
    log: bool
    style: str  # "solid", "dashed" or "dotted": the line in the header's sample and on the grid
    stroke_in: float = 0.006  # the pen's width, in inches of paper (1 to 4 px at 300 dpi)
    gray: int | None = None  # a light pen's gray on white paper (before the scan); None: the page's black ink

    @property
    def tone(self) -> str:
        """The ink a legend names: "dark" (the page's black) or "light" (a gray pen)."""
        return "dark" if self.gray is None else "light"

    def stroke_px(self, dpi: int) -> int:
        return max(1, round(self.stroke_in * dpi))

    def pen_gray(self, page_ink: int) -> int:
        """The gray the pen draws in on a page whose black ink is `page_ink`."""
        return page_ink if self.gray is None else self.gray


@dataclass(frozen=True)
class TrackSpec:
    left: float  # column of the left border's centre
    right: float
    grid: str  # "linear" or "log"
    divisions: int  # linear: number of divisions; log: decades
    curves: tuple[CurveSpec, ...]

    def weights(self, dpi: int) -> list[str | None]:
        """Per curve, the line weight its legend shows at `dpi` (`synth_truth.legend_weights` of its pens)."""
        return legend_weights([curve.stroke_px(dpi) for curve in self.curves])

    def division_fractions(self) -> list[float]:
        """Where the value grid's lines fall across the track, 0 and 1 (the borders) excluded."""
        if self.grid == "linear":
            return [k / self.divisions for k in range(1, self.divisions)]
        k = self.divisions
        inner = [(d + math.log10(m)) / k for d in range(k) for m in range(1, 10)]
        return [f for f in inner if 0 < f < 1]


@dataclass(frozen=True)
class SectionSpec:
    scale_name: str
    header_top: int  # first row of the track-header strip
    top: float  # row of the grid's top frame line
    bottom: float  # row of its bottom frame line
    depth_top: float  # depth at row `top`
    rows_per_unit: float
    depth_column: tuple[float, float]  # border centres either side of it
    tracks: tuple[TrackSpec, ...]

    @property
    def scale(self) -> DepthScale:
        return scale_named(self.scale_name)

    def depth_at(self, row: np.ndarray | float) -> np.ndarray:
        return self.depth_top + (np.asarray(row, dtype=np.float64) - self.top) / self.rows_per_unit

    def row_of(self, depth: np.ndarray | float) -> np.ndarray:
        return self.top + (np.asarray(depth, dtype=np.float64) - self.depth_top) * self.rows_per_unit

    @property
    def depth_bottom(self) -> float:
        return float(self.depth_at(self.bottom))


@dataclass(frozen=True)
class ScanSpec:
    bitonal: bool  # 1-bit, as most archive scanners store line art
    skew_deg: float  # counter-clockwise, about the page centre
    turn: int  # 0, 90, 180 or 270: counter-clockwise, after the skew
    blur: float  # Gaussian radius in pixels, before thresholding
    noise: float  # sensor noise, gray levels
    threshold: float  # a 1-bit scan's ink: darker than this share of the way from ink to paper
    dirt: float  # specks and smudges per square inch


@dataclass(frozen=True)
class PageSpec:
    seed: int
    index: int
    dpi: int
    width: int
    height: int
    header: tuple[int, int]  # rows of the header block's frame, top and bottom
    header_lines: tuple[str, ...]
    well: str
    font: str  # a DejaVu face's file name, or "pillow" (Pillow's built-in font)
    sections: tuple[SectionSpec, ...]
    scan: ScanSpec

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
