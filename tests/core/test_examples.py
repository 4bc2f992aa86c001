"""The files in examples/ stay true: each is accepted and does what its comments say. When the synthetic
generator draws differently, `python scripts/make_examples.py` writes them anew."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from PIL import Image

from veernet_core.config import TrainConfig
from veernet_core.digitise.calibration import Calibration
from veernet_core.digitise.pipeline import ScanOptions, digitise_scan
from veernet_core.digitise.predict import bundled_model_path, load_model, read_checkpoint
from veernet_core.synth import SynthLog, generate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REGENERATE = "veernet_core.synth draws this log differently now: run python scripts/make_examples.py"
SEED, SYNTHETIC_INDEX, TRACK_INDEX = 2026, 54, 333  # scripts/make_examples.py's logs
TRACK_COLUMNS = slice(150, 750)


def _load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(data, dict)
    return data


def _pixels(name: str) -> np.ndarray:
    return np.asarray(Image.open(EXAMPLES / name))


def _bundled() -> tuple[Any, str]:
    model, _ = load_model(bundled_model_path())
    return model, read_checkpoint(bundled_model_path())[1]


def _median_error(log: SynthLog, k: int, depths: np.ndarray, values: np.ndarray, columns: np.ndarray) -> float:
    """Median |read - true| of curve k as a share of its track range, where it is inked on its primary scale."""
    curve = log.curves[k]
    keep = curve.inked[columns] & ~curve.wrapped[columns] & np.isfinite(values)
    measure = np.log10 if curve.scale.log else np.asarray
    span = abs(measure(curve.scale.right) - measure(curve.scale.left))
    return float(np.median(np.abs(measure(values[keep]) - measure(curve.values[columns][keep]))) / span)


def test_the_synthetic_example_is_its_scan_and_digitises_with_named_curves() -> None:
    log = generate(SEED, SYNTHETIC_INDEX, 0.1, 3)
    np.testing.assert_array_equal(_pixels("scan-synthetic.png"), log.image, err_msg=REGENERATE)
    calibration = _load("calibration-synthetic.yaml")
    truth = log.calibration()
    assert calibration["depth"]["top"] == truth["depth"]["top"]
    assert abs(calibration["depth"]["bottom"] - truth["depth"]["bottom"]) < 1e-3
    assert (calibration["track_top"], calibration["track_bottom"]) == (truth["track_top"], truth["track_bottom"])
    for written, curve in zip(calibration["curves"], log.curves, strict=True):
        assert (written["mnemonic"], written["left"], written["right"]) == (curve.mnemonic, curve.scale.left,
                                                                             curve.scale.right)
        assert (written["style"], written["ink"]) == (curve.style, curve.ink_class)
    result = digitise_scan((EXAMPLES / "scan-synthetic.png").read_bytes(), calibration, _bundled, "bundled")
    curves = result.curves.curves
    assert [c.mnemonic for c in curves] == [c.mnemonic for c in log.curves]
    # Each named by its hints, and neither contradicted by what the scan shows.
    assert [c.identity for c in curves] == ["hinted", "hinted"]
    assert [c.warnings for c in curves] == [(), ()]
    width = log.image.shape[1]
    columns = np.rint(result.curves.calibration.depth.column_of(result.curves.depth)).astype(int).clip(0, width - 1)
    for k, curve in enumerate(curves):
        assert _median_error(log, k, result.curves.depth, curve.values, columns) < 0.02, curve.mnemonic


def test_the_track_example_is_a_crop_of_its_log_and_digitises() -> None:
    log = generate(SEED, TRACK_INDEX, 0.1, 3)
    rows = slice(max(0, log.track[0] - 3), log.track[1] + 4)  # as scripts/make_examples.py crops it
    np.testing.assert_array_equal(_pixels("scan-track.png"), log.image[rows, TRACK_COLUMNS], err_msg=REGENERATE)
    options = _load("calibration-track.yaml")
    calibration = options["calibration"]
    for col, depth in calibration["depth"]["ticks"]:
        true_depth = float(log.depth.depth_of_column(np.array(150 + col), log.image.shape[1]))
        assert abs(depth - true_depth) < 1e-2
    top, bottom = log.track[0] - rows.start, log.track[1] - rows.start
    assert (calibration["track_top"], calibration["track_bottom"]) == (top, bottom)
    height, width = _pixels("scan-track.png").shape
    checked = Calibration.from_dict(calibration, height, width)
    assert [c.wrap for c in checked.curves] == [c.wrap for c in log.curves] and checked.curves[0].anchors
    buffer = io.BytesIO()
    Image.fromarray(_pixels("scan-track.png")).save(buffer, format="PNG")
    result = digitise_scan(buffer.getvalue(), calibration, _bundled, "bundled", ScanOptions(well=options["well"]))
    curves = result.curves.curves
    assert [c.mnemonic for c in curves] == [c.mnemonic for c in log.curves]
    assert curves[0].identity == "anchored" and not any(c.warnings for c in curves)
    columns = 150 + np.rint(checked.depth.column_of(result.curves.depth)).astype(int).clip(0, width - 1)
    for k, curve in enumerate(curves):
        assert np.isfinite(curve.values).mean() > 0.9
        assert _median_error(log, k, result.curves.depth, curve.values, columns) < 0.02, curve.mnemonic
    assert b"EXAMPLE-TRACK" in result.files["las"]


def test_the_example_job_is_a_valid_config_that_trains(tmp_path: Path) -> None:
    config = TrainConfig.from_dict(_load("job.yaml"))
    assert config.model.num_classes == config.data.classes == 2
    done = subprocess.run([sys.executable, "-m", "veernet_core", "train", "--out", str(tmp_path),
                           "--config", str(EXAMPLES / "job.yaml")], capture_output=True, text=True, timeout=600,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"status": "completed"' in done.stdout and list(tmp_path.glob("epoch-0001-*.pt"))


def test_the_core_command_line_reads_the_yaml_options_and_says_how_curves_were_named(tmp_path: Path,
                                                                                  capsys: Any) -> None:
    from veernet_core.__main__ import main

    scan, options = EXAMPLES / "scan-track.png", EXAMPLES / "calibration-track.yaml"
    assert main(["digitise", str(scan), "--calibration", str(options), "--out", str(tmp_path)]) == 0
    said = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    first, second = (c.mnemonic for c in generate(SEED, TRACK_INDEX, 0.1, 3).curves)
    assert said["identity"] == {first: "anchored", second: "hinted"} and said["warnings"] == []
    assert (tmp_path / "result.las").exists()
