"""bench/analyse_scoring.py's legend hints: the ink and weight the analysis read off each curve's line sample,
judged against the page's truth; a wrong one is a correction, an empty one is not."""

from __future__ import annotations

import copy
import sys
from functools import cache
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import analyse_scoring  # noqa: E402

from veernet_core.digitise.layout.analyse import analyse_image  # noqa: E402
from veernet_core.digitise.layout.proposal import to_proposal  # noqa: E402
from veernet_core.page_synth import PageOptions, SynthPage, generate_page  # noqa: E402


@cache
def _analysed() -> tuple[SynthPage, dict[str, Any]]:
    """A gray page of one section (tests/core/test_section.py's) and its proposal, as the service reads it."""
    page = generate_page(4040, 1, PageOptions(dpi=200, turn=90, bitonal=False, sections=1,
                                              first_section_in=(4.0, 5.0)))
    return page, to_proposal(analyse_image(page.image, float(page.spec.dpi)))


def test_a_wrong_ink_or_weight_is_a_correction_and_an_empty_one_is_not() -> None:
    page, proposal = _analysed()
    score = analyse_scoring.score_page(page.spec, proposal)
    curves = [c for track in proposal["sections"][0]["tracks"] for c in track["curves"]]
    true_curves = sum(len(t.curves) for t in page.spec.sections[0].tracks)
    assert score.hints["ink"][0] == score.hints["weight"][0] == true_curves
    read = [c for c in curves if c["ink"]["value"] is not None]
    assert read and score.hints["ink"][1] == len(read) and score.hints["ink"][2] == 0
    summary = analyse_scoring.summarise([score])
    assert summary["ink_read"] == round(len(read) / true_curves, 4) and summary["ink_wrong"] == 0
    named = [c for c in curves if c["mnemonic"]["value"] is not None]
    assert summary["curve_fields_by_name"]["mnemonic"] == {"read": round(len(named) / true_curves, 4), "wrong": 0.0}
    assert summary["curves_found"] == round(len(curves) / true_curves, 4) and summary["curves_extra"] == 0

    wrong = copy.deepcopy(proposal)
    flipped = next(c for track in wrong["sections"][0]["tracks"] for c in track["curves"] if c["ink"]["value"])
    flipped["ink"]["value"] = "light" if flipped["ink"]["value"] == "dark" else "dark"
    judged = analyse_scoring.score_page(page.spec, wrong)
    assert judged.hints["ink"][2] == 1 and not judged.curves_ok and not judged.no_correction

    emptied = copy.deepcopy(proposal)
    for track in emptied["sections"][0]["tracks"]:
        for curve in track["curves"]:
            curve["ink"]["value"] = curve["weight"]["value"] = None
    judged = analyse_scoring.score_page(page.spec, emptied)
    assert judged.hints["ink"][1:] == [0, 0] and judged.curves_ok == score.curves_ok

    weighted = copy.deepcopy(proposal)
    track = next(t for t in weighted["sections"][0]["tracks"] if len(t["curves"]) > 1)
    for curve in track["curves"]:  # a legend never shows every pen of a track thick: one at least is wrong
        curve["weight"]["value"] = "thick"
    assert analyse_scoring.score_page(page.spec, weighted).hints["weight"][2] >= 1


def test_a_second_curve_on_a_header_line_is_extra_and_a_correction() -> None:
    """A curve proposed twice on one header line (its line sample taken for another curve's) is one for the
    person to remove: extra, however empty its fields, and the page needs a correction."""
    page, proposal = _analysed()
    score = analyse_scoring.score_page(page.spec, proposal)
    assert score.curves_extra == 0
    doubled = copy.deepcopy(proposal)
    curves = doubled["sections"][0]["tracks"][0]["curves"]
    twin = copy.deepcopy(curves[0])
    for name in (*analyse_scoring.CURVE_FIELDS, *analyse_scoring.LEGEND_HINTS):
        twin[name]["value"] = None
    twin["header_row"] += 1.0
    curves.insert(1, twin)
    judged = analyse_scoring.score_page(page.spec, doubled)
    assert judged.curves_extra == 1 and judged.curves_found == score.curves_found
    assert judged.curve_fields_wrong == score.curve_fields_wrong and not judged.no_correction


def test_a_renderers_own_header_rows_score_as_the_generators_geometry() -> None:
    """The slot from the rows a renderer printed each curve's name on (bench/analyse_eval.py's `paper_slot`,
    given here the generator's own rows) scores a proposal as the generator's header geometry does; rows
    two inches from every name match no curve."""
    import analyse_eval

    from veernet_core.page_draw import header_line_row
    page, proposal = _analysed()
    spec = page.spec
    rows = tuple(tuple(tuple(header_line_row(section, k, spec.dpi) for k in range(len(track.curves)))
                       for track in section.tracks) for section in spec.sections)
    slot = analyse_eval.paper_slot(rows, spec.dpi)
    by_rows, by_geometry = analyse_scoring.score_page(spec, proposal, slot), analyse_scoring.score_page(spec, proposal)
    assert by_geometry.curves_found > 0 and by_geometry.curve_fields_read > 0
    assert {k: v for k, v in vars(by_rows).items() if k != "depth_errors"} == {
        k: v for k, v in vars(by_geometry).items() if k != "depth_errors"}
    far = tuple(tuple(tuple(r - 2.0 * spec.dpi for r in track) for track in section) for section in rows)
    moved = analyse_scoring.score_page(spec, proposal, analyse_eval.paper_slot(far, spec.dpi))
    assert moved.curves_found == 0 and moved.curves_extra == sum(len(t["curves"]) for t in
                                                                   proposal["sections"][0]["tracks"])
