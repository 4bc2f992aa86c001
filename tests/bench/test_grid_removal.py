"""bench/digitise_eval.py's grid options: `--grid none` (the independent renderer's logs printed without
grid and depth numbers, the most taking the grid off could give) and `--keep-grid` (full-resolution scans
read with their grid, as before the service took it off)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import digitise_eval  # noqa: E402
from digitise_figures import figures  # noqa: E402
from paper import render  # noqa: E402

from veernet_core.digitise.predict import bundled_model_path, load_model, read_checkpoint  # noqa: E402


def test_the_independent_renderer_without_grid_is_the_same_log_without_its_grid() -> None:
    kept, bare = render(7777, 3, 0.1), render(7777, 3, 0.1, grid=False)
    assert (kept.mask == bare.mask).all()
    pairs = zip(kept.curves, bare.curves, strict=True)
    assert all(np.array_equal(a.values, b.values, equal_nan=True) for a, b in pairs)
    assert bare.factors["grid"] == "none" and not bare.factors["labels_in_track"]
    assert kept.factors["grid"] != "none"
    paper = bare.mask == 0
    assert np.abs(bare.image[paper].astype(int) - np.median(bare.image[paper])).mean() < \
        np.abs(kept.image[paper].astype(int) - np.median(kept.image[paper])).mean()


def _error(log, keep_grid: bool) -> float:
    args = argparse.Namespace(renderer="paper", colour=False, seed=7777, grid="printed", keep_grid=keep_grid,
                              anchors=0, scan_scale=None, source="model")
    data, _ = read_checkpoint(bundled_model_path())
    model, _ = load_model(data)
    _, digitised, hints_read, resampled = digitise_eval.read_log(args, model, log, 2)
    assert resampled == 1 and digitised is not None
    return float(figures(digitise_eval.evaluate_log(log, digitised, hints_read))["mae_pct"])


def test_a_light_dotted_curve_under_a_dense_skewed_grid_is_read_once_the_grid_is_off() -> None:
    """Independent renderer, tuning seed 7777, log 12 at full resolution: a 1-px light gray dotted curve
    under depth lines every 3 px on a 0.64-degree skew. With the grid the tracer follows the lines
    (28.8 % of the track range); without it, 1.4 %."""
    log = digitise_eval.render_log(argparse.Namespace(renderer="paper", colour=False, seed=7777), 12, 1.0, 2)
    assert log.factors["skew"] and len(log.curves) == 1 and log.curves[0].style == "dotted"
    assert _error(log, keep_grid=False) < 3.0 < 15.0 < _error(log, keep_grid=True)


def test_grid_none_is_refused_for_the_training_generator() -> None:
    with pytest.raises(SystemExit, match="--grid none"):
        digitise_eval.main(["--grid", "none", "--logs", "1"])


def test_grid_left_counts_a_grid_left_on_as_staying_and_the_services_removal_takes_most_of_it(monkeypatch) -> None:
    """bench/grid_left.py on one generated 1-bit page (page 2 of its default seed): with the grid left on,
    every line it measures stays; through `without_grid`, the borders and value lines come off and nine
    depth lines in ten."""
    import grid_left

    from veernet_core.digitise import grid
    from veernet_core.page_synth import generate_page

    assert generate_page(5150, 2).spec.scan.bitonal
    taken = grid_left.measure(5150, range(2, 3))
    monkeypatch.setattr(grid, "without_grid", lambda gray, colour, top, bottom: (gray, colour))
    left_on = grid_left.measure(5150, range(2, 3))
    for kind in ("depth_lines", "value_lines", "borders"):
        lines, staying, before, after = left_on[kind]["all"]
        assert lines > 0 and staying == lines and before == after > 0, kind
        assert taken[kind]["all"][0] == lines  # the same lines measured
    assert taken["borders"]["all"][1] == 0
    assert taken["value_lines"]["all"][1] <= 0.1 * taken["value_lines"]["all"][0]
    assert taken["depth_lines"]["all"][1] <= 0.1 * taken["depth_lines"]["all"][0]
