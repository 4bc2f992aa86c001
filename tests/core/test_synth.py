from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from veernet_core import synth_curves as shapes
from veernet_core.config import ConfigError, TrainConfig
from veernet_core.synth import (
    HEIGHT_RANGE,
    WIDTH_RANGE,
    CurveTruth,
    SynthLog,
    TrackScale,
    generate,
    log_size,
    write_samples,
)
from veernet_core.synth_dataset import SynthDataset
from veernet_core.synth_factors import EXCLUDABLE
from veernet_core.synth_truth import STYLES, wrap_sides

REPO = Path(__file__).resolve().parents[2]
SMALL = 0.1  # ~64 x 320-1,280 px: the real generator, quickly
SURVEY = range(150)  # enough logs that every factor level shows up


@cache
def _log(index: int, scale: float = SMALL, classes: int = 2) -> SynthLog:
    return generate(0, index, scale, classes)


def _survey() -> list[SynthLog]:
    return [_log(i) for i in SURVEY]


def _curves() -> list[tuple[SynthLog, CurveTruth]]:
    return [(log, c) for log in _survey() for c in log.curves]


def _fraction(log: SynthLog, curve: CurveTruth) -> np.ndarray:
    top, bottom = log.track
    return (curve.row - top) / (bottom - top)


def _digest(log: SynthLog) -> str:
    blob = log.image.tobytes() + log.mask.tobytes() + json.dumps(log.truth_json()).encode()
    return hashlib.sha256(blob).hexdigest()


def test_same_arguments_give_identical_logs() -> None:
    a, b = generate(3, 5, SMALL), generate(3, 5, SMALL)
    assert _digest(a) == _digest(b)
    assert _digest(generate(3, 6, SMALL)) != _digest(a)
    assert _digest(generate(4, 5, SMALL)) != _digest(a)
    assert _digest(generate(3, 5, SMALL, exclude=("jpeg",))) == _digest(generate(3, 5, SMALL, exclude=("jpeg",)))


def test_same_arguments_give_identical_logs_in_another_process() -> None:
    code = (
        "import hashlib, json; from veernet_core.synth import generate; log = generate(3, 5, 0.1); "
        "print(hashlib.sha256(log.image.tobytes() + log.mask.tobytes()"
        " + json.dumps(log.truth_json()).encode()).hexdigest())"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "12345"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.strip() == _digest(generate(3, 5, SMALL))


def test_generated_shape_is_log_size() -> None:
    for index, scale in [(0, SMALL), (1, SMALL), (2, 0.05), (3, 0.2), (4, 0.001)]:
        log = generate(7, index, scale)
        assert log.image.shape == log.mask.shape == log_size(7, index, scale)
    assert log_size(7, 4, 0.001) == (32, 32)


def test_sizes_cover_the_stated_ranges_at_full_scale() -> None:
    heights, widths = np.array([log_size(0, i) for i in range(3000)]).T
    assert HEIGHT_RANGE[0] <= heights.min() <= HEIGHT_RANGE[0] + 5
    assert HEIGHT_RANGE[1] - 5 <= heights.max() <= HEIGHT_RANGE[1]
    assert WIDTH_RANGE[0] <= widths.min() <= WIDTH_RANGE[0] + 100
    assert WIDTH_RANGE[1] - 100 <= widths.max() <= WIDTH_RANGE[1]
    assert abs(np.median(widths) - sum(WIDTH_RANGE) / 2) < 400  # uniform, not skewed to one end
    half = log_size(0, 11, 0.5)
    full = log_size(0, 11)
    assert half == (round(full[0] * 0.5), round(full[1] * 0.5))


def test_binary_and_legacy_masks_share_one_drawing() -> None:
    for index in range(8):
        binary, legacy = _log(index), _log(index, classes=3)
        assert np.array_equal(binary.image, legacy.image)
        assert np.array_equal(binary.mask, (legacy.mask > 0).astype(np.uint8))
        assert set(np.unique(binary.mask)) == {0, 1}
        assert set(np.unique(legacy.mask)) == ({0, 1, 2} if len(legacy.curves) > 1 else {0, 1})
    with pytest.raises(ValueError, match="classes"):
        generate(0, 0, SMALL, classes=4)


def _single_runs(mask: np.ndarray) -> np.ndarray:
    """Columns whose mask pixels form exactly one unbroken run."""
    height = mask.shape[0]
    first = mask.argmax(axis=0)
    last = height - 1 - mask[::-1].argmax(axis=0)
    return mask.any(axis=0) & (mask.sum(axis=0) == last - first + 1)


def test_truth_row_is_the_centre_of_the_drawn_stroke() -> None:
    """Where one curve alone has ink, the mask's centroid is within half a pixel of its `row`; where
    several have, each one's row is inside the mask."""
    checked = 0
    for log in [*_survey()[:60], generate(0, 1, 1.0), generate(0, 2, 0.5)]:
        inked = np.array([c.inked for c in log.curves])
        mask = log.mask > 0
        rows = np.arange(mask.shape[0])[:, None]
        centroid = (mask * rows).sum(axis=0) / np.maximum(mask.sum(axis=0), 1)
        for curve in log.curves:
            cols = np.flatnonzero(curve.inked)
            assert cols.size > 0
            assert mask[np.rint(curve.row[cols]).astype(int), cols].all()
            alone = cols[(inked[:, cols].sum(axis=0) == 1) & _single_runs(mask)[cols]]
            assert np.abs(centroid[alone] - curve.row[alone]).max(initial=0.0) <= 0.5 + 1e-9
            checked += alone.size
        assert not mask[:, ~inked.any(axis=0)].any()  # no ink where no curve is inked
    assert checked > 10_000


def test_values_round_trip_through_the_scale() -> None:
    for log, curve in _curves():
        present = np.isfinite(curve.values)
        assert np.array_equal(present, np.isfinite(curve.row))
        plain = present & ~curve.wrapped
        recovered = curve.scale.to_value(_fraction(log, curve)[plain])
        np.testing.assert_allclose(recovered, curve.values[plain], rtol=1e-9)
        np.testing.assert_allclose(curve.scale.to_fraction(curve.values[plain]), _fraction(log, curve)[plain])
        assert np.all((curve.row[present] >= log.track[0]) & (curve.row[present] <= log.track[1]))


def test_wrapped_columns_are_drawn_on_their_sides_backup_scale() -> None:
    sides_seen = set()
    for log, curve in _curves():
        assert set(np.unique(curve.wrap_side)) <= {0, *wrap_sides(curve.wrap)}
        for side in wrap_sides(curve.wrap):
            on = curve.wrap_side == side
            if not on.any():
                continue
            sides_seen.add((curve.wrap, side))
            beyond = curve.scale.to_fraction(curve.values[on])
            assert np.all(beyond > 1) if side > 0 else np.all(beyond < 0)
            backup = curve.backup_scale_on(side).to_value(_fraction(log, curve)[on])
            np.testing.assert_allclose(backup, curve.values[on], rtol=1e-9)
            np.testing.assert_allclose(curve.unwrapped_fraction(log.track)[on],
                                       curve.scale.to_fraction(curve.values[on]), atol=1e-9)
    assert sides_seen == {("right", 1), ("left", -1), ("both", 1), ("both", -1)}


def test_a_held_curve_runs_flat_along_an_edge_it_has_no_backup_scale_for() -> None:
    """A plotter with no backup scale to go to clips the pen: the curve runs flat along the edge, on the
    border line or within 2 % of the track inside, its value there the edge's, its ink in the mask."""
    held = [(log, curve) for log, curve in _curves() if curve.held]
    assert len(held) >= 0.05 * len(_curves()) and {curve.held for _, curve in held} == {1, -1}
    on_the_border, stretches = 0, 0
    for log, curve in held:
        assert curve.held not in wrap_sides(curve.wrap) and log.factors["held"]
        fraction = np.where(curve.wrap_side == 0, _fraction(log, curve), np.nan)  # on its own scale
        edge = np.nanmax(fraction) if curve.held > 0 else np.nanmin(fraction)
        inset = 1.0 - edge if curve.held > 0 else edge
        assert -1e-9 <= inset <= 0.021, inset
        on_the_border += inset < 1e-9
        flat = np.flatnonzero(np.abs(fraction - edge) < 1e-9)
        stretches += flat.size >= 3  # where the curve is not logged over most of it, fewer columns show
        np.testing.assert_allclose(curve.values[flat], curve.scale.to_value(np.full(flat.size, edge)), rtol=1e-9)
        inked = flat[curve.inked[flat]]
        rows = np.rint(curve.row[inked]).astype(int)
        assert log.mask[rows, inked].mean() > 0.9, "the held ink is the curve's in the mask"
    assert 0 < on_the_border < len(held) and stretches >= 0.9 * len(held), "held over stretches of columns"
    plain = [_fraction(log, c) for log, c in _curves() if not c.held and c.wrap == "none" and np.isfinite(c.row).any()]
    assert all(np.nanmin(f) > 0.0 and np.nanmax(f) < 1.0 for f in plain), "a curve not held stays off the edges"


def test_holding_a_curve_changes_no_other_draw() -> None:
    """The held curves come from a generator of their own: without them (exclude "held") every log is
    drawn as it was, the held curve aside."""
    for index in range(40):
        log, plain = _log(index), generate(0, index, SMALL, exclude=("held",))
        if not log.factors["held"]:
            assert _digest(log) == _digest(plain)
            continue
        assert not plain.factors["held"]
        for curve, other in zip(log.curves, plain.curves, strict=True):
            assert (curve.style, curve.ink, curve.stroke_px, curve.wrap) == (other.style, other.ink, other.stroke_px,
                                                                             other.wrap)
            if not curve.held:
                np.testing.assert_array_equal(curve.row, other.row)


def test_a_constant_curve_holds_one_to_three_values_along_the_track_in_any_style() -> None:
    """A bit size: a straight line along the track at one value, stepping to another at a casing point
    (one to three levels), inside the track, in any style, its ink in the mask; never held at an edge."""
    constant = [(log, curve) for log, curve in _curves() if curve.constant]
    assert 0.03 * len(_curves()) <= len(constant) <= 0.1 * len(_curves())
    assert len({curve.style for _, curve in constant}) >= 3
    level_counts = set()
    for log, curve in constant:
        assert log.factors["constant"] and curve.held == 0 and not curve.wrapped.any()
        fraction = _fraction(log, curve)
        valued = np.isfinite(fraction)
        # Away from its steps the line is flat: most columns share their neighbours' row exactly.
        flat = np.abs(np.diff(fraction[valued])) < 1e-9
        assert flat.mean() > 0.95, flat.mean()
        levels = np.unique(np.round(curve.values[np.isfinite(curve.values)][1:][flat], 9))
        level_counts.add(levels.size)
        assert 1 <= levels.size <= 3
        assert np.all((fraction[valued] > 0.003) & (fraction[valued] < 0.997))
        inked = np.flatnonzero(curve.inked & valued)
        assert log.mask[np.rint(curve.row[inked]).astype(int), inked].mean() > 0.9, "its ink is the curve's"
    assert level_counts == {1, 2, 3}
    plain = [curve for _, curve in _curves() if not curve.constant and np.isfinite(curve.row).sum() > 10]
    assert all(np.mean(np.abs(np.diff(c.row[np.isfinite(c.row)])) < 1e-9) < 0.5 for c in plain), \
        "only a constant curve runs flat along most of the track"


def test_a_constant_curves_levels_lie_on_the_grid_half_the_time() -> None:
    """`synth_curves.constant`: each level on one of the track's grid lines half the time (a bit size often
    is), else anywhere 4-96 % across; steps only 10-90 % along; with no grid lines, anywhere."""
    lines = np.array([0.2, 0.4, 0.6, 0.8])
    on, levels_seen, total = 0, set(), 0
    for seed in range(300):
        f = shapes.constant(np.random.default_rng(seed), 500, lines)
        levels = f[np.flatnonzero(np.r_[True, np.diff(f) != 0])]
        levels_seen.add(levels.size)
        steps = np.flatnonzero(np.diff(f) != 0) + 1
        assert np.all((steps >= 50) & (steps <= 450))
        assert np.all((levels >= 0.04) & (levels <= 0.96))
        on += int(np.isin(levels, lines).sum())
        total += levels.size
    assert levels_seen == {1, 2, 3} and 0.4 < on / total < 0.6, on / total
    bare = shapes.constant(np.random.default_rng(1), 500, np.empty(0))
    assert np.all((bare >= 0.04) & (bare <= 0.96))


def test_holding_a_curve_at_a_value_changes_no_other_draw() -> None:
    """The constant curves come from a generator of their own: without them (exclude "constant") every log
    is drawn as it was, but for the constant curve's own shape."""
    changed = 0
    for index in range(60):
        log, plain = _log(index), generate(0, index, SMALL, exclude=("constant",))
        assert not plain.factors["constant"]
        if not log.factors["constant"]:
            assert _digest(log) == _digest(plain)
            continue
        changed += 1
        for curve, other in zip(log.curves, plain.curves, strict=True):
            assert (curve.style, curve.ink, curve.stroke_px, curve.wrap) == (other.style, other.ink, other.stroke_px,
                                                                             other.wrap)
            if not curve.constant:
                np.testing.assert_array_equal(curve.row, other.row)
            else:
                assert not other.constant and not np.array_equal(curve.row, other.row, equal_nan=True)
    assert changed >= 2


def test_backup_scale_is_shifted_by_one_track_width() -> None:
    gr = TrackScale(0.0, 150.0, False, "GR", "API")
    assert gr.backup(1) == TrackScale(150.0, 300.0, False, "GR", "API")
    assert gr.backup(-1) == TrackScale(-150.0, 0.0, False, "GR", "API")
    res = TrackScale(0.2, 2000.0, True, "ILD", "ohm.m").backup(1)
    assert res.left == 2000.0 and res.right == pytest.approx(2e7)
    np.testing.assert_allclose(res.to_value(np.array([0.25])), [20000.0])


def _runs(flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lengths of the True runs and of the False runs strictly between them."""
    edges = np.diff(np.concatenate(([0], flags.astype(np.int8), [0])))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return stops - starts, starts[1:] - stops[:-1]


def test_every_style_is_drawn_and_broken_styles_leave_bare_gaps() -> None:
    ink_runs: dict[str, list[int]] = {style: [] for style in STYLES}
    for log, curve in _curves():
        valued = np.isfinite(curve.values)
        if curve.style == "solid":
            assert np.array_equal(curve.inked, valued)
            continue
        gaps = valued & ~curve.inked
        assert gaps.any()
        ink_runs[curve.style] += _runs(curve.inked)[0][1:-1].tolist()  # the ends may be cut short
        others = np.array([c.inked for c in log.curves if c is not curve]).reshape(-1, valued.size)
        bare = np.flatnonzero(gaps & ~others.any(axis=0))
        assert not log.mask[:, bare].any()  # a gap is paper, and paper is background
    assert all(ink_runs[s] for s in ("dashed", "dotted", "dash-dot"))
    assert np.mean(ink_runs["dotted"]) < np.mean(ink_runs["dash-dot"]) < np.mean(ink_runs["dashed"])


def test_ink_from_black_to_light_gray_shows_in_the_scan() -> None:
    tones: dict[str, list[float]] = {"dark": [], "light": []}
    for log, curve in _curves():
        if log.factors["bilevel"] or len(log.curves) > 1:
            continue
        cols = np.flatnonzero(curve.inked)
        ink = np.median(log.image[np.rint(curve.row[cols]).astype(int), cols])
        tones[curve.ink_class].append(float(np.median(log.image)) - float(ink))
        assert (curve.ink < 100) == (curve.ink_class == "dark")
    assert min(tones["dark"]) > 60 and 8 < np.median(tones["light"]) < min(tones["dark"])


def _crosses(log: SynthLog) -> bool:
    rows = [c.unwrapped_fraction(log.track) for c in log.curves]
    return any(np.nansum(np.abs(np.diff(np.sign(a - b)))) > 0 for i, a in enumerate(rows) for b in rows[i + 1:])


def _interrupted(curve: CurveTruth) -> bool:
    valued = np.flatnonzero(np.isfinite(curve.values))
    return not np.isfinite(curve.values[valued[0] : valued[-1] + 1]).all()


def _levels_seen(logs: list[SynthLog]) -> set[str]:
    seen = set()
    for log in logs:
        seen |= set(log.factor_levels())
        seen |= {f"stroke_{c.stroke_px}" for c in log.curves} | {c.style for c in log.curves}
        seen |= {c.ink_class for c in log.curves} | {f"wrap_{c.wrap}" for c in log.curves}
        seen |= {"interrupted" for c in log.curves if _interrupted(c)} | {"crossing" for _ in [0] if _crosses(log)}
    return seen


def test_every_factor_level_appears_over_a_batch_of_logs() -> None:
    assert set(EXCLUDABLE) | {"crossing"} <= _levels_seen(_survey())
    logs = _survey()
    bilevel = [log for log in logs if log.factors["bilevel"]]
    assert {log.factors["bilevel_mode"] for log in bilevel} == {"threshold", "dither"}
    assert all(set(np.unique(log.image)) <= {0, 255} for log in bilevel if not log.factors["jpeg"])
    assert all(len(np.unique(log.image)) > 2 for log in logs if log.factors["jpeg"])
    assert all(abs(log.factors["skew_degrees"]) <= 1.0 for log in logs)
    assert max(abs(log.factors["skew_degrees"]) for log in logs) > 0.9
    assert {log.factors["grid"] for log in logs} == {"linear", "log"}


def _mean_jump(log: SynthLog) -> float:
    return float(np.nanmean(np.concatenate([np.abs(np.diff(c.row))[c.inked[1:]] for c in log.curves])))


def test_a_low_resolution_print_moves_its_curves_several_pixels_between_columns() -> None:
    low = [_mean_jump(log) for log in _survey() if log.factors["low_res"]]
    normal = [_mean_jump(log) for log in _survey() if not log.factors["low_res"]]
    assert low and np.median(low) > 2 * np.median(normal) and np.median(low) > 2.0


# Levels that need another one: a solid pair needs solid curves; a pair told apart by ink needs both inks.
IMPLIED = {"solid": {"same_ink_solid_pair", "solid_pair_by_ink"}, "dark": {"solid_pair_by_ink"},
           "light": {"solid_pair_by_ink"}}


@pytest.mark.parametrize("level", EXCLUDABLE)
def test_an_excluded_level_is_never_generated(level: str) -> None:
    seen = _levels_seen([generate(5, i, 0.05, exclude=(level,)) for i in range(150)])
    assert level not in seen
    assert set(EXCLUDABLE) - {level} - IMPLIED.get(level, set()) <= seen  # every other level still comes


def test_exclusion_names_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown factor level 'dotty'; allowed: solid, dashed, dotted"):
        generate(0, 0, SMALL, exclude=("dotty",))
    with pytest.raises(ValueError, match="excludes every style"):
        SynthDataset(4, SMALL, exclude=STYLES)
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_dict({"data": {"exclude": ["dotted", "sepia"], "classes": 2}, "model": {"num_classes": 2}})
    assert set(caught.value.errors) == {"data.exclude"} and "allowed: solid" in caught.value.errors["data.exclude"]
    config = TrainConfig.from_dict({"data": {"exclude": ["dotted"], "classes": 2}, "model": {"num_classes": 2}})
    assert config.data.exclude == ("dotted",) and TrainConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ConfigError, match="synthetic data only"):
        TrainConfig.from_dict({"data": {"kind": "manifest", "manifest_url": "/x", "exclude": ["dotted"]}})


def test_calibration_carries_the_headers_hints() -> None:
    for log in _survey()[:30]:
        calibration = json.loads(json.dumps(log.calibration()))
        assert calibration["track_top"] == log.track[0]
        for curve, entry in zip(log.curves, calibration["curves"], strict=True):
            assert entry["style"] == curve.style and entry["ink"] == curve.ink_class
            assert entry["wrap"] == curve.wrap and entry["wrap"] in ("none", "right", "left", "both")
            assert (entry["left"], entry["right"], entry["log"]) == (curve.scale.left, curve.scale.right,
                                                                      curve.scale.log)
            assert "anchors" not in entry
        for curve, entry in zip(log.curves, log.calibration(anchors=3)["curves"], strict=True):
            depths = log.depth_at(np.arange(log.image.shape[1]), curve.row)
            for anchor in entry["anchors"]:  # a point read off the curve: its depth, and the value drawn there
                col = int(np.nanargmin(np.abs(depths - anchor["depth"])))
                assert curve.values[col] == pytest.approx(anchor["value"], rel=1e-9)


def test_truth_json_is_strict_json() -> None:
    logs = [log for log in _survey() if any(np.isnan(c.values).any() for c in log.curves)]
    assert logs, "no survey log has an absent stretch"
    truth = json.loads(json.dumps(logs[0].truth_json(), allow_nan=False))
    assert (truth["height"], truth["width"]) == logs[0].image.shape
    assert any(None in c["values"] for c in truth["curves"])
    assert {"style", "ink", "ink_class", "stroke_px", "wrap", "wrap_side", "backup_scales"} <= set(truth["curves"][0])
    assert truth["factors"] == logs[0].factors


def test_dataset_items_and_sizes() -> None:
    dataset = SynthDataset(3, scale=SMALL, seed=0)
    assert len(dataset) == 3
    assert dataset.sizes() == [log_size(0, i, SMALL) for i in range(3)]
    for i, (height, width) in enumerate(dataset.sizes()):
        item = dataset[i]
        assert item["index"] == i
        assert item["image"].dtype == torch.float32 and item["image"].shape == (1, height, width)
        assert item["mask"].dtype == torch.int64 and item["mask"].shape == (height, width)
        assert item["image"].min() >= 0.0 and item["image"].max() <= 1.0
        np.testing.assert_allclose(item["image"][0].numpy() * 255, _log(i).image, atol=1e-3)
    excluding = SynthDataset(3, scale=SMALL, seed=0, exclude=("bilevel",))
    assert excluding.sizes() == dataset.sizes()
    np.testing.assert_array_equal(excluding[1]["mask"].numpy(), generate(0, 1, SMALL, exclude=("bilevel",)).mask)
    with pytest.raises(IndexError):
        dataset[3]


def test_write_samples(tmp_path: Path) -> None:
    paths = write_samples(tmp_path, 2, seed=0, scale=SMALL)
    assert [p.name for p in paths[:3]] == ["log-00000.png", "log-00000-mask.png", "log-00000.json"]
    assert len(paths) == 6 and all(p.is_file() for p in paths)
    np.testing.assert_array_equal(np.asarray(Image.open(paths[0])), _log(0).image)
    assert set(np.unique(np.asarray(Image.open(paths[1])))) <= {0, 120}
    assert json.loads(paths[2].read_text()) == json.loads(json.dumps(_log(0).truth_json()))
