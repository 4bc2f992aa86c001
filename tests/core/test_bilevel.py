"""1-bit scans: told from gray ones and from each other (`bilevel.one_bit_kind`), marked as the service
reads them (`pipeline.readable_scan`), and their inks' tones not held against the calibration's hints
(`identity`): a threshold makes light ink as black as dark."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.core.naming_testkit import Drawn, RenderedLog, render, share_on_own_curve
from veernet_core.digitise.bilevel import one_bit_kind
from veernet_core.digitise.calibration import Calibration
from veernet_core.digitise.curves import Digitised, digitise
from veernet_core.digitise.ink import ScanPixels
from veernet_core.digitise.pipeline import readable_scan
from veernet_core.digitise.rescale import Resampling
from veernet_core.synth_scan import BAYER_8

DARK_SOLID, LIGHT_DASHED = Drawn("solid", "dark"), Drawn("dashed", "light")


def thresholded(gray: np.ndarray) -> np.ndarray:
    """A 1-bit scan as archive scanners threshold: black below halfway from the paper to the light ink."""
    paper = float(np.median(gray))
    return np.where(gray < (paper + 165.0) / 2, 0, 255).astype(np.uint8)


def dithered(gray: np.ndarray) -> np.ndarray:
    """A 1-bit scan by ordered dither of the gray as it is (the paper's own tone in dots)."""
    h, w = gray.shape
    cells = np.tile(BAYER_8, (h // 8 + 1, w // 8 + 1))[:h, :w]
    return np.where(1.0 - gray / 255.0 > (cells + 0.5) / 64, 0, 255).astype(np.uint8)


def jpeg(gray: np.ndarray, quality: int) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(gray).save(buffer, format="JPEG", quality=quality)
    return np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("L"), dtype=np.uint8)


def _calibration(log: RenderedLog, hints: list[dict[str, Any]]) -> Calibration:
    curves = [{"mnemonic": f"C{k}", "unit": "API", "left": 0, "right": 150, **h} for k, h in enumerate(hints)]
    return Calibration.from_dict(log.calibration(curves), *log.scan.gray.shape)


def _reduced(gray: np.ndarray) -> Resampling:
    """A full-resolution scan read at half its size: the service marks and cleans such scans."""
    return Resampling(0.1, 0.2, False, gray.shape, (gray.shape[0] // 2, gray.shape[1] // 2))


def test_a_gray_scan_is_not_1_bit_and_a_1_bit_one_is_told_threshold_from_dither() -> None:
    log = render(0, [DARK_SOLID, LIGHT_DASHED])
    gray = log.scan.gray
    assert one_bit_kind(gray) is None
    assert one_bit_kind(thresholded(gray)) == "threshold"
    assert one_bit_kind(dithered(gray)) == "dither"
    # A JPEG of a 1-bit scan rings about its edges but is still 1-bit; a JPEG of a gray one is gray.
    assert one_bit_kind(jpeg(dithered(gray), 44)) == "dither"
    assert one_bit_kind(jpeg(thresholded(gray), 44)) == "threshold"
    assert one_bit_kind(jpeg(gray, 44)) is None
    assert one_bit_kind(np.full((40, 60), 255, np.uint8)) is None  # blank paper: nothing says which


def test_the_service_marks_a_reduced_1_bit_scan_and_leaves_a_colour_or_unreduced_one_as_it_is() -> None:
    log = render(0, [DARK_SOLID, LIGHT_DASHED])
    calibration = _calibration(log, [{}, {}])
    one_bit = thresholded(log.scan.gray)
    assert readable_scan(ScanPixels(one_bit), calibration, _reduced(one_bit)).one_bit == "threshold"
    assert readable_scan(ScanPixels(dithered(log.scan.gray)), calibration, _reduced(one_bit)).one_bit == "dither"
    assert readable_scan(ScanPixels(log.scan.gray), calibration, _reduced(one_bit)).one_bit is None
    as_it_is = Resampling(0.1, 0.1, False, one_bit.shape, one_bit.shape)
    assert readable_scan(ScanPixels(one_bit), calibration, as_it_is).one_bit is None
    rgb = np.repeat(one_bit[..., None], 3, axis=2)
    assert readable_scan(ScanPixels(one_bit, rgb), calibration, _reduced(one_bit)).one_bit is None


def _read(log: RenderedLog, one_bit: np.ndarray, hints: list[dict[str, Any]],
          page_kind: str | None = None) -> Digitised:
    calibration = _calibration(log, hints)
    scan = readable_scan(ScanPixels(one_bit), calibration, _reduced(one_bit), page_kind)
    return digitise(log.probabilities, calibration, scan=scan)


def test_a_track_cut_from_a_page_is_read_as_its_page_whatever_its_own_dots_say() -> None:
    """A track's crop is marked with its page's 1-bit kind where it is given (`page_kind`, which
    `section.read_section` reads off the whole page): a thresholded page's track with a broken light grid and
    specks of dirt reads as dithered on its own. Marked as its page (here a crop whose dots read as a dither, on
    a page that reads thresholded), its tone hints change nothing but a note, as on any thresholded scan; read
    on its own, the light curve is said to look dark."""
    log = render(0, [DARK_SOLID, LIGHT_DASHED])
    crop = dithered(thresholded(log.scan.gray).astype(np.float64) * 0.5 + 64)  # its black and paper both dotted
    assert one_bit_kind(crop) == "dither"
    hints = [{"style": "dashed", "ink": "light"}, {"style": "solid", "ink": "dark"}]
    calibration = _calibration(log, hints)
    assert readable_scan(ScanPixels(crop), calibration, _reduced(crop), "threshold").one_bit == "threshold"
    assert readable_scan(ScanPixels(crop), calibration, _reduced(crop)).one_bit == "dither"
    as_page = _read(log, crop, hints, "threshold")
    for curve in as_page.curves:
        assert any("the scan is 1-bit (thresholded): ink tones cannot be read" in w for w in curve.warnings)
        assert not any("looks dark" in w for w in curve.warnings), curve.warnings
    alone = _read(log, crop, hints)
    assert not any("the scan is 1-bit (thresholded)" in w for c in alone.curves for w in c.warnings)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_on_a_thresholded_scan_tone_hints_change_nothing_but_a_note(seed: int) -> None:
    log = render(seed, [DARK_SOLID, LIGHT_DASHED])
    assert log.crossings(0, 1) >= 8, "the curves must cross for the test to mean anything"
    one_bit = thresholded(log.scan.gray)
    # The threshold made the light curve as black as the dark one.
    light_ink = one_bit[np.rint(log.rows[1]).astype(np.int64), np.arange(one_bit.shape[1])]
    assert np.mean(light_ink == 0) > 0.5
    hinted = _read(log, one_bit, [{"style": "dashed", "ink": "light"}, {"style": "solid", "ink": "dark"}])
    styles = _read(log, one_bit, [{"style": "dashed"}, {"style": "solid"}])
    # The tones are neither evidence nor contradicted: traces and names as with the styles alone.
    for a, b in zip(hinted.curves, styles.curves, strict=True):
        np.testing.assert_array_equal(a.trace.u, b.trace.u)
        assert a.identity == b.identity
        assert not any(w.startswith("declared ink") and ", but the trace named" in w for w in a.warnings), a.warnings
        assert any("the scan is 1-bit (thresholded): ink tones cannot be read" in w for w in a.warnings)
    for curve, own in zip(hinted.curves, (1, 0), strict=True):
        if curve.identity == "hinted":  # a name given is right
            assert share_on_own_curve(curve.trace.row, log.rows[own], [log.rows[1 - own]]) >= 0.8


def test_a_thresholded_scan_read_as_gray_holds_the_light_hint_against_its_black_curve() -> None:
    """Why the service marks 1-bit scans: unmarked, the same scan warns that the light curve looks dark and
    leaves its name in doubt, though its style names it."""
    log = render(0, [DARK_SOLID, LIGHT_DASHED])
    one_bit = thresholded(log.scan.gray)
    hints = [{"style": "dashed", "ink": "light"}, {"style": "solid", "ink": "dark"}]
    unmarked = digitise(log.probabilities, _calibration(log, hints), scan=ScanPixels(one_bit))
    assert any("declared ink light, but the trace named C0 looks dark" in w for w in unmarked.curves[0].warnings)
    assert [c.identity for c in unmarked.curves] == ["ambiguous", "ambiguous"]
    assert [c.identity for c in _read(log, one_bit, hints).curves] == ["hinted", "hinted"]


def test_a_1_bit_scan_says_nothing_of_tones_where_none_tells_curves_apart() -> None:
    log = render(0, [DARK_SOLID, Drawn("dashed", "dark")])
    hints = [{"style": "dashed", "ink": "dark"}, {"style": "solid", "ink": "dark"}]
    result = _read(log, thresholded(log.scan.gray), hints)
    assert [c.warnings for c in result.curves] == [(), ()]


def test_a_dithered_scan_is_read_as_a_gray_one() -> None:
    """A dither's strokes read black at full resolution, but so do its paper's dots under a broken curve's
    gaps: its tones keep their warnings, and it gets no 1-bit note (bilevel.py says why)."""
    log = render(0, [DARK_SOLID, LIGHT_DASHED])
    one_bit = dithered(log.scan.gray)
    hints = [{"style": "dashed", "ink": "light"}, {"style": "solid", "ink": "dark"}]
    calibration = _calibration(log, hints)
    marked = readable_scan(ScanPixels(one_bit), calibration, _reduced(one_bit))
    assert marked.one_bit == "dither"
    result = digitise(log.probabilities, calibration, scan=marked)
    unmarked = digitise(log.probabilities, calibration, scan=ScanPixels(marked.gray))
    for a, b in zip(result.curves, unmarked.curves, strict=True):
        np.testing.assert_array_equal(a.trace.u, b.trace.u)
        assert (a.identity, a.warnings) == (b.identity, b.warnings)
        assert not any("1-bit" in w for w in a.warnings)


@pytest.mark.parametrize("seed", [0, 1])
def test_curves_told_apart_only_by_tone_are_left_in_doubt_on_a_thresholded_scan(seed: int) -> None:
    """A dark and a light solid curve, thresholded to black alike: nothing left tells them apart, so both
    names are flagged, each says its tone went unread, and the result's warnings say to check."""
    from veernet_core.digitise.export import ExportMeta, to_json

    log = render(seed, [DARK_SOLID, Drawn("solid", "light")])
    result = _read(log, thresholded(log.scan.gray), [{"ink": "light"}, {"ink": "dark"}])
    assert [c.identity for c in result.curves] == ["ambiguous", "ambiguous"]
    assert all(any("1-bit (thresholded)" in w for w in c.warnings) for c in result.curves)
    warnings = to_json(result, ExportMeta("0" * 64))["warnings"]
    assert isinstance(warnings, list)
    assert any("C0, C1: neither the calibration nor the scan tells" in w for w in warnings)
