"""The depth scales printed logs use, and the grid each draws: what page layout analysis matches a
section's grid against, and what the full-page generator draws.

A scale is a ratio of paper to ground (1 in per 100 ft is 1:1200). Its grid has light lines every
`minor` depth units, heavier ones every `medium` and the heaviest every `major`; depth numbers are
printed every `label_every`. The ratio alone fixes how many pixels a depth unit takes at a given
resolution, which is how a section's scale is named from its grid spacing and the scan's dpi.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

INCHES_PER_UNIT = {"ft": 12.0, "m": 1000.0 / 25.4}


@dataclass(frozen=True)
class DepthScale:
    name: str  # as a log's header prints it
    unit: str  # "ft" or "m"
    ratio: int  # paper : ground, 1 : ratio
    minor: float  # depth units between light grid lines
    medium: float
    major: float
    label_every: float  # depth units between printed depth numbers

    @property
    def inches_per_unit(self) -> float:
        """Paper inches one depth unit takes."""
        return INCHES_PER_UNIT[self.unit] / self.ratio

    def rows_per_unit(self, dpi: float) -> float:
        return self.inches_per_unit * dpi

    @property
    def medium_every(self) -> int:
        """Minor intervals between two medium lines."""
        return round(self.medium / self.minor)

    @property
    def major_every(self) -> int:
        return round(self.major / self.minor)


SCALES: tuple[DepthScale, ...] = (
    DepthScale("1 in per 100 ft", "ft", 1200, 10.0, 50.0, 100.0, 100.0),
    DepthScale("2 in per 100 ft", "ft", 600, 10.0, 50.0, 100.0, 100.0),
    DepthScale("5 in per 100 ft", "ft", 240, 2.0, 10.0, 50.0, 50.0),
    DepthScale("1:200", "m", 200, 1.0, 5.0, 10.0, 10.0),
    DepthScale("1:500", "m", 500, 2.0, 10.0, 50.0, 50.0),
)


def scale_named(name: str) -> DepthScale:
    for scale in SCALES:
        if scale.name == name:
            return scale
    raise ValueError(f"no depth scale {name!r}; known: {', '.join(s.name for s in SCALES)}")


def nearest_scale(inches_per_row_unit: float) -> tuple[DepthScale, float]:
    """The standard scale closest (in log ratio) to a measured paper length per depth unit, in inches, and
    how far off it is, as a factor >= 1 (1.0: exact)."""
    def off(scale: DepthScale) -> float:
        return abs(math.log(inches_per_row_unit / scale.inches_per_unit))
    best = min(SCALES, key=off)
    return best, math.exp(off(best))
