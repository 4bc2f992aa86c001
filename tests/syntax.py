"""Parsing Python source in tests, pytest's own parses included.

CPython 3.11 before 3.11.8 may raise a spurious `SystemError: AST constructor recursion depth mismatch`
now and then (python/cpython#106905). It was seen here twice: once in one of the project's own parses
of its files while collecting the whole suite, and once in pytest's parse of a test module it rewrites
(tests/e2e/test_dashboard_browser.py, collected for the serial run of `make test` on a clean clone),
never on a file alone. Such a parse is tried again, up to three times; `tests/conftest.py` makes every
`ast.parse` of the test process do so.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

_parse = ast.parse


def parse_retried(source: str | bytes, filename: str = "<unknown>", mode: str = "exec", **options: Any) -> Any:
    """`ast.parse`, tried again when CPython's spurious recursion-depth SystemError interrupts it."""
    for attempt in range(3):
        try:
            return _parse(source, filename, mode, **options)
        except SystemError as error:
            if "recursion depth mismatch" not in str(error) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def parsed(path: Path) -> ast.Module:
    """The file's syntax tree."""
    tree = parse_retried(path.read_text(), str(path))
    assert isinstance(tree, ast.Module)
    return tree
