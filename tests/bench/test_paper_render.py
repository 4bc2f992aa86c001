"""The evaluation renderer (bench/paper/): exact truth read from its own ink, and independence from
the training generator (nothing imported from it but the truth format)."""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bench.paper import render
from bench.paper.render import PEN_COLOURS
from tests.syntax import parsed
from veernet_core.synth_truth import SynthLog

REPO = Path(__file__).resolve().parents[2]
PAPER = REPO / "bench" / "paper"
SURVEY = range(80)


@cache
def _log(index: int, scale: float = 0.1, clean: bool = False) -> SynthLog:
    return render(11, index, scale, clean)


def _digest(log: SynthLog) -> str:
    return hashlib.sha256(log.image.tobytes() + log.mask.tobytes() + json.dumps(log.truth_json()).encode()).hexdigest()


def test_a_log_is_a_pure_function_of_its_arguments() -> None:
    assert _digest(render(3, 4, 0.1)) == _digest(render(3, 4, 0.1))
    assert _digest(render(3, 5, 0.1)) != _digest(render(3, 4, 0.1))
    assert _digest(render(4, 4, 0.1)) != _digest(render(3, 4, 0.1))
    with pytest.raises(ValueError, match="non-negative"):
        render(-1, 0)


def _near(changes: np.ndarray, reach: int) -> np.ndarray:
    """Columns within `reach` of a change between column i and i + 1."""
    flags = np.zeros(changes.size + 1, dtype=bool)
    for i in np.flatnonzero(changes):
        flags[max(0, i + 1 - reach) : i + 1 + reach] = True
    return flags


def _one_run(ink: np.ndarray) -> np.ndarray:
    """Columns whose ink is one unbroken run of rows."""
    starts = np.diff(ink.astype(np.int8), axis=0, prepend=0) == 1
    return starts.sum(axis=0) == 1


def _alone(log: SynthLog, k: int) -> np.ndarray:
    """Columns where curve k is inked and no other curve's pen is anywhere near that column."""
    ok = log.curves[k].inked.copy()
    for j, other in enumerate(log.curves):
        if j != k:
            reach = np.ones(2 * other.stroke_px + 3)
            ok &= np.convolve(other.inked | np.isfinite(other.values), reach, mode="same") == 0
    return ok


@pytest.mark.parametrize("scale", [0.1, 0.3])
def test_truth_rows_are_the_centres_of_the_drawn_ink(scale: float) -> None:
    """On a clean page (white paper, inks only) a column's darkness is the pen's coverage, so its
    centroid is the stroke centre: the truth's row agrees to a hundredth of a pixel where a curve is
    alone and its ink one run (a steep dashed stretch can put several dashes in one column), and every
    inked truth row lies within the column's ink."""
    checked = 0
    for index in range(24 if scale == 0.1 else 6):
        log = _log(index, scale, clean=True)
        darkness = 255.0 - log.image.astype(np.float64)
        rows = np.arange(log.image.shape[0], dtype=np.float64)[:, None]
        centroid = (darkness * rows).sum(axis=0) / np.maximum(darkness.sum(axis=0), 1e-9)
        for k, curve in enumerate(log.curves):
            cols = np.flatnonzero(curve.inked)
            first, last = log.mask.argmax(axis=0), log.mask.shape[0] - 1 - log.mask[::-1].argmax(axis=0)
            assert log.mask[:, cols].any(axis=0).all()  # inked columns hold ink
            # within the column's ink, give or take the faint rim (under the mask's quarter) of a thin pen
            assert ((curve.row[cols] >= first[cols] - 2) & (curve.row[cols] <= last[cols] + 2)).all()
            # Beside a wrap the pen's ink is in two places in one column (leaving by one edge, back by
            # the other); the truth is the centre of the larger part, the image's centroid is of both.
            crossing = _near(np.diff(curve.wrap_side.astype(int)) != 0, curve.stroke_px + 4)
            solo = np.flatnonzero(_alone(log, k) & _one_run(darkness > 2) & ~crossing)
            if 255 - curve.ink < 60:
                continue  # too faint for a 1/255 quantisation to leave the centroid this exact
            assert np.abs(centroid[solo] - curve.row[solo]).max(initial=0.0) < 0.05
            checked += solo.size
    assert checked > 3000


def test_values_follow_the_row_on_the_scale_it_is_drawn_on() -> None:
    for log in (_log(i) for i in SURVEY):
        top, bottom = log.track
        for curve in log.curves:
            has = np.isfinite(curve.values)
            unwrapped = (curve.row[has] - top) / (bottom - top) + curve.wrap_side[has]
            np.testing.assert_allclose(curve.scale.to_fraction(curve.values[has]), unwrapped, atol=1e-9)
            sides = {"none": set(), "right": {1}, "left": {-1}, "both": {1, -1}}[curve.wrap]
            assert set(np.unique(curve.wrap_side[has]).tolist()) <= {0} | sides


def _levels(log: SynthLog) -> set[str]:
    seen = set(log.factor_levels()) | {f"grid_{log.factors['grid']}", f"bilevel_{log.factors['bilevel_mode']}"}
    for c in log.curves:
        seen |= {c.style, c.ink_class, f"stroke_{c.stroke_px}", f"wrap_{c.wrap}"}
        seen |= {f"wrapped_{'right' if s > 0 else 'left'}" for s in np.unique(c.wrap_side) if s}
    return seen


def test_every_factor_level_appears_over_a_batch() -> None:
    seen = set().union(*(_levels(_log(i)) for i in SURVEY))
    expected = {"solid", "dashed", "dotted", "dash-dot", "dark", "light", *(f"stroke_{s}" for s in range(1, 5)),
                *(f"curves_{n}" for n in range(1, 5)), "wrap_none", "wrap_right", "wrap_left", "wrap_both",
                "wrapped_right", "wrapped_left", "bilevel_dither", "bilevel_threshold", "jpeg", "low_res",
                "stains", "skew", "labels_in_track", "grid_linear", "grid_log", "same_ink_solid_pair",
                "solid_pair_by_ink"}
    assert expected <= seen, expected - seen
    for log in (_log(i) for i in SURVEY):
        if log.factors["bilevel"] and not log.factors["jpeg"]:
            assert set(np.unique(log.image).tolist()) <= {0, 255}
        if log.factors["low_res"]:
            assert log.factors["px_per_unit"] < 2 and log.depth.unit == "ft"  # about a pixel per foot


def test_broken_styles_leave_gaps_of_bare_paper() -> None:
    for log in (_log(i, clean=True) for i in range(40)):
        inked = np.array([c.inked for c in log.curves])
        for curve in log.curves:
            gaps = np.isfinite(curve.values) & ~curve.inked
            assert (curve.style != "solid") or gaps.sum() <= 2  # a solid pen lifts only where the record stops
            ink_near = np.convolve(inked.any(axis=0), np.ones(2 * curve.stroke_px + 1), mode="same") > 0
            bare = gaps & ~ink_near
            assert log.image[:, bare].min(initial=255) >= 250  # nothing of this pen there: white paper


def _imported_modules(path: Path) -> set[str]:
    """Every absolute module a file imports, anywhere in it (a function-level import too)."""
    names: set[str] = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _project_imports(files: list[Path]) -> set[str]:
    return {name for f in files for name in _imported_modules(f)
            if name.split(".")[0] in ("veernet_core", "api", "worker", "bench")}


def test_the_renderer_imports_nothing_of_the_training_generator_but_the_truth_format() -> None:
    """The strip renderer takes only `synth_truth` from veernet_core; the full-page renderer (sheet*.py) only
    the full-page truth format and what it is built on (`page_spec`, the depth scales, `synth_truth`)."""
    files = sorted(PAPER.glob("*.py"))
    assert {f.name for f in files} >= {"render.py", "raster.py", "values.py", "page.py", "sheet.py"}
    sheets = [f for f in files if f.name.startswith("sheet")]
    assert _project_imports([f for f in files if f not in sheets]) == {"veernet_core.synth_truth"}
    assert _project_imports(sheets) <= {"veernet_core.page_spec", "veernet_core.digitise.layout.scales",
                                        "veernet_core.synth_truth"}
    code = ("import sys; import bench.paper; bench.paper.render(0, 0, 0.1); "
            "print(sorted(m for m in sys.modules if m.startswith('veernet_core')))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "['veernet_core', 'veernet_core.synth_truth']"


def test_a_colour_log_is_its_gray_twin_printed_in_coloured_inks() -> None:
    """The same curves, pens and page in other inks: the same mask and truth rows, a distinct colour per
    pen, named in the calibration's hints; the gray image is the colour scan's luma, as the service reads
    an upload; a colour scan is never 1-bit."""
    for index in range(8):
        gray, colour = _log(index), render(11, index, 0.1, colour=True)
        assert gray.colour is None and colour.colour is not None
        assert colour.colour.shape == (*colour.image.shape, 3)
        assert np.array_equal(colour.mask, gray.mask)
        assert np.array_equal(colour.image, np.asarray(Image.fromarray(colour.colour).convert("L")))
        for a, b in zip(gray.curves, colour.curves, strict=True):
            assert np.array_equal(a.row, b.row, equal_nan=True) and np.array_equal(a.inked, b.inked)
            assert (a.style, a.stroke_px, a.wrap, a.colour) == (b.style, b.stroke_px, b.wrap, "")
        names = [c.colour or "black" for c in colour.curves]
        assert len(set(names)) == len(names) and set(names) <= set(PEN_COLOURS)
        hints = [c["ink"] for c in colour.calibration()["curves"]]
        assert hints == [c.colour or "dark" for c in colour.curves]
        assert not colour.factors["bilevel"] and colour.factors["colour"]
        for factor in ("jpeg", "stains", "skew", "grid", "labels_in_track"):
            assert colour.factors[factor] == gray.factors[factor]


def test_a_colour_pen_draws_in_its_own_colour() -> None:
    """On a clean colour page, the pixels a curve's pen covers fully (no other pen near) are its colour."""
    checked = 0
    for index in range(16):
        log = render(11, index, 0.3, clean=True, colour=True)
        assert log.colour is not None
        for k, curve in enumerate(log.curves):
            if curve.stroke_px < 2:
                continue
            clear = curve.inked & (curve.wrap_side == 0)
            for j, other in enumerate(log.curves):
                if j != k:  # no other pen within a few strokes' width in the column
                    clear &= ~(np.abs(np.nan_to_num(other.row, nan=-1e9) - curve.row) < 3 * (curve.stroke_px
                                                                                             + other.stroke_px))
            cols = np.flatnonzero(clear)
            if cols.size < 20:
                continue
            centre = log.colour[np.rint(curve.row[cols]).astype(int), cols].astype(np.float64)
            reference = np.array(PEN_COLOURS[curve.colour or "black"][0], np.float64)
            assert np.linalg.norm(np.median(centre, axis=0) - reference) < 45, (index, k, curve.colour)
            checked += 1
    assert checked >= 5
