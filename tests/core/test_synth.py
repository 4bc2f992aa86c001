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

from veernet_core.synth import (
    HEIGHT_RANGE,
    WIDTH_RANGE,
    CurveTruth,
    SynthDataset,
    SynthLog,
    TrackScale,
    generate,
    log_size,
    write_samples,
)

REPO = Path(__file__).resolve().parents[2]
SMALL = 0.1  # ~64 x 320-1,280 px: the real generator, quickly
SURVEY = range(40)  # enough logs that every variant (two curves, dashes, wraps) shows up


@cache
def _log(index: int, scale: float = SMALL, classes: int = 3) -> SynthLog:
    return generate(0, index, scale, classes)


def _survey() -> list[SynthLog]:
    return [_log(i) for i in SURVEY]


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


def test_image_is_bright_paper_with_darker_ink() -> None:
    log = _log(0)
    assert log.image.dtype == np.uint8 and log.mask.dtype == np.uint8
    assert np.median(log.image) > 150
    assert log.image[log.mask > 0].mean() < np.median(log.image) - 20


def test_binary_and_multiclass_masks_share_one_drawing() -> None:
    for index in range(6):
        binary, multi = _log(index, classes=2), _log(index)
        assert np.array_equal(binary.image, multi.image)
        assert np.array_equal(binary.mask, (multi.mask > 0).astype(np.uint8))
        assert set(np.unique(binary.mask)) == {0, 1}
        expected = {0, 1, 2} if len(multi.curves) == 2 else {0, 1}
        assert set(np.unique(multi.mask)) == expected
    assert {len(log.curves) for log in _survey()} == {1, 2}
    with pytest.raises(ValueError, match="classes"):
        generate(0, 0, SMALL, classes=4)


def test_truth_row_is_the_centre_of_the_curve_mask() -> None:
    for log in [*_survey(), _log(1, scale=1.0)]:
        for position, curve in enumerate(log.curves):
            own = log.curve_class(position)
            later = {log.curve_class(k) for k in range(position + 1, len(log.curves))}
            cols = np.flatnonzero(curve.inked)
            assert cols.size > 0
            at_row = log.mask[np.rint(curve.row[cols]).astype(int), cols]
            assert np.isin(at_row, [own, *later]).all()
            assert np.mean(at_row == own) > 0.75  # the later curve only wins where the strokes cross
            hits = log.mask[:, cols] == own
            clean = _untouched(hits, np.isin(log.mask[:, cols], list(later)))
            assert clean.mean() > 0.5  # a 50-px track: curves often cross
            rows = np.arange(log.mask.shape[0])[:, None]
            centroid = (hits * rows).sum(axis=0)[clean] / hits.sum(axis=0)[clean]
            assert np.abs(centroid - curve.row[cols][clean]).max() <= 0.5 + 1e-9


def _untouched(hits: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Columns where a curve's pixels form one run with no other curve's pixel in it or next to it."""
    height = hits.shape[0]
    first = hits.argmax(axis=0)
    last = height - 1 - hits[::-1].argmax(axis=0)
    one_run = hits.any(axis=0) & (hits.sum(axis=0) == last - first + 1)
    other_below = np.concatenate([np.zeros((1, hits.shape[1]), int), np.cumsum(other, axis=0)])
    lo, hi = np.maximum(first - 1, 0), np.minimum(last + 2, height)
    cols = np.arange(hits.shape[1])
    return one_run & (other_below[hi, cols] - other_below[lo, cols] == 0)


def test_values_round_trip_through_the_scale() -> None:
    for log in _survey():
        for curve in log.curves:
            present = np.isfinite(curve.values)
            assert np.array_equal(present, np.isfinite(curve.row))
            plain = present & ~curve.wrapped
            recovered = curve.scale.to_value(_fraction(log, curve)[plain])
            np.testing.assert_allclose(recovered, curve.values[plain], rtol=1e-9)
            fraction = curve.scale.to_fraction(curve.values[plain])
            np.testing.assert_allclose(fraction, _fraction(log, curve)[plain])
            assert np.all((curve.row[present] >= log.track[0]) & (curve.row[present] <= log.track[1]))


def test_wrapped_columns_are_flagged_and_drawn_on_the_backup_scale() -> None:
    wrapping = [(log, c) for log in _survey() for c in log.curves if c.wrapped.any()]
    assert wrapping, "no survey log wraps"
    for log, curve in wrapping:
        assert curve.backup_scale is not None
        beyond = curve.scale.to_fraction(curve.values[curve.wrapped])
        assert np.all(beyond > 1) or np.all(beyond < 0)  # past one edge of the primary scale
        backup = curve.backup_scale.to_value(_fraction(log, curve)[curve.wrapped])
        np.testing.assert_allclose(backup, curve.values[curve.wrapped], rtol=1e-9)
    never = [c for log in _survey() for c in log.curves if not c.wrapped.any()]
    assert never and all(c.backup_scale is None for c in never)


def test_backup_scale_is_shifted_by_one_track_width() -> None:
    gr = TrackScale(0.0, 150.0, False, "GR", "API")
    assert gr.backup(1) == TrackScale(150.0, 300.0, False, "GR", "API")
    assert gr.backup(-1) == TrackScale(-150.0, 0.0, False, "GR", "API")
    res = TrackScale(0.2, 2000.0, True, "ILD", "ohm.m").backup(1)
    assert res.left == 2000.0 and res.right == pytest.approx(2e7)
    np.testing.assert_allclose(res.to_value(np.array([0.25])), [20000.0])


def test_dashed_curves_have_gaps_without_ink_but_with_values() -> None:
    curves = [(log, k, c) for log in _survey() for k, c in enumerate(log.curves)]
    dashed = [(log, k, c) for log, k, c in curves if c.dashed]
    assert dashed and len(dashed) < len(curves)
    for log, k, curve in dashed:
        gaps = np.flatnonzero(np.isfinite(curve.values) & ~curve.inked)
        assert gaps.size > 0
        assert not (log.mask[:, gaps] == log.curve_class(k)).any()
    for _, _, curve in curves:
        if not curve.dashed:
            assert np.array_equal(curve.inked, np.isfinite(curve.values))


def _runs(flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lengths of the True runs and of the False runs strictly between them."""
    edges = np.diff(np.concatenate(([0], flags.astype(np.int8), [0])))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return stops - starts, starts[1:] - stops[:-1]


@pytest.mark.parametrize("scale", [SMALL, 0.3, 1.0])
def test_each_curve_class_has_its_own_line_style(scale: float) -> None:
    """Curve 1 (class 1) is always solid; curve 2 (class 2) always dashed at one regular period, so
    which curve is which can be seen on the page (as a log header's legend says) after any crossing."""
    logs = [_log(i) for i in SURVEY] if scale == SMALL else [generate(0, i, scale) for i in range(8)]
    two = [log for log in logs if len(log.curves) == 2]
    assert two and len(two) < len(logs)
    periods = set()
    for log in logs:
        first = log.curves[0]
        assert not first.dashed and np.array_equal(first.inked, np.isfinite(first.values))
        assert _runs(first.inked)[0].size == 1  # solid: one unbroken run (an absent stretch is at an end)
        if len(log.curves) == 1:
            continue
        second = log.curves[1]
        assert second.dashed
        valued = np.flatnonzero(np.isfinite(second.values))
        inside = second.inked[valued[0] : valued[-1] + 1]
        assert np.isfinite(second.values[valued[0] : valued[-1] + 1]).all()
        ink, gaps = _runs(inside)
        assert gaps.size >= 10
        assert np.unique(gaps).size == 1 and np.unique(ink[1:-1]).size == 1  # the ends may be cut short
        assert ink.max() == ink[1:-1].max() and ink[1] > gaps[0]  # dashes longer than the gaps
        periods.add((int(ink[1]), int(gaps[0])))
        # The mask follows the ink: class 2 in every dash column, never in a gap, which is bare paper
        # (background, or the solid curve where it runs there) and lighter in the image.
        gap_cols = valued[0] + np.flatnonzero(~inside)
        assert not (log.mask[:, gap_cols] == 2).any()
        assert (log.mask[:, second.inked] == 2).any(axis=0).all()
        rows = np.rint(np.where(np.isfinite(second.row), second.row, 0)).astype(int)
        height = log.mask.shape[0]
        near_first = np.zeros(log.mask.shape[1], dtype=bool)
        for offset in range(-3, 4):
            near_first |= log.mask[np.clip(rows + offset, 0, height - 1), np.arange(rows.size)] == 1
        ink_cols = np.flatnonzero(second.inked & ~near_first)
        clear_gaps = gap_cols[~near_first[gap_cols]]
        assert clear_gaps.size > 0
        ink_tone = log.image[rows[ink_cols], ink_cols].astype(float).mean()
        gap_tone = log.image[rows[clear_gaps], clear_gaps].astype(float).mean()
        assert gap_tone - ink_tone > 20
    assert len(periods) == 1  # one style at a given scale, whatever the log


def test_truth_json_is_strict_json() -> None:
    logs = [log for log in _survey() if any(np.isnan(c.values).any() for c in log.curves)]
    assert logs, "no survey log has an absent stretch"
    truth = json.loads(json.dumps(logs[0].truth_json(), allow_nan=False))
    assert (truth["height"], truth["width"]) == logs[0].image.shape
    assert None in truth["curves"][0]["values"] or None in truth["curves"][-1]["values"]


def test_dataset_items_and_sizes() -> None:
    dataset = SynthDataset(3, scale=SMALL, classes=3, seed=0)
    assert len(dataset) == 3
    assert dataset.sizes() == [log_size(0, i, SMALL) for i in range(3)]
    for i, (height, width) in enumerate(dataset.sizes()):
        item = dataset[i]
        assert item["index"] == i
        assert item["image"].dtype == torch.float32 and item["image"].shape == (1, height, width)
        assert item["mask"].dtype == torch.int64 and item["mask"].shape == (height, width)
        assert item["image"].min() >= 0.0 and item["image"].max() <= 1.0
        np.testing.assert_allclose(item["image"][0].numpy() * 255, _log(i).image, atol=1e-3)
    with pytest.raises(IndexError):
        dataset[3]


def test_write_samples(tmp_path: Path) -> None:
    paths = write_samples(tmp_path, 2, seed=0, scale=SMALL)
    assert [p.name for p in paths[:3]] == ["log-00000.png", "log-00000-mask.png", "log-00000.json"]
    assert len(paths) == 6 and all(p.is_file() for p in paths)
    np.testing.assert_array_equal(np.asarray(Image.open(paths[0])), _log(0).image)
    assert set(np.unique(np.asarray(Image.open(paths[1])))) <= {0, 120, 240}
    assert json.loads(paths[2].read_text()) == json.loads(json.dumps(_log(0).truth_json()))
