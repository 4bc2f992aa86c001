"""On a full-resolution scan read reduced by the bundled model, a curve that is the only one of its
declared tone in a shared track is traced on the scan's ink of that tone (`veernet_core.digitise.tones`):
on these logs of the generator (seed 7777, which the model never saw), the curve traced on the model's
grid and moved onto the nearest ink was read 10 % of the track off on average."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import digitise_eval  # noqa: E402
from digitise_figures import scored  # noqa: E402

from veernet_core.digitise.predict import bundled_model_path, load_model  # noqa: E402
from veernet_core.digitise.tones import alone_in_tone  # noqa: E402

SEED = 7777
# (log, curve alone in its tone): a dash-dot dark curve among two light ones (10.0 % before), a solid
# light curve among three dark ones (10.2 % before).
LOGS = ((20, 1), (10, 1))


@pytest.fixture(scope="module")
def model() -> object:
    return load_model(bundled_model_path())[0]


@pytest.mark.parametrize(("index", "curve"), LOGS)
def test_a_curve_alone_in_its_tone_is_read_on_the_ink_of_that_tone(model: object, index: int, curve: int) -> None:
    args = digitise_eval._parser().parse_args(["--scale", "1.0", "--classes", "2", "--seed", str(SEED)])
    log = digitise_eval.render_log(args, index, 1.0, 2)
    calibration, hints_read = digitise_eval.calibration_for(log)
    assert curve in alone_in_tone(calibration) and len(log.curves) >= 3
    _, digitised, hints_read, resampled = digitise_eval.read_log(args, model, log, 2)
    assert resampled and digitised is not None
    row = digitise_eval.evaluate_log(log, digitised, hints_read)[curve]
    error = np.abs(row["pred"] - row["truth"])[scored(row)]
    assert error.size > 0.9 * np.count_nonzero(row["inked"] & ~row["wrapped"])
    assert 100 * float(error.mean()) < 3.0
