"""The retried parse of tests/syntax.py, which every `ast.parse` of the test process goes through."""

from __future__ import annotations

import ast

import pytest

from tests import syntax

MISMATCH = "AST constructor recursion depth mismatch (before=129, after=139)"


def test_the_test_process_parses_with_retries() -> None:
    assert ast.parse is syntax.parse_retried  # pytest's rewriting of test modules included


def _failing(times: int, message: str, calls: list[str]) -> object:
    def parse(source: str, filename: str, mode: str, **options: object) -> ast.Module:
        calls.append(source)
        if len(calls) <= times:
            raise SystemError(message)
        return ast.Module(body=[], type_ignores=[])
    return parse


@pytest.mark.parametrize(("times", "message", "parses", "raised"), [
    (2, MISMATCH, 3, None),  # spurious twice: the third parse gives the tree
    (3, MISMATCH, 3, "recursion depth mismatch"),  # three times in a row: not taken for spurious
    (1, "something else", 1, "something else"),  # any other error at once
])
def test_a_spurious_recursion_depth_error_is_tried_again_and_any_other_error_is_not(
        monkeypatch: pytest.MonkeyPatch, times: int, message: str, parses: int, raised: str | None) -> None:
    calls: list[str] = []
    monkeypatch.setattr(syntax, "_parse", _failing(times, message, calls))
    if raised is None:
        assert isinstance(syntax.parse_retried("x = 1"), ast.Module)
    else:
        with pytest.raises(SystemError, match=raised):
            syntax.parse_retried("x = 1")
    assert len(calls) == parses
