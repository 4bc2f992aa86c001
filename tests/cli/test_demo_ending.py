"""How `veernet demo` ends without --keep (what `make run` shows last): the service stopped before the
report, then one line that says how to keep it running. The demo's job itself, and its --keep ending, run
for real in tests/e2e/test_embedded_default.py; here the service is a real process that stands in for
`veernet up`, and the main job's outcome is given."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from api.cli import demo
from api.settings import Settings


def _outcome(data: Path) -> demo.Outcome:
    scan = {"job_id": 8, "size": (96, 3200), "paths": {"las": str(data / "segment-8.las"),
                                                       "csv": str(data / "segment-8.csv")},
            "curves": [{"mnemonic": "GR", "mae_pct": 1.25, "coverage": 0.99}]}
    return demo.Outcome(job={"id": 7}, checkpoint={"id": 3, "size": 1024, "sha256": "ab" * 32, "metrics": {}},
                        path=str(data / "job-7-checkpoint-3.pt"), scan=scan, elapsed_s=12.0)


@pytest.mark.parametrize("succeeded", [True, False])
def test_without_keep_the_service_stops_before_the_report_and_the_last_line_says_how_to_keep_it(
        service: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        succeeded: bool) -> None:
    stack = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    running_at_report: list[bool] = []
    report = demo._report

    def reported(settings: Settings, outcome: demo.Outcome) -> None:
        running_at_report.append(stack.poll() is None)
        report(settings, outcome)

    monkeypatch.setattr(demo, "_start_stack", lambda port: stack)
    monkeypatch.setattr(demo, "_main_job", lambda base, settings, started: _outcome(service.veernet_data_dir)
                        if succeeded else None)
    monkeypatch.setattr(demo, "_report", reported)
    try:
        code = demo.run_demo(8123, keep=False)
    finally:
        if stack.poll() is None:
            stack.kill()
        stack.wait()
    out = capsys.readouterr().out
    assert stack.returncode == -signal.SIGTERM, "the demo stops the service it started"
    assert code == (0 if succeeded else 1)
    assert running_at_report == ([False] if succeeded else []), "the service is stopped before the report"
    page = " (this job's page is /#/jobs/7)" if succeeded else ""
    assert out.splitlines()[-1] == (f"the service has stopped. To look around the dashboard{page}, keep it "
                                    "running: make run KEEP=1, or veernet demo --keep")
    if succeeded:
        assert "job 7 succeeded in 12 s" in out and "where everything is:" in out
        assert "http://" not in out.split("where everything is:")[1], "no link to the service it has stopped"
