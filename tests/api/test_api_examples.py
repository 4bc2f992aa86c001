"""The example files a user starts from are accepted by the service as they are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from fastapi.testclient import TestClient

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _yaml(name: str) -> dict[str, Any]:
    data = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(data, dict)
    return data


def test_the_example_job_is_accepted_as_written(client: TestClient) -> None:
    config = _yaml("job.yaml")
    response = client.post("/jobs", json={"kind": "train", "config": config})
    assert response.status_code == 202, response.text
    stored = response.json()["config"]
    assert stored["data"] == {**stored["data"], **config["data"]} and stored["epochs"] == config["epochs"]


def test_the_example_calibrations_are_accepted_with_their_scans(client: TestClient) -> None:
    for scan, options in (("scan-synthetic.png", {"calibration": _yaml("calibration-synthetic.yaml")}),
                          ("scan-track.png", _yaml("calibration-track.yaml"))):
        data = (EXAMPLES / scan).read_bytes()
        response = client.post("/segment", files={"file": (scan, data, "image/png")},
                               data={"options": json.dumps(options)})
        assert response.status_code == 202, response.text
        kept = response.json()["config"]["calibration"]["curves"]
        written = options["calibration"]["curves"]
        assert [(c["style"], c["ink"]) for c in kept] == [(c["style"], c["ink"]) for c in written], (
            "the hints are kept as written")
