"""Page layout analysis on generated pages: what it proposes against the generator's truth, and what it does
with pages it cannot read."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pytest

from veernet_core.digitise.layout import analyse
from veernet_core.digitise.layout.analyse import analyse_image
from veernet_core.digitise.layout.depth import Grid, Label, Pattern, fit_depth, name_scale, weight_pattern
from veernet_core.digitise.layout.lines import Line, fit_lattice
from veernet_core.digitise.layout.ocr import find_tesseract
from veernet_core.digitise.layout.proposal import to_proposal
from veernet_core.digitise.layout.sections import find_sections
from veernet_core.page_draw import header_slot
from veernet_core.page_spec import PageSpec
from veernet_core.page_synth import PageOptions, generate_page

needs_tesseract = pytest.mark.skipif(find_tesseract() is None, reason="Tesseract is not installed "
                                     "(apt-get install tesseract-ocr tesseract-ocr-eng; make test does)")
SEED = 11
# Small pages, every scan variant: turned each way, gray and 1-bit, one and two sections, feet and metres.
PAGES = [PageOptions(dpi=dpi, turn=turn, bitonal=bitonal, sections=sections, unit=unit,
                     first_section_in=(5.0, 6.0), second_section_in=(2.5, 3.0))
         for dpi, turn, bitonal, sections, unit in [(150, 0, True, 2, "ft"), (200, 90, False, 1, "m"),
                                                     (300, 180, True, 2, "m"), (250, 270, False, 2, "ft")]]


@cache
def _analysed(k: int) -> tuple[PageSpec, dict[str, Any]]:
    page = generate_page(SEED, k, PAGES[k])
    return page.spec, to_proposal(analyse_image(page.image, float(page.spec.dpi)))


@pytest.mark.parametrize("k", range(len(PAGES)))
def test_orientation_sections_and_tracks_match_the_truth(k: int) -> None:
    spec, proposal = _analysed(k)
    assert proposal["orientation"]["turn"]["value"] == spec.scan.turn
    assert proposal["orientation"]["skew_deg"]["value"] == pytest.approx(spec.scan.skew_deg, abs=0.02)
    assert len(proposal["sections"]) == len(spec.sections)
    for found, truth in zip(proposal["sections"], spec.sections, strict=True):
        rows = found["rows"]["value"]
        assert abs(rows["top"] - truth.top) <= 2 and abs(rows["bottom"] - truth.bottom) <= 2
        assert len(found["tracks"]) == len(truth.tracks)
        for track, true_track in zip(found["tracks"], truth.tracks, strict=True):
            extent = track["extent"]["value"]
            assert abs(extent["left"] - true_track.left) <= 2 and abs(extent["right"] - true_track.right) <= 2
            assert track["grid"]["value"] == {"scale": true_track.grid, "divisions": true_track.divisions}
        column = found["depth_column"]["value"]
        assert abs(column["left"] - truth.depth_column[0]) <= 2 and abs(column["right"] - truth.depth_column[1]) <= 2
    header = proposal["header"]["value"]  # holds the true block (and any dirt that touches it)
    assert abs(header["top"] - spec.header[0]) <= 6
    assert spec.header[1] - 6 <= header["bottom"] < spec.sections[0].header_top


@needs_tesseract
def test_most_sections_get_a_depth_fit_and_the_others_say_what_to_supply() -> None:
    fitted = total = 0
    for k in range(len(PAGES)):
        _, proposal = _analysed(k)
        for number, section in enumerate(proposal["sections"], 1):
            total += 1
            if section["depth"]["ticks"]["value"] is not None:
                fitted += 1
            else:
                assert any(m.startswith(f"section {number}:") and "depth ticks" in m for m in proposal["messages"])
    assert fitted >= total - 1, f"{fitted} of {total} sections fitted"


@needs_tesseract
@pytest.mark.parametrize("k", range(len(PAGES)))
def test_the_depth_fit_and_scale_match_the_truth(k: int) -> None:
    spec, proposal = _analysed(k)
    for found, truth in zip(proposal["sections"], spec.sections, strict=True):
        depth = found["depth"]
        assert found["scale"]["value"] == truth.scale_name
        assert depth["unit"]["value"] == truth.scale.unit
        if depth["ticks"]["value"] is None:  # too few numbers read: left empty (counted in the test above)
            continue
        (row_a, depth_a), (row_b, depth_b) = depth["ticks"]["value"]
        rows = np.linspace(truth.top, truth.bottom, 50)
        fitted = depth_a + (rows - row_a) * (depth_b - depth_a) / (row_b - row_a)
        worst_rows = np.abs(fitted - truth.depth_at(rows)).max() * truth.rows_per_unit
        assert worst_rows <= 1.0, f"depth off by {worst_rows:.2f} px at worst"
        assert depth["rows_per_unit"]["value"] == pytest.approx(truth.rows_per_unit, rel=2e-3)
        assert depth["residual"] < truth.scale.minor


@needs_tesseract
def test_curve_names_are_mostly_read_and_rarely_wrong() -> None:
    """Names are proposed only where two differently prepared readings agree; a misreading that both share
    still gets through now and then (bench/analyse_eval.py counts them over many pages)."""
    read = wrong = 0
    for k in range(len(PAGES)):
        spec, proposal = _analysed(k)
        for found, truth in zip(proposal["sections"], spec.sections, strict=True):
            for track, true_track in zip(found["tracks"], truth.tracks, strict=True):
                names = {c.mnemonic for c in true_track.curves}
                for curve in track["curves"]:
                    if curve["mnemonic"]["value"] is None:
                        continue  # a line sample whose name went unread: left for the person
                    read += 1
                    wrong += curve["mnemonic"]["value"] not in names
    assert read >= 10 and wrong <= 0.1 * read, f"{wrong} of {read} names wrong"


@needs_tesseract
def test_every_curve_of_a_header_is_proposed_and_one_whose_name_went_unread_is_left_to_name() -> None:
    """A legend draws one line sample per curve: each sample under no read name is a curve too, with no name
    (for the person to supply) and a message saying so; its style read off its sample, its unit and scale ends
    where both readings of its line agree on them, and then right."""
    tracks = complete = unread = ends = 0
    for k in range(len(PAGES)):
        spec, proposal = _analysed(k)
        for found, truth in zip(proposal["sections"], spec.sections, strict=True):
            for track, true_track in zip(found["tracks"], truth.tracks, strict=True):
                tracks += 1
                assert len(track["curves"]) <= len(true_track.curves)
                complete += len(track["curves"]) == len(true_track.curves)
                rows = [c["header_row"] for c in track["curves"]]
                assert rows == sorted(rows)
                for curve in track["curves"]:
                    if curve["mnemonic"]["value"] is None:
                        unread += 1
                        k_true = header_slot(curve["header_row"], truth, len(true_track.curves), spec.dpi)
                        for side in ("unit", "left", "right", "style"):
                            if curve[side]["value"] is not None:
                                ends += 1
                                assert k_true is not None
                                assert curve[side]["value"] == getattr(true_track.curves[k_true], side)
        if any(c["mnemonic"]["value"] is None for s in proposal["sections"] for t in s["tracks"] for c in t["curves"]):
            said = proposal["messages"]
            assert any("names could not be read" in m and "supply each one's mnemonic" in m for m in said)
    assert complete >= 0.9 * tracks and unread >= 1, f"{complete} of {tracks} tracks complete, {unread} unread"
    assert ends >= 1, "no unit, scale end or style read on a line whose name went unread"


@needs_tesseract
def test_a_lone_zero_tesseract_misreads_in_its_line_is_read_again_as_a_number() -> None:
    """A generated page (tuning seed 20261124, page 1) whose GR's left end, a lone "0", the first reading of
    its header takes for ")": read again from its box as digits, it is 0, which its right end checks."""
    page = generate_page(20261124, 1)
    proposal = to_proposal(analyse_image(page.image, float(page.spec.dpi)))
    ends = {(c["mnemonic"]["value"], c["left"]["value"], c["right"]["value"])
            for s in proposal["sections"] for t in s["tracks"] for c in t["curves"]}
    assert ("GR", 0.0, 150.0) in ends, ends


@needs_tesseract
def test_a_unit_tesseract_reads_as_no_known_one_is_read_again_told_the_units_characters() -> None:
    """A generated page (tuning seed 20261124, page 11) where one of its GRs' units, "(API)", is read as no known
    unit by either reading of its header: read again from its box told the characters of units only, it is API."""
    page = generate_page(20261124, 11)
    proposal = to_proposal(analyse_image(page.image, float(page.spec.dpi)))
    units = [(c["mnemonic"]["value"], c["unit"]["value"]) for s in proposal["sections"] for t in s["tracks"]
             for c in t["curves"]]
    assert units.count(("GR", "API")) == 4 and ("GR", None) not in units, units


@needs_tesseract
def test_legend_inks_and_weights_are_read_off_the_line_samples_and_never_wrong() -> None:
    """Each read curve's ink (dark or light) and weight (thin or thick) as its header's line sample shows
    them: ink only on gray scans (a 1-bit scan prints every ink black), weights on both; what is proposed is
    what the legend says (`synth_truth.legend_weights` for the weights), and an empty field is no hint."""
    inks = weights = 0
    for k in range(len(PAGES)):
        spec, proposal = _analysed(k)
        for found, truth in zip(proposal["sections"], spec.sections, strict=True):
            for track, true_track in zip(found["tracks"], truth.tracks, strict=True):
                legend = true_track.weights(spec.dpi)
                for curve in track["curves"]:
                    k_true = header_slot(curve["header_row"], truth, len(true_track.curves), spec.dpi)
                    assert k_true is not None, curve
                    ink, weight = curve["ink"]["value"], curve["weight"]["value"]
                    assert ink is None or not spec.scan.bitonal, "an ink read on a 1-bit scan"
                    assert ink in (None, true_track.curves[k_true].tone), curve
                    assert weight in (None, legend[k_true]), curve
                    assert curve["ink"]["evidence"] and curve["weight"]["evidence"]
                    inks += ink is not None
                    weights += weight is not None
    assert inks >= 8 and weights >= 8, f"{inks} inks and {weights} weights read"


def _grid(lines: int = 60, spacing: float = 15.0, origin: float = 100.0) -> Grid:
    centres = origin + spacing * np.arange(lines)
    return Grid(fit_lattice(centres, spacing), np.ones(lines), lines)


def _fifth_lines_grid(major: float) -> Grid:
    """120 lines 30 px apart (0.1 in at 300 dpi), weighing 0.5, every fifth 1.0 and every tenth `major`."""
    k = np.arange(120)
    weights = np.where(k % 10 == 0, major, np.where(k % 5 == 0, 1.0, 0.5)) + 0.01 * np.sin(k)
    return Grid(fit_lattice(100.0 + 30.0 * k, 30.0), weights, k.size)


@pytest.mark.parametrize("major", [1.0, 2.0])
def test_a_grid_whose_medium_and_major_lines_look_alike_names_its_scale_unsure(major: float) -> None:
    """0.1 in of paper per line at 300 dpi is 1 in per 100 ft (10 ft a line, heavier every 5th and 10th) or 5 in
    per 100 ft (2 ft, every 5th and 25th). Where every fifth line is drawn as heavy as every tenth, the weights
    cannot say which: the scale is named with a rival, and lends the depth fit no depth per line. Where the
    tenth lines are heavier still, it is 1 in per 100 ft, with none."""
    grid = _fifth_lines_grid(major)
    pattern = weight_pattern(grid)
    assert pattern is not None
    guess = name_scale(grid, pattern, 300.0, 2550, None)
    assert guess is not None
    if major == 1.0:
        assert {(5, 10), (5, 25)} <= pattern.alike
        assert {guess.scale.name, guess.rival} == {"1 in per 100 ft", "5 in per 100 ft"}
    else:
        assert (pattern.medium_every, pattern.major_every) == (5, 10) and (5, 25) not in pattern.alike
        assert guess.scale.name == "1 in per 100 ft" and guess.rival is None
    with_numbers = name_scale(grid, pattern, 300.0, 2550, 2.0)  # two depth numbers 50 ft apart over 25 lines
    assert with_numbers is not None and with_numbers.scale.name == "5 in per 100 ft" and with_numbers.rival is None


@pytest.mark.parametrize("major", [1.0, 2.0])
def test_where_two_scales_fit_the_grid_alike_the_depth_numbers_decide_or_no_depth_is_proposed(major: float) -> None:
    """The grid above, with depth numbers. With medium and major lines alike, 7950 and 8000 25 lines apart are
    2 ft a line, 5 in per 100 ft (1 in per 100 ft prints no 7950, and would lend 10 ft a line to 8000 alone, as
    the tie's first scale did before: seed 777's page 45 was fitted 400 ft off), and 8000 alone fits either
    scale, so no depth is proposed. With the tenth lines heavier, the scale is sure, and lends 8000 alone its
    10 ft a line."""
    grid = _fifth_lines_grid(major)

    def fitted(numbers: list[tuple[int, float]]) -> analyse.SectionFinding:
        finding = analyse.SectionFinding(None, None, [], None, 0, grid, weight_pattern(grid), [])  # type: ignore[arg-type]
        finding.labels = [Label(grid.row(line), str(int(value)), value, 0.9) for line, value in numbers]
        analyse._fit(finding, 300.0, 2550)
        return finding

    one = fitted([(55, 8000.0)])
    if major == 1.0:
        both = fitted([(30, 7950.0), (55, 8000.0)])
        assert both.fit is not None and both.fit.per_line == 2.0 and both.fit.votes == 2
        assert both.scale is not None and both.scale.scale.name == "5 in per 100 ft"
        assert one.fit is None
    else:
        assert one.fit is not None and one.fit.per_line == 10.0
        assert one.scale is not None and one.scale.scale.name == "1 in per 100 ft"


def test_a_curves_flat_stretches_beside_a_depth_line_do_not_split_its_section() -> None:
    """Two flat stretches of a curve cross most of a track between two depth lines, the second a few rows
    above the next depth line, where it falls on the lattice's step as well: the depth line, nearer the
    lattice, is taken, the stretches passed over, and the grid stays one section (seed 777's page 23 of
    bench/analyse_eval.py was split in two there, its second part read as 46 tracks)."""
    spacing, rows = 37.0, 5000.0 + 37.0 * np.arange(30)
    lines = [Line(float(y), int(y), int(y), 0.83, 1.0) for y in rows]
    lines += [Line(float(rows[10] + 22), int(rows[10] + 22), int(rows[10] + 22), 0.30, 1.0),
              Line(float(rows[11] - 5), int(rows[11] - 5), int(rows[11] - 5), 0.38, 1.0)]
    found = find_sections(sorted(lines, key=lambda line: line.centre))
    assert len(found) == 1
    assert [line.centre for line in found[0].lines] == rows.tolist()
    assert found[0].spacing == pytest.approx(spacing)


def test_a_misread_depth_number_is_outvoted() -> None:
    grid = _grid()
    labels = [Label(100.0 + 150 * k, str(v), float(v), 0.9) for k, v in enumerate([1000, 1100, 1200, 1800, 1400])]
    fit = fit_depth(grid, labels, None)
    assert fit is not None
    assert (fit.first, fit.per_line, fit.votes) == (1000.0, 10.0, 4)
    assert [label.inlier for label in fit.labels] == [True, True, True, False, True]
    assert fit.residual == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("offset", [-0.6, -0.4, -0.1, 0.0, 0.2])
def test_a_depth_number_sitting_over_its_heavy_line_is_fitted_to_it(offset: float) -> None:
    """Numbers printed over the heavy line they name (their middles 0.4-0.6 of a step above it, nearer the light
    line above) or centred on it are fitted to that line, and the residual leaves their placement out; on a grid
    whose lines all weigh alike, a number is fitted to the line nearest its middle."""
    grid = _fifth_lines_grid(2.0)
    labels = [Label(100.0 + 30.0 * (10 * k + offset), str(v), float(v), 0.9)
              for k, v in enumerate([5000, 5100, 5200, 5300], start=1)]
    fit = fit_depth(grid, labels, None)
    assert fit is not None and (fit.first, fit.per_line, fit.votes) == (4900.0, 10.0, 4)
    assert fit.residual == pytest.approx(0.0, abs=1e-9)
    alike = fit_depth(_grid(120, 30.0), labels, None)
    assert alike is not None and alike.first == 4900.0 - 10.0 * round(offset)


def test_numbers_sitting_over_their_lines_on_a_grid_whose_weights_a_1_bit_scan_evened_out() -> None:
    """Where a 1-bit scan leaves the lines about as heavy as each other, the section's weight pattern (its major
    lines every tenth) still says which lines the numbers are printed at: all of them sitting over their lines,
    the fit puts them there, not one line up; without the pattern, the nearest line it is."""
    k = np.arange(120)
    grid = Grid(fit_lattice(100.0 + 30.0 * k, 30.0), 1.0 + 0.01 * np.sin(k), k.size)
    labels = [Label(100.0 + 30.0 * (10 * n - 0.6), str(v), float(v), 0.9)
              for n, v in enumerate([5000, 5100, 5200, 5300], start=1)]
    pattern = Pattern(5, 10, 0, 0.9, frozenset({(5, 10)}))
    fit = fit_depth(grid, labels, None, None, pattern)
    assert fit is not None and (fit.first, fit.per_line) == (4900.0, 10.0)
    nearest = fit_depth(grid, labels, None)
    assert nearest is not None and nearest.first == 4910.0


def test_numbers_that_decrease_down_the_page_or_do_not_agree_give_no_fit() -> None:
    grid = _grid()
    falling = [Label(100.0 + 150 * k, "", float(v), 0.9) for k, v in enumerate([1400, 1300, 1200])]
    assert fit_depth(grid, falling, None) is None
    scattered = [Label(100.0 + 150 * k, "", float(v), 0.9) for k, v in enumerate([1000, 1730, 1210])]
    assert fit_depth(grid, scattered, None) is None
    assert fit_depth(grid, [Label(250.0, "1100", 1100.0, 0.9)], None) is None
    one = fit_depth(grid, [Label(250.0, "1100", 1100.0, 0.9)], 10.0)
    assert one is not None and one.first == 1000.0, "one number is enough given the depth per line"


def test_a_page_without_a_grid_proposes_no_sections_and_says_what_to_supply() -> None:
    rng = np.random.default_rng(0)
    blank = np.full((2200, 1275), 235, np.uint8)
    blank[rng.random(blank.shape) < 0.0005] = 20  # dust
    blank[300:330, 200:1000] = 30  # a heading
    proposal = to_proposal(analyse_image(blank, 150.0))
    assert proposal["sections"] == []
    assert any("no log grid found" in message for message in proposal["messages"])


@pytest.mark.parametrize("name", ["tiny", "black", "noise", "stripes", "lines"])
def test_pages_that_are_no_log_are_answered_not_failed(name: str) -> None:
    rng = np.random.default_rng(1)
    image = {"tiny": np.full((40, 40), 255, np.uint8), "black": np.zeros((900, 400), np.uint8),
             "noise": rng.integers(0, 256, (900, 700), dtype=np.uint8),
             "stripes": np.tile(np.where(np.arange(400) % 40 < 2, 0, 255).astype(np.uint8), (900, 1)),
             "lines": np.tile(np.where(np.arange(900) % 30 < 2, 0, 255).astype(np.uint8)[:, None], (1, 400))}[name]
    proposal = to_proposal(analyse_image(image, None))
    assert proposal["messages"], "it says what could not be found"
    for section in proposal["sections"]:
        assert section["depth"]["ticks"]["value"] is None


def test_unreadable_depth_numbers_leave_the_depth_empty_and_say_so() -> None:
    page = generate_page(SEED, 0, PAGES[0])
    spec = page.spec
    image = page.image.copy()
    left, right = spec.sections[0].depth_column  # turn 0: scan pixels are page pixels, give or take the skew
    image[:, round(left) + 8:round(right) - 8] = 255
    proposal = to_proposal(analyse_image(image, float(spec.dpi)))
    depth = proposal["sections"][0]["depth"]
    assert depth["ticks"]["value"] is None and depth["rows_per_unit"]["value"] is None
    assert any("section 1" in m and "supply two depth ticks" in m for m in proposal["messages"])
    assert proposal["sections"][0]["tracks"], "the rest of the layout is still proposed"


def test_without_tesseract_the_geometry_is_still_proposed() -> None:
    page = generate_page(SEED, 1, PAGES[1])
    proposal = to_proposal(analyse_image(page.image, float(page.spec.dpi), tesseract="/nonexistent/tesseract"))
    assert any("Tesseract is not installed" in m for m in proposal["messages"])
    section = proposal["sections"][0]
    assert section["tracks"] and section["depth"]["ticks"]["value"] is None
    assert all(track["curves"] == [] for track in section["tracks"])
