"""Writers: LAS 2.0 re-read by lasio and checked by lascheck, CSV and JSON shapes, mask and overlay PNGs."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path

import lasio
import numpy as np
import pytest
from PIL import Image, ImageDraw

from veernet_core.digitise.calibration import Calibration, CurveScale, DepthScale
from veernet_core.digitise.curves import Digitised, digitise
from veernet_core.digitise.export import LAS_NULL, PALETTE, ExportMeta, mask_png, overlay_png, to_csv, to_json, to_las
from veernet_core.digitise.tracer import ColumnTrace

HEIGHT, WIDTH, TOP, BOTTOM = 64, 300, 4.0, 59.0
META = ExportMeta("ab" * 32, "checkpoint:42", scan="well-7.png", well="WELL 7",
                  created="2026-01-02T03:04:05Z")


def tent_map(rows: np.ndarray) -> np.ndarray:
    grid = np.arange(HEIGHT, dtype=np.float64)[:, None]
    weights = np.clip(1.0 - np.abs(grid - rows[None, :]), 0.0, 1.0)
    return np.where(np.isfinite(rows)[None, :], weights, 0.0).astype(np.float32)


@pytest.fixture
def result() -> Digitised:
    """Two curves in separate classes; GR stops a third of the way down, ILD is on a log scale."""
    x = np.arange(WIDTH) / WIDTH
    gr_rows = TOP + (0.2 + 0.1 * np.sin(6 * x)) * (BOTTOM - TOP)
    gr_rows[WIDTH // 3:] = np.nan  # logged over the upper third only: a long gap, null in the outputs
    ild_rows = TOP + (0.6 + 0.2 * x) * (BOTTOM - TOP)
    probs = np.stack([np.zeros((HEIGHT, WIDTH), np.float32), tent_map(gr_rows), tent_map(ild_rows)])
    calibration = Calibration(DepthScale.from_ends(1500.0, 1500.0 + (WIDTH - 1) * 0.1, "m", WIDTH),
                              (CurveScale("GR", "API", 0.0, 150.0), CurveScale("ILD", "ohm.m", 0.2, 2000.0, True)),
                              TOP, BOTTOM, 0.5)
    return digitise(probs, calibration)


def test_las_reads_back_with_lasio(result: Digitised) -> None:
    las = lasio.read(io.StringIO(to_las(result, META)))
    assert las.version["VERS"].value == 2.0 and las.version["WRAP"].value == "NO"
    assert las.well["STRT"].value == 1500.0 and las.well["STEP"].value == 0.5
    assert las.well["STOP"].value == float(result.depth[-1]) and las.well["NULL"].value == LAS_NULL
    assert las.well["STRT"].unit == "M" and las.curves["DEPT"].unit == "M"
    assert las.keys() == ["DEPT", "GR", "ILD"]
    np.testing.assert_allclose(las["DEPT"], result.depth)
    for name, curve in zip(("GR", "ILD"), result.curves, strict=True):
        read = las[name]
        assert np.array_equal(np.isnan(read), np.isnan(curve.values))  # lasio turns NULL back into NaN
        np.testing.assert_allclose(read[~np.isnan(read)], curve.values[~np.isnan(curve.values)], rtol=1e-5)
    assert np.isnan(las["GR"]).sum() > len(result.depth) // 2
    assert las.params["MODEL"].value == META.model_sha256
    assert las.params["MODELID"].value == "checkpoint/42"  # a colon would end the LAS value
    assert las.well["DATE"].value == "2026-01-02 03.04.05 UTC" and las.well["WELL"].value == "WELL 7"
    assert las.params["DDEPA"].value == 1500.0 and las.params["TRKTOP"].value == TOP
    assert "0.2 2000 LOG" in str(las.params["SCL2"].value)


def test_las_rows_are_lasios_own(result: Digitised) -> None:
    """The ~ASCII rows are written as lasio's writer writes them, value for value: the same file as lasio
    writing every row, for values of every size and sign, NULLs and a value too long for its field."""
    values = np.array([0.0, -0.0, 1.5, -2.25, 123456.789, -1.234567e-5, 3.3e21, -7.7e-300, np.nan, 1e100])
    rows = np.resize(values, result.depth.size)
    wide = dataclasses.replace(result, curves=[dataclasses.replace(result.curves[0], values=rows),
                                              dataclasses.replace(result.curves[1], values=rows[::-1].copy())])
    text = to_las(wide, META)
    las = lasio.read(io.StringIO(text))
    everything = lasio.LASFile()
    everything.version, everything.well = las.version, las.well
    everything.params, everything.other = las.params, las.other
    for curve in las.curves:
        everything.append_curve(curve.mnemonic, curve.data, unit=curve.unit, descr=curve.descr)
    buffer = io.StringIO()
    everything.write(buffer, version=2.0, wrap=False, fmt="%.6g")
    lasio_rows = [line for line in buffer.getvalue().split("~A", 1)[1].splitlines()[1:] if line.strip()]
    assert text.split("~A", 1)[1].splitlines()[1:] == lasio_rows
    assert any("1e+100" in line for line in lasio_rows) and any("-999.25" in line for line in lasio_rows)


def test_las_writes_the_null_value_in_the_data(result: Digitised) -> None:
    text = to_las(result, META)
    data = text.split("~A", 1)[1].splitlines()[1:]
    assert any("-999.25" in line for line in data)
    assert "\n\n" not in text


def test_las_passes_lascheck(result: Digitised, tmp_path: Path) -> None:
    lascheck = pytest.importorskip("lascheck", reason="lascheck is the LAS 2.0 validator named in the issue")
    path = tmp_path / "result.las"
    path.write_text(to_las(result, META))
    las = lascheck.read(str(path))
    assert las.get_non_conformities() == []
    assert las.check_conformity()


def test_las_of_a_resampled_scan_records_the_size_read_and_conforms(result: Digitised, tmp_path: Path) -> None:
    lascheck = pytest.importorskip("lascheck", reason="lascheck is the LAS 2.0 validator named in the issue")
    path = tmp_path / "resampled.las"
    path.write_text(to_las(result, dataclasses.replace(META, read_at="70x800")))
    assert lascheck.read(str(path)).get_non_conformities() == []
    assert lasio.read(str(path)).params["READAT"].value == "70x800"
    assert "READAT" not in lasio.read(io.StringIO(to_las(result, META))).params, "only when resampled"


def test_a_mask_of_model_grid_probabilities_is_drawn_at_the_scan_size() -> None:
    probs = np.zeros((2, 8, 20), np.float32)
    probs[0], probs[1, 4, :] = 1.0, 1.0  # background everywhere but row 4
    probs[0, 4, :] = 0.0
    mask = np.asarray(Image.open(io.BytesIO(mask_png(probs, (80, 200)))))
    assert mask.shape == (80, 200)
    assert mask[44, 100] > 200 and mask[10, 100] == 0, "the curve row lands where it lies on the scan"


def test_las_in_feet_and_a_non_round_step_still_conform(result: Digitised, tmp_path: Path) -> None:
    lascheck = pytest.importorskip("lascheck", reason="lascheck is the LAS 2.0 validator named in the issue")
    c = result.calibration
    feet = Calibration(DepthScale.from_ends(4921.26, 4921.26 + (WIDTH - 1) * 0.3281, "ft", WIDTH), c.curves,
                       c.track_top, c.track_bottom, 0.25)
    probs = np.stack([np.zeros((HEIGHT, WIDTH), np.float32), *(tent_map(t.trace.row) for t in result.curves)])
    path = tmp_path / "feet.las"
    path.write_text(to_las(digitise(probs, feet), META))
    assert lascheck.read(str(path)).get_non_conformities() == []
    assert lasio.read(str(path)).well["STRT"].value == 4921.5


def test_csv_has_one_row_per_depth_and_empty_cells_for_null(result: Digitised) -> None:
    rows = list(csv.reader(io.StringIO(to_csv(result))))
    assert rows[0] == ["DEPT [m]", "GR [API]", "GR confidence", "GR wrapped", "GR wrap unexpected",
                       "ILD [ohm.m]", "ILD confidence", "ILD wrapped", "ILD wrap unexpected"]
    assert len(rows) == 1 + result.depth.size
    gr = [r[1] for r in rows[1:]]
    assert gr.count("") == int(np.isnan(result.curves[0].values).sum())
    assert float(rows[1][0]) == result.depth[0]
    assert float(rows[1][5]) == pytest.approx(result.curves[1].values[0], rel=1e-9)


def test_json_has_a_value_and_a_confidence_per_sample_and_null_where_no_curve(result: Digitised) -> None:
    data = to_json(result, META)
    json.dumps(data, allow_nan=False)  # strict JSON: no NaN anywhere
    n = result.depth.size
    assert data["depth"] == {"unit": "m", "step": 0.5, "start": 1500.0, "stop": float(result.depth[-1]),
                             "values": result.depth.tolist()}
    curves = data["curves"]
    assert isinstance(curves, list)
    gr, ild = curves
    assert len(gr["values"]) == len(gr["confidence"]) == len(gr["wrapped"]) == len(gr["wrap_unexpected"]) == n
    assert all((v is None) == (c is None) for v, c in zip(gr["values"], gr["confidence"], strict=True))
    assert gr["values"][-1] is None and gr["values"][0] is not None
    assert None not in ild["values"] and ild["unit"] == "ohm.m"
    assert data["model"] == {"sha256": META.model_sha256, "id": META.model_id}
    assert Calibration.from_dict(data["calibration"], HEIGHT, WIDTH) == result.calibration  # type: ignore[arg-type]


def test_mask_png_is_the_curve_probability(result: Digitised) -> None:
    probs = np.zeros((2, HEIGHT, WIDTH), np.float32)
    probs[0] = 1.0
    probs[0, 10, 20], probs[1, 10, 20] = 0.25, 0.75
    mask = np.asarray(Image.open(io.BytesIO(mask_png(probs))))
    assert mask.shape == (HEIGHT, WIDTH) and mask[10, 20] == round(0.75 * 255) and mask[0, 0] == 0


def test_mask_png_is_a_valid_8_bit_gray_png_of_every_pixel() -> None:
    """The mask's own PNG writer (unfiltered rows): Pillow reads back exactly the rounded probabilities."""
    rng = np.random.default_rng(3)
    curve = rng.random((37, 129)).astype(np.float32)
    curve[0, :5], curve[-1, -5:] = 0.0, 1.0
    probs = np.stack([1.0 - curve, curve])
    picture = Image.open(io.BytesIO(mask_png(probs)))
    picture.load()  # decodes every row and checks the chunks' CRCs
    assert picture.mode == "L" and picture.size == (129, 37)
    expected = np.clip(np.rint((1.0 - probs[0]) * 255.0), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(np.asarray(picture), expected)


def test_overlay_draws_each_curve_in_its_colour_over_the_scan(result: Digitised) -> None:
    scan = np.full((HEIGHT, WIDTH), 220, np.uint8)
    overlay = np.asarray(Image.open(io.BytesIO(overlay_png(scan, result))).convert("RGB"))
    assert overlay.shape == (HEIGHT, WIDTH, 3)
    for k, curve in enumerate(result.curves):
        col = 50
        row = int(round(curve.trace.row[col]))
        window = overlay[max(row - 1, 0): row + 2, col]
        assert any(tuple(px) == PALETTE[k] for px in window), f"curve {k} not drawn at column {col}"
    assert tuple(overlay[HEIGHT // 2, WIDTH - 1]) != PALETTE[0]  # GR is null there: nothing drawn


def _segment_by_segment(scan: np.ndarray, d: Digitised) -> np.ndarray:
    """The overlay's lines as an RGB picture drawn one segment per column pair (no borders, no names)."""
    canvas = Image.fromarray((scan.astype(np.float32) * 0.6 + 102.0).astype(np.uint8), mode="L").convert("RGB")
    pen = ImageDraw.Draw(canvas)
    for k, curve in enumerate(d.curves):
        t = curve.trace
        for col in range(t.row.size - 1):
            if np.isfinite(t.row[col]) and np.isfinite(t.row[col + 1]) and t.level[col] == t.level[col + 1]:
                thin = bool(t.bridged[col] or t.bridged[col + 1])
                pen.line([(col, float(t.row[col])), (col + 1, float(t.row[col + 1]))], fill=PALETTE[k],
                         width=1 if thin else 2)
    return np.asarray(canvas)


def test_overlay_polylines_and_palette_give_the_picture_of_one_rgb_segment_per_column(result: Digitised) -> None:
    """The overlay draws stretches of one width as polylines on palette indices; away from the track
    borders and the curve names, its pixels are those of an RGB drawing segment by segment, through
    bridged stretches, wraps and nulls."""
    rng = np.random.default_rng(5)
    scan = rng.integers(0, 256, (HEIGHT, WIDTH), dtype=np.uint8)
    first = result.curves[0]
    trace = first.trace
    bridged, level, row = trace.bridged.copy(), trace.level.copy(), trace.row.copy()
    bridged[20:35] = bridged[60:61] = True
    level[70:90] = 1
    row[40:42] = np.nan
    edited = ColumnTrace(trace.u, level, row, trace.confidence, bridged)
    curves = [type(first)(first.mnemonic, first.unit, first.values, first.confidence, first.wrapped, edited,
                          first.wrap_unexpected),
              *result.curves[1:]]
    d = Digitised(result.depth, result.depth_unit, result.step, curves, result.calibration, result.image_size)
    picture = Image.open(io.BytesIO(overlay_png(scan, d)))
    assert picture.mode == "P"
    overlay = np.asarray(picture.convert("RGB"))
    expected = _segment_by_segment(scan, d)
    compared = np.ones((HEIGHT, WIDTH), dtype=bool)
    compared[[int(TOP), int(BOTTOM)], :] = False  # the dotted borders
    compared[:, :40] = False  # the names, drawn beside each curve's first point
    assert compared.sum() > 0.8 * compared.size
    np.testing.assert_array_equal(overlay[compared], expected[compared])
    assert (overlay[compared] == np.asarray(PALETTE[0])).all(axis=-1).any()  # a curve is drawn there


def test_a_single_sample_cannot_make_a_las_file(result: Digitised) -> None:
    short = Digitised(result.depth[:1], "m", 0.5, result.curves, result.calibration, result.image_size)
    with pytest.raises(ValueError, match="at least two depth samples"):
        to_las(short, META)
