"""The web dashboard end to end in headless Chromium (Debian's, driven by Playwright): the real embedded
service with API keys on, a CPU training worker and a segment worker, all logging JSON.

The page asks for a key, takes the admin key, submits a tiny training job, shows it running and
finished with its curves, timeline and checkpoints; a checkpoint downloaded through the page matches
the sha256 the API registered; a synthetic scan uploaded on the segment page comes back traced; a
generated full page uploaded on the analysis page comes back with its sections and tracks. The
screenshots are kept under var/test-artefacts/dashboard/ (VEERNET_ARTEFACTS_DIR moves them).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_jobs import tiny_config
from e2e_procs import FAST_LEASES, ROOT, code_root, free_port, service_env
from e2e_stack import Stack, api_proc, worker_proc
from PIL import Image

pytestmark = pytest.mark.e2e
# The page's Content-Security-Policy forbids eval, so the test waits on elements and attributes the page
# sets (locators), never on script strings (wait_for_function).

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# As the machine's notes say: no sandbox as root, and no background connections to a network that is closed.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
ADMIN_KEY = "admin-dashboard-" + os.urandom(12).hex()
CONFIG = tiny_config(data={"dataset_size": 16, "scale": 0.08})  # two epochs of three steps: seconds on a CPU
FULL_RESOLUTION_INDEX = 19  # of seed 90,210: its first full-resolution log at most 4,000 px wide
WAIT_MS = 180_000  # page states on a loaded two-core machine: generous, and each wait ends as soon as it holds


@pytest.fixture(scope="module")
def artefacts() -> Path:
    path = Path(os.environ.get("VEERNET_ARTEFACTS_DIR", ROOT / "var" / "test-artefacts")) / "dashboard"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def stack(tmp_path: Path, e2e_dir: Path) -> Iterator[Stack]:  # e2e_dir: the code snapshot is taken
    env = service_env(VEERNET_DATA_DIR=tmp_path / "data", VEERNET_ADMIN_KEY=ADMIN_KEY, VEERNET_LOG_FORMAT="json",
                      **FAST_LEASES)
    subprocess.run([sys.executable, "-m", "api.cli", "migrate"], env=env, cwd=code_root(), check=True, timeout=120,
                   capture_output=True)
    port = free_port()
    data = tmp_path / "data"
    stack = Stack(env=env, logs=tmp_path, database_url=f"sqlite:///{data / 'veernet.db'}",
                  broker_url=f"sqla+sqlite:///{data / 'broker.db'}", api_url=f"http://127.0.0.1:{port}",
                  api=api_proc(env, tmp_path, port, reaper=True), reaper=None,
                  workers=[worker_proc("train-dash", env, tmp_path),
                           worker_proc("segment-dash", env, tmp_path, queue="segment")])
    stack.client.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
    try:
        yield stack.start()
    finally:
        stack.stop()


@pytest.fixture
def page(artefacts: Path) -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium (scripts/ensure-services)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.errors = []  # type: ignore[attr-defined]
        page.on("pageerror", lambda error: page.errors.append(str(error)))  # type: ignore[attr-defined]
        page.outside = []  # type: ignore[attr-defined]
        page.on("request", lambda r: r.url.startswith(("http://127.0.0.1", "blob:", "data:"))
                or page.outside.append(r.url))  # type: ignore[attr-defined]
        try:
            yield page
        finally:
            page.screenshot(path=str(artefacts / "last-page.png"), full_page=True)
            context.close()
            browser.close()
    print(f"\ndashboard screenshots: {artefacts}")


def shot(page: Any, artefacts: Path, name: str) -> None:
    page.screenshot(path=str(artefacts / f"{name}.png"), full_page=True)


def test_submit_watch_download_and_digitise_in_the_browser(stack: Stack, page: Any, artefacts: Path,
                                                           tmp_path: Path) -> None:
    page.goto(stack.api_url + "/")
    page.locator("#key-panel").wait_for(state="visible")  # keys are on: the page's first API call got 401
    assert "needs an API key" in page.locator("#key-reason").inner_text()
    shot(page, artefacts, "01-key-asked")
    page.fill("#key-input", ADMIN_KEY)
    page.click("#key-save")
    page.locator("#jobs-total").filter(has_text="0 job(s)").wait_for()

    # Submit a tiny training job from the page and follow it to its own page.
    page.fill("#job-config", json.dumps(CONFIG))
    page.click("#submit-job")
    page.wait_for_url("**/#/jobs/*")
    job_id = int(page.url.rsplit("/", 1)[1])
    # Running (a fast machine may finish a tiny job between two polls: then it is seen succeeded), with steps done.
    page.locator('#job-status[data-status="running"], #job-status[data-status="succeeded"]').wait_for()
    page.locator('#job-progress:not([data-fraction=""]):not([data-fraction="0"])').wait_for()
    shot(page, artefacts, "02-job-running")
    page.locator('#job-status[data-status="succeeded"]').wait_for()
    epochs = CONFIG["epochs"]
    page.locator(f'#loss-svg[data-points="{epochs}"]').wait_for()  # one point per committed epoch
    page.locator(f"#checkpoints tbody tr:nth-child({epochs})").wait_for()
    shot(page, artefacts, "03-job-succeeded")
    assert page.locator("#job-progress").get_attribute("data-fraction") == "1"
    # Epochs count work done, as the CLI and the API do: a finished two-epoch job is at 2/2.
    assert page.locator("#job-progress-text").inner_text().endswith(f"epochs done {epochs}/{epochs}")
    assert page.locator('#iou-svg polyline[data-series="IoU (curves, mean)"]').count() == 1
    kinds = page.locator("#timeline tbody tr").evaluate_all("rows => rows.map(r => r.dataset.kind)")
    assert kinds[:2] == ["queued", "claimed"] and kinds[-1] == "succeeded" and kinds.count("checkpoint") == epochs
    assert page.locator('#attempts li[data-attempt="1"]').inner_text().startswith("Attempt 1 claimed")

    # Download the newest checkpoint through the page (the key goes with it) and check it against the API.
    registered = stack.client.get(f"/jobs/{job_id}/checkpoints").json()
    newest = registered[-1]
    with page.expect_download() as download_info:
        page.click(f'#checkpoints a.download[data-checkpoint="{newest["id"]}"]')
    saved = tmp_path / "downloaded.pt"
    download_info.value.save_as(saved)
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == newest["sha256"]
    assert saved.stat().st_size == newest["size"]
    assert download_info.value.suggested_filename.startswith(f"job-{job_id}-")

    # The jobs table shows it finished.
    page.click("#nav-jobs")
    page.locator(f'#jobs-table tr[data-job="{job_id}"][data-status="succeeded"]').wait_for()
    assert page.locator(f'#jobs-table tr[data-job="{job_id}"] td.eta').inner_text() == "done"
    assert page.locator(f'#jobs-table tr[data-job="{job_id}"] td.epochs').inner_text() == f"{epochs}/{epochs}"
    shot(page, artefacts, "04-jobs-table")

    # Digitise a synthetic scan on the segment page: the traced curves come back over it and against depth.
    from veernet_core.synth import generate

    log = next(g for g in (generate(seed=90_210, index=i, scale=0.12, classes=3) for i in range(50))
               if len(g.curves) == 1 and g.curves[0].style == "solid")
    scan = tmp_path / "synthetic-log.png"
    Image.fromarray(log.image).save(scan)
    page.click("#nav-segment")
    page.set_input_files("#scan-file", str(scan))
    page.fill("#segment-options", json.dumps({"calibration": log.calibration(), "well": "SYNTH-1"}))
    page.locator("#scan-preview").wait_for(state="visible")
    page.click("#segment-submit")
    page.wait_for_url("**/#/segment/*")
    segment_id = int(page.url.rsplit("/", 1)[1])
    page.locator('#segment-state[data-done="true"]').wait_for()
    page.locator('#scan-image[data-loaded="true"]').wait_for()
    shot(page, artefacts, "05-segment-result")
    result = stack.client.get(f"/jobs/{segment_id}/result").json()
    found = sum(v is not None for curve in result["curves"] for v in curve["values"])
    assert found > len(result["depth"]["values"]) // 2, "the bundled model should trace most of the curve"
    assert int(page.locator("#trace-svg").get_attribute("data-polylines") or 0) >= 1
    assert int(page.locator("#depth-chart").get_attribute("data-samples") or 0) == found
    assert page.locator("#scan-image").evaluate("img => img.naturalWidth") == log.image.shape[1]

    # A full-resolution scan: the bundled model reads it at its own scale, and the page says so.
    full = generate(seed=90_210, index=FULL_RESOLUTION_INDEX, scale=1.0, classes=3)
    assert full.image.shape[1] <= 4000, "the seed's first full-resolution log at most 4,000 px wide"
    Image.fromarray(full.image).save(scan)
    page.click("#nav-segment")
    page.set_input_files("#scan-file", str(scan))
    page.fill("#segment-options", json.dumps({"calibration": full.calibration()}))
    page.click("#segment-submit")
    page.wait_for_url(f"**/#/segment/{segment_id + 1}")
    page.locator('#segment-state[data-done="true"]').wait_for()
    model_size = stack.client.get(f"/jobs/{segment_id + 1}/result").json()["inference"]["model_size"]
    assert f"read at the model's scale ({model_size[0]} x {model_size[1]} px" in page.locator(
        "#segment-state").inner_text()
    assert page.errors == [] and page.outside == [], (page.errors, page.outside)  # type: ignore[attr-defined]

    # Every line the worker logged while it ran the job is JSON, and names the job and its attempt.
    lines = [json.loads(line) for line in stack.workers[0].output().splitlines() if line.startswith("{")]
    claimed = [r for r in lines if f"job {job_id}: claimed as attempt 1" in r["message"]]
    assert claimed and claimed[0]["job_id"] == job_id and claimed[0]["attempt"] == 1, lines[-20:]



def test_analyse_a_full_page_scan_in_the_browser(stack: Stack, page: Any, artefacts: Path, tmp_path: Path) -> None:
    """A generated page uploaded on #/analyse: its sections and tracks come back with their confidences, and
    the proposal can be downloaded as it is."""
    from veernet_core.digitise.layout.ocr import find_tesseract
    from veernet_core.page_synth import PageOptions, generate_page

    generated = generate_page(8, 2, PageOptions(dpi=150, turn=0, bitonal=True, sections=2, unit="ft"))
    scan = tmp_path / "page.tif"
    Image.fromarray(generated.image).convert("1").save(scan, compression="group4", dpi=(150, 150))
    page.goto(stack.api_url + "/")
    page.locator("#key-panel").wait_for(state="visible")
    page.fill("#key-input", ADMIN_KEY)
    page.click("#key-save")
    page.click("#nav-analyse")
    page.set_input_files("#page-file", str(scan))
    page.click("#analyse-submit")
    page.locator("#analyse-result .section-card").first.wait_for()
    shot(page, artefacts, "06-page-analysed")
    cards = page.locator("#analyse-result .section-card")
    assert cards.count() == len(generated.spec.sections)
    for k, truth in enumerate(generated.spec.sections):
        card = cards.nth(k)
        assert card.locator("tr.track-row").count() == len(truth.tracks)
        if find_tesseract() is not None:
            assert truth.scale_name in card.inner_text()
    assert "Turned 0 degrees clockwise" in page.locator("#analyse-orientation").inner_text()
    assert page.locator("#error").is_hidden(), "the jobs page's poll, left in flight, stopped with its page"
    with page.expect_download() as download_info:
        page.click("#proposal-download")
    saved = tmp_path / "proposal.json"
    download_info.value.save_as(saved)
    proposal = json.loads(saved.read_text())
    assert proposal == stack.client.post("/scans/analyse", files={"file": ("page.tif", scan.read_bytes())},
                                         data={}).json()
    assert page.errors == [] and page.outside == [], (page.errors, page.outside)  # type: ignore[attr-defined]
