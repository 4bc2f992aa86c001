"""Inks read as blends of paper and ink (veernet_core.digitise.colours): a stroke of any strength lies on its
ink's line of mixes with the paper, and off every other ink's."""

from __future__ import annotations

import numpy as np

from veernet_core.digitise.calibration_fields import INK_COLOURS
from veernet_core.digitise.colours import BLACK, ink_line, mismatch, paper_tint

PAPER = np.array([246.0, 240.0, 222.0])  # yellowed paper


def _mixed(ink: tuple[int, int, int], share: float) -> np.ndarray:
    return PAPER + share * (np.array(ink, np.float64) - PAPER)


def test_every_mix_of_an_ink_with_the_paper_lies_on_its_line_and_off_the_others() -> None:
    inks = {**INK_COLOURS, "dark": BLACK}
    for name, ink in inks.items():
        for share in (0.25, 0.5, 1.0):
            seen = _mixed(ink, share)
            own = float(mismatch(seen, PAPER, ink_line(name)))
            others = {other: float(mismatch(seen, PAPER, ink_line(other))) for other in inks if other != name}
            assert own < 1e-6, (name, share)
            nearest = min(others, key=others.__getitem__)
            assert others[nearest] > 0.05, (name, share, nearest, others[nearest])


def test_a_faint_stroke_is_judged_by_its_hue_and_paper_noise_by_nothing() -> None:
    """A quarter-strength red is as far off blue's line, for its distance from the paper, as full red;
    a pixel a few gray levels off the paper matches every line about equally (HUE_FLOOR)."""
    red, blue = INK_COLOURS["red"], INK_COLOURS["blue"]
    faint, full = float(mismatch(_mixed(red, 0.25), PAPER, blue)), float(mismatch(_mixed(red, 1.0), PAPER, blue))
    assert 0.6 < faint / full < 1.6 and faint > 0.4
    noise = PAPER + np.array([3.0, -2.0, 1.0])
    spread = [float(mismatch(noise, PAPER, ink_line(name))) for name in (*INK_COLOURS, "dark")]
    assert max(spread) < 0.2


def test_the_papers_tint_is_read_off_the_bright_pixels() -> None:
    rng = np.random.default_rng(5)
    gray = np.full((40, 300), 236.0) + rng.normal(0, 2, (40, 300))
    colour = gray[..., None] * (PAPER / 236.0)[None, None, :]
    colour[10:13] = (200, 40, 40)  # a red stroke across: not paper
    gray[10:13] = 85
    assert np.allclose(paper_tint(colour, gray) * 236.0, PAPER, atol=2.0)
