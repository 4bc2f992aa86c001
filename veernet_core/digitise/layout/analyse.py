"""Page layout analysis, end to end: a scan in, a proposed calibration out (`veernet_core.digitise.layout.
proposal` writes it). The steps, each in its own module: turn and deskew (`page`), sections and header
(`sections`), tracks and value grids (`tracks`), depth lattice, scale and depth fit (`depth`), text boxes
(`labels`) read by Tesseract (`ocr`), curves in the track headers (`headers`).

Tesseract runs twice per page at most, once for every depth number and once for every track header.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from veernet_core.digitise.bilevel import one_bit_kind
from veernet_core.digitise.layout import headers, labels, ocr
from veernet_core.digitise.layout.depth import (
    DepthFit,
    Grid,
    Label,
    Pattern,
    ScaleGuess,
    depth_grid,
    fit_depth,
    name_scale,
    weight_pattern,
)
from veernet_core.digitise.layout.lines import Line
from veernet_core.digitise.layout.page import (
    Skew,
    deskew,
    ink_threshold,
    measure_skew,
    paper_level,
    turn_clockwise,
)
from veernet_core.digitise.layout.scales import scale_named
from veernet_core.digitise.layout.sections import (
    Ink,
    SectionRows,
    find_sections,
    header_block,
    ink_outside,
    page_lines,
    strip_top,
)
from veernet_core.digitise.layout.tracks import Columns, Interval, ValueGrid, section_columns, value_grid

TRACK_CROSSING = 0.5  # a track is crossed by at least half its section's depth lines
DEPTH_COLUMN_CROSSING = 0.3
# A run of fewer page-wide lines than this at one spacing, without exactly one column between its borders that
# most of them leave open, is a ruled table (a header block's well data), not a log's grid: every log section
# leaves its depth column open. On the independent page renderer's pages (bench/paper/sheet.py, seed 1) header
# tables made runs of 8-12 rules, every column crossed or (rules spanning some columns) four left open; the 57
# log sections found ran 18-159 lines, those under 36 lines each with one column open, as did the generator's 62
# (seed 20261124).
TABLE_LINES = 20


@dataclass
class Upright:
    page: Ink
    turn: int  # degrees the scan was turned clockwise
    ink_above: int  # ink above the first grid and below the last: the header end has more
    ink_below: int
    skew: Skew | None
    sections: list[SectionRows]


@dataclass
class SectionFinding:
    rows: SectionRows
    columns: Columns
    tracks: list[Interval]
    depth_column: Interval | None
    strip_top: int
    grid: Grid | None
    pattern: Pattern | None
    value_grids: list[ValueGrid | None]
    number_boxes: list[labels.TextBox] = field(default_factory=list)
    header_boxes: list[labels.TextBox | None] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    curves: list[list[headers.CurveHeader]] = field(default_factory=list)
    fit: DepthFit | None = None
    scale: ScaleGuess | None = None


@dataclass
class Analysis:
    image_size: tuple[int, int]  # (height, width) as scanned
    dpi: float | None
    upright: Upright
    sections: list[SectionFinding]
    header: tuple[int, int] | None
    ocr_problem: str | None


def analyse_image(image: np.ndarray, dpi: float | None, tesseract: str | None = None) -> Analysis:
    """Analyse a uint8 grayscale scan (paper bright) of one page."""
    upright = make_upright(image)
    found, floor = [], 0
    for rows in upright.sections:
        finding = _section(upright.page, rows, floor)
        found.append(finding)
        floor = int(rows.bottom) + 1
    problem = _read_text(upright.page, found, tesseract)
    for finding in found:
        _fit(finding, dpi, upright.page.ink.shape[1])
    first_strip = found[0].strip_top if found else upright.page.ink.shape[0]
    return Analysis(image.shape, dpi, upright, found, header_block(upright.page, first_strip), problem)


def make_upright(image: np.ndarray) -> Upright:
    """Portrait (a quarter turn if the scan is wider than tall), deskewed, then upside down if the grids'
    far side holds more ink than their near side: the header block is at the top of a log. A page less
    than 1.5 times as long as wide is tried both ways, and kept the way that shows more depth lines."""
    long_side, short_side = max(image.shape), min(image.shape)
    portrait = 0 if image.shape[0] >= image.shape[1] else 90
    turns = [portrait] if long_side >= 1.5 * short_side else [portrait, (portrait + 90) % 180]
    tried = [_deskewed(image, turn) for turn in turns]
    page, turn, skew, lines, sections = max(tried, key=lambda t: sum(len(s.lines) for s in t[4]))
    above, below = ink_outside(page, sections)
    if below <= above:
        return Upright(page, turn, above, below, skew, sections)
    gray = np.ascontiguousarray(page.gray[::-1, ::-1])
    page = Ink(gray, gray < page.threshold, page.paper, page.threshold, page.tones)
    flipped = [_flip(line, gray.shape[0]) for line in reversed(lines)]
    return Upright(page, (turn + 180) % 360, below, above, skew, log_sections(page, find_sections(flipped)))


def _deskewed(image: np.ndarray, turn: int) -> tuple[Ink, int, Skew | None, list[Line], list[SectionRows]]:
    """The scan turned, deskewed and made ink, with its page-wide lines and the sections they make."""
    gray = turn_clockwise(image, turn)
    threshold = ink_threshold(gray)
    paper = paper_level(gray, threshold)
    skew = measure_skew(gray < threshold)
    if skew is not None:
        gray = deskew(gray, skew, paper)
    page = Ink(gray, gray < threshold, paper, threshold, one_bit_kind(image[::4, ::4]) is None)
    lines = page_lines(page)
    return page, turn, skew, lines, log_sections(page, find_sections(lines))


def log_sections(page: Ink, sections: list[SectionRows]) -> list[SectionRows]:
    """The runs of lines that are a log's grid: long ones, and short ones that leave one column open (the depth
    column); a ruled table of fewer than TABLE_LINES rules, every column crossed or several cells left open by
    rules that span some of its columns only, is not one."""
    return [rows for rows in sections if len(rows.lines) >= TABLE_LINES
            or sum(i.depth_lines < DEPTH_COLUMN_CROSSING for i in section_columns(page, rows).intervals) == 1]


def _flip(line: Line, height: int) -> Line:
    return Line(height - 1 - line.centre, height - 1 - line.last, height - 1 - line.first, line.coverage,
                line.weight)


def _section(page: Ink, rows: SectionRows, floor: int) -> SectionFinding:
    columns = section_columns(page, rows)
    tracks = [i for i in columns.intervals if i.depth_lines >= TRACK_CROSSING]
    open_intervals = [i for i in columns.intervals if i.depth_lines < DEPTH_COLUMN_CROSSING]
    depth_column = min(open_intervals, key=lambda i: (i.depth_lines, -i.width)) if open_intervals else None
    top = strip_top(page, rows.top, columns.borders, floor) if columns.intervals else int(rows.top)
    grid = depth_grid(page, rows, tracks) if tracks else None
    finding = SectionFinding(rows, columns, tracks, depth_column, top, grid,
                             weight_pattern(grid) if grid else None, [value_grid(t) for t in tracks])
    if depth_column is not None:
        finding.number_boxes = labels.number_boxes(page, rows, depth_column)
    finding.header_boxes = [labels.header_box(page, t, top, rows.top) if top < rows.top - 4 else None
                            for t in tracks]
    return finding


def _read_text(page: Ink, found: list[SectionFinding], tesseract: str | None) -> str | None:
    """Depth numbers and track headers of every section, each read twice (four Tesseract runs in all); the
    problem, if Tesseract could not run."""
    boxes = [box for finding in found for box in finding.number_boxes]
    crops = [box.crop(page, 4) for box in boxes]
    try:
        sharp, soft = ocr.read_twice(crops, [box.height for box in boxes], page.threshold, "0123456789", tesseract)
        _number_labels(found, sharp, soft)
        _track_curves(page, found, tesseract)
    except ocr.OcrUnavailable as exc:
        return str(exc)
    return None


def _number_labels(found: list[SectionFinding], sharp: list[list[ocr.Word]], soft: list[list[ocr.Word]]) -> None:
    """A depth number is the text both readings of its box agree on; where they differ it has no value."""
    readings = iter(zip(sharp, soft, strict=True))
    for finding in found:
        for box in finding.number_boxes:
            first, second = (ocr.joined(words) for words in next(readings))
            value = float(first[0]) if first[0].isdigit() and first[0] == second[0] else None
            text = first[0] if first[0] == second[0] else f"{first[0]}|{second[0]}"
            finding.labels.append(Label(box.middle, text, value, min(first[1], second[1])))


def _track_curves(page: Ink, found: list[SectionFinding], tesseract: str | None) -> None:
    """Every track header read twice, differently prepared; a field is kept where both readings agree. Each
    line sample under no read name is a curve too, its name left for the person (`headers.with_unread`)."""
    boxes = [box for finding in found for box in finding.header_boxes if box is not None]
    crops = [labels.erase_rules(box.crop(page, 0), page.threshold) for box in boxes]
    heights = [headers.text_height(crop, page.threshold) for crop in crops]
    sharp, soft = (iter(reading) for reading in ocr.read_twice(crops, heights, page.threshold, None, tesseract))
    inks = [crop < page.threshold for crop in crops]
    kinds = [_grid_kind(grid) for finding in found
             for box, grid in zip(finding.header_boxes, finding.value_grids, strict=True) if box is not None]
    agreed = []  # per header box: its curves, each field as both readings read it
    for header, ink, kind in zip(boxes, inks, kinds, strict=True):
        agreed.append(headers.joined_entries(headers.agreed(headers.curves_in(next(sharp), header, ink),
                                                            headers.curves_in(next(soft), header, ink), *kind)))
    agreed = _reread_ends(agreed, crops, heights, inks, kinds, page.threshold, tesseract)
    agreed = _reread_units(agreed, crops, heights, page.threshold, tesseract)
    read = []  # per header box: (its curves read and styled, their samples' rows, every sample in it)
    for header, curves in zip(boxes, agreed, strict=True):
        samples = headers.line_samples(page.ink, page.gray, page.paper, header)
        above = headers.samples_above(curves, samples, header.top, header.bottom)
        styles = [_style(page, header, curves, k, above) for k in range(len(curves))]
        styled = [replace(c, style=style) for c, (style, _) in zip(curves, styles, strict=True)]
        read.append((styled, [row for _, row in styles], samples, above))
    # How far a legend's sample sits from its curve's text (under it, or over it in a box whose samples are
    # `above` their text), as the read curves of the page show it.
    below = [row - c.row for curves, rows, *_ in read for c, row in zip(curves, rows, strict=True) if row is not None]
    black = headers.page_black(page.gray, page.ink, page.paper) if read else 1.0
    headed = iter(zip(read, heights, strict=True))
    for finding in found:
        for box in finding.header_boxes:
            if box is None:
                finding.curves.append([])
                continue
            (styled, rows, samples, above), height = next(headed)
            offset = (float(np.median(np.abs(below))) if below else 2.0 * height) * (-1.0 if above else 1.0)
            curves, rows = headers.with_unread(styled, rows, samples, height, offset)
            # A sample under no read text is styled as any: its curve's row is put where text sits beside it
            # (above it, or below in a box whose samples are drawn over their text).
            curves = [replace(c, style=_style(page, box, curves, k, above)[0]) if c.mnemonic.value is None
                      and c.style.value is None else c for k, c in enumerate(curves)]
            finding.curves.append(headers.legend(curves, rows, samples, black, page.tones))
    at = [(finding, b, box) for finding in found for b, box in enumerate(finding.header_boxes) if box is not None]
    kept = headers.weights_agreed([(box, finding.curves[b]) for finding, b, box in at])
    for (finding, b, _), curves in zip(at, kept, strict=True):
        finding.curves[b] = curves


def _reread_ends(agreed: list[list[headers.CurveHeader]], crops: list[np.ndarray], heights: list[float],
                 inks: list[np.ndarray], kinds: list[tuple[bool | None, int | None]], threshold: int,
                 tesseract: str | None) -> list[list[headers.CurveHeader]]:
    """Every scale end left unread, read again from its word's box as a number, twice (sharp and soft), all of
    a page's in one Tesseract run per reading; kept where the line's ends then fit its track's grid
    (`headers.with_reread`; `kinds`: each box's track grid, as `_grid_kind` gives it)."""
    wanted = [(b, k, side, word, *headers.reread_crop(crops[b], word, heights[b]))
              for b, curves in enumerate(agreed) for k, curve in enumerate(curves)
              for side, word in headers.reread_words(curve)]
    if not wanted:
        return agreed
    cut = [crop for *_, crop, _ in wanted]
    sharp, soft = ocr.read_twice(cut, [heights[b] for b, *_ in wanted], threshold, headers.END_DIGITS, tesseract)
    ends: dict[tuple[int, int], dict[int, headers.Reading]] = {}
    for (b, k, side, word, _, offset), first, second in zip(wanted, sharp, soft, strict=True):
        ends.setdefault((b, k), {})[side] = headers.reread_end(word, first, second, offset, inks[b],
                                                               agreed[b][k].height)
    mended = []
    for b, (curves, kind) in enumerate(zip(agreed, kinds, strict=True)):
        mended.append([headers.with_reread(curve, ends[(b, k)], *kind) if (b, k) in ends else curve
                       for k, curve in enumerate(curves)])
    return mended


def _reread_units(agreed: list[list[headers.CurveHeader]], crops: list[np.ndarray], heights: list[float],
                  threshold: int, tesseract: str | None) -> list[list[headers.CurveHeader]]:
    """Every unit neither reading read as a known one, read again from its word's box told the characters of
    units only, twice (sharp and soft), all of a page's in one Tesseract run per reading (`headers.reread_unit`)."""
    wanted = [(b, k, *headers.reread_crop(crops[b], curve.unit_word, heights[b]))
              for b, curves in enumerate(agreed) for k, curve in enumerate(curves) if curve.unit_word is not None]
    if not wanted:
        return agreed
    cut = [crop for *_, crop, _ in wanted]
    sharp, soft = ocr.read_twice(cut, [heights[b] for b, *_ in wanted], threshold, headers.UNIT_CHARS, tesseract)
    units = {(b, k): unit for (b, k, *_), first, second in zip(wanted, sharp, soft, strict=True)
             if (unit := headers.reread_unit(first, second)).value is not None}
    return [[replace(curve, unit=units[(b, k)]) if (b, k) in units else curve for k, curve in enumerate(curves)]
            for b, curves in enumerate(agreed)]


def _grid_kind(grid: ValueGrid | None) -> tuple[bool | None, int | None]:
    """Whether a track's value grid is logarithmic (None: unread), and its decades if it is."""
    log = None if grid is None else grid.scale == "log"
    return log, grid.divisions if grid is not None and log else None


def _style(page: Ink, box: labels.TextBox, curves: list[headers.CurveHeader],
           k: int, above: bool = False) -> tuple[headers.Reading, int | None]:
    """The style of the sample line drawn under curve k's text (over it, `above`), and its page row."""
    if above:
        bound = curves[k - 1].row if k else float(box.top)
    else:
        bound = curves[k + 1].row if k + 1 < len(curves) else float(box.bottom)
    return headers.line_style(page.ink, box, curves[k], bound, page.gray if page.tones else None, page.paper,
                              above)


def _fit(finding: SectionFinding, dpi: float | None, page_width: int) -> None:
    """The depth fit, then the scale it implies. A confidently named scale (from the file's resolution) lends
    its depth per line when the numbers alone cannot give it, and says which numbers can be printed. Where a
    scale of another depth per line fits the grid as well (`ScaleGuess.rival`), each lends its own, and the
    fit more numbers agree with is kept; where as many agree with either, there is none."""
    if finding.grid is None:
        return
    first = name_scale(finding.grid, finding.pattern, dpi, page_width, None)
    scales = []  # the scales sure enough to lend their depth per line and the numbers they print
    if first is not None and first.dpi_source == "file" and first.off < 1.1:
        scales = [first.scale] if first.rival is None else [first.scale, scale_named(first.rival)]
    fits = [fit_depth(finding.grid, finding.labels, scale.minor, scale.label_every, finding.pattern)
            for scale in scales] or [fit_depth(finding.grid, finding.labels, None, None, finding.pattern)]
    found = sorted((fit for fit in fits if fit is not None), key=lambda fit: -fit.votes)
    alike = len(found) > 1 and found[1].votes == found[0].votes and found[1].per_line != found[0].per_line
    finding.fit = found[0] if found and not alike else None
    per_line = finding.fit.per_line if finding.fit is not None else None
    finding.scale = name_scale(finding.grid, finding.pattern, dpi, page_width, per_line)
