"""Schemathesis against the OpenAPI schema of api.main:app, in process, with keys on and the admin key:
every operation, generated cases (positive and negative), no 5xx, and every answer as the schema says
(status code, content type, headers and body). The figures are printed by the last test."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from auth_testkit import build_world, new_admin_key
from hypothesis import HealthCheck, settings
from schemathesis.core.result import Ok

from api.main import app
from api.settings import Settings

# One process: under pytest-xdist with two or more workers, schemathesis's items collect as one test of one
# operation, and test_figures below needs every operation's answers in its own process.
pytestmark = pytest.mark.serial
MAX_EXAMPLES = 50  # per operation: well under a minute for the whole schema
# A schema-valid submission may still be refused with 422 for what no JSON schema says: POST /jobs and /plan for
# rules across config fields (model.num_classes = data.classes, ...) or a device nothing knows, POST /segment
# for a file that is not an image or options (a JSON string in a form field) that make no sense. Everything else
# is checked as documented.
SEMANTIC_422 = {"include-method": "POST", "checks": {"positive_data_acceptance": {
    "expected-statuses": ["2xx", "401", "403", "404", "409", "413", "422", "429"]}}}
ADMIN_KEY = new_admin_key()  # schemathesis sends it on every case, and knows it does when it mutates auth
CONFIG = schemathesis.config.SchemathesisConfig.from_dict({
    "auth": {"openapi": {"ApiKey": {"bearer": ADMIN_KEY}}},
    "operations": [{**SEMANTIC_422, "include-path": path}
                   for path in ("/jobs", "/segment", "/plan", "/plan/chart.svg")]})
schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)
FIGURES: Counter[str] = Counter()
STATUSES: Counter[tuple[str, int]] = Counter()


@pytest.fixture(scope="session")
def database_url(postgres_url: str) -> str:
    """The real stack's database."""
    return postgres_url


@pytest.fixture
def keyed_world(service: Settings, reconfigure: Callable[..., Settings], store: Any) -> None:
    """Keys on, one tenant's jobs, checkpoint and results in place (small ids: generated ones hit them),
    and a short wait=true so that a generated POST /segment never waits for a worker that is not there."""
    # A plan that needs a measurement queues a probe job (no worker runs it here) and answers at once;
    # tests/api/test_api_plan.py covers the plans themselves.
    reconfigure(VEERNET_ADMIN_KEY=ADMIN_KEY, SEGMENT_WAIT_MAX_SECONDS=0.05)
    build_world(store, "acme", queued=2)


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_answers_as_its_schema_says(case: schemathesis.Case, keyed_world: None) -> None:
    operation = f"{case.operation.method.upper()} {case.operation.path}"
    FIGURES["cases"] += 1
    try:
        response = case.call_and_validate()
    except Exception:
        FIGURES["violations"] += 1
        raise
    STATUSES[(operation, response.status_code)] += 1
    FIGURES["5xx"] += response.status_code >= 500


def test_figures() -> None:
    """After the run above: cases, answers by status, 5xx and violations; and every operation was covered."""
    operations = {f"{r.ok().method.upper()} {r.ok().path}" for r in schema.get_all_operations() if isinstance(r, Ok)}
    covered = {operation for operation, _ in STATUSES}
    if not FIGURES["cases"]:
        pytest.skip("run with the schemathesis tests above (they did not run)")
    by_status = Counter(status for _, status in STATUSES.elements())
    print(f"\nschemathesis: {len(operations)} operations, {FIGURES['cases']} generated cases, "
          f"{FIGURES['5xx']} 5xx, {FIGURES['violations']} schema violations; answers by status: "
          f"{dict(sorted(by_status.items()))}")
    assert covered == operations
    assert FIGURES["5xx"] == 0 and FIGURES["violations"] == 0
