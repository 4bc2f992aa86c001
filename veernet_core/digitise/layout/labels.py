"""Where the printed text is: the depth numbers in a section's depth column, and each track's header box.
Crops of the gray scan go to Tesseract (`ocr`); the boxes say where each word came from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from veernet_core.digitise.layout.sections import Ink, SectionRows
from veernet_core.digitise.layout.tracks import Interval


@dataclass(frozen=True)
class TextBox:
    top: int
    bottom: int  # inclusive
    left: int
    right: int  # inclusive

    @property
    def height(self) -> int:
        return self.bottom - self.top + 1

    @property
    def middle(self) -> float:
        return (self.top + self.bottom) / 2

    def crop(self, page: Ink, margin: int) -> np.ndarray:
        height, width = page.gray.shape
        return page.gray[max(0, self.top - margin):min(height, self.bottom + margin + 1),
                         max(0, self.left - margin):min(width, self.right + margin + 1)]


def number_boxes(page: Ink, rows: SectionRows, column: Interval) -> list[TextBox]:
    """Boxes around each line of text in the depth column: runs of inked rows (gaps of a row or two
    closed) at least as wide as tall, as a number of two digits or more is; round specks are not."""
    x0, x1 = column.left.last + 3, column.right.first - 2
    y0, y1 = math.ceil(rows.top) + 3, math.floor(rows.bottom) - 2
    if x1 - x0 < 4 or y1 - y0 < 4:
        return []
    ink = page.ink[y0:y1, x0:x1]
    boxes = []
    for a, b in _runs(np.asarray(ink.any(axis=1)), close=2):
        columns = np.flatnonzero(ink[a:b + 1].any(axis=0))
        left, right = _main_cluster(columns, gap=max(3, b - a + 1))
        if right - left + 1 >= 1.1 * (b - a + 1) and b - a + 1 >= 5:
            boxes.append(TextBox(y0 + a, y0 + b, x0 + left, x0 + right))
    if not boxes:
        return boxes
    usual = float(np.median([box.height for box in boxes]))  # the numbers' height: dirt is far smaller
    return [box for box in boxes if box.height >= 0.5 * usual]


def _runs(mask: np.ndarray, close: int) -> list[tuple[int, int]]:
    """Inclusive (first, last) of the runs of True, joining runs separated by at most `close` False."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    runs: list[tuple[int, int]] = []
    for first, stop in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
        if runs and first - runs[-1][1] - 1 <= close:
            runs[-1] = (runs[-1][0], stop - 1)
        else:
            runs.append((first, stop - 1))
    return runs


def _main_cluster(columns: np.ndarray, gap: int) -> tuple[int, int]:
    """The widest group of inked columns whose gaps are at most `gap`: the text, without a speck beside it."""
    if columns.size == 0:
        return 0, -1
    breaks = np.flatnonzero(np.diff(columns) > gap)
    starts = np.concatenate(([0], breaks + 1))
    stops = np.concatenate((breaks, [columns.size - 1]))
    widest = int(np.argmax(columns[stops] - columns[starts]))
    return int(columns[starts[widest]]), int(columns[stops[widest]])


def header_box(page: Ink, track: Interval, strip_top: int, body_top: float) -> TextBox | None:
    """The inside of a track's header box: between its borders, from under the strip's top line to above
    the grid's top frame line."""
    top = strip_top + 2 + round(track.left.last - track.left.first)
    bottom = math.floor(body_top) - 3 - round(track.left.last - track.left.first)
    left, right = track.left.last + 3, track.right.first - 3
    if bottom - top < 6 or right - left < 10:
        return None
    return TextBox(top, bottom, left, right)


RULE_STRETCHES = 16  # a line across a header box has ink in at least this many of its 20 stretches; text, in a few


def spread(ink: np.ndarray) -> np.ndarray:
    """Per row of a header box's ink (bool): in how many of 20 stretches across the box it has ink."""
    return np.stack([b.any(axis=1) for b in np.array_split(ink, 20, axis=1) if b.shape[1]], axis=1).sum(axis=1)


def erase_rules(crop: np.ndarray, ink_below: int) -> np.ndarray:
    """A header crop without its long horizontal lines (the samples of each curve's line style, solid,
    dashed or dotted, and a box's edges), which Tesseract would read as a row of dashes: rows with ink in
    at least RULE_STRETCHES of 20 stretches across the crop, with a row either side, are painted paper. A
    line of text has ink in a few stretches only (its scale ends and its name)."""
    clean = crop.copy()
    rows = np.flatnonzero(spread(crop < ink_below) >= RULE_STRETCHES)
    paper = np.uint8(np.median(crop)) if crop.size else np.uint8(255)
    for row in rows.tolist():
        clean[max(0, row - 1):row + 2] = paper
    return clean
