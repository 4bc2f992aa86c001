"""`veernet analyse` against a real embedded service (tests/cli/conftest.py): the summary a user sees, the
proposal written to disk, and one error line for what cannot be analysed."""

from __future__ import annotations

import io
import json
import subprocess

import pytest
import yaml
from cli_stack import CliService
from PIL import Image

from api.cli.analyse import _curve_text
from veernet_core.digitise.layout.ocr import find_tesseract
from veernet_core.page_synth import PageOptions, generate_page

pytestmark = pytest.mark.e2e
OPTIONS = PageOptions(dpi=150, turn=0, bitonal=True, sections=1, unit="ft", first_section_in=(4.0, 5.0))


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def test_analyse_shows_the_layout_and_writes_the_proposal(cli_service: CliService) -> None:
    cli = cli_service.cli
    page = generate_page(3, 1, OPTIONS)
    buffer = io.BytesIO()
    Image.fromarray(page.image).convert("1").save(buffer, format="TIFF", compression="group4", dpi=(150, 150))
    (cli.cwd / "page.tif").write_bytes(buffer.getvalue())

    said = _ok(cli("analyse", "page.tif", "-o", "calibration.yaml", timeout_s=180))
    assert "turned 0 degrees clockwise" in said and "section 1: rows" in said
    assert "wrote the proposal to calibration.yaml" in said
    proposal = yaml.safe_load((cli.cwd / "calibration.yaml").read_text())
    section, truth = proposal["sections"][0], page.spec.sections[0]
    extents = [(t["extent"]["value"]["left"], t["extent"]["value"]["right"]) for t in section["tracks"]]
    assert len(extents) == len(truth.tracks)
    assert all(abs(a - t.left) <= 2 and abs(b - t.right) <= 2 for (a, b), t in zip(extents, truth.tracks, strict=True))
    if find_tesseract() is not None:
        assert section["scale"]["value"] == truth.scale_name
        assert f"{truth.scale_name}" in said

    as_json = json.loads(_ok(cli("analyse", "page.tif", "--json", timeout_s=180)))
    assert as_json["sections"][0]["rows"] == section["rows"]


def test_a_file_that_is_not_one_page_is_one_error_line(cli_service: CliService) -> None:
    cli = cli_service.cli
    pages = [Image.new("L", (100, 200), 240) for _ in range(2)]
    out = io.BytesIO()
    pages[0].save(out, format="TIFF", save_all=True, append_images=pages[1:])
    (cli.cwd / "two.tif").write_bytes(out.getvalue())
    result = cli("analyse", "two.tif")
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and "2 pages" in line
    missing = cli("analyse", "missing.tif")
    assert missing.returncode == 1 and missing.stderr.startswith("error: cannot read the scan missing.tif")


def test_a_curves_line_shows_the_ink_and_weight_read_and_nothing_for_those_not_read() -> None:
    def field(value: object) -> dict[str, object]:
        return {"value": value, "confidence": 0.9 if value is not None else 0.0, "evidence": ""}
    curve = {"mnemonic": field("GR"), "unit": field("API"), "left": field(0.0), "right": field(150.0),
             "style": field("dashed"), "ink": field("light"), "weight": field("thick")}
    assert _curve_text(curve) == "GR API 0..150 dashed light thick"
    curve.update(ink=field(None), weight=field(None), mnemonic=field(None))
    assert _curve_text(curve) == "? API 0..150 dashed"
    del curve["ink"], curve["weight"]  # a proposal from a service older than the legend's hints
    assert _curve_text(curve) == "? API 0..150 dashed"
