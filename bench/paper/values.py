"""Curve values for the evaluation renderer (bench/paper/render.py): a rock column, then tools reading it.

Written from how logs behave, not from the training generator: the borehole crosses a sequence of
beds (a Markov chain of shale, sand, limestone and coal with log-normal thicknesses in metres); every
tool reads each bed's own response, smeared over the tool's vertical resolution, with the tool's noise
and its typical accidents (cycle skips on the sonic, washouts on the caliper in shales, a spiky micro
resistivity). Values are physical (API, mV, g/cm3, ...) and the track scales are those printed on
log headers, so a curve leaves its track where the rock says so and wraps onto a backup scale there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Per lithology, per tool: the range a bed's reading is drawn from (log10 for the resistivities).
RESPONSES: dict[str, dict[str, tuple[float, float]]] = {
    "shale": {"GR": (85, 150), "SP": (-4, 4), "CALI": (9.2, 12.5), "RT": (0.2, 0.8), "MSFL": (0.1, 0.7),
              "RHOB": (2.35, 2.58), "NPHI": (0.30, 0.45), "DT": (92, 128)},
    "sand": {"GR": (18, 60), "SP": (-75, -25), "CALI": (8.4, 9.0), "RT": (0.3, 2.5), "MSFL": (0.5, 2.0),
             "RHOB": (2.1, 2.4), "NPHI": (0.10, 0.30), "DT": (72, 102)},
    "lime": {"GR": (8, 32), "SP": (-35, -10), "CALI": (8.4, 8.8), "RT": (1.5, 3.5), "MSFL": (1.2, 2.6),
             "RHOB": (2.55, 2.71), "NPHI": (-0.01, 0.10), "DT": (47, 62)},
    "coal": {"GR": (12, 45), "SP": (-25, 0), "CALI": (8.5, 10.5), "RT": (2.0, 3.7), "MSFL": (1.5, 3.0),
             "RHOB": (1.25, 1.8), "NPHI": (0.45, 0.62), "DT": (105, 155)},
}
LOG_TOOLS = ("RT", "MSFL")  # read in log10 above
# Which bed follows which: shales dominate clastic sequences; coal sits on sand or shale.
TRANSITIONS = {"shale": (("sand", 0.55), ("lime", 0.2), ("shale", 0.15), ("coal", 0.1)),
               "sand": (("shale", 0.7), ("coal", 0.15), ("lime", 0.15)),
               "lime": (("shale", 0.6), ("lime", 0.2), ("sand", 0.2)),
               "coal": (("shale", 0.6), ("sand", 0.4))}


@dataclass(frozen=True)
class HeaderScale:
    """A track scale as printed on a log header."""

    mnemonic: str
    name: str
    unit: str
    left: float
    right: float
    log: bool


# The scales headers commonly print for each tool (a narrow one makes the curve leave the track).
HEADER_SCALES: dict[str, tuple[HeaderScale, ...]] = {
    "GR": (HeaderScale("GR", "Gamma Ray", "GAPI", 0, 150, False), HeaderScale("GR", "Gamma Ray", "GAPI", 0, 100, False),
           HeaderScale("GR", "Gamma Ray", "GAPI", 0, 200, False)),
    "SP": (HeaderScale("SP", "Spontaneous Potential", "mV", -100, 0, False),
           HeaderScale("SP", "Spontaneous Potential", "mV", -60, 40, False)),
    "CALI": (HeaderScale("CALI", "Caliper", "in", 6, 16, False), HeaderScale("CALI", "Caliper", "in", 8, 12, False)),
    "RT": (HeaderScale("RT", "True Resistivity", "ohm.m", 0.2, 2000, True),
           HeaderScale("RT", "True Resistivity", "ohm.m", 0.2, 200, True),
           HeaderScale("RT", "True Resistivity", "ohm.m", 1, 100, True)),
    "MSFL": (HeaderScale("MSFL", "Micro Spherically Focused", "ohm.m", 0.2, 200, True),),
    "RHOB": (HeaderScale("RHOB", "Bulk Density", "g/cc", 1.95, 2.95, False),
             HeaderScale("RHOB", "Bulk Density", "g/cc", 2.0, 3.0, False)),
    "NPHI": (HeaderScale("NPHI", "Neutron Porosity", "v/v", 0.45, -0.15, False),
             HeaderScale("NPHI", "Neutron Porosity", "v/v", 0.6, 0.0, False)),
    "DT": (HeaderScale("DT", "Sonic", "us/ft", 140, 40, False), HeaderScale("DT", "Sonic", "us/ft", 150, 50, False)),
}


def bed_column(rng: np.random.Generator, depths: np.ndarray) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Beds down the interval: per sample its bed number, each bed's lithology, and each bed's
    "quality" in [0, 1] (where in its lithology's ranges the bed's readings fall)."""
    span = float(depths[-1] - depths[0])
    median_bed = span * rng.uniform(0.004, 0.02)
    lith, tops = ["shale" if rng.random() < 0.5 else "sand"], [float(depths[0])]
    while tops[-1] < depths[-1]:
        tops.append(tops[-1] + median_bed * float(rng.lognormal(0.0, 0.8)))
        names, weights = zip(*TRANSITIONS[lith[-1]], strict=True)
        lith.append(str(rng.choice(names, p=np.array(weights) / sum(weights))))
    bed = np.searchsorted(np.array(tops), depths, side="right") - 1
    return bed, lith, rng.uniform(0, 1, len(lith))


def tool_reading(rng: np.random.Generator, tool: str, beds: tuple[np.ndarray, list[str], np.ndarray],
                 samples_per_metre: float) -> np.ndarray:
    """One tool's values per sample: each bed's response, smeared over the tool's vertical resolution,
    plus noise and the tool's accidents."""
    bed, lith, quality = beds
    blend = np.clip(quality + rng.normal(0, 0.15, quality.size), 0, 1)  # tools disagree a little
    low, high = (np.array([RESPONSES[name][tool][k] for name in lith]) for k in (0, 1))
    per_bed = low + blend * (high - low)
    raw = per_bed[bed]
    resolution = rng.uniform(0.3, 0.9) * samples_per_metre  # metres of rock one reading averages
    value = _gaussian_smooth(raw, resolution / 2.355)
    value = value + rng.normal(0, 0.012 * (high.max() - low.min()), value.size)
    value = _accidents(rng, tool, value, bed, lith, samples_per_metre)
    return 10.0**value if tool in LOG_TOOLS else value


def _accidents(rng: np.random.Generator, tool: str, value: np.ndarray, bed: np.ndarray, lith: list[str],
               samples_per_metre: float) -> np.ndarray:
    value = value.copy()
    if tool == "DT":  # cycle skips: a few samples read far too slow
        for start in rng.integers(0, value.size, int(rng.integers(0, 8))):
            value[start : start + int(rng.integers(1, 4))] += rng.uniform(20, 45)
    if tool == "CALI":  # washouts: the hole caves in some shales
        shaly = np.array([name == "shale" for name in lith])[bed]
        for start in rng.integers(0, value.size, int(rng.integers(0, 5))):
            stop = start + max(1, round(rng.uniform(0.5, 4) * samples_per_metre))
            value[start:stop] += np.where(shaly[start:stop], rng.uniform(1.5, 5), 0.0)
    if tool == "MSFL":  # a pad tool: spiky
        spikes = rng.random(value.size) < 0.01
        value[spikes] += rng.normal(0, 0.5, int(spikes.sum()))
    return value


def _gaussian_smooth(x: np.ndarray, sigma: float) -> np.ndarray:
    if sigma < 0.3:
        return x
    half = int(math.ceil(3 * sigma))
    kernel = np.exp(-0.5 * (np.arange(-half, half + 1) / sigma) ** 2)
    padded = np.pad(x, half, mode="edge")
    return np.convolve(padded, kernel / kernel.sum(), mode="valid")


def to_fraction(scale: HeaderScale, value: np.ndarray) -> np.ndarray:
    """Position across the track (0 at the header's left value, at the top row; 1 at its right)."""
    if scale.log:
        return (np.log10(value) - math.log10(scale.left)) / (math.log10(scale.right) - math.log10(scale.left))
    return (value - scale.left) / (scale.right - scale.left)


def keep_in_reach(fraction: np.ndarray, sides: tuple[int, ...]) -> np.ndarray:
    """Where the header has no backup scale on a side, the recorder's pen cannot go past the track's
    edge: the curve is squeezed softly inside; on a backup side it may go one track width further."""
    low, high = (-0.97 if -1 in sides else 0.015), (1.97 if 1 in sides else 0.985)
    out = fraction.copy()
    above, below = out > high - 0.05, out < low + 0.05
    out[above] = high - 0.05 + 0.05 * np.tanh((out[above] - high + 0.05) / 0.05)
    out[below] = low + 0.05 - 0.05 * np.tanh((low + 0.05 - out[below]) / 0.05)
    return out
