"""Fixtures of the `veernet` client command tests: one embedded service per module (cli_stack.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))  # the e2e process helpers, reused

from cli_stack import (  # noqa: E402
    PRESIGN_BUCKET,
    CliService,
    Presigning,
    embedded_service,
    start_presigning_api,
)


@pytest.fixture(scope="module")
def cli_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliService]:
    with embedded_service(tmp_path_factory.mktemp("cli")) as service:
        yield service


@pytest.fixture(scope="module")
def presigning(cli_service: CliService) -> Iterator[Presigning]:
    """A second API whose downloads are 307s to presigned S3 URLs; started before the training, so that
    it starts while the job trains."""
    with start_presigning_api(cli_service, PRESIGN_BUCKET) as presigning:
        yield presigning
