"""The calibration's vocabulary, in one place: every field a user may send (with whether it is required,
its default and a one-line description) and the values its hints may take. The parser
(`veernet_core.digitise.calibration`) rejects any other field name from this table, the README's reference
(docs/reference.md) and the OpenAPI description of POST /segment's `options` are rendered from it, and
a test checks that they agree.
"""

from __future__ import annotations

from dataclasses import dataclass

# A curve's backup scales: which side(s) one track width past the primary scale the curve may wrap to.
# "right": one track width past `right` (the trace leaves the track's bottom edge and re-enters at the
# top); "left": one track width past `left`; the value is the wrap level the tracer reports (+1 / -1).
WRAP_LEVELS: dict[str, tuple[int, ...]] = {"none": (), "right": (1,), "left": (-1,), "both": (-1, 1)}
# The older integer form of `wrap` (files written before the names): still read, mapped here only.
LEGACY_WRAP: dict[int, str] = {0: "none", 1: "right", -1: "left"}
STYLES = ("solid", "dashed", "dotted", "dash-dot")
INK_SHADES = ("dark", "light")  # black ink versus gray or faded ink
# Colour names a curve's ink may have on a colour scan, with the RGB the naming step compares against.
INK_COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (200, 40, 40), "orange": (230, 130, 30), "green": (40, 150, 60),
    "blue": (40, 70, 200), "purple": (130, 50, 160), "brown": (130, 80, 40),
}
INKS = (*INK_SHADES, *INK_COLOURS)
# A curve's line weight in the legend, against the track's other curves: a heavier pen than theirs is thick.
WEIGHTS = ("thin", "thick")


@dataclass(frozen=True)
class FieldDoc:
    """One calibration field: its dotted path (`[]` for list items), whether it is required, its default."""

    path: str
    required: bool
    default: str  # as a user writes it; "" for required fields
    description: str

    @property
    def summary(self) -> str:
        """"required", "optional" or "optional, default X"."""
        return "required" if self.required else "optional" + (f", default {self.default}" if self.default else "")


CALIBRATION_FIELDS: tuple[FieldDoc, ...] = (
    FieldDoc("depth", True, "", "Depth along the scan's width: either `top`/`bottom` or `ticks`, with `unit`."),
    FieldDoc("depth.unit", True, "", "Depth unit, such as m or ft."),
    FieldDoc("depth.top", False, "", "Depth at the scan's first column (with `bottom`; or give `ticks`)."),
    FieldDoc("depth.bottom", False, "", "Depth at the scan's last column (with `top`)."),
    FieldDoc("depth.ticks", False, "", "Two [column, depth] pairs read off depth ticks (instead of top/bottom)."),
    FieldDoc("curves", True, "", "The track's curves (1 to 4), each with its scale and optional identity hints."),
    FieldDoc("curves[].mnemonic", True, "", "Curve name for the outputs, such as GR."),
    FieldDoc("curves[].unit", False, '""', "Value unit, such as API."),
    FieldDoc("curves[].left", True, "", "Value at the track's top border row (the scale's left end)."),
    FieldDoc("curves[].right", True, "", "Value at the track's bottom border row (the scale's right end)."),
    FieldDoc("curves[].log", False, "false", "true for a logarithmic scale (left and right then positive)."),
    FieldDoc("curves[].wrap", False, "none", "Backup scales the curve wraps to: none, right, left or both "
             "(older files: 0, 1, -1)."),
    FieldDoc("curves[].style", False, "", "Line style from the log's legend: " + ", ".join(STYLES) + "."),
    FieldDoc("curves[].ink", False, "", "Ink from the legend: dark or light, or a colour on colour scans: "
             + ", ".join(INK_COLOURS) + "."),
    FieldDoc("curves[].weight", False, "", "Line weight from the legend, against the track's other curves: "
             "thin or thick (drawn with a heavier pen than theirs); a dotted curve's against dotted curves only."),
    FieldDoc("curves[].anchors", False, "[]", "Points read off the scan that this curve passes through."),
    FieldDoc("curves[].anchors[].depth", True, "", "Depth of the point, in depth.unit, within the scan."),
    FieldDoc("curves[].anchors[].value", True, "", "The curve's value there, on its primary scale."),
    FieldDoc("track_top", True, "", "Image row of the track's top border: where every scale reads `left`."),
    FieldDoc("track_bottom", True, "", "Image row of the track's bottom border: where every scale reads `right`."),
    FieldDoc("step", True, "", "Output depth step, in depth.unit (one output sample per step)."),
)


def allowed_names(parent: str) -> tuple[str, ...]:
    """Field names allowed directly under `parent` ("" for the top level, "curves[]", "depth", ...)."""
    prefix = f"{parent}." if parent else ""
    return tuple(f.path[len(prefix):] for f in CALIBRATION_FIELDS
                 if f.path.startswith(prefix) and "." not in f.path[len(prefix):])


def reference_markdown() -> str:
    """The calibration fields as a Markdown table (docs/reference.md holds this text; a test compares)."""
    lines = ["| field | required | default | meaning |", "|---|---|---|---|"]
    for f in CALIBRATION_FIELDS:
        lines.append(f"| `{f.path}` | {'yes' if f.required else 'no'} | {f.default and f'`{f.default}`'} | "
                     f"{f.description} |")
    return "\n".join(lines) + "\n"
