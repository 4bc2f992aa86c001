"""The page calibration's vocabulary, in one place: every field a user may send for digitising one section of a
full-page scan (POST /segment `options.page_calibration`), with whether it is required, its default and a
one-line description. It is the proposal of POST /scans/analyse (`veernet_core.digitise.layout.proposal`)
with its null values filled in, so every field the proposal writes is allowed here, the ones digitising does
not use included (marked "read only"); a hand-written calibration gives plain values instead of the
proposal's {value, confidence, evidence} triples. Each curve takes the fields of a track calibration's curve
(`calibration_fields.CALIBRATION_FIELDS`, `curves[]...`). The parser (`section_calibration`) refuses any other
field name, and docs/reference.md is rendered from this table.
"""

from __future__ import annotations

from veernet_core.digitise.calibration_fields import CALIBRATION_FIELDS, FieldDoc

FORMAT = "veernet.page-calibration/1"  # what POST /scans/analyse writes in `format`
TRIPLE_KEYS = frozenset({"value", "confidence", "evidence"})  # a proposed field: read by its value
INFORMATIONAL = "Read only: written by the analysis, not used for digitising."

_CURVE = "sections[].tracks[].curves[]"
SECTION_FIELDS: tuple[FieldDoc, ...] = (
    FieldDoc("format", False, "", f"`{FORMAT}` when sent (the proposal's own); any other value is refused."),
    FieldDoc("image", False, "", "The scan the calibration was made for: `height` and `width` must be the "
             "upload's; `dpi` sets the pixel scale the model reads the tracks at."),
    FieldDoc("image.height", False, "", "Rows of the scan as stored."),
    FieldDoc("image.width", False, "", "Columns of the scan as stored."),
    FieldDoc("image.dpi", False, "", "The scan's resolution (null: taken from an 8.5 in wide page)."),
    FieldDoc("page", False, "", "Size of the upright page (`height`, `width`): checked against the turned scan."),
    FieldDoc("page.height", False, "", "Rows of the upright page."),
    FieldDoc("page.width", False, "", "Columns of the upright page."),
    FieldDoc("orientation", False, "", "How the scan is made upright (header at the top, depth down the page)."),
    FieldDoc("orientation.turn", False, "0", "Degrees the scan is turned clockwise: 0, 90, 180 or 270."),
    FieldDoc("orientation.skew_deg", False, "0", "Then rotated by minus this many degrees about its centre "
             "(counter-clockwise positive), at most 3."),
    FieldDoc("header", False, "", INFORMATIONAL),
    FieldDoc("messages", False, "", INFORMATIONAL),
    FieldDoc("section", False, "0", "Index of the section to digitise; required when `sections` lists more "
             "than one. Only that section is read: the others may stay incomplete."),
    FieldDoc("step", False, "", "Output depth step, in the depth unit; default: 1, 2 or 5 times a power of ten, "
             "the least at or above the depth of one pixel row."),
    FieldDoc("sections", True, "", "The page's log sections, top to bottom, as the analysis proposes them."),
    FieldDoc("sections[].rows", True, "", "The section's grid: rows of its top and bottom frame lines."),
    FieldDoc("sections[].rows.top", True, "", "Row of the grid's top frame line on the upright page."),
    FieldDoc("sections[].rows.bottom", True, "", "Row of the grid's bottom frame line."),
    FieldDoc("sections[].depth", True, "", "The section's depth fit: `unit` and two `ticks`."),
    FieldDoc("sections[].depth.unit", True, "", "Depth unit, such as m or ft."),
    FieldDoc("sections[].depth.ticks", True, "", "Two [row, depth] pairs of the fit (depth grows down the page); "
             "depth is linear in the row between and beyond them."),
    FieldDoc("sections[].depth.rows_per_unit", False, "", INFORMATIONAL),
    FieldDoc("sections[].depth.range", False, "", INFORMATIONAL),
    FieldDoc("sections[].depth.residual", False, "", INFORMATIONAL),
    FieldDoc("sections[].depth.labels", False, "", INFORMATIONAL),
    FieldDoc("sections[].header_rows", False, "", INFORMATIONAL),
    FieldDoc("sections[].scale", False, "", INFORMATIONAL),
    FieldDoc("sections[].grid", False, "", INFORMATIONAL),
    FieldDoc("sections[].depth_column", False, "", INFORMATIONAL),
    FieldDoc("sections[].tracks", True, "", "The section's tracks, left to right, each with its curves."),
    FieldDoc("sections[].tracks[].extent", True, "", "Columns of the track's left and right border centres."),
    FieldDoc("sections[].tracks[].extent.left", True, "", "Column of the left border: where every scale reads "
             "`left`."),
    FieldDoc("sections[].tracks[].extent.right", True, "", "Column of the right border: where every scale reads "
             "`right`."),
    FieldDoc("sections[].tracks[].grid", False, "", INFORMATIONAL),
    FieldDoc("sections[].tracks[].curves", True, "", "The track's curves (1 to 4); mnemonics unique in the "
             "section, since one LAS file holds them all."),
    *(FieldDoc(f"sections[].tracks[].{f.path}", f.required, f.default, f.description)
      for f in CALIBRATION_FIELDS if f.path.startswith("curves[].")),
    FieldDoc(f"{_CURVE}.header_row", False, "", INFORMATIONAL),
)
_USED = {f.path for f in SECTION_FIELDS if f.description != INFORMATIONAL}


def allowed_names(parent: str) -> tuple[str, ...]:
    """Field names allowed directly under `parent` ("" for the top level, "sections[]", ...)."""
    prefix = f"{parent}." if parent else ""
    return tuple(f.path[len(prefix):] for f in SECTION_FIELDS
                 if f.path.startswith(prefix) and "." not in f.path[len(prefix):])


def is_used(path: str) -> bool:
    """Whether digitising reads the field at this dotted path (the others are the analysis's own notes)."""
    return path in _USED


def reference_markdown() -> str:
    """The page calibration fields as a Markdown table (docs/reference.md holds this text; a test compares)."""
    lines = ["| field | required | default | meaning |", "|---|---|---|---|"]
    for f in SECTION_FIELDS:
        lines.append(f"| `{f.path}` | {'yes' if f.required else 'no'} | {f.default and f'`{f.default}`'} | "
                     f"{f.description} |")
    return "\n".join(lines) + "\n"
