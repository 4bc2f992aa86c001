"""The calibration of one section of a full-page scan: how the page is made upright, the section's rows and
depth fit, and its tracks with their curves. It is read from the proposal of POST /scans/analyse as the user
completed it ({value, confidence, evidence} triples read by their value) or from the same fields written by
hand with plain values (`section_fields.SECTION_FIELDS`); every bad field is reported at once by its path in
the request (`sections[0].tracks[2].curves[1].right`), a null value left in the proposal as one to fill in.

Positions are pixels of the upright page, as the analysis gives them (`layout.page`). A track is digitised
as a track calibration (`Calibration`) of its crop: the section's rows by the track's columns, turned so
that depth runs along the width (the transpose, which keeps a scale's left end at the top), the depth fit
moved onto the crop's columns. `track_calibration` builds it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from veernet_core.digitise.calibration import MAX_CURVES, Calibration, CalibrationError, CurveScale, DepthScale
from veernet_core.digitise.calibration_parse import parse_curve, parse_number
from veernet_core.digitise.section_fields import FORMAT, TRIPLE_KEYS, allowed_names

Errors = dict[str, str]
TURNS = (0, 90, 180, 270)
MAX_SKEW_DEG = 3.0  # as the analysis measures at most (layout.page.MAX_SKEW_DEG)
MIN_SECTION_ROWS = 32  # the crop is the model's input width: at least one 32-px block
MIN_TRACK_COLUMNS = 8
NOMINAL_DPI = 300.0  # pixel scale 1.0 (veernet_core.digitise.rescale)
PAGE_WIDTH_IN = 8.5  # a page's width when its file states no resolution (as the analysis assumes)
HINTS = ("style", "ink", "weight")  # a curve field whose null means "no hint", not "fill me in"


@dataclass(frozen=True)
class SectionTrack:
    left: float  # column of the left border centre: every scale reads `left` here
    right: float
    curves: tuple[CurveScale, ...]


@dataclass(frozen=True)
class Crop:
    """A track's crop of the upright page: rows [row0, row1] by columns [col0, col1], both inclusive."""

    row0: int
    row1: int
    col0: int
    col1: int

    @property
    def size(self) -> tuple[int, int]:
        """(height, width) of the crop once turned: track columns down, section rows along."""
        return self.col1 - self.col0 + 1, self.row1 - self.row0 + 1


def track_crop(rows: tuple[float, float], left: float, right: float, page_size: tuple[int, int]) -> Crop:
    """A track's crop of an upright page of `page_size`: the section's rows (its frame lines at `rows`), the
    track's columns (its borders at `left` and `right`) and a margin either side (a curve's stroke reaches
    past a border; the model's training logs leave a few per cent of the height outside their track), at
    least MIN_SECTION_ROWS columns."""
    height, width = page_size
    margin = max(4.0, 0.05 * (right - left))
    col0, col1 = max(0, math.floor(left - margin)), min(width - 1, math.ceil(right + margin))
    while col1 - col0 + 1 < MIN_SECTION_ROWS and (col0 > 0 or col1 < width - 1):
        col0, col1 = max(0, col0 - 1), min(width - 1, col1 + 1)
    return Crop(*section_rows(rows, height), col0, col1)


def section_rows(rows: tuple[float, float], height: int) -> tuple[int, int]:
    """The page rows a section's crops span: from its top frame line to its bottom one, on a page `height`
    rows tall."""
    return math.floor(rows[0]), min(math.ceil(rows[1]), height - 1)


@dataclass(frozen=True)
class SectionCalibration:
    turn: int  # degrees the scan is turned clockwise to be upright
    skew_deg: float  # then rotated by -skew_deg about its centre
    index: int  # which section of the page
    rows: tuple[float, float]  # the grid's top and bottom frame lines
    depth: DepthScale  # depth of a page row (col_a, col_b hold rows)
    tracks: tuple[SectionTrack, ...]
    step: float
    image_size: tuple[int, int]  # (height, width) of the scan as stored
    dpi: float | None

    @property
    def page_size(self) -> tuple[int, int]:
        return page_size(self.image_size, self.turn)

    @property
    def scan_scale(self) -> float:
        """The page's pixel scale relative to full-resolution logs: its dpi over 300, or from the page's width
        taken as 8.5 in when the file states none."""
        dpi = self.dpi or self.page_size[1] / PAGE_WIDTH_IN
        return dpi / NOMINAL_DPI

    @property
    def section_rows(self) -> tuple[int, int]:
        return section_rows(self.rows, self.page_size[0])

    def crop(self, j: int) -> Crop:
        """Track j's crop (`track_crop`)."""
        track = self.tracks[j]
        return track_crop(self.rows, track.left, track.right, self.page_size)

    def track_calibration(self, j: int) -> Calibration:
        """Track j as a track calibration of its turned crop (depth along the width, `left` at the top)."""
        crop, track = self.crop(j), self.tracks[j]
        d = self.depth
        raw = {"depth": {"ticks": [[d.col_a - crop.row0, d.depth_a], [d.col_b - crop.row0, d.depth_b]],
                         "unit": d.unit},
               "curves": [c.to_dict() for c in track.curves], "track_top": track.left - crop.col0,
               "track_bottom": track.right - crop.col0, "step": self.step}
        try:
            return Calibration.from_dict(raw, *crop.size)
        except CalibrationError as exc:  # the page-level checks hold what this checks; name it as sent if not
            raise CalibrationError({_page_path(name, self.index, j): message
                                    for name, message in exc.errors.items()}) from exc

    def to_dict(self) -> dict[str, Any]:
        """The plain form, read back by `from_dict`: the other sections as empty objects (not read)."""
        d = self.depth
        section = {"rows": {"top": self.rows[0], "bottom": self.rows[1]},
                   "depth": {"unit": d.unit, "ticks": [[d.col_a, d.depth_a], [d.col_b, d.depth_b]]},
                   "tracks": [{"extent": {"left": t.left, "right": t.right},
                               "curves": [c.to_dict() for c in t.curves]} for t in self.tracks]}
        return {"format": FORMAT, "image": {"height": self.image_size[0], "width": self.image_size[1],
                                            "dpi": self.dpi},
                "orientation": {"turn": self.turn, "skew_deg": self.skew_deg}, "section": self.index,
                "step": self.step, "sections": [{}] * self.index + [section]}

    @classmethod
    def from_dict(cls, data: Any, height: int, width: int) -> SectionCalibration:
        """Read and check a page calibration for a scan of (height, width) px as stored; raises one
        CalibrationError naming every bad field."""
        return _Reader(height, width).read(data)


def page_size(image_size: tuple[int, int], turn: int) -> tuple[int, int]:
    """(height, width) of the upright page: a quarter turn swaps the sides; the deskew keeps the size."""
    return (image_size[1], image_size[0]) if turn % 180 else image_size


def default_step(depth_per_row: float) -> float:
    """The least of 1, 2 or 5 times a power of ten at or above the depth of one pixel row."""
    exponent = math.floor(math.log10(depth_per_row))
    for mantissa in (1, 2, 5, 10):
        step = mantissa * 10.0**exponent
        if step >= depth_per_row * (1 - 1e-9):
            return round(step, 12)
    return 10.0 ** (exponent + 1)  # not reached: 10 x 10**e >= anything below 10**(e + 1)


def _page_path(name: str, section: int, track: int) -> str:
    """A track calibration's field name as the page calibration names it."""
    where = f"sections[{section}]"
    if name.startswith("curves"):
        return f"{where}.tracks[{track}].{name}"
    if name in ("track_top", "track_bottom"):
        return f"{where}.tracks[{track}].extent"
    return f"{where}.depth.ticks" if name.startswith("depth") else name


def _field_name(path: str, parent: str) -> str:
    """The first name under `parent` in a dotted path: `curves[0].anchors[1].depth` under `curves[0]` is anchors."""
    return path[len(parent) + 1:].split(".")[0].split("[")[0]


def _is_triple(raw: Any) -> bool:
    return isinstance(raw, dict) and "value" in raw and set(raw) <= TRIPLE_KEYS


class _Missing:
    """A field absent or left null: already reported."""


MISSING = _Missing()


class _Reader:
    """One reading of a page calibration: the scan's size and every problem found so far."""

    def __init__(self, height: int, width: int) -> None:
        self.image_size = (height, width)
        self.errors: Errors = {}

    def read(self, data: Any) -> SectionCalibration:
        if not isinstance(data, dict):
            raise CalibrationError({"page_calibration": "must be an object: the proposal of POST /scans/analyse, "
                                    "completed, or {orientation, section, sections: [{rows, depth, tracks}]}"})
        self._unknown(data, "", "")
        if "format" in data and data["format"] != FORMAT:
            self.errors["format"] = f"must be {FORMAT!r} (or left out), got {data['format']!r}"
        dpi = self._image(data.get("image"))
        turn, skew = self._orientation(data.get("orientation", {}))
        if turn is not None:
            self._page(data.get("page"), page_size(self.image_size, turn))
        index, section = self._section_of(data)
        parts = None
        if section is not None and turn is not None:
            parts = self._read_section(section, index, page_size(self.image_size, turn))
        step = self._step(data, parts[1] if parts else None, parts[0] if parts else None)
        if self.errors or parts is None or turn is None or skew is None or step is None:
            raise CalibrationError(self.errors or {"sections": "could not be read"})
        rows, depth, tracks = parts
        return SectionCalibration(turn, skew, index, rows, depth, tracks, step, self.image_size, dpi)

    # -- fields ------------------------------------------------------------------------------------------

    def _value(self, raw: Any, where: str, what: str) -> Any:
        """A field's value: a triple's `value`, else the field as written; MISSING (and reported) when null."""
        value = raw["value"] if _is_triple(raw) else raw
        if value is None:
            self.errors[where] = f"is not filled in (null in the proposal): give {what}"
            return MISSING
        return value

    def _field(self, parent: dict[str, Any], name: str, where: str, what: str) -> Any:
        if name not in parent:
            self.errors[where] = f"is required: {what}"
            return MISSING
        return self._value(parent[name], where, what)

    def _number(self, parent: dict[str, Any], name: str, where: str, what: str) -> float | None:
        value = self._field(parent, name, where, what)
        return None if value is MISSING else parse_number(value, where, self.errors)

    def _object(self, raw: Any, where: str, parent: str, what: str) -> dict[str, Any] | None:
        value = self._value(raw, where, what)
        if value is MISSING:
            return None
        if not isinstance(value, dict):
            self.errors[where] = f"must be an object: {what}"
            return None
        self._unknown(value, parent, where)
        return value

    def _unknown(self, raw: dict[str, Any], parent: str, where: str) -> None:
        allowed = allowed_names(parent)
        for name in raw:
            if name not in allowed:
                self.errors[f"{where}.{name}" if where else str(name)] = f"unknown field; allowed: {', '.join(allowed)}"

    # -- the page ----------------------------------------------------------------------------------------

    def _image(self, raw: Any) -> float | None:
        """The scan's stated size (checked against the upload) and its dpi, if given."""
        if raw is None:
            return None
        image = self._object(raw, "image", "image", "{height, width, dpi} of the scan")
        if image is None:
            return None
        for k, name in enumerate(("height", "width")):
            if name in image and image[name] != self.image_size[k]:
                self.errors[f"image.{name}"] = (f"is {image[name]!r} but the uploaded scan is {self.image_size[0]} x "
                                                f"{self.image_size[1]} px (height x width): this calibration was "
                                                "made for another scan, or the scan was changed since")
        dpi = image.get("dpi")
        if dpi is None:
            return None
        if isinstance(dpi, bool) or not isinstance(dpi, int | float) or not 50 <= dpi <= 2400:
            self.errors["image.dpi"] = (f"must be the scan's resolution in dots per inch (50 to 2400) or null, "
                                        f"got {dpi!r}")
            return None
        return float(dpi)

    def _page(self, raw: Any, size: tuple[int, int]) -> None:
        if raw is None:
            return
        page = self._object(raw, "page", "page", "{height, width} of the upright page")
        for k, name in enumerate(("height", "width")):
            if page is not None and name in page and page[name] != size[k]:
                self.errors[f"page.{name}"] = (f"is {page[name]!r} but the scan turned by orientation.turn is "
                                               f"{size[0]} x {size[1]} px (height x width): check orientation.turn")

    def _orientation(self, raw: Any) -> tuple[int | None, float | None]:
        orientation = self._object(raw, "orientation", "orientation", "{turn, skew_deg}")
        if orientation is None:
            return None, None
        turn = self._value(orientation.get("turn", 0), "orientation.turn", "the turn, 0, 90, 180 or 270")
        if turn is not MISSING and (isinstance(turn, bool) or turn not in TURNS):
            self.errors["orientation.turn"] = f"must be 0, 90, 180 or 270 (degrees clockwise), got {turn!r}"
            turn = MISSING
        skew = self._value(orientation.get("skew_deg", 0.0), "orientation.skew_deg", "the skew in degrees")
        skew = None if skew is MISSING else parse_number(skew, "orientation.skew_deg", self.errors)
        if skew is not None and abs(skew) > MAX_SKEW_DEG:
            self.errors["orientation.skew_deg"] = f"must be within +-{MAX_SKEW_DEG:g} degrees, got {skew!r}"
            skew = None
        return (None if turn is MISSING else int(turn)), skew

    def _section_of(self, data: dict[str, Any]) -> tuple[int, Any]:
        """(index, raw section) of the section to digitise; (index, None) when it cannot be had."""
        sections = data.get("sections")
        if not isinstance(sections, list) or not sections:
            self.errors["sections"] = ("is required: a non-empty list of sections, each {rows, depth, tracks}"
                                       if sections is None else "must be a non-empty list of sections")
            return 0, None
        index = data.get("section")
        if index is None and len(sections) > 1:
            self.errors["section"] = (f"is required: sections lists {len(sections)}; give the index of the one to "
                                      f"digitise, 0 to {len(sections) - 1}")
            return 0, None
        index = 0 if index is None else index
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(sections):
            self.errors["section"] = f"must be a section index, 0 to {len(sections) - 1}, got {index!r}"
            return 0, None
        for k, other in enumerate(sections):
            if not isinstance(other, dict):
                self.errors[f"sections[{k}]"] = "must be an object {rows, depth, tracks}"
        return index, sections[index] if isinstance(sections[index], dict) else None

    # -- the section -------------------------------------------------------------------------------------

    def _read_section(self, raw: dict[str, Any], s: int, size: tuple[int, int]
                      ) -> tuple[tuple[float, float], DepthScale, tuple[SectionTrack, ...]] | None:
        where = f"sections[{s}]"
        self._unknown(raw, "sections[]", where)
        before = len(self.errors)
        rows = self._rows(raw, where, size[0])
        depth = self._depth(raw, where)
        tracks = self._tracks(raw, where, size[1])
        if rows is not None and depth is not None:
            self._anchors(tracks or (), rows, depth, where)
        if len(self.errors) > before or rows is None or depth is None or tracks is None:
            return None
        return rows, depth, tracks

    def _rows(self, raw: dict[str, Any], where: str, height: int) -> tuple[float, float] | None:
        what = "{top, bottom}: rows of the grid's top and bottom frame lines"
        rows = self._object(raw.get("rows"), f"{where}.rows", "sections[].rows", what) if "rows" in raw else None
        if "rows" not in raw:
            self.errors[f"{where}.rows"] = f"is required: {what}"
        if rows is None:
            return None
        top, bottom = (self._number(rows, name, f"{where}.rows.{name}", "a row of the upright page")
                       for name in ("top", "bottom"))
        if top is None or bottom is None:
            return None
        if not 0 <= top < height:
            self.errors[f"{where}.rows.top"] = f"must be a row of the upright page (0 to {height - 1}), got {top!r}"
        elif not top + MIN_SECTION_ROWS <= bottom <= height - 1:
            self.errors[f"{where}.rows.bottom"] = (f"must be at least {MIN_SECTION_ROWS} rows below rows.top "
                                                   f"({top:g}) and inside the page (< {height}), got {bottom!r}")
        else:
            return top, bottom
        return None

    def _depth(self, raw: dict[str, Any], where: str) -> DepthScale | None:
        what = "{unit, ticks: [[row, depth], [row, depth]]}: the section's depth fit"
        depth = self._object(raw.get("depth"), f"{where}.depth", "sections[].depth", what) if "depth" in raw \
            else None
        if "depth" not in raw:
            self.errors[f"{where}.depth"] = f"is required: {what}"
        if depth is None:
            return None
        unit = self._field(depth, "unit", f"{where}.depth.unit", "the depth unit, such as m or ft")
        if unit is not MISSING and (not isinstance(unit, str) or not unit.strip()):
            self.errors[f"{where}.depth.unit"] = f"must name the depth unit, such as m or ft, got {unit!r}"
        ticks = self._field(depth, "ticks", f"{where}.depth.ticks", "two [row, depth] pairs read off the depth "
                            "numbers")
        scale = None if ticks is MISSING else self._ticks(ticks, f"{where}.depth.ticks")
        if scale is None or not isinstance(unit, str) or not unit.strip():
            return None
        return replace(scale, unit=unit.strip())

    def _ticks(self, ticks: Any, where: str) -> DepthScale | None:
        if not (isinstance(ticks, list) and len(ticks) == 2 and all(isinstance(t, list) and len(t) == 2
                                                                    for t in ticks)):
            self.errors[where] = f"must be two [row, depth] pairs, got {ticks!r}"
            return None
        numbers = [parse_number(x, f"{where}[{k}]", self.errors) for k, pair in enumerate(ticks) for x in pair]
        if None in numbers:
            return None
        (r1, d1), (r2, d2) = sorted([(numbers[0] or 0.0, numbers[1] or 0.0), (numbers[2] or 0.0, numbers[3] or 0.0)])
        if r1 == r2:
            self.errors[where] = "must be at two different rows"
        elif d2 <= d1:
            self.errors[where] = (f"must deepen down the page ({d1:g} at row {r1:g}, {d2:g} at row {r2:g}); if the "
                                  "log reads upward the page is upside down: add 180 to orientation.turn")
        else:
            return DepthScale("unit", r1, d1, r2, d2)
        return None

    def _tracks(self, raw: dict[str, Any], where: str, width: int) -> tuple[SectionTrack, ...] | None:
        tracks = raw.get("tracks")
        if not isinstance(tracks, list) or not tracks:
            self.errors[f"{where}.tracks"] = "is required: the section's tracks, each {extent, curves}"
            return None
        read = [self._track(t, f"{where}.tracks[{j}]", width) for j, t in enumerate(tracks)]
        self._unique_mnemonics(read, where)
        return None if None in read else tuple(t for t in read if t is not None)

    def _track(self, raw: Any, where: str, width: int) -> SectionTrack | None:
        if not isinstance(raw, dict):
            self.errors[where] = "must be an object {extent: {left, right}, curves: [...]}"
            return None
        self._unknown(raw, "sections[].tracks[]", where)
        extent = self._object(raw.get("extent"), f"{where}.extent", "sections[].tracks[].extent",
                              "{left, right}: columns of the track's border centres") if "extent" in raw else None
        if "extent" not in raw:
            self.errors[f"{where}.extent"] = "is required: {left, right}, columns of the track's border centres"
        left = right = None
        if extent is not None:
            left, right = (self._number(extent, name, f"{where}.extent.{name}", "a column of the upright page")
                           for name in ("left", "right"))
        if left is not None and right is not None:
            if not 0 <= left < width:
                self.errors[f"{where}.extent.left"] = f"must be a column of the page (0 to {width - 1}), got {left!r}"
            elif not left + MIN_TRACK_COLUMNS <= right <= width - 1:
                self.errors[f"{where}.extent.right"] = (f"must be at least {MIN_TRACK_COLUMNS} columns right of "
                                                        f"extent.left ({left:g}) and inside the page (< {width}), "
                                                        f"got {right!r}")
        curves = self._curves(raw.get("curves"), f"{where}.curves")
        bad_extent = any(k.startswith(f"{where}.extent") for k in self.errors)
        if bad_extent or left is None or right is None or curves is None:
            return None
        return SectionTrack(left, right, curves)

    def _curves(self, raw: Any, where: str) -> tuple[CurveScale, ...] | None:
        if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_CURVES:
            self.errors[where] = (f"must list the track's 1 to {MAX_CURVES} curves, each {{mnemonic, unit, left, "
                                  f"right, ...}}, got {len(raw) if isinstance(raw, list) else raw!r}")
            return None
        read = [self._curve(c, f"{where}[{k}]") for k, c in enumerate(raw)]
        return None if None in read else tuple(c for c in read if c is not None)

    def _curve(self, raw: Any, where: str) -> CurveScale | None:
        """A curve with its triples read by value: a null hint (style, ink) is no hint; any other null is a
        field to fill in. The rest is a track calibration's curve (`calibration_parse.parse_curve`)."""
        if not isinstance(raw, dict):
            self.errors[where] = "must be an object {mnemonic, unit, left, right, log, ...}"
            return None
        plain: dict[str, Any] = {}
        nulls = False
        for name, value in raw.items():
            if name == "header_row":
                continue
            if name in HINTS and (value["value"] if _is_triple(value) else value) is None:
                continue
            read = self._value(value, f"{where}.{name}", _WHAT.get(name, "its value"))
            nulls |= read is MISSING
            plain[name] = read
        found: Errors = {}
        curve = parse_curve({k: v for k, v in plain.items() if v is not MISSING}, where, found)
        # "is required" where the proposal's null already said "fill in" is left out: one message a field
        self.errors.update({k: v for k, v in found.items() if plain.get(_field_name(k, where)) is not MISSING})
        problems = curve.problems(where) if curve is not None else {}
        self.errors.update(problems)
        return None if nulls or curve is None or problems else curve

    def _unique_mnemonics(self, tracks: list[SectionTrack | None], where: str) -> None:
        seen: dict[str, str] = {}
        for j, track in enumerate(tracks):
            for k, curve in enumerate(track.curves if track else ()):
                name, path = curve.mnemonic.strip().upper(), f"{where}.tracks[{j}].curves[{k}]"
                if name in seen:
                    self.errors[f"{path}.mnemonic"] = (f"{curve.mnemonic!r} is also {seen[name]}'s: each curve of a "
                                                       "section needs its own mnemonic (one LAS file holds them "
                                                       "all); rename one, e.g. GR and GR_2")
                seen.setdefault(name, path)

    def _anchors(self, tracks: tuple[SectionTrack, ...], rows: tuple[float, float], depth: DepthScale,
                 where: str) -> None:
        shallow, deep = (float(depth.depth_of(r)) for r in rows)
        for j, track in enumerate(tracks):
            for k, curve in enumerate(track.curves):
                for a, anchor in enumerate(curve.anchors):
                    if not shallow <= anchor.depth <= deep:
                        self.errors[f"{where}.tracks[{j}].curves[{k}].anchors[{a}].depth"] = (
                            f"must lie within the section's depths ({shallow:g} to {deep:g}), got {anchor.depth!r}")

    def _step(self, data: dict[str, Any], depth: DepthScale | None, rows: tuple[float, float] | None) -> float | None:
        if depth is None or rows is None:
            if "step" in data:
                parse_number(data["step"], "step", self.errors)
            return None
        per_row = (depth.depth_b - depth.depth_a) / (depth.col_b - depth.col_a)
        span = per_row * (rows[1] - rows[0])
        if "step" not in data or data["step"] is None:
            return default_step(per_row)
        step = parse_number(data["step"], "step", self.errors)
        if step is not None and not 0 < step <= span:
            self.errors["step"] = f"must be positive and at most the section's depth span ({span:g}), got {step!r}"
            return None
        return step


_WHAT = {"mnemonic": "the curve's name, such as GR", "unit": 'its unit, such as API ("" for none)',
         "left": "the value at the track's left border", "right": "the value at the track's right border",
         "log": "true for a logarithmic scale, else false", "wrap": "none, right, left or both",
         "anchors": "a list of {depth, value} points (or [])"}
