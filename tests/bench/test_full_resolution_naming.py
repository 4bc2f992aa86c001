"""Curves that share a track on a full-resolution scan are named by their looks on the scan, and a curve
the joint tracer's hint-based names read differently is flagged ambiguous (`rescale.agreed`): on these
held-out logs the looks alone named curves wrong without a flag."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import digitise_eval  # noqa: E402

from veernet_core.digitise.predict import bundled_model_path, load_model  # noqa: E402

# Held-out generator logs (seed 424242, full resolution) where the looks-only naming named 1-2 curves
# wrong without a flag (2, 3 and 4 curves sharing the track).
LOGS = (41, 8, 6)


@pytest.fixture(scope="module")
def model() -> object:
    return load_model(bundled_model_path())[0]


@pytest.mark.parametrize("index", LOGS)
def test_no_curve_of_a_full_resolution_log_is_named_wrong_without_a_flag(model: object, index: int) -> None:
    args = digitise_eval._parser().parse_args(["--scale", "1.0", "--classes", "2"])
    log = digitise_eval.render_log(args, index, 1.0, 2)
    _, digitised, hints_read, resampled = digitise_eval.read_log(args, model, log, 2)
    assert resampled and digitised is not None and len(log.curves) >= 2
    rows = digitise_eval.evaluate_log(log, digitised, hints_read)
    figures = digitise_eval.identity_figures(rows)
    assert figures["curves"] == len(log.curves)
    assert figures["wrong_unflagged"] == 0, [(r["identity"], r["style"], r["ink_class"]) for r in rows]
