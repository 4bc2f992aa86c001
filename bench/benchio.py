"""Output helpers shared by the bench scripts: stdout is kept for the one JSON line each prints.

Imported as ``benchio`` by the scripts run as ``python bench/<script>.py`` (their folder is on sys.path).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


def log(message: str) -> None:
    """Progress goes to stderr, so that stdout holds only the result."""
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Everything written to fd 1 (including by C++ libraries) goes to stderr, so stdout holds one JSON line."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
