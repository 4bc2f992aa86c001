"""Parsing the project's own files in tests."""

from __future__ import annotations

import ast
from pathlib import Path


def parsed(path: Path) -> ast.Module:
    """The file's syntax tree. CPython 3.11 before 3.11.8 may raise a spurious `SystemError: AST constructor
    recursion depth mismatch` now and then (python/cpython#106905; seen once here while collecting the whole
    suite, never on this file alone): such a parse is tried again, up to three times."""
    text = path.read_text()
    for attempt in range(3):
        try:
            return ast.parse(text, str(path))
        except SystemError as error:
            if "recursion depth mismatch" not in str(error) or attempt == 2:
                raise
    raise AssertionError("unreachable")
