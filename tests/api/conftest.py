"""API test fixtures: an HTTP client on the app, and a reader of the real (embedded) broker."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# The e2e helpers, reused: `e2e_stack.redis_db` gives a test a Redis db no concurrent test session uses.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from api_testkit import SMALL_CONFIG, take_messages
from e2e_stack import redis_db

from api import jobs
from api.db import session_scope
from api.settings import Settings
from api.storage import make_store
from veernet_core.checkpoint import LocalStore, S3Store


@pytest.fixture
def broker_messages(service: Settings) -> Callable[[str], list[tuple[str, list[Any]]]]:
    """Take every message waiting on a queue of the configured broker: [(task name, args), ...]."""

    def take(queue: str) -> list[tuple[str, list[Any]]]:
        return take_messages(service.broker_url, queue)

    return take


@pytest.fixture
def running_job(service: Settings) -> tuple[int, int]:
    """A train job claimed by worker 'w1': (job id, attempt)."""
    with session_scope() as session:
        job_id = jobs.create_job(session, "train", SMALL_CONFIG).id
    with session_scope() as session:
        attempt = jobs.claim(session, job_id, "w1", lease_s=60)
    assert attempt == 1
    return job_id, attempt


@pytest.fixture
def store(service: Settings) -> LocalStore | S3Store:
    return make_store(service)


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A db of the machine's Redis that no concurrent test session uses (`e2e_stack.redis_db`'s file locks),
    flushed before and after: a queue no other test process takes messages from."""
    with redis_db() as url:
        yield url
