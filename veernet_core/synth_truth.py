"""The ground-truth format of a synthetic (or otherwise rendered) scanned log, with no drawing code.

`veernet_core.synth` renders logs in this format, and so does the independent evaluation renderer in
bench/, which imports nothing else from the generator. Pixel (r, c) has its centre at row r, column c.
Per curve and per column: `row` is the exact centre of the drawn stroke, `values` the value it stands
for, `wrap_side` the scale it is drawn on (0 its own, +1 the backup scale one track width past `right`,
-1 the one past `left`), `inked` whether ink is there (a dashed or dotted curve's gaps are bare paper,
while `values` and `row` run on through them).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

STYLES = ("solid", "dashed", "dotted", "dash-dot")
INK_CLASSES = ("dark", "light")
WRAPS = ("none", "right", "left", "both")
LIGHT_INK_FROM = 100  # gray level (on white paper) from which an ink counts as light


def ink_class(ink: int) -> str:
    """"dark" or "light": the word a log's header or a user would use for this gray level."""
    return "light" if ink >= LIGHT_INK_FROM else "dark"


def wrap_sides(wrap: str) -> tuple[int, ...]:
    """The backup-scale sides a `wrap` word names: +1 past `right`, -1 past `left`."""
    return {"none": (), "right": (1,), "left": (-1,), "both": (1, -1)}[wrap]


@dataclass(frozen=True)
class TrackScale:
    """How a curve's value maps across the track: `left` at the track's top row, `right` at its bottom."""

    left: float
    right: float
    log: bool  # log10 interpolation between left and right
    mnemonic: str
    unit: str

    def _ends(self) -> tuple[float, float]:
        return (math.log10(self.left), math.log10(self.right)) if self.log else (self.left, self.right)

    def to_fraction(self, value: np.ndarray) -> np.ndarray:
        """Value -> position across the track (0 top, 1 bottom); values off the scale fall outside 0..1."""
        v = np.asarray(value, dtype=np.float64)
        if self.log:
            positive = v > 0
            v = np.where(positive, np.log10(np.where(positive, v, 1.0)), np.nan)
        a, b = self._ends()
        return (v - a) / (b - a)

    def to_value(self, fraction: np.ndarray) -> np.ndarray:
        a, b = self._ends()
        x = a + np.asarray(fraction, dtype=np.float64) * (b - a)
        return np.power(10.0, x) if self.log else x

    def backup(self, direction: int) -> TrackScale:
        """The scale one track width further on: past `right` for direction +1, past `left` for -1."""
        a, b = self._ends()
        far = b + (b - a) if direction > 0 else a - (b - a)
        far_value = 10.0**far if self.log else far
        left, right = (self.right, far_value) if direction > 0 else (far_value, self.left)
        return TrackScale(left, right, self.log, self.mnemonic, self.unit)


@dataclass(frozen=True)
class DepthCalibration:
    """Depth at column 0 (`top`) and at the last column (`bottom`); depth runs along the width."""

    top: float
    bottom: float
    unit: str

    def depth_of_column(self, col: np.ndarray, width: int) -> np.ndarray:
        if width < 2:
            raise ValueError(f"depth calibration needs an image at least 2 columns wide, got {width}")
        return self.top + np.asarray(col, dtype=np.float64) * (self.bottom - self.top) / (width - 1)


@dataclass
class CurveTruth:
    name: str
    mnemonic: str
    scale: TrackScale
    values: np.ndarray  # float64 per column, NaN where the curve is absent (style gaps keep their values)
    row: np.ndarray  # float64 centre row of the drawn stroke per column, NaN where absent
    wrap_side: np.ndarray  # int8 per column: 0 on `scale`, +1 on the backup past right, -1 past left
    wrap: str  # the backup scales the header gives: "none", "right", "left" or "both" (see WRAPS)
    style: str  # "solid", "dashed", "dotted" or "dash-dot" (see STYLES)
    ink: int  # gray level of the ink on white paper: 0 black .. about 175 light gray
    stroke_px: int  # stroke thickness in pixels of this image
    inked: np.ndarray = field(default_factory=lambda: np.ones(0, dtype=bool))  # bool per column: ink drawn
    colour: str = ""  # on a colour scan, the ink's colour as a legend names it (red, blue, ...); "" gray or black
    # The edge the curve is held at where it runs off a side without a backup scale (+1 `right`, -1 `left`),
    # as a plotter clips it: it runs flat along that edge, on the border line or a few pixels inside; 0: never.
    held: int = 0
    # Held at one value inside the track (a bit size; a few values in steps at casing points): a straight
    # line along the track, often on a grid line (`synth_curves.constant`).
    constant: bool = False

    def __post_init__(self) -> None:
        if self.inked.size == 0:
            self.inked = np.isfinite(self.values)
        if self.style not in STYLES or self.wrap not in WRAPS:
            raise ValueError(f"style must be one of {STYLES} and wrap one of {WRAPS}, got {self.style!r}, "
                             f"{self.wrap!r}")

    @property
    def wrapped(self) -> np.ndarray:
        """bool per column: drawn on a backup scale there."""
        return self.wrap_side != 0

    @property
    def ink_class(self) -> str:
        return ink_class(self.ink)

    @property
    def dashed(self) -> bool:
        """Drawn in any broken style (dashed, dotted, dash-dot): it has gaps of bare paper."""
        return self.style != "solid"

    def backup_scale_on(self, side: int) -> TrackScale:
        """The backup scale on `side` (+1 past `right`, -1 past `left`)."""
        return self.scale.backup(side)

    @property
    def backup_scale(self) -> TrackScale | None:
        """The one backup scale of a curve that wraps on one side; None for "none". A curve with backup
        scales on both sides has two: use `backup_scale_on`."""
        sides = wrap_sides(self.wrap)
        if len(sides) > 1:
            raise ValueError(f"curve {self.mnemonic} has backup scales on both sides; use backup_scale_on(side)")
        return self.scale.backup(sides[0]) if sides else None

    def unwrapped_fraction(self, track: tuple[int, int]) -> np.ndarray:
        """Position on the curve's own scale per column (outside 0..1 where it is drawn on a backup)."""
        return (self.row - track[0]) / (track[1] - track[0]) + self.wrap_side

    def hints(self) -> dict[str, Any]:
        """What the log's header says of this curve beside its scale: style, ink (its colour's name on a
        colour scan, else its ink class), backup sides."""
        return {"style": self.style, "ink": self.colour or self.ink_class, "wrap": self.wrap}


@dataclass
class SynthLog:
    image: np.ndarray  # uint8 (H, W), dark ink on light paper
    mask: np.ndarray  # uint8 (H, W): class of the curve whose stroke covers the pixel, 0 background
    curves: list[CurveTruth]
    depth: DepthCalibration
    track: tuple[int, int]  # rows of the top and bottom track borders: fraction 0 and 1 of every scale
    seed: int
    index: int
    classes: int = 2
    shear: float = 0.0  # page skew: paper column = image column - shear * (row - track centre row)
    factors: dict[str, Any] = field(default_factory=dict)  # per-log scan and page factors (see `factor_levels`)
    colour: np.ndarray | None = None  # uint8 (H, W, 3) of a colour scan, whose luma is `image`; None for gray

    def curve_class(self, position: int) -> int:
        """Mask class of curves[position]: 1 for every curve in the binary kind; in the legacy order
        kind (classes=3) 1 for the first curve and 2 for every later one."""
        return 1 if self.classes == 2 else min(position + 1, self.classes - 1)

    def depth_at(self, col: np.ndarray, row: np.ndarray) -> np.ndarray:
        """Depth of image points, undoing the skew (exact on the track's centre row for any `row`)."""
        pivot = (self.track[0] + self.track[1]) / 2
        paper_col = np.asarray(col, dtype=np.float64) - self.shear * (np.asarray(row, np.float64) - pivot)
        return self.depth.depth_of_column(paper_col, self.image.shape[1])

    def calibration(self, anchors: int = 0, weights: bool = False) -> dict[str, Any]:
        """What a person would read off this log, in the form POST /segment takes: depth ends, track
        borders, one output sample per column, and per curve its scale with the header's hints:
        `style`, `ink` ("dark"/"light") and `wrap` ("none"/"right"/"left"/"both": the sides of its
        backup scales); with `weights`, each curve's line weight where the legend shows it (`legend_weights`);
        with `anchors`, that many points per curve read off the scan ({depth, value}, spread along the curve
        where it is inked and on its own scale)."""
        width = self.image.shape[1]
        curves = [{"mnemonic": c.scale.mnemonic, "unit": c.scale.unit, "left": c.scale.left,
                   "right": c.scale.right, "log": c.scale.log, **c.hints()} for c in self.curves]
        if weights:
            for entry, weight in zip(curves, legend_weights([c.stroke_px for c in self.curves]), strict=True):
                if weight is not None:
                    entry["weight"] = weight
        if anchors:
            for entry, curve in zip(curves, self.curves, strict=True):
                entry["anchors"] = self._anchors(curve, anchors)
        step = (self.depth.bottom - self.depth.top) / (width - 1)
        return {"depth": {"top": self.depth.top, "bottom": self.depth.bottom, "unit": self.depth.unit},
                "curves": curves, "track_top": float(self.track[0]), "track_bottom": float(self.track[1]),
                "step": step}

    def _anchors(self, curve: CurveTruth, count: int) -> list[dict[str, float]]:
        cols = np.flatnonzero(curve.inked & ~curve.wrapped & np.isfinite(curve.values))
        if cols.size == 0:
            return []
        picks = cols[np.rint(np.linspace(0, cols.size - 1, count + 2)[1:-1]).astype(int)]
        return [{"depth": float(self.depth_at(c, curve.row[c])), "value": float(curve.values[c])} for c in picks]

    def factor_levels(self) -> list[str]:
        """The log's factor levels as words an evaluation can group by (page factors and curve looks)."""
        levels = [f"curves_{len(self.curves)}"]
        levels += [name for name in ("bilevel", "jpeg", "low_res", "stains", "skew", "labels_in_track",
                                     "same_ink_solid_pair", "solid_pair_by_ink", "held", "constant")
                   if self.factors.get(name)]
        return levels

    def truth_json(self) -> dict[str, Any]:
        """Ground truth as plain JSON types; NaN becomes None."""
        height, width = self.image.shape
        return {
            "seed": self.seed,
            "index": self.index,
            "height": height,
            "width": width,
            "classes": self.classes,
            "track": list(self.track),
            "shear": self.shear,
            "depth": asdict(self.depth),
            "factors": dict(self.factors),
            "curves": [_curve_json(c, self.curve_class(k)) for k, c in enumerate(self.curves)],
        }


def _curve_json(curve: CurveTruth, mask_class: int) -> dict[str, Any]:
    return {
        "name": curve.name,
        "mnemonic": curve.mnemonic,
        "class": mask_class,
        "scale": asdict(curve.scale),
        "wrap": curve.wrap,
        "backup_scales": {("right" if side > 0 else "left"): asdict(curve.backup_scale_on(side))
                          for side in wrap_sides(curve.wrap)},
        "style": curve.style,
        "ink": curve.ink,
        "ink_class": curve.ink_class,
        "colour": curve.colour,
        "stroke_px": curve.stroke_px,
        "values": _json_floats(curve.values),
        "row": _json_floats(curve.row),
        "wrap_side": curve.wrap_side.astype(int).tolist(),
        "inked": curve.inked.tolist(),
    }


def _json_floats(a: np.ndarray) -> list[float | None]:
    return [x if math.isfinite(x) else None for x in a.astype(np.float64).tolist()]


def pair_factors(curves: list[CurveTruth]) -> dict[str, bool]:
    """Whether two solid curves of the track share an ink (class, or colour on a colour scan: nothing on
    the page tells them apart) and whether two solid curves differ in ink only (ink alone tells them apart)."""
    solid_inks = [c.colour or c.ink_class for c in curves if c.style == "solid"]
    return {"same_ink_solid_pair": len(solid_inks) > len(set(solid_inks)),
            "solid_pair_by_ink": len(set(solid_inks)) > 1}


# A pen at least this many times as wide as another of its track is one a legend shows heavier: the widest
# pens then read thick and the narrowest thin; pens closer than that (2 px beside 3) are not told apart.
LEGEND_WEIGHT_RATIO = 2.0


def legend_weights(strokes_px: list[int]) -> list[str | None]:
    """Per curve of a track (its pen's width in px), the line weight a person reads off its legend: thick for
    the widest pens and thin for the narrowest where they differ by LEGEND_WEIGHT_RATIO or more, else none."""
    lo, hi = min(strokes_px), max(strokes_px)
    if hi < LEGEND_WEIGHT_RATIO * lo:
        return [None] * len(strokes_px)
    return ["thick" if px == hi else "thin" if px == lo else None for px in strokes_px]
