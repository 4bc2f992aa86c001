"""The reference of what a user writes: every TrainConfig field, every calibration field and every page
calibration field, each with a one-line description, rendered into docs/reference.md and the OpenAPI schema
from one source each.

A training field's description is the comment beside it in `veernet_core/config.py` (the reason for its
default, nanoGPT style), or the comment lines just above it; a calibration field's is its entry in
`veernet_core.digitise.calibration_fields.CALIBRATION_FIELDS`. tests/core/test_reference.py checks that
docs/reference.md is this module's output and that no field goes undescribed.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import tokenize
from typing import Any

from veernet_core.config import DataConfig, ModelConfig, TrainConfig
from veernet_core.digitise import calibration_fields, section_fields

CONFIG_SECTIONS: tuple[tuple[str, type], ...] = (("", TrainConfig), ("model.", ModelConfig), ("data.", DataConfig))


def _comments(cls: type) -> dict[str, str]:
    """A dataclass's fields' comments: the one on the field's line, else the comment lines above it."""
    source = inspect.getsource(cls)
    found: dict[str, str] = {}
    above: list[str] = []
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for k, token in enumerate(tokens):
        if token.type == tokenize.COMMENT:
            text = token.string.lstrip("#").strip()
            line_start = all(t.start[0] != token.start[0] or t.type in (tokenize.INDENT, tokenize.DEDENT)
                             for t in tokens[:k] if t.start[0] == token.start[0])
            if line_start:
                above.append(text)
            else:
                name = next(t.string for t in tokens if t.start[0] == token.start[0] and t.type == tokenize.NAME)
                found[name] = text
                above = []
        elif token.type == tokenize.NAME and token.start[1] == 4 and tokens[k + 1].string == ":" and above:
            found.setdefault(token.string, " ".join(above))
            above = []
        elif token.type == tokenize.NAME and token.start[1] == 4:
            above = []
    return found


def config_descriptions() -> dict[str, str]:
    """Dotted TrainConfig field name -> its one-line description ("" where the source has none)."""
    descriptions: dict[str, str] = {}
    for prefix, cls in CONFIG_SECTIONS:
        comments = _comments(cls)
        for field in dataclasses.fields(cls):
            if field.name not in ("model", "data") or prefix:
                descriptions[prefix + field.name] = comments.get(field.name, "")
    return descriptions


def _default(value: Any) -> str:
    return str(list(value)) if isinstance(value, tuple) else repr(value) if isinstance(value, str) else str(value)


def _config_table() -> list[str]:
    descriptions = config_descriptions()
    lines = ["| field | default | meaning |", "|---|---|---|"]
    for prefix, cls in CONFIG_SECTIONS:
        defaults = cls()
        for field in dataclasses.fields(cls):
            dotted = prefix + field.name
            if dotted in descriptions:
                lines.append(f"| `{dotted}` | `{_default(getattr(defaults, field.name))}` | {descriptions[dotted]} |")
    return lines


def reference_markdown() -> str:
    """docs/reference.md: the training config's fields, then the calibration's."""
    return "\n".join([
        "# Reference",
        "",
        "Generated from the code by `python -m veernet_core.reference > docs/reference.md`; a test keeps this",
        "file equal to its output, so a field added or removed in the code shows here.",
        "",
        "## Training config (`POST /jobs` `config`, `veernet submit FILE`)",
        "",
        "A `TrainConfig`; every field is optional and takes the default shown. Nested fields are written as",
        "objects (`{\"model\": {\"num_classes\": 2}}`) or, on the command line, `--set model.num_classes=2`.",
        "",
        *_config_table(),
        "",
        "## Calibration (`POST /segment` `options.calibration`, `veernet segment --calibration FILE`)",
        "",
        "Unknown fields are refused naming the allowed ones; every bad field is reported at once.",
        "",
        calibration_fields.reference_markdown().rstrip("\n"),
        "",
        "## Page calibration (`POST /segment` `options.page_calibration`, `veernet segment --calibration FILE`)",
        "",
        "One section of a full-page scan: the proposal of `POST /scans/analyse` (`veernet analyse`) as the user",
        "completed it, or the same fields written by hand. Any field may be a `{value, confidence, evidence}`",
        "triple, read by its value; a null value is a field to fill in (a null `style` or `ink` is no hint).",
        "Positions are pixels of the upright page. Unknown fields are refused naming the allowed ones; every",
        "bad field is reported at once by its path (`sections[0].tracks[2].curves[1].right`).",
        "",
        section_fields.reference_markdown().rstrip("\n"),
        "",
    ])


if __name__ == "__main__":
    print(reference_markdown(), end="")
