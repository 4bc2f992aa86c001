"""Naming the curves of a track from what the log says (style, ink, anchors), on rendered logs whose
curves cross; the generator's ink footprint stands in for a binary model's probabilities."""

from __future__ import annotations

import io
import math
from typing import Any

import lasio
import numpy as np
import pytest
from PIL import Image

from tests.core import naming_testkit
from tests.core.naming_testkit import Drawn, RenderedLog, render, share_on_own_curve
from veernet_core.digitise import identity
from veernet_core.digitise.calibration import Calibration, CurveScale
from veernet_core.digitise.curves import Digitised, digitise
from veernet_core.digitise.export import ExportMeta, to_json, to_las
from veernet_core.digitise.identity import (
    AMBIGUOUS_SHARE,
    DISAGREE_SHARE,
    DISAGREE_U,
    DOUBLED_SHARE,
    INKED_APART,
    Naming,
    _cheap_swap,
    _doubted,
    _inked_in_order,
    checked_against,
    doubled,
    name_traces,
)
from veernet_core.digitise.ink import (
    MIN_DARKNESS,
    Look,
    Page,
    PenWidth,
    ScanPixels,
    looks_along,
    marks_style,
    page_of,
    stroke_widths,
    style_label,
)
from veernet_core.digitise.predict import load_colour
from veernet_core.digitise.tracer import ColumnTrace

SOLID_DARK, SOLID_LIGHT = Drawn("solid", "dark"), Drawn("solid", "light")


def _digitise(log: RenderedLog, hints: list[dict[str, Any]]) -> Digitised:
    curves = [{"mnemonic": f"C{k}", "unit": "API", "left": 0, "right": 150, **h} for k, h in enumerate(hints)]
    calibration = Calibration.from_dict(log.calibration(curves), *log.scan.gray.shape)
    return digitise(log.probabilities, calibration, scan=log.scan)


def _shares(log: RenderedLog, result: Digitised, drawn_for: list[int]) -> list[float]:
    """Per named curve: the share of columns (where the curves are apart) its trace is on the drawn curve
    it should be named after."""
    n = len(log.rows)
    return [share_on_own_curve(curve.trace.row, log.rows[drawn_for[c]], [log.rows[j] for j in range(n)
                                                                          if j != drawn_for[c]])
            for c, curve in enumerate(result.curves)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_dark_and_a_light_solid_curve_that_cross_are_named_by_their_ink(seed: int) -> None:
    log = render(seed, [SOLID_DARK, SOLID_LIGHT])
    assert log.crossings(0, 1) >= 8, "the curves must cross for the test to mean anything"
    for hints, drawn_for in (([{"ink": "dark"}, {"ink": "light"}], [0, 1]),
                             ([{"ink": "light"}, {"ink": "dark"}], [1, 0])):  # the listing order does not matter
        result = _digitise(log, hints)
        assert min(_shares(log, result, drawn_for)) >= 0.9
        assert [c.identity for c in result.curves] == ["hinted", "hinted"]
        assert [c.warnings for c in result.curves] == [(), ()]


def test_a_gray_pen_half_way_to_black_is_the_light_curve_beside_a_black_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gray pen that inks over half the way from the paper to black (the page generator's gray 90-140 on
    white) reads dark on its own (`ink.DARK_RATIO`): that contradicted its light hint, and both curves of a
    track declared dark and light were flagged. Beside the black curve it is the lighter one, and light."""
    monkeypatch.setitem(naming_testkit.INK_RGB, "light", (70, 70, 70))  # 52 % as dark as black
    alone = _digitise(render(0, [SOLID_LIGHT]), [{"ink": "light"}]).curves[0]
    assert any("declared ink light" in w and "looks dark" in w for w in alone.warnings), "on its own it reads dark"
    log = render(0, [SOLID_DARK, SOLID_LIGHT])
    for hints, drawn_for in (([{"ink": "dark"}, {"ink": "light"}], [0, 1]),
                             ([{"ink": "light"}, {"ink": "dark"}], [1, 0])):
        result = _digitise(log, hints)
        assert min(_shares(log, result, drawn_for)) >= 0.9
        assert [c.identity for c in result.curves] == ["hinted", "hinted"]
        assert [c.warnings for c in result.curves] == [(), ()]


def test_without_hints_two_curves_are_ambiguous_and_the_outputs_say_so(tmp_path: Any) -> None:
    log = render(0, [SOLID_DARK, SOLID_LIGHT])
    result = _digitise(log, [{}, {}])
    assert [c.identity for c in result.curves] == ["ambiguous", "ambiguous"]
    data = to_json(result, ExportMeta("0" * 64))
    assert [c["identity"] for c in data["curves"]] == ["ambiguous", "ambiguous"]  # type: ignore[index]
    warnings = data["warnings"]
    assert isinstance(warnings, list)
    assert any("C0, C1: neither the calibration nor the scan tells" in w for w in warnings)
    text = to_las(result, ExportMeta("0" * 64))
    las = lasio.read(io.StringIO(text))
    assert "neither the calibration nor the scan tells these curves apart" in las.other
    assert las.params["IDN1"].value == "AMBIGUOUS"
    lascheck = pytest.importorskip("lascheck", reason="lascheck is the LAS 2.0 validator named in the issue")
    (tmp_path / "ambiguous.las").write_text(text)
    assert lascheck.read(str(tmp_path / "ambiguous.las")).get_non_conformities() == []


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_dashed_and_a_solid_curve_are_named_by_their_style(seed: int) -> None:
    log = render(seed, [SOLID_DARK, Drawn("dashed", "dark")])
    result = _digitise(log, [{"style": "dashed"}, {"style": "solid"}])
    assert min(_shares(log, result, [1, 0])) >= 0.8
    assert [c.identity for c in result.curves] == ["hinted", "hinted"]
    assert [c.warnings for c in result.curves] == [(), ()]


@pytest.mark.parametrize("seed", [0, 1])
def test_a_hint_beside_a_curve_with_no_hint_of_its_kind_vouches_for_no_name(seed: int) -> None:
    """A light curve declared light beside one of no declared ink: the other curve may be light too, so the
    hint tells nothing apart and both names are in doubt, however well the light trace fits the hint (as a
    header read in part leaves it: bench/page_segment_eval.py --hints read). Declared on both, the inks name
    them; a style both declare, differing, tells them apart whatever one ink hint says."""
    log = render(seed, [SOLID_DARK, SOLID_LIGHT])
    assert [c.identity for c in _digitise(log, [{}, {"ink": "light"}]).curves] == ["ambiguous", "ambiguous"]
    assert [c.identity for c in _digitise(log, [{"ink": "dark"}, {"ink": "light"}]).curves] == ["hinted", "hinted"]
    log = render(seed, [SOLID_DARK, Drawn("dashed", "light")])
    assert [c.identity for c in _digitise(log, [{"style": "solid"}, {"ink": "light"}]).curves] == \
        ["ambiguous", "ambiguous"]
    result = _digitise(log, [{"style": "solid"}, {"style": "dashed", "ink": "light"}])
    assert [c.identity for c in result.curves] == ["hinted", "hinted"]
    assert min(_shares(log, result, [0, 1])) >= 0.8


def test_colour_names_curves_on_a_colour_scan() -> None:
    log = render(0, [Drawn("solid", "red"), Drawn("solid", "blue")], colour=True)
    result = _digitise(log, [{"ink": "blue"}, {"ink": "red"}])
    assert min(_shares(log, result, [1, 0])) >= 0.95
    gray = render(0, [Drawn("solid", "red"), Drawn("solid", "blue")], colour=False)
    on_gray = _digitise(gray, [{"ink": "blue"}, {"ink": "red"}]).curves
    assert [c.identity for c in on_gray] == ["ambiguous"] * 2
    assert all("colour hints need a colour upload" in c.warnings[0] for c in on_gray)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_faded_colours_are_named_by_their_hue(seed: int) -> None:
    """Faded red and blue pens: each stroke's colour is far from its ink's full RGB, and nearer white than
    either, but lies on the line of its ink's mixes with the paper, and off the other's."""
    log = render(seed, [Drawn("solid", "faded red"), Drawn("solid", "faded blue")], colour=True)
    assert log.crossings(0, 1) >= 4, "the curves must cross for the test to mean anything"
    result = _digitise(log, [{"ink": "blue"}, {"ink": "red"}])
    assert min(_shares(log, result, [1, 0])) >= 0.95
    assert [c.identity for c in result.curves] == ["hinted"] * 2
    assert [c.warnings for c in result.curves] == [(), ()]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_red_and_a_black_curve_are_named_by_colour(seed: int) -> None:
    """A red stroke is as dark as a dark gray one: on a colour scan its hue, not its darkness, keeps it
    from being named `dark`, and keeps the black curve's trace off it where they cross."""
    log = render(seed, [Drawn("solid", "red"), SOLID_DARK], colour=True)
    assert log.crossings(0, 1) >= 4, "the curves must cross for the test to mean anything"
    result = _digitise(log, [{"ink": "dark"}, {"ink": "red"}])
    assert min(_shares(log, result, [1, 0])) >= 0.95
    assert [c.identity for c in result.curves] == ["hinted"] * 2
    assert [c.warnings for c in result.curves] == [(), ()]


def _apart_column(log: RenderedLog) -> int:
    """A column where the two curves are far apart, away from the scan's ends."""
    gap = np.abs(log.rows[0] - log.rows[1])
    gap[:100] = gap[-100:] = 0
    return int(np.argmax(gap))


def _anchored_on(log: RenderedLog, at: int) -> tuple[Digitised, int]:
    """The log digitised with one anchor, on drawn curve 1 where the curves are furthest apart, given to
    calibrated curve `at` (the other curve has no hints); and the anchor's column."""
    col = _apart_column(log)
    track = log.track[1] - log.track[0]
    value = float((log.rows[1][col] - log.track[0]) / track * 150)  # curve 1's value there, 0-150 across
    hints: list[dict[str, Any]] = [{}, {}]
    hints[at] = {"anchors": [{"depth": log.depth_of(col), "value": value}]}
    return _digitise(log, hints), col


@pytest.mark.xfail(strict=True, reason=(
    "the joint tracer finds the first curve's path alone, and where the other curve is calmer it may move across "
    "paper onto it (veernet_core/digitise/joint.py: MOVE_COST per pixel across paper is small against a wiggly "
    "curve's own movement), so the two traces change curves where the curves never touch and one anchor names "
    "them right over about half the log; the naming step flags them ambiguous "
    "(test_one_anchor_does_not_vouch_for_names_it_cannot_tell). With both paths found together, each follows "
    "one curve, but the naming still cuts stretches where a trace jumps by more than a stroke, and the "
    "anchor vouches only for its own stretch (tried and not kept: bench/README.md, 2026-11-26)"))
@pytest.mark.parametrize("seed", [30, 47])  # the two curves never cross: one anchor names them all along
def test_an_anchor_names_two_curves_that_look_the_same(seed: int) -> None:
    log = render(seed, [SOLID_DARK, SOLID_DARK])
    assert log.crossings(0, 1) == 0 and np.abs(log.rows[0] - log.rows[1]).min() > 10
    for at in (0, 1):
        result, col = _anchored_on(log, at)
        named = result.curves[at].trace.row[col]
        assert abs(named - log.rows[1][col]) < 1.5, "the anchored curve is the one through the anchor"
        assert min(_shares(log, result, [1, 0] if at == 0 else [0, 1])) >= 0.95
        assert result.curves[at].identity == "anchored" and result.curves[1 - at].identity == "hinted"
        assert result.curves[at].warnings == ()


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5, 30, 47])
def test_one_anchor_does_not_vouch_for_names_it_cannot_tell(seed: int) -> None:
    """Two curves that look the same (crossing many times in seeds 0-5, never in 30 and 47); one anchor
    tells them apart about itself, and elsewhere the tracer may have swapped them. Every name that is
    wrong over most of the log is flagged ambiguous (the issue's contract), and the anchor's curve still
    goes through the anchor."""
    log = render(seed, [SOLID_DARK, SOLID_DARK])
    for at in (0, 1):
        result, col = _anchored_on(log, at)
        assert abs(result.curves[at].trace.row[col] - log.rows[1][col]) < 1.5
        shares = _shares(log, result, [1, 0] if at == 0 else [0, 1])
        for curve, share in zip(result.curves, shares, strict=True):
            assert curve.identity == "ambiguous" or share > 0.5, (curve.mnemonic, curve.identity, share)


def test_an_anchor_far_from_its_curve_is_a_warning() -> None:
    log = render(1, [SOLID_DARK, SOLID_LIGHT])
    middle = (log.track[0] + log.track[1]) / 2
    col = 100 + int(np.argmax((log.rows[0][100:-100] < middle - 10) & (log.rows[1][100:-100] < middle - 10)))
    assert max(log.rows[0][col], log.rows[1][col]) < middle - 10, "both curves in the track's upper half"
    # 150 is the track's bottom border: far from both curves there.
    anchor = {"depth": log.depth_of(col), "value": 150.0}
    result = _digitise(log, [{"ink": "dark"}, {"ink": "light", "anchors": [anchor]}])
    assert any(f"anchor 150 at depth {anchor['depth']:g}" in w for w in result.curves[1].warnings)
    assert result.curves[1].identity == "ambiguous"  # its trace misses the point a person read: not vouched for


def _curves(*hints: dict[str, Any]) -> Calibration:
    return Calibration.from_dict({"depth": {"top": 1000.0, "bottom": 1010.0, "unit": "ft"}, "track_top": 5,
                                  "track_bottom": 45, "step": 0.5,
                                  "curves": [{"mnemonic": f"C{k}", "left": 0, "right": 100, **h}
                                             for k, h in enumerate(hints)]}, 50, 400)


def test_a_name_the_scan_contradicts_is_flagged_with_the_curves_it_may_have_swapped_with() -> None:
    calibration = _curves({"style": "solid", "ink": "dark"}, {"style": "dashed", "ink": "dark"},
                          {"style": "dotted", "ink": "light"}, {"style": "dash-dot", "ink": "dark"})
    named = ["hinted", "hinted", "anchored", "hinted"]
    assert _doubted(named, [(), (), (), ()], calibration) == named
    # The trace named C1 (dashed) looks solid: C1's name is in doubt, and so is C0's, the solid curve.
    assert _doubted(named, [(), (("style", "solid"),), (), ()], calibration) == [
        "ambiguous", "ambiguous", "anchored", "hinted"]
    # The trace named C0 (dark) looks light: C2, the light curve, may be the one it follows.
    assert _doubted(named, [(("ink", "light"),), (), (), ()], calibration) == [
        "ambiguous", "hinted", "ambiguous", "hinted"]
    # A style no other curve declares, or a missed anchor: that curve's name alone.
    assert _doubted(named, [(), (), (("anchor", ""),), (("style", "dotted"),)], calibration) == [
        "hinted", "hinted", "ambiguous", "ambiguous"]
    # C2's ink is its own in the track and reads as declared: its name stands on it, and a style read
    # against C2, or a trace that looks like C2's style, flags nothing.
    assert _doubted(named, [(), (), (("style", "solid"),), ()], calibration) == named
    assert _doubted(named, [(), (("style", "dotted"),), (), ()], calibration) == [
        "hinted", "ambiguous", "anchored", "hinted"]
    # Unless its own trace reads another ink.
    assert _doubted(named, [(), (), (("style", "solid"), ("ink", "dark")), ()], calibration) == [
        "ambiguous", "ambiguous", "ambiguous", "ambiguous"]
    assert _doubted(["single"], [(("style", "solid"),)], _curves({"style": "dashed"})) == ["single"]


def test_a_style_misread_flags_no_pair_whose_shares_of_ink_follow_their_styles() -> None:
    # A dotted curve on a jagged path reads solid by its columns and by its marks; beside it, the solid curve.
    calibration = _curves({"style": "solid"}, {"style": "dotted"})
    named = ["hinted", "hinted"]
    misread = [(), (("style", "solid"),)]
    assert _doubted(named, misread, calibration) == ["ambiguous", "ambiguous"]  # no shares of ink given
    # The trace named dotted inks less of its length than the solid one's, as the styles say: no swap.
    assert _doubted(named, misread, calibration, inked=[0.97, 0.80]) == named
    # Inking more (the names may be swapped), or within INKED_APART of it, still flags both.
    assert _doubted(named, misread, calibration, inked=[0.80, 0.97]) == ["ambiguous", "ambiguous"]
    assert _doubted(named, misread, calibration, inked=[0.95, 0.95 - 0.5 * INKED_APART]) == ["ambiguous", "ambiguous"]
    assert _doubted(named, misread, calibration, inked=[0.95, None]) == ["ambiguous", "ambiguous"]
    # The order only answers a swap with a curve of another declared duty: with two solid curves beside the
    # dotted one, the one whose trace inks less than the dotted one's stays in doubt with it.
    three = _curves({"style": "solid"}, {"style": "dotted"}, {"style": "solid"})
    assert _doubted(["hinted"] * 3, [(), (("style", "solid"),), ()], three, inked=[0.97, 0.80, 0.78]) == [
        "hinted", "ambiguous", "ambiguous"]
    # A misread ink is not a style: the shares of ink say nothing of it.
    inks = _curves({"ink": "dark"}, {"ink": "light"})
    assert _doubted(named, [(("ink", "light"),), ()], inks, inked=[0.9, 0.5]) == ["ambiguous", "ambiguous"]


def test_shares_of_ink_are_in_order_where_the_style_that_inks_more_inks_more_by_inked_apart() -> None:
    solid, dashed, dotted, unknown = (CurveScale("C", "u", 0, 1, style=style)
                                      for style in ("solid", "dashed", "dotted", None))
    assert _inked_in_order(dotted, solid, 0.80, 0.97) and _inked_in_order(solid, dashed, 0.9, 0.8)
    assert not _inked_in_order(dotted, solid, 0.97, 0.80)
    assert not _inked_in_order(dotted, solid, 0.90, 0.90 + 0.5 * INKED_APART)
    assert not _inked_in_order(solid, solid, 0.5, 0.9)  # one style: no order to follow
    assert not _inked_in_order(unknown, solid, 0.5, 0.9) and not _inked_in_order(dotted, solid, None, 0.9)


def test_a_hint_the_scan_contradicts_is_a_warning_not_an_error() -> None:
    log = render(0, [SOLID_DARK, SOLID_LIGHT])
    result = _digitise(log, [{"ink": "dark"}, {"ink": "dark"}])  # one of them is light on the scan
    assert [c.identity for c in result.curves] == ["ambiguous", "ambiguous"]
    warned = [w for c in result.curves for w in c.warnings]
    assert len(warned) == 1 and "declared ink dark" in warned[0] and "looks light" in warned[0]
    data = to_json(result)
    assert any("declared ink dark" in w for w in data["warnings"])  # type: ignore[union-attr]


def test_one_curve_is_single_and_its_contradicted_style_is_a_warning() -> None:
    log = render(2, [Drawn("dashed", "dark")])
    result = _digitise(log, [{"style": "solid"}])
    assert result.curves[0].identity == "single"
    assert any("declared style solid" in w and "looks dashed" in w for w in result.curves[0].warnings)
    assert _digitise(log, [{"style": "dashed"}]).curves[0].warnings == ()


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def test_the_colour_of_an_upload_is_kept_for_naming_and_a_gray_one_is_not() -> None:
    rgb = np.full((40, 60, 3), 230, np.uint8)
    rgb[10, :, :] = (200, 30, 30)
    colour = load_colour(_png(rgb))
    assert colour is not None and colour.shape == (40, 60, 3) and tuple(colour[10, 5]) == (200, 30, 30)
    assert load_colour(_png(rgb[..., 0])) is None  # a gray file
    assert load_colour(_png(np.repeat(rgb[..., :1], 3, axis=2))) is None  # RGB, but every pixel gray
    portrait = load_colour(_png(rgb.transpose(1, 0, 2).copy()), rotate_portrait=True)
    assert portrait is not None and portrait.shape == (40, 60, 3) and tuple(portrait[10, 5]) == (200, 30, 30)


def _trace(rows: np.ndarray, top: float, bottom: float, level: np.ndarray | None = None) -> ColumnTrace:
    level = np.zeros(rows.size, np.int8) if level is None else level.astype(np.int8)
    u = (rows - top) / (bottom - top) + level
    return ColumnTrace(u, level, rows, np.ones(rows.size, np.float32), np.zeros(rows.size, bool))


def _two_alike(wraps: tuple[str, str]) -> Calibration:
    curves = [{"mnemonic": f"C{k}", "unit": "API", "left": 0, "right": 150, "wrap": w} for k, w in enumerate(wraps)]
    return Calibration.from_dict({"depth": {"top": 1000.0, "bottom": 1100.0, "unit": "m"}, "curves": curves,
                                  "track_top": 0.0, "track_bottom": 100.0, "step": 1.0}, 110, 400)


def test_a_wrap_names_alike_curves_by_their_declared_backup_scales() -> None:
    """Two curves drawn alike, apart all along; one is read on a backup scale past the right edge in a
    stretch, and only the second curve declares one there: the wrap names both, in either listing order."""
    cols = np.arange(400)
    upper = 20.0 + 5.0 * np.sin(cols / 30.0)
    lower = 70.0 + 5.0 * np.cos(cols / 25.0)
    level = np.where((cols > 150) & (cols < 200), 1, 0)  # read on the right backup scale there
    wrapping, plain = _trace(lower, 0.0, 100.0, level), _trace(upper, 0.0, 100.0)
    for traces in ([wrapping, plain], [plain, wrapping]):
        naming = name_traces(traces, _two_alike(("none", "right")), None)
        assert naming.traces[1] is not None and np.array_equal(naming.traces[1].level, level)
        assert np.array_equal(naming.traces[0].row, upper)
        assert naming.identity == ["hinted", "hinted"] and naming.warnings == [(), ()]
    unnamed = name_traces([wrapping, plain], _two_alike(("right", "right")), None)
    assert unnamed.identity == ["ambiguous", "ambiguous"], "both declare the backup scale: nothing tells"
    # Traces from a tracer that traced each curve on the levels it declares (`joint`): the wrap names them the
    # same, but it is the tracer's reading of the hints, and vouches for neither.
    for keyword in ("checked", "assigned"):
        traced = name_traces([plain, wrapping], _two_alike(("none", "right")), None, **{keyword: True})
        assert np.array_equal(traced.traces[0].row, upper) and np.array_equal(traced.traces[1].level, level)
        assert traced.identity == ["ambiguous", "ambiguous"], keyword


def test_a_swap_cheap_over_a_share_of_the_log_leaves_the_names_in_doubt() -> None:
    lengths = np.full(20, 10.0)  # 20 stretches of 10 columns
    telling = np.full(20, 3.0)  # evidence lost per stretch by swapping two curves there
    assert not _cheap_swap(telling, lengths, 200.0)
    run = math.ceil(AMBIGUOUS_SHARE * 20)  # stretches in the shortest run that leaves names in doubt
    quiet = telling.copy()
    quiet[8 : 8 + run] = 0.0  # that many stretches say nothing
    assert _cheap_swap(quiet, lengths, 200.0)
    shorter = telling.copy()
    shorter[8 : 8 + run - 1] = 0.0  # one stretch fewer
    assert not _cheap_swap(shorter, lengths, 200.0)
    quiet[8 + run // 2] = 3.0  # evidence in the middle of them: no quiet run is long enough
    assert not _cheap_swap(quiet, lengths, 200.0)
    against = telling.copy()
    against[:4], against[4] = 3.0, -20.0  # one stretch's evidence is against the names: the run about it is cheap
    assert _cheap_swap(against, lengths, 200.0)


def _look_alone(scan: ScanPixels, page: Page, rows: np.ndarray, cols: np.ndarray, half: int) -> Look | None:
    """One stretch's look measured on its own with NumPy's median and quantile: what `ink.looks_along`
    gives per stretch."""
    window = np.clip(np.rint(rows)[:, None].astype(np.int64) + np.arange(-half, half + 1)[None, :], 0,
                     scan.gray.shape[0] - 1)
    seen = ~page.grid_cols[cols] & ~page.grid_rows[window].any(axis=1)
    window, cols = window[seen], cols[seen]
    if cols.size == 0:
        return None
    pixels = scan.gray[window, cols[:, None]]
    darkness = page.paper[cols] - pixels.min(axis=1).astype(np.float64)
    inked = darkness >= max(MIN_DARKNESS, 0.5 * float(np.quantile(darkness, 0.9)))
    rgb = None
    if scan.colour is not None and inked.any():
        ink_rows = window[np.arange(cols.size), pixels.argmin(axis=1)][inked]
        r, g, b = (float(v) for v in np.median(scan.colour[ink_rows, cols[inked]].astype(np.float64), axis=0))
        rgb = (r, g, b)
    return Look(inked, float(np.median(darkness[inked])) if inked.any() else 0.0, float(np.median(page.paper[cols])),
                rgb)


@pytest.mark.parametrize("colour", [False, True])
def test_the_looks_of_all_stretches_at_once_are_those_of_each_stretch_alone(colour: bool) -> None:
    """`ink.looks_along` measures a trace in every stretch from one gather and one sort; each look must be
    exactly the stretch's look measured alone (None where fewer than `min_columns` are seen)."""
    rng = np.random.default_rng(3)
    height, width = 80, 900
    gray = rng.integers(180, 256, (height, width)).astype(np.uint8)
    gray[:, ::97] = 20  # vertical grid lines
    gray[37, :] = 30  # a horizontal one
    rows = 40 + 25 * np.sin(np.arange(width) / 60.0)
    dashes = (np.arange(width) // 7) % 3 != 0
    for col in np.flatnonzero(dashes):
        gray[int(round(rows[col])) - 1 : int(round(rows[col])) + 2, col] = rng.integers(0, 120)
    rgb = np.stack([gray, gray // 2 + 60, 255 - gray // 3], axis=-1).astype(np.uint8) if colour else None
    scan = ScanPixels(gray, rgb)
    page = page_of(scan, 5.0, 75.0)
    cols = np.flatnonzero(rng.random(width) < 0.8)  # columns where the trace is seen, away from others
    cuts = np.sort(rng.choice(np.arange(1, width), 60, replace=False))
    bounds = list(zip([0, *cuts.tolist()], [*cuts.tolist(), width], strict=True))
    together = looks_along(scan, page, rows[cols], cols, 2, bounds, min_columns=3)
    alone = []
    for a, b in bounds:
        mine = cols[(cols >= a) & (cols < b)]
        look = _look_alone(scan, page, rows[mine], mine, 2)
        alone.append(look if look is not None and look.columns >= 3 else None)
    assert sum(look is None for look in alone) > 0 and sum(look is not None for look in alone) > 40
    for got, want in zip(together, alone, strict=True):
        assert (got is None) == (want is None)
        if got is not None and want is not None:
            np.testing.assert_array_equal(got.inked, want.inked)
            assert (got.darkness, got.paper, got.rgb) == (want.darkness, want.paper, want.rgb)
            assert (got.rgb is None) == (not colour) or not got.inked.any()


def _hand_trace(u: np.ndarray) -> ColumnTrace:
    return _trace(10 + 40 * u, 10.0, 50.0)  # track fractions u on a track of rows 10-50


def test_a_second_naming_that_reads_a_curve_differently_flags_it() -> None:
    """Two curves swapped over part of the log by a second naming: flagged where the swap covers more than
    DISAGREE_SHARE of the columns, not for one the second naming reads the same; a curve the second naming
    itself leaves ambiguous is flagged too."""
    columns = 1000
    x = np.linspace(0, 1, columns)
    upper, lower = 0.3 + 0.05 * np.sin(6 * x), 0.7 + 0.05 * np.cos(5 * x)
    first = Naming([_hand_trace(upper), _hand_trace(lower)], ["hinted", "hinted"], [(), ()])

    def swapped(share: float) -> list[ColumnTrace]:
        cut = int(share * columns)
        return [_hand_trace(np.r_[lower[:cut], upper[cut:]]), _hand_trace(np.r_[upper[:cut], lower[cut:]])]

    assert checked_against(first, Naming(first.traces, ["hinted", "hinted"], [(), ()])).identity == ["hinted"] * 2
    small = checked_against(first, Naming(swapped(DISAGREE_SHARE / 2), ["hinted", "hinted"], [(), ()]))
    assert small.identity == ["hinted", "hinted"]
    large = checked_against(first, Naming(swapped(2 * DISAGREE_SHARE), ["hinted", "hinted"], [(), ()]))
    assert large.identity == ["ambiguous", "ambiguous"] and large.traces == first.traces
    near = [_hand_trace(upper + DISAGREE_U / 2), _hand_trace(lower)]  # the same traces, read a little apart
    assert checked_against(first, Naming(near, ["hinted", "hinted"], [(), ()])).identity == ["hinted"] * 2
    assert checked_against(first, Naming(first.traces, ["hinted", "ambiguous"], [(), ()])).identity == [
        "hinted", "ambiguous"]


def test_a_trace_that_runs_on_another_curves_trace_is_flagged_whatever_names_it() -> None:
    """A curve the segmenter barely sees is traced along its neighbour's ink (by the tracer, or by its tone after
    the naming), and its hints, read there, may still name it: over more than DOUBLED_SHARE of its columns on
    another curve's trace, both names are flagged and warned, even where an anchor speaks for each; a shorter
    meeting changes nothing."""
    columns = 400
    x = np.linspace(0, 1, columns)
    upper, lower = 30 + 5 * np.sin(6 * x), 70 + 5 * np.cos(5 * x)
    at = columns - 20  # both anchors near the end, where the two traces are apart
    depth = 1000.0 + 100.0 * at / (columns - 1)
    curves = [{"mnemonic": f"C{k}", "unit": "API", "left": 0, "right": 100,
               "anchors": [{"depth": depth, "value": float(rows[at])}]} for k, rows in enumerate((upper, lower))]
    calibration = Calibration.from_dict({"depth": {"top": 1000.0, "bottom": 1100.0, "unit": "m"}, "curves": curves,
                                         "track_top": 0.0, "track_bottom": 100.0, "step": 1.0}, 110, columns)

    def named(share: float) -> Naming:
        cut = int(share * columns)
        riding = np.r_[upper[:cut] + 0.5, lower[cut:]]  # on the upper curve's trace, half a row off, then its own
        return doubled(name_traces([_trace(upper, 0.0, 100.0), _trace(riding, 0.0, 100.0)], calibration, None),
                       calibration)

    short = named(DOUBLED_SHARE / 2)
    assert short.identity == ["anchored", "anchored"] and short.warnings == [(), ()]
    long = named(DOUBLED_SHARE + 0.15)
    assert long.identity == ["ambiguous", "ambiguous"]
    share = round(100 * (DOUBLED_SHARE + 0.15))
    assert long.warnings == [(f"the trace named C{k} runs on another curve's trace over {share} % of its length: it "
                              "may follow that curve, not its own",) for k in (0, 1)]
    assert np.array_equal(long.traces[0].row, upper)  # the traces are left as traced


def test_a_trace_that_runs_beside_another_curves_trace_within_two_hundredths_of_the_track_is_flagged() -> None:
    """A faint curve's trace that runs along a thick neighbour's stroke lies a row or two off that curve's trace,
    not on it: within DOUBLED_U (0.02 of the track) over more than DOUBLED_SHARE of its columns, both names are
    flagged and warned; three hundredths off, the two traces are two curves, and neither is warned so."""
    columns = 400
    x = np.linspace(0, 1, columns)
    upper, lower = 30 + 5 * np.sin(6 * x), 70 + 5 * np.cos(5 * x)
    at = columns - 20  # an anchor for each near the end, where the two traces are apart
    depth = 1000.0 + 100.0 * at / (columns - 1)
    curves = [{"mnemonic": f"C{k}", "unit": "API", "left": 0, "right": 100,
               "anchors": [{"depth": depth, "value": float(rows[at])}]} for k, rows in enumerate((upper, lower))]
    calibration = Calibration.from_dict({"depth": {"top": 1000.0, "bottom": 1100.0, "unit": "m"}, "curves": curves,
                                         "track_top": 0.0, "track_bottom": 100.0, "step": 1.0}, 110, columns)
    cut = int((DOUBLED_SHARE + 0.15) * columns)

    def named(off: float) -> Naming:
        riding = np.r_[upper[:cut] + off, lower[cut:]]  # `off` rows beside the upper curve's trace, then its own
        return doubled(name_traces([_trace(upper, 0.0, 100.0), _trace(riding, 0.0, 100.0)], calibration, None),
                       calibration)

    beside = named(1.5)  # 0.015 of the track: within DOUBLED_U
    assert beside.identity == ["ambiguous", "ambiguous"]
    assert all(len(w) == 1 and "runs on another curve's trace" in w[0] for w in beside.warnings)
    assert named(3.0).warnings == [(), ()]  # (their names are in doubt all the same: they touch over half the log)


def _pens_scan(pens: tuple[int, int], width: int = 2400, height: int = 540) -> tuple[np.ndarray, list[np.ndarray]]:
    """Two solid black curves on white paper, drawn with pens `pens` px wide, crossing every 400 columns at the
    track's middle: (the scan, each curve's centre row per column)."""
    cols = np.arange(width)
    centres = [270.0 + 150.0 * np.sin(2 * np.pi * cols / 800.0), 270.0 - 150.0 * np.sin(2 * np.pi * cols / 800.0)]
    image = np.full((height, width), 255, np.uint8)
    for rows, pen in zip(centres, pens, strict=True):
        _ink(image, rows, pen, cols)
    return image, centres


def _ink(image: np.ndarray, rows: np.ndarray, pen: int, cols: np.ndarray) -> None:
    """In place: a black stroke `pen` px wide along `rows` in columns `cols`; a steep stroke covers the rows it
    moves over from the column before."""
    for x in cols:
        low, high = sorted((rows[x], rows[max(x - 1, 0)]))
        image[int(round(low - (pen - 1) / 2)) : int(round(high + (pen - 1) / 2)) + 1, x] = 0


def _alike_pair() -> Calibration:
    curves = [{"mnemonic": f"C{k}", "left": 0, "right": 100, "style": "solid", "ink": "dark"} for k in range(2)]
    return Calibration.from_dict({"depth": {"top": 1000.0, "bottom": 1240.0, "unit": "ft"}, "track_top": 20,
                                  "track_bottom": 520, "step": 0.5, "curves": curves}, 540, 2400)


def test_the_width_of_a_pen_is_read_along_a_trace() -> None:
    image, centres = _pens_scan((1, 4))
    scan = ScanPixels(image)
    page = page_of(scan, 20.0, 520.0)
    cols = np.arange(image.shape[1])
    # About the curves' turns (where they run level), where they run steep, two columns
    bounds = [(150, 250), (550, 650), (300, 360), (2000, 2002)]
    thin, thick = (stroke_widths(scan, page, rows, cols, 6, bounds, 3) for rows in centres)
    for k in (0, 1):
        assert thin[k] is not None and abs(thin[k].px - 1.0) < 0.3 and thin[k].error < 0.2
        assert thick[k] is not None and abs(thick[k].px - 4.0) < 0.3 and thick[k].error < 0.2
    steep_thin, steep_thick = thin[2], thick[2]
    assert steep_thin is not None and steep_thick is not None
    assert steep_thick.px - steep_thin.px > 2.0, "a steep stroke reads wider than its pen, but pens stay apart"
    assert thin[3] is None and thick[3] is None  # two columns are too few


@pytest.mark.parametrize("pens", [(1, 4), (4, 1), (2, 5)])
def test_curves_told_apart_only_by_their_pens_keep_them_through_crossings(pens: tuple[int, int]) -> None:
    """Two solid dark curves drawn with different pens cross every 400 columns. A tracer that bounces at
    each crossing hands over the upper and the lower of the two: each trace changes curves at every
    crossing. Nothing in the hints tells the curves apart, but each keeps its pen, so each named curve is
    read from one curve all along (and stays flagged: which of the two is C0 nothing says)."""
    image, centres = _pens_scan(pens)
    upper, lower = np.minimum(*centres), np.maximum(*centres)
    naming = name_traces([_trace(upper, 20.0, 520.0), _trace(lower, 20.0, 520.0)], _alike_pair(), ScanPixels(image))
    for trace in naming.traces:
        on = [np.mean(np.abs(trace.row - rows) <= 2.0) for rows in centres]
        assert max(on) >= 0.95, on
    assert naming.identity == ["ambiguous", "ambiguous"]


def _weighted_pair(weights: tuple[str, str]) -> Calibration:
    curves = [{"mnemonic": f"C{k}", "left": 0, "right": 100, "style": "solid", "ink": "dark", "weight": w}
              for k, w in enumerate(weights)]
    return Calibration.from_dict({"depth": {"top": 1000.0, "bottom": 1240.0, "unit": "ft"}, "track_top": 20,
                                  "track_bottom": 520, "step": 0.5, "curves": curves}, 540, 2400)


@pytest.mark.parametrize("pens", [(1, 4), (4, 1), (1, 2)])
def test_declared_weights_name_curves_told_apart_only_by_their_pens(pens: tuple[int, int]) -> None:
    """Two solid dark curves, one pen twice or four times the other's, cross every 400 columns and the tracer
    hands over the upper and the lower of the two. The legend's weights name them: the curve declared thick
    is read from the wider pen all along, whichever order the calibration lists them in. A pen's width alone
    does not vouch for the names (a steep stroke reads wider than its pen): both stay flagged."""
    image, centres = _pens_scan(pens)
    upper, lower = np.minimum(*centres), np.maximum(*centres)
    thick = int(np.argmax(pens))
    for weights in (("thick", "thin"), ("thin", "thick")):
        naming = name_traces([_trace(upper, 20.0, 520.0), _trace(lower, 20.0, 520.0)], _weighted_pair(weights),
                             ScanPixels(image))
        for trace, weight in zip(naming.traces, weights, strict=True):
            drawn = centres[thick if weight == "thick" else 1 - thick]
            assert np.mean(np.abs(trace.row - drawn) <= 2.0) >= 0.95, (weights, weight)
        assert naming.identity == ["ambiguous", "ambiguous"]


def test_weights_that_do_not_differ_say_nothing() -> None:
    """Both curves declared thick (or only one declared): the names are the pens' continuity alone, as
    without weights."""
    image, centres = _pens_scan((1, 4))
    traces = [_trace(np.minimum(*centres), 20.0, 520.0), _trace(np.maximum(*centres), 20.0, 520.0)]
    plain = name_traces(traces, _alike_pair(), ScanPixels(image))
    for weights in (("thick", "thick"), ("thick", None)):
        curves = [{"mnemonic": f"C{k}", "left": 0, "right": 100, "style": "solid", "ink": "dark", "weight": w}
                  for k, w in enumerate(weights)]
        calibration = Calibration.from_dict({"depth": {"top": 1000.0, "bottom": 1240.0, "unit": "ft"},
                                             "track_top": 20, "track_bottom": 520, "step": 0.5, "curves": curves},
                                            540, 2400)
        named = name_traces(traces, calibration, ScanPixels(image))
        for a, b in zip(named.traces, plain.traces, strict=True):
            np.testing.assert_array_equal(a.row, b.row)


def test_a_curves_pen_names_the_short_stretches_between_long_ones() -> None:
    """Two solid dark curves, pens of 1 and 4 px, zigzag across each other at one slope (a stroke reads
    wider than its pen where it is steep, so at one slope each pen reads one width all along). Every 200
    columns the tracer hands each curve's trace to the other over 60 columns, cut into three short
    stretches where both traces break for a column, as a jagged curve's track is cut every ten columns or
    so. Joined only from one long stretch to the next (`_Links`), a curve keeps the tracer's swaps there (a
    quarter of its columns on the other curve); each curve's pen, read off the long stretches, names the
    short ones too. Which of the two is C0 nothing says, so both stay flagged."""
    width = 2400
    cols = np.arange(width)
    zigzag = 120.0 + 300.0 * 2 * np.abs((cols / 800.0) % 1.0 - 0.5)
    centres = [zigzag, 540.0 - zigzag]
    image = np.full((540, width), 255, np.uint8)
    for rows, pen in zip(centres, (1, 4), strict=True):
        for x in cols:
            low, high = sorted((rows[x], rows[max(x - 1, 0)]))  # a stroke covers the rows it moves over
            image[int(round(low - (pen - 1) / 2)) : int(round(high + (pen - 1) / 2)) + 1, x] = 0
    upper, lower = np.minimum(*centres), np.maximum(*centres)
    first, second = upper.copy(), lower.copy()
    for start in range(110, width, 200):
        run = slice(start, start + 60)
        first[run], second[run] = lower[run], upper[run]
        for trace in (first, second):
            trace[[start, start + 20, start + 40, start + 59]] = np.nan
    naming = name_traces([_trace(first, 20.0, 520.0), _trace(second, 20.0, 520.0)], _alike_pair(), ScanPixels(image))
    for trace in naming.traces:
        found = np.isfinite(trace.row)
        on = [np.mean(np.abs(trace.row[found] - rows[found]) <= 2.0) for rows in centres]
        assert max(on) >= 0.95, on
    assert naming.identity == ["ambiguous", "ambiguous"]


def test_curves_drawn_alike_go_straight_through_their_crossings() -> None:
    """The same crossings drawn with one pen, and the traces handed over as a tracer that turns back at every
    crossing would: nothing in their looks tells the curves apart, but each curve's line into a crossing goes on
    as its line out of it (`identity._continuity`), so each named trace follows one drawn curve. Which of the two
    is C0 nothing says, so both stay flagged."""
    image, centres = _pens_scan((2, 2))
    upper, lower = np.minimum(*centres), np.maximum(*centres)
    naming = name_traces([_trace(upper, 20.0, 520.0), _trace(lower, 20.0, 520.0)], _alike_pair(), ScanPixels(image))
    for trace in naming.traces:
        found = np.isfinite(trace.row)
        on = [np.mean(np.abs(trace.row[found] - rows[found]) <= 2.0) for rows in centres]
        assert max(on) >= 0.95, on
    assert naming.identity == ["ambiguous", "ambiguous"]
    kept = name_traces([_trace(centres[0], 20.0, 520.0), _trace(centres[1], 20.0, 520.0)], _alike_pair(),
                       ScanPixels(image))
    assert [np.array_equal(t.row, rows) for t, rows in zip(kept.traces, centres, strict=True)] == [True, True], \
        "traces that go straight through are kept as the tracer handed them over"


@pytest.mark.xfail(strict=True, reason="a curve's line into a touch is held against the lines out of it "
                   "(`identity._continuity`), which cannot tell two curves that meet and part (each turning back) "
                   "from two that cross, where they come together at a slope: the names are handed across at "
                   "every touch. Fitting a parabola through both sides told these apart but not the crossings "
                   "(tried and not kept, bench/README.md, 2026-12-07)")
def test_curves_drawn_alike_that_meet_and_part_keep_their_traces() -> None:
    """Two curves drawn alike that come together every 400 columns and part again, never crossing, traced as
    they are drawn: their names stay on their traces."""
    cols = np.arange(2400)
    bend = 75.0 * np.sin(2 * np.pi * cols / 800.0) ** 2
    centres = [270.0 - bend, 270.0 + bend]
    image = np.full((540, 2400), 255, np.uint8)
    for rows in centres:
        _ink(image, rows, 2, cols)
    naming = name_traces([_trace(rows, 20.0, 520.0) for rows in centres], _alike_pair(), ScanPixels(image))
    for trace, rows in zip(naming.traces, centres, strict=True):
        assert np.mean(np.abs(trace.row - rows) <= 2.0) >= 0.95


def _marked_scan(marks: list[tuple[int, int]], width: int = 2400,
                 height: int = 540) -> tuple[np.ndarray, list[np.ndarray]]:
    """Two black curves apart all along, each drawn in marks of (ink, paper) columns: (the scan, each curve's
    centre row per column)."""
    cols = np.arange(width)
    centres = [170.0 + 60.0 * np.sin(2 * np.pi * cols / 700.0), 370.0 + 60.0 * np.cos(2 * np.pi * cols / 900.0)]
    image = np.full((height, width), 255, np.uint8)
    for rows, (on, off) in zip(centres, marks, strict=True):
        _ink(image, rows, 3, cols[cols % (on + off) < on])
    return image, centres


def _styled_pair(styles: tuple[str | None, ...]) -> Calibration:
    curves = [{"mnemonic": f"C{k}", "left": 0, "right": 100, "ink": "dark", **({"style": s} if s else {})}
              for k, s in enumerate(styles)]
    return Calibration.from_dict({"depth": {"top": 1000.0, "bottom": 1240.0, "unit": "ft"}, "track_top": 20,
                                  "track_bottom": 520, "step": 0.5, "curves": curves}, 540, 2400)


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_a_pair_whose_shares_of_ink_contradict_their_names_is_flagged(order: tuple[int, int]) -> None:
    """A print whose dots are long (7 columns of ink, 3 of paper: they read as dashes) and whose dashes are long
    with short gaps (14 and 2: they read solid). Each curve's own reading gives the dashed name to the dots, and
    the dotted name, on a trace that reads solid, is contradicted. The dashed name stood unflagged. But the dots
    ink less of their length than the dashes, as dots do: the order of their shares of ink contradicts the names,
    so both are flagged. Drawn as a dotted and a dashed curve usually are, the two readings agree: no flag."""
    image, centres = _marked_scan([(7, 3), (14, 2)])
    traces = [_trace(centres[k], 20.0, 520.0) for k in order]
    naming = name_traces(traces, _styled_pair(("dotted", "dashed")), ScanPixels(image))
    assert np.mean(np.abs(naming.traces[1].row - centres[0]) <= 2.0) == 1.0  # the dashed name on the dots
    assert naming.identity == ["ambiguous", "ambiguous"]
    for said, mnemonic in zip(naming.warnings, ("C0", "C1"), strict=True):
        assert any(line.startswith(f"the trace named {mnemonic} (ink in ") and "the other way round" in line
                   for line in said), said
    image, centres = _marked_scan([(2, 4), (8, 4)])
    traces = [_trace(centres[k], 20.0, 520.0) for k in order]
    naming = name_traces(traces, _styled_pair(("dotted", "dashed")), ScanPixels(image))
    for trace, drawn in zip(naming.traces, centres, strict=True):
        assert np.mean(np.abs(trace.row - drawn) <= 2.0) == 1.0
    assert naming.identity == ["hinted", "hinted"] and naming.warnings == [(), ()]


def test_a_curve_of_no_declared_style_is_in_no_pair_the_shares_of_ink_flag() -> None:
    """Three traces seen in one stretch, inked over a third, two thirds and a tenth of their columns, named a
    dotted, a dashed and an unstyled curve. The dotted and the dashed are in the order their styles ink. The
    unstyled one inks least, but it could be drawn in any style: that says nothing against the dotted name."""
    curves = _styled_pair(("dotted", "dashed", None)).curves
    looks = [Look(np.arange(120) % k < m, 150.0, 240.0, None) for k, m in ((3, 1), (3, 2), (10, 1))]
    evidence = identity._duty_evidence(curves, [list(looks)], [np.zeros((3, 3))])
    assert evidence is not None
    assert identity._order_doubted(evidence, [(0, 1, 2)], curves) == []
    assert identity._order_doubted(evidence, [(1, 0, 2)], curves) == [(0, 1)]  # the dotted name on the dashes



def _zigzag_scan(width: int = 2400, height: int = 540) -> tuple[np.ndarray, list[np.ndarray]]:
    """A solid curve (2 px pen) and a dotted one (square dots 4 px across, one every 4 columns), apart all along,
    both on a path that zigzags 3 rows either way (a noisy log printed fine). The dots cover every column, and
    each dot lies within 2 rows of the next, so they touch in the band a trace sweeps; on the scan they are apart.
    (The scan, each curve's centre row per column.)"""
    cols = np.arange(width)
    solid = 160.0 + 50.0 * np.sin(2 * np.pi * cols / 700.0) + np.where((cols // 3) % 2 == 0, -3.0, 3.0)
    first = np.round(380.0 + 50.0 * np.cos(2 * np.pi * cols[::4] / 900.0) + np.where(np.arange(cols[::4].size) % 2 == 0,
                                                                                    -3.0, 3.0)).astype(int)
    image = np.full((height, width), 255, np.uint8)
    _ink(image, solid, 2, cols)
    for x, top in zip(cols[::4], first - 2, strict=True):
        image[top : top + 4, x : x + 4] = 0
    dotted = np.repeat(first - 0.5, 4)[:width]
    return image, [solid, dotted]


def test_dots_that_touch_along_a_traces_band_speak_for_a_dotted_curve() -> None:
    image, centres = _zigzag_scan()
    calibration = _styled_pair(("solid", "dotted"))
    scan = ScanPixels(image)
    page = page_of(scan, 20.0, 520.0)
    cols = np.arange(image.shape[1])
    # What the columns and the marks read: the dots are solid by both.
    look = looks_along(scan, page, centres[1], cols, 2, [(0, cols.size)], 3)[0]
    assert look is not None and style_label(look) == "solid"
    assert marks_style(scan, page, centres[1], cols, 2, 2).style == "solid"
    traces = [_trace(rows, 20.0, 520.0) for rows in centres]
    bounds = [(0, 1200), (1200, 2400)]
    evidence = [np.zeros((2, 2)) for _ in bounds]
    identity._add_dots(evidence, calibration.curves, scan, page, traces, bounds, np.zeros(cols.size, bool), 2)
    for scores in evidence:  # (curves, traces): each stretch's 1,200 columns, fully one way or the other
        said = identity.DOT_WEIGHT * math.sqrt(1200)
        assert scores.ravel().tolist() == pytest.approx([said, -said, -said, said])
    untouched = [np.zeros((2, 2)) for _ in bounds]  # no dotted curve declared: nothing to say
    identity._add_dots(untouched, _styled_pair(("solid", "dashed")).curves, scan, page, traces, bounds,
                       np.zeros(cols.size, bool), 2)
    assert all(not scores.any() for scores in untouched)


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_a_dotted_curve_whose_dots_read_solid_is_named_and_not_warned_against(order: tuple[int, int]) -> None:
    """The looks and the marks read the zigzag dots solid; the dots on the scan bear the dotted hint out, so
    neither curve's name is in doubt, whichever trace the tracer gave first."""
    image, centres = _zigzag_scan()
    traces = [_trace(centres[k], 20.0, 520.0) for k in order]
    naming = name_traces(traces, _styled_pair(("solid", "dotted")), ScanPixels(image))
    for trace, drawn in zip(naming.traces, centres, strict=True):
        assert np.mean(np.abs(trace.row - drawn) <= 2.0) == 1.0
    assert naming.identity == ["hinted", "hinted"] and naming.warnings == [(), ()]


def _dots_and_moving_pen_scan(width: int = 2400, height: int = 540) -> tuple[np.ndarray, list[np.ndarray]]:
    """A thin solid pen (2 px) that moves 2 rows up or down every column (a noisy log printed fine) and a
    thick dotted one (round dots 4 px across, one every 5 columns) that runs level between turns, crossing
    every 400 columns: (the scan, each curve's centre row per column)."""
    cols = np.arange(width)
    wave = 150.0 * np.sin(2 * np.pi * cols / 800.0)
    solid = 270.0 + wave + np.where(cols % 2 == 0, -1.0, 1.0)
    dotted = 270.0 - wave
    image = np.full((height, width), 255, np.uint8)
    _ink(image, solid, 2, cols)
    disc = (np.arange(4)[:, None] - 1.5) ** 2 + (np.arange(4)[None, :] - 1.5) ** 2 <= 4.0  # chords 2, 4, 4, 2
    for x in cols[::5]:
        top = int(round(dotted[x] - 1.5))
        image[top : top + 4, x : x + 4][disc[:, : min(4, width - x)]] = 0
    return image, [solid, dotted]


def test_a_thick_dotted_pen_reads_narrower_by_its_columns_than_a_thin_pen_that_moves_each_column() -> None:
    """Why a dotted curve's weight is held only against another dotted curve's (`identity.DOT_STYLES`): a
    column crosses a round dot off its centre or not at all, and a thin pen that moves rows every column covers
    them all."""
    image, centres = _dots_and_moving_pen_scan()
    scan = ScanPixels(image)
    page = page_of(scan, 20.0, 520.0)
    cols = np.arange(image.shape[1])
    bounds = [(150, 250), (550, 650)]  # about the turns, where both run level
    solid, dotted = (stroke_widths(scan, page, rows, cols, 6, bounds, 3) for rows in centres)
    for k in (0, 1):
        assert solid[k] is not None and dotted[k] is not None
        assert solid[k].px > dotted[k].px + 0.5, (solid[k], dotted[k])


def test_a_dotted_curves_declared_weight_says_nothing_beside_a_line() -> None:
    """A thin solid curve and a thick dotted one (the pens of the scan above), handed over at every crossing
    as the upper and the lower trace: the weights say nothing of them, so they are named as with no weights
    declared. A thin and a thick curve of other styles beside a dotted one are still told apart by theirs, and
    a thin and a thick dotted curve by theirs."""
    image, centres = _dots_and_moving_pen_scan()
    traces = [_trace(np.minimum(*centres), 20.0, 520.0), _trace(np.maximum(*centres), 20.0, 520.0)]

    def calibration(weights: tuple[str | None, ...], styles: tuple[str, ...]) -> Calibration:
        curves = [{"mnemonic": f"C{k}", "left": 0, "right": 100, "style": s, "ink": "dark",
                   **({"weight": w} if w else {})} for k, (w, s) in enumerate(zip(weights, styles, strict=True))]
        return Calibration.from_dict({"depth": {"top": 1000.0, "bottom": 1240.0, "unit": "ft"}, "track_top": 20,
                                      "track_bottom": 520, "step": 0.5, "curves": curves}, 540, 2400)

    weighed = name_traces(traces, calibration(("thin", "thick"), ("solid", "dotted")), ScanPixels(image))
    plain = name_traces(traces, calibration((None, None), ("solid", "dotted")), ScanPixels(image))
    for a, b in zip(weighed.traces, plain.traces, strict=True):
        np.testing.assert_array_equal(a.row, b.row)
    assert weighed.identity == plain.identity
    styled = calibration(("thin", "thick", "thin"), ("solid", "dashed", "dotted")).curves
    assert any(identity._weight_signs(styled))
    assert not any(identity._weight_signs(calibration(("thin", "thick"), ("solid", "dotted")).curves))
    assert any(identity._weight_signs(calibration(("thin", "thick"), ("dotted", "dotted")).curves))  # dots with dots
    evidence = [np.zeros((3, 3))]
    pens = [[PenWidth(w, 0.1)] for w in (2.0, 4.0, 3.0)]
    identity._add_weights(evidence, identity._weight_signs(styled), pens)
    assert evidence[0][0].sum() < 0 < evidence[0][1].sum() and not evidence[0][2].any()
