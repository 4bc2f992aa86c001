"""bench/lease_train.sh on the CPU, small: the script that trains a recipe within a GPU lease probes, plans
its epochs, trains, leaves the last checkpoint and its figures in $OUT, measures it beside the bundled model
on held-out logs of both renderers, and returns once that ends, read through a pipe as a lease's call reads
it (its checkpoint copier is ended and holds no pipe open)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from veernet_core.checkpoint import deserialize
from veernet_core.digitise.predict import bundled_model_path, read_checkpoint, training_scale

ROOT = Path(__file__).resolve().parents[2]


def test_the_lease_script_trains_within_its_deadline_and_returns_its_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "SCALE": "0.05", "DEADLINE": "600", "PROBE_LOGS": "12", "LOGS": "16",
           "MAX_EPOCHS": "2", "DEVICE": "cpu", "WORKERS": "0", "PYTHON": sys.executable, "OMP_NUM_THREADS": "1",
           "EVAL_LOGS": "1", "EVAL_SEED": "31337", "EVAL_SCALE": "0.25", "EVAL_JOBS": "1"}
    # Through a pipe, as a lease's call reads it: the command must end when training ends.
    done = subprocess.run(["bash", str(ROOT / "bench" / "lease_train.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=500)
    assert done.returncode == 0, done.stdout + done.stderr
    plan = (out / "plan.txt").read_text()
    assert "train exit 0" in plan, plan
    epochs = int(plan.split("epochs ")[1].split()[0])
    assert epochs == 2  # MAX_EPOCHS: the probe's estimate leaves time for more
    state = deserialize(read_checkpoint(str(out / "model.pt"))[0])
    assert training_scale(state) == 0.05
    assert state["train_config"]["epochs"] == epochs
    recipe = json.loads((ROOT / "veernet_core" / "assets" / "bundled-config.json").read_text())
    area = (0.05 / recipe["data"]["scale"]) ** 2
    assert state["train_config"]["pixel_budget"] == round(recipe["pixel_budget"] * area)
    assert json.loads((out / "model.json").read_text())["epoch"] == epochs
    assert json.loads((out / "config.json").read_text())["data"]["dataset_size"] == 16
    # Then the trained model and the bundled one, side by side on the same held-out logs of both renderers.
    trained_sha = hashlib.sha256((out / "model.pt").read_bytes()).hexdigest()
    bundled_sha = hashlib.sha256(Path(bundled_model_path()).read_bytes()).hexdigest()
    for renderer in ("synth", "paper"):
        for model, sha in (("trained", trained_sha), ("bundled", bundled_sha)):
            assert f"eval {model} {renderer} exit 0" in plan, plan
            figures = json.loads((out / f"eval-{model}-{renderer}.json").read_text())
            assert (figures["renderer"], figures["logs"], figures["seed"]) == (renderer, 1, 31337)
            assert figures["model_sha256"] == sha
            assert f"  {model} on {renderer}: mean {figures['mae_pct']} %" in plan
