"""A track header's legend read off its line samples: each curve's ink (dark or light) against the page's
black, and its weight (thin or thick) against the header's other samples, read or not."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter

from veernet_core.digitise.layout.headers import (
    CurveHeader,
    LineSample,
    Reading,
    legend,
    line_samples,
    line_style,
    page_black,
    weights_agreed,
    with_unread,
)
from veernet_core.digitise.layout.labels import TextBox
from veernet_core.digitise.layout.page import ink_threshold, paper_level

PAPER, BLACK = 235, 20
WIDTH = 400
# (row of the sample's top edge, pen width in px, pen gray on white paper (0: the page's black), line style)
PENS = [(40, 1, 0, "solid"), (100, 4, 100, "dashed"), (160, 2, 0, "solid")]
PATTERNS = {"solid": (1, 0), "dashed": (20, 10), "dotted": (3, 6), "dash-dot": (20, 6, 4, 6)}  # ink, paper, ...
BOX = TextBox(top=5, bottom=195, left=10, right=WIDTH - 10)


def _header(pens: list[tuple[int, int, int, str]], blur: float = 0.5, bitonal: bool = False,
            skew: float = 0.0, frame: bool = True) -> np.ndarray:
    """A header box's pixels as a scanner gives them: the box's black frame, a line of black text over each
    line sample (drawn with its pen's width and gray), blurred, on paper of PAPER and ink of BLACK. With a
    `skew` (degrees), scanned turned by it and turned back as the analysis deskews a page, both bilinearly.
    Without its `frame`, the page's ink threshold is set by the text and samples alone."""
    image = Image.new("L", (WIDTH, 200), 255)
    pen = ImageDraw.Draw(image)
    for top, width, gray, style in pens:
        pen.text((WIDTH // 2 - 20, top - 24), "GR (API)", fill=0)  # the curve's name above its sample
        marks = np.concatenate([np.full(n, k % 2 == 0) for k, n in enumerate(PATTERNS[style])])
        for x in range(20, WIDTH - 20):
            if marks[(x - 20) % marks.size]:
                pen.line([(x, top), (x, top + width - 1)], fill=gray)
    if skew:
        image = image.rotate(skew, Image.Resampling.BILINEAR, fillcolor=255)
        image = image.rotate(-skew, Image.Resampling.BILINEAR, fillcolor=255)
    if frame:  # outside BOX: a log's borders, in its black
        ImageDraw.Draw(image).rectangle([0, 0, WIDTH - 1, 199], outline=0, width=4)
    toned = np.asarray(image.filter(ImageFilter.GaussianBlur(blur)), dtype=np.float32)
    toned = toned * (PAPER - BLACK) / 255 + BLACK
    if bitonal:
        toned = np.where(toned < (BLACK + PAPER) / 2, 0, 255)
    return toned.astype(np.uint8)


def _scanned(pixels: np.ndarray) -> tuple[int, np.ndarray]:
    """The paper's gray and the ink, at the page's ink threshold, as the analysis takes them."""
    threshold = ink_threshold(pixels)
    return paper_level(pixels, threshold), pixels < threshold


def _read(pixels: np.ndarray, tones: bool = True, read: tuple[int, ...] = (0, 1, 2),
          pens: list[tuple[int, int, int, str]] = PENS, gray: bool = True) -> list[CurveHeader]:
    paper, ink = _scanned(pixels)
    curves = [CurveHeader(Reading("GR", 0.9), Reading(None, 0.0), Reading(None, 0.0), Reading(None, 0.0),
                          Reading(None, 0.0), float(pens[k][0] - 20), 10.0) for k in read]
    styles = [line_style(ink, BOX, curve, curves[i + 1].row if i + 1 < len(curves) else float(BOX.bottom),
                         pixels if gray else None, paper) for i, curve in enumerate(curves)]
    curves = [replace(curve, style=style) for curve, (style, _) in zip(curves, styles, strict=True)]
    return legend(curves, [row for _, row in styles], line_samples(ink, pixels, paper, BOX),
                  page_black(pixels, ink, paper), tones)


def test_each_sample_reads_dark_or_light_against_the_pages_black_whatever_its_width() -> None:
    """A one-pixel black pen, blurred, peaks about as light as a wide gray one: kept to one row of ink, its
    darkness summed across the stroke still reads it dark."""
    curves = _read(_header(PENS, blur=0.7))
    assert [c.ink.value for c in curves] == ["dark", "light", "dark"]
    assert all(c.ink.confidence >= 0.5 for c in curves)


def test_a_thin_stroke_over_two_rows_at_half_the_black_is_left_unread() -> None:
    """Two rows at half the page's black: a one-pixel dark pen that the scan spread over two rows, or a
    two-pixel light pen. Nothing on the sample tells which, so no ink is proposed; a wide light pen's is."""
    pens = [(40, 2, 128, "solid"), (100, 4, 128, "solid")]
    assert [c.ink.value for c in _read(_header(pens, blur=0.3), pens=pens, read=(0, 1))] == [None, "light"]


def test_weights_follow_the_legend_rule_over_every_sample_of_the_header_read_or_not() -> None:
    """1, 4 and 2 px pens: the widest is thick, the narrowest thin, the middle one neither, whatever their
    inks. Where the 1 px curve's name goes unread, the 2 px one is still not called thin: the rule counts
    every sample."""
    assert [c.weight.value for c in _read(_header(PENS))] == ["thin", "thick", None]
    assert [c.weight.value for c in _read(_header(PENS), read=(1, 2))] == ["thick", None]


def test_pens_closer_than_twofold_give_no_weight() -> None:
    pens = [(40, 2, 0, "solid"), (100, 3, 0, "dashed")]
    assert [c.weight.value for c in _read(_header(pens), pens=pens, read=(0, 1))] == [None, None]


def test_on_a_1_bit_scan_neither_ink_nor_weight_is_read() -> None:
    """Its threshold prints every ink black, widening a dark pen's stroke and thinning a light one's."""
    curves = _read(_header(PENS, bitonal=True), tones=False)
    assert [(c.ink.value, c.weight.value) for c in curves] == [(None, None)] * 3
    assert [c.weight.value for c in _read(_header(PENS, bitonal=True))] == ["thin", "thick", None]  # were tones read


def test_a_header_without_line_samples_proposes_no_ink_and_no_weight() -> None:
    pixels = _header([])
    curves = _read(pixels, read=(0,), pens=[(60, 1, 0, "solid")])
    assert curves[0].ink.value is None and curves[0].weight.value is None


def test_each_style_is_read_off_its_sample_dash_dot_included() -> None:
    """Solid, dashed and dotted by the share of the sample inked; dash-dot by its marks, long and short in
    turn, as the traces' are read (`ink.style_scores`): a dash and a dot ink about as much as a dash alone."""
    for blur, bitonal in ((0.4, False), (0.7, False), (0.5, True)):
        for styles in (("solid", "dashed", "dotted"), ("dash-dot", "dashed", "dash-dot")):
            pens = [(40 + 60 * k, 2, 0, style) for k, style in enumerate(styles)]
            curves = _read(_header(pens, blur=blur, bitonal=bitonal), pens=pens)
            assert [c.style.value for c in curves] == list(styles), (blur, bitonal)


def test_a_sample_under_no_read_name_is_a_curve_left_to_name_in_its_place() -> None:
    """Names read for the first and last of three samples: the middle one comes back between them, with no
    name and no style, its text's row where the others' sit above their samples, its ink and weight read."""
    pixels = _header(PENS, blur=0.7)
    paper, ink = _scanned(pixels)
    read = [CurveHeader(Reading(name, 0.9), Reading(None, 0.0), Reading(None, 0.0), Reading(None, 0.0),
                        Reading("solid", 0.9), float(PENS[k][0] - 20), 10.0) for name, k in (("GR", 0), ("SP", 2))]
    rows = [line_style(ink, BOX, read[0], read[1].row)[1], line_style(ink, BOX, read[1], float(BOX.bottom))[1]]
    samples = line_samples(ink, pixels, paper, BOX)
    curves, rows = with_unread(read, rows, samples, 10.0, 20.0)
    assert [c.mnemonic.value for c in curves] == ["GR", None, "SP"]
    assert curves[1].style.value is None and abs(curves[1].row - (samples[1].row - 20.0)) < 1e-9
    named = legend(curves, rows, samples, page_black(pixels, ink, paper), True)
    assert [(c.ink.value, c.weight.value) for c in named] == [("dark", "thin"), ("light", "thick"), ("dark", None)]


def test_a_thin_pen_broken_at_random_by_the_scan_gives_no_style() -> None:
    """A solid light line that the threshold broke at random reads as neither solid nor a pattern: its marks
    and gaps do not repeat, so no style is proposed, while a dashed line broken nowhere still reads dashed."""
    pens = [(40, 1, 0, "solid"), (100, 1, 0, "dashed")]
    pixels = _header(pens, blur=0.3)
    rng = np.random.default_rng(5)
    row = np.flatnonzero(pixels[35:50, 30] < 128)[0] + 35  # the first sample's row of ink
    cut = np.zeros(WIDTH, dtype=bool)  # runs of its columns lost at random, of random lengths, as a light pen's are
    x = 20
    while x < WIDTH:
        x += int(rng.integers(1, 40))
        gap = int(rng.integers(3, 12))
        cut[x:x + gap] = True
        x += gap
    pixels[row - 1:row + 2, cut] = pixels[row - 6, 30]  # paper
    assert [c.style.value for c in _read(pixels, pens=pens, read=(0, 1))] == [None, "dashed"]


def test_a_light_stroke_summing_to_under_a_row_of_black_or_to_more_than_a_thin_dark_one_reads_light() -> None:
    """A one-pixel gray pen sums to under a row of the page's black, which no dark pen a pixel wide or more does;
    a two-pixel pen of a darker gray sums to more than a one-pixel dark pen spread over two rows. Both are light;
    the one-pixel black pen beside them, blurred over two rows, still reads dark."""
    pens = [(40, 1, 110, "solid"), (100, 2, 90, "dashed"), (160, 1, 0, "solid")]
    curves = _read(_header(pens, blur=0.3), pens=pens)
    assert [c.ink.value for c in curves] == ["light", "light", "dark"]
    assert all(c.ink.confidence >= 0.5 for c in curves)


@pytest.mark.parametrize(("skew", "pen_gray"), [(0.3, 130), (1.0, 100)])
def test_a_thin_light_solid_line_split_across_two_rows_by_the_deskew_reads_solid(skew: float, pen_gray: int) -> None:
    """Turned and turned back, a one-pixel gray line falls across two rows along stretches of its length, each
    too light to be ink: its ink alone reads broken at a regular step, as dashed. Its darkness summed across
    the rows is the stroke's there, and it reads solid; the dashed black line below it stays dashed."""
    pens = [(60, 1, pen_gray, "solid"), (130, 1, 0, "dashed")]
    pixels = _header(pens, skew=skew, frame=False)
    assert [c.style.value for c in _read(pixels, pens=pens, read=(0, 1))] == ["solid", "dashed"]
    assert [c.style.value for c in _read(pixels, pens=pens, read=(0, 1), gray=False)] == ["dashed", "dashed"]


def test_a_wide_pens_sample_is_found_at_its_middle_row_and_not_proposed_again() -> None:
    """A 5 px pen's sample spans several rows as full as each other. Its row is their middle, as every sample's
    is, so the curve read above it keeps it: no unnamed curve is added for it, and its ink and weight are its."""
    pens = [(40, 5, 0, "solid"), (100, 1, 0, "dashed")]
    pixels = _header(pens, blur=0.4)
    paper, ink = _scanned(pixels)
    read = [CurveHeader(Reading("GR", 0.9), Reading(None, 0.0), Reading(None, 0.0), Reading(None, 0.0),
                        Reading(None, 0.0), float(top - 20), 10.0) for top, *_ in pens]
    rows = [line_style(ink, BOX, read[0], read[1].row)[1], line_style(ink, BOX, read[1], float(BOX.bottom))[1]]
    samples = line_samples(ink, pixels, paper, BOX)
    assert [s.row for s in samples] == rows
    curves, _ = with_unread(read, rows, samples, 10.0, 20.0)
    assert [c.mnemonic.value for c in curves] == ["GR", "GR"]
    named = legend(curves, rows, samples, page_black(pixels, ink, paper), True)
    assert [(c.ink.value, c.weight.value) for c in named] == [("dark", "thick"), ("dark", "thin")]


def test_a_smudge_across_a_line_of_text_is_no_line_sample() -> None:
    """Dirt inked across most of the box over rows as tall as a line of text (a 1-bit scan's smudge beside the
    text's words) is no pen's stroke: the samples found are the pens' alone."""
    pens = [(60, 2, 0, "solid"), (130, 1, 0, "dashed")]
    def rows(pixels: np.ndarray) -> list[int]:
        paper, ink = _scanned(pixels)
        return [s.row for s in line_samples(ink, pixels, paper, BOX)]
    clean = _header(pens)
    smudged = clean.copy()
    smudged[80:105, 30:WIDTH - 30] = BLACK  # between the samples, 25 rows tall
    assert len(rows(clean)) == 2 and rows(smudged) == rows(clean)


def test_a_sample_whose_ink_is_between_a_gray_pens_and_the_blacks_is_left_unread() -> None:
    """Its ink at 0.7 of the page's black, two rows of black summed across it: a two-pixel dark pen whose peak the
    scan's blur took down, or a wide gray one; on the independent page renderer's gray scans a tenth of the dark
    pens read under 0.71 of the black. Neither is proposed. Ink at half the black is a gray pen's, at 0.9 the
    black's."""
    black = 0.9
    samples = [LineSample(40, 0.7 * black, 2.0 * black, 3.0), LineSample(100, 0.5 * black, 2.0 * black, 4.0),
               LineSample(160, 0.9 * black, 2.0 * black, 2.0)]
    curves = [CurveHeader(Reading("GR", 0.9), Reading(None, 0.0), Reading(None, 0.0), Reading(None, 0.0),
                          Reading("solid", 0.9), float(sample.row - 20), 10.0) for sample in samples]
    read = legend(curves, [sample.row for sample in samples], samples, black, True)
    assert [c.ink.value for c in read] == [None, "light", "dark"]


def test_a_tracks_weights_are_kept_only_where_its_legend_printed_again_reads_them_the_same() -> None:
    """Two sections' legends of one track (boxes over the same columns) that read its pens' weights differently:
    neither printing proposes a weight. Where they agree, and for another track's legend, printed once, the
    weights stay."""
    def curves(weights: tuple[str | None, ...]) -> list[CurveHeader]:
        return [CurveHeader(Reading(name, 0.9), Reading(None, 0.0), Reading(None, 0.0), Reading(None, 0.0),
                            Reading("solid", 0.9), 20.0 + 30 * k, 10.0, weight=Reading(weight, 0.8))
                for k, (name, weight) in enumerate(zip(("LLD", "LLS", "MSFL"), weights, strict=True))]
    upper, lower = TextBox(100, 200, 600, 1000), TextBox(3200, 3300, 602, 1001)
    other = TextBox(100, 200, 1040, 1500)
    read = weights_agreed([(upper, curves(("thin", "thin", "thick"))), (other, curves(("thick", None, "thin"))),
                           (lower, curves(("thick", "thin", "thin")))])
    assert [[c.weight.value for c in printed] for printed in read] == [
        [None, None, None], ["thick", None, "thin"], [None, None, None]]
    read = weights_agreed([(upper, curves(("thin", None, "thick"))), (lower, curves(("thin", None, "thick")))])
    assert [[c.weight.value for c in printed] for printed in read] == [["thin", None, "thick"]] * 2
