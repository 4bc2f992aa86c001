"""What varies between synthetic logs, and how often: the domain randomisation of `veernet_core.synth`.

Real paper gives no guarantee of a curve's style, tone or order, so every factor is drawn per log
from the caller's `numpy.random.Generator` (never a global RNG). A factor level named in `exclude`
is never generated, for leave-one-out training (its probability mass goes to the other levels);
`EXCLUDABLE` lists the names `DataConfig.exclude` accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from veernet_core.synth_truth import STYLES, WRAPS, ink_class, wrap_sides

STROKES = (1, 2, 3, 4)  # px in the rendered image, whatever the scale: thin pens and thick ones
CURVE_COUNTS = (1, 2, 3, 4)
PAGE_LEVELS = ("bilevel", "jpeg", "low_res", "stains", "skew", "labels_in_track")
PAIR_LEVELS = ("same_ink_solid_pair", "solid_pair_by_ink")
EXCLUDABLE: tuple[str, ...] = (
    *STYLES, "dark", "light", *PAIR_LEVELS, *(f"wrap_{w}" for w in WRAPS[1:]), "interrupted", "held", "constant",
    *(f"stroke_{s}" for s in STROKES), *(f"curves_{n}" for n in CURVE_COUNTS), *PAGE_LEVELS,
)
# Groups of which at least one level must stay: a log needs a style, an ink, a stroke and a count.
_GROUPS = {"style": STYLES, "ink": ("dark", "light"), "stroke": tuple(f"stroke_{s}" for s in STROKES),
           "curve count": tuple(f"curves_{n}" for n in CURVE_COUNTS)}

DARK_INK = (0, 70)  # gray levels on white paper: black to dark gray
LIGHT_INK = (115, 175)  # mid to light gray, well clear of the dark range so "dark"/"light" is unambiguous
SKEW_MAX_DEGREES = 1.0


def exclusion_errors(exclude: tuple[str, ...] | list[str]) -> list[str]:
    """What is wrong with an exclusion list, in words (empty when it is usable)."""
    errors = [f"unknown factor level {name!r}; allowed: {', '.join(EXCLUDABLE)}"
              for name in exclude if name not in EXCLUDABLE]
    errors += [f"excludes every {group} ({', '.join(levels)}); keep at least one"
               for group, levels in _GROUPS.items() if set(levels) <= set(exclude)]
    return errors


def check_exclude(exclude: tuple[str, ...] | list[str]) -> frozenset[str]:
    errors = exclusion_errors(exclude)
    if errors:
        raise ValueError("; ".join(errors))
    return frozenset(exclude)


def choose(rng: np.random.Generator, levels: tuple, weights: tuple[float, ...], allowed: list[bool]) -> object:
    """One of `levels` by `weights`, renormalised over the allowed ones (one uniform draw, always)."""
    w = np.array(weights, dtype=np.float64) * np.array(allowed, dtype=np.float64)
    cumulative = np.cumsum(w / w.sum())
    return levels[min(int(np.searchsorted(cumulative, rng.random(), side="right")), len(levels) - 1)]


def _chance(rng: np.random.Generator, p: float, name: str, excluded: frozenset[str]) -> bool:
    draw = rng.random()  # drawn even when excluded, so excluding one level leaves the others' draws alone
    return name not in excluded and draw < p


@dataclass(frozen=True)
class PageFactors:
    """How the page was printed and scanned."""

    curves: int
    bilevel: str  # "none", "threshold" (1-bit by a threshold) or "dither" (1-bit by ordered dither)
    jpeg_quality: int  # 0: not JPEG-compressed
    low_res: float  # 1.0: a normal print; below 1, a compressed depth scale (curves jump between columns)
    stains: int  # stains and tide marks on the paper
    skew_degrees: float
    labels_in_track: bool  # depth numbers printed inside the track as well as in the depth strip


def page_factors(rng: np.random.Generator, excluded: frozenset[str]) -> PageFactors:
    counts = [f"curves_{n}" not in excluded for n in CURVE_COUNTS]
    curves = int(choose(rng, CURVE_COUNTS, (0.25, 0.35, 0.25, 0.15), counts))  # type: ignore[call-overload]
    bilevel = "none"
    if _chance(rng, 0.15, "bilevel", excluded):
        bilevel = "threshold" if rng.random() < 0.5 else "dither"
    jpeg = int(rng.integers(20, 86)) if _chance(rng, 0.25, "jpeg", excluded) else 0
    # About 1 px per foot of depth: a curve moves several pixels between neighbouring columns.
    low_res = float(rng.uniform(0.1, 0.3)) if _chance(rng, 0.15, "low_res", excluded) else 1.0
    stains = int(rng.integers(1, 5)) if _chance(rng, 0.2, "stains", excluded) else 0
    skew = float(rng.uniform(-1, 1) * SKEW_MAX_DEGREES)
    if "skew" in excluded:
        skew = 0.0
    labels = _chance(rng, 0.2, "labels_in_track", excluded)
    return PageFactors(curves, bilevel, jpeg, low_res, stains, skew, labels)


@dataclass(frozen=True)
class CurveLook:
    """How one curve is drawn: what a log's header legend would say of it, and its pen."""

    style: str
    ink: int  # gray level on white paper
    stroke_px: int
    wrap: str
    interrupted: bool  # the curve stops and starts again inside the logged interval

    @property
    def ink_class(self) -> str:
        return ink_class(self.ink)


def _ink(rng: np.random.Generator, cls: str) -> int:
    low, high = DARK_INK if cls == "dark" else LIGHT_INK
    return int(rng.integers(low, high + 1))


def _look(rng: np.random.Generator, excluded: frozenset[str], style: str | None = None,
          cls: str | None = None) -> CurveLook:
    drawn_style = str(choose(rng, STYLES, (0.4, 0.25, 0.15, 0.2), [s not in excluded for s in STYLES]))
    drawn_cls = str(choose(rng, ("dark", "light"), (0.65, 0.35), [c not in excluded for c in ("dark", "light")]))
    cls = cls or drawn_cls
    ink = _ink(rng, cls)
    stroke = int(choose(rng, STROKES, (0.4, 0.3, 0.2, 0.1),  # type: ignore[call-overload]
                        [f"stroke_{s}" not in excluded for s in STROKES]))
    wrap = str(choose(rng, WRAPS, (0.6, 0.17, 0.13, 0.1), [w == "none" or f"wrap_{w}" not in excluded for w in WRAPS]))
    interrupted = _chance(rng, 0.12, "interrupted", excluded)
    return CurveLook(style or drawn_style, ink, stroke, wrap, interrupted)


HELD_SHARE = 0.1  # of curves: held at an edge with no backup scale where they run off the track


def held_edge(rng: np.random.Generator, wrap: str, excluded: frozenset[str]) -> int:
    """The edge a curve runs off and is held at, as a plotter clips a pen with no backup scale to go to
    (+1 `right`, -1 `left`), or 0. Only a side its header gives no backup scale; two draws always, so that
    excluding "held" leaves every later draw of `rng` alone."""
    draw, pick = rng.random(), rng.random()
    free = [side for side in (1, -1) if side not in wrap_sides(wrap)]
    if "held" in excluded or not free or draw >= HELD_SHARE:
        return 0
    return free[min(int(pick * len(free)), len(free) - 1)]


CONSTANT_SHARE = 0.06  # of curves: held at one value (or a few, in steps) inside the track: a bit size


def constant(rng: np.random.Generator, excluded: frozenset[str]) -> bool:
    """Whether a curve holds one value along the track (`synth_curves.constant`); one draw always, so that
    excluding "constant" leaves every later draw of `rng` alone."""
    return _chance(rng, CONSTANT_SHARE, "constant", excluded)


def _violates(looks: list[CurveLook], excluded: frozenset[str]) -> bool:
    solid = [look.ink_class for look in looks if look.style == "solid"]
    same = len(solid) > len(set(solid))
    return ("same_ink_solid_pair" in excluded and same) or ("solid_pair_by_ink" in excluded and len(set(solid)) > 1)


def curve_looks(rng: np.random.Generator, count: int, excluded: frozenset[str]) -> list[CurveLook]:
    """Looks for `count` curves of one track. Some tracks get on purpose two solid curves of one ink
    class (nothing tells them apart) or of two ink classes (ink alone does); any curve whose look would
    make an excluded pair is drawn again, and dropped if twenty draws cannot avoid it."""
    forced: dict[int, tuple[str, str]] = {}
    mode = rng.random()
    pair = rng.permutation(count)[:2].tolist() if count >= 2 else []
    first_cls = "dark" if rng.random() < 0.6 else "light"
    can_solid = "solid" not in excluded
    if pair and can_solid and mode < 0.15 and "same_ink_solid_pair" not in excluded and first_cls not in excluded:
        forced = {k: ("solid", first_cls) for k in pair}
    elif pair and can_solid and mode < 0.35 and "solid_pair_by_ink" not in excluded \
            and not {"dark", "light"} & excluded:
        forced = dict(zip(pair, (("solid", "dark"), ("solid", "light")), strict=True))
    looks: list[CurveLook] = []
    for k in range(count):
        style, cls = forced.get(k, (None, None))
        for _ in range(20):
            look = _look(rng, excluded, style, cls)
            if not _violates([*looks, look], excluded):
                looks.append(look)
                break
            style, cls = None, None  # a forced look that clashes with an exclusion is redrawn freely
    return looks  # never empty: one curve alone makes no pair
