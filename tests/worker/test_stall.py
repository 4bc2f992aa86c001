"""A job whose thread is stuck while its heartbeat still beats: the heartbeat sees no progress, records where
the job was stuck, hands it back and ends the process.

Here the job thread is a real thread stuck in a wait, and the heartbeat a real one on the real database and
broker; only the last act, ending the process, is recorded instead of done (it would end pytest). That act
is tested in a process of its own below, and the whole of it on a real worker with a real hung DataLoader
worker in tests/e2e/test_chaos_stall.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))  # the API tests' broker reader
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))  # and the e2e tests' process helpers

from api_testkit import take_messages
from e2e_procs import pid_alive, wait_until

from api import jobs
from api.db import session_scope
from api.models import Job, JobEvent
from api.settings import Settings
from worker.attempt import STALL_FACTOR, STALLED_EXIT, Heartbeat, start_job

CONFIG: dict[str, Any] = {"epochs": 1, "effective_batch": 4}


class StuckJob:
    """A job claimed by this process's worker code, whose job thread is a real thread that waits on an
    event (as a training thread waits on a hung DataLoader worker) after the progress it is told to make."""

    def __init__(self, settings: Settings) -> None:
        with session_scope() as session:
            self.job_id = jobs.create_job(session, "train", CONFIG).id
        self.settings = settings
        self.ended = threading.Event()
        self.release = threading.Event()
        self.heartbeat: Heartbeat | None = None
        self.ready = threading.Event()
        self.progress: Callable[[Heartbeat], None] = lambda heartbeat: heartbeat.progressed("train")  # a step done
        self.thread = threading.Thread(target=self._job, name="job-thread", daemon=True)

    def _job(self) -> None:
        started = start_job(self.job_id, self.settings)
        assert started is not None
        attempt, _, heartbeat = started
        heartbeat._end_process = self.ended.set  # the process is not ended: pytest runs in it
        self.attempt, self.heartbeat = attempt, heartbeat
        self.ready.set()
        self.progress(heartbeat)
        wait_here_for_ever(self.release)

    def start(self, progress: Callable[[Heartbeat], None] | None = None) -> StuckJob:
        self.progress = progress or self.progress
        self.thread.start()
        assert self.ready.wait(30), "the job was not claimed"
        return self

    def stop(self) -> None:
        self.release.set()
        if self.heartbeat is not None:
            self.heartbeat.stop()
        self.thread.join(10)

    def job(self) -> Job:
        with session_scope() as session:
            return jobs.get_job(session, self.job_id)

    def events(self) -> list[JobEvent]:
        with session_scope() as session:
            rows = session.scalars(select(JobEvent).where(JobEvent.job_id == self.job_id).order_by(JobEvent.id))
            return [row for row in rows]


def wait_here_for_ever(release: threading.Event) -> None:
    """The stuck call: its name is what the stall's event must show."""
    release.wait(60)


@pytest.fixture
def stuck(service: Settings, reconfigure: Callable[..., Settings]) -> Iterator[Callable[..., StuckJob]]:
    made: list[StuckJob] = []

    def make(**env: object) -> StuckJob:
        settings = reconfigure(HEARTBEAT_SECONDS=0.05, LEASE_SECONDS=30, **env)
        made.append(StuckJob(settings))
        return made[-1]

    yield make
    for job in made:
        job.stop()


def test_a_stuck_job_is_recorded_where_it_hung_handed_back_and_its_process_ended(
        stuck: Callable[..., StuckJob], service: Settings) -> None:
    job = stuck(STALL_SECONDS=0.5).start()
    assert job.ended.wait(10), "the stalled job's process was never ended"
    assert job.heartbeat is not None and job.heartbeat.stalled.is_set() and job.heartbeat.lost.is_set()
    row = job.job()
    assert (row.status, row.infra_failures, row.lease_owner) == ("queued", 1, None)
    events = job.events()
    assert [e.kind for e in events][-2:] == ["stalled", "requeued"], [e.kind for e in events]
    stalled = events[-2]
    assert stalled.attempt == job.attempt and "no progress for" in stalled.message and "'train'" in stalled.message
    assert "STALL_SECONDS" in stalled.message
    data = stalled.data or {}
    assert data["phase"] == "train" and data["idle_seconds"] >= 0.5 and data["allowed_seconds"] == 0.5
    assert "wait_here_for_ever" in "".join(data["stack"]), data["stack"]
    assert "infrastructure recovery 1 of" in events[-1].message
    assert take_messages(service.broker_url, "train") == [("veernet.train", [job.job_id])], "sent again"
    with session_scope() as session:  # the attempt holds the job no more: its writes are refused
        assert not jobs.heartbeat(session, job.job_id, job.attempt, 30)


def test_a_job_that_keeps_progressing_is_never_stalled(stuck: Callable[..., StuckJob]) -> None:
    moving = threading.Event()

    def progress(heartbeat: Heartbeat) -> None:  # a step every 0.1 s for 1.5 s: three times the allowance
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            heartbeat.progressed("train", 0.1)
            time.sleep(0.1)
        moving.set()

    job = stuck(STALL_SECONDS=0.5).start(progress)
    assert moving.wait(10)
    assert not job.ended.is_set() and job.job().status == "running"
    assert job.ended.wait(10), "then stuck, it stalls"


def test_a_phase_expected_to_be_long_gets_its_factor_before_it_stalls(stuck: Callable[..., StuckJob]) -> None:
    expected = 0.5  # a validation measured at 0.5 s may take STALL_FACTOR times that: 1.5 s, not STALL_SECONDS
    job = stuck(STALL_SECONDS=0.2).start(lambda heartbeat: heartbeat.progressed("validate", expected))
    begun = time.monotonic()
    assert job.ended.wait(10)
    waited = time.monotonic() - begun
    assert waited >= STALL_FACTOR * expected - 0.05, waited
    stalled = next(e for e in job.events() if e.kind == "stalled")
    assert (stalled.data or {})["phase"] == "validate" and (stalled.data or {})["allowed_seconds"] == 1.5
    assert "allowed 2 s: 3x the phase's measured 0.5 s" in stalled.message, stalled.message


def test_a_job_still_setting_up_is_not_watched(stuck: Callable[..., StuckJob]) -> None:
    """Before its first report a job opens its data and measures its memory, which reports nothing and may
    take long (a large labelled dataset's image sizes read off S3): the watch starts at the first report."""
    job = stuck(STALL_SECONDS=0.2).start(lambda heartbeat: None)
    time.sleep(1.0)
    assert not job.ended.is_set() and job.job().status == "running"
    assert "stalled" not in [e.kind for e in job.events()]


def test_stall_seconds_zero_watches_nothing(stuck: Callable[..., StuckJob]) -> None:
    job = stuck(STALL_SECONDS=0).start()
    time.sleep(1.0)
    assert not job.ended.is_set() and job.job().status == "running"
    assert "stalled" not in [e.kind for e in job.events()]


def test_a_stall_past_the_infra_cap_fails_the_job_and_sends_nothing(
        stuck: Callable[..., StuckJob], service: Settings) -> None:
    job = stuck(STALL_SECONDS=0.3, MAX_INFRA_ATTEMPTS=1).start()
    assert job.ended.wait(10)
    row = job.job()
    assert row.status == "failed" and "MAX_INFRA_ATTEMPTS=1" in (row.error or "") and "stalled" in (row.error or "")
    assert [e.kind for e in job.events()][-2:] == ["stalled", "failed"]
    assert take_messages(service.broker_url, "train") == []


def test_stall_seconds_must_outlast_a_heartbeat(reconfigure: Callable[..., Settings]) -> None:
    with pytest.raises(ValueError, match="STALL_SECONDS"):
        reconfigure(HEARTBEAT_SECONDS=10, STALL_SECONDS=5)


ENDS_ITSELF = textwrap.dedent("""
    import multiprocessing, sys, time
    from worker.attempt import end_stalled_process

    def hang():
        time.sleep(600)

    if __name__ == "__main__":
        child = multiprocessing.get_context("fork").Process(target=hang)
        child.start()
        print(child.pid, flush=True)
        end_stalled_process()
        print("still here", flush=True)
""")


@pytest.mark.parametrize("stopped", [False, True], ids=["running-child", "stopped-child"])
def test_a_stalled_process_kills_its_children_and_exits(tmp_path: Path, stopped: bool) -> None:
    """What the heartbeat does last, in a process of its own: its children (a DataLoader's workers, a hung
    or stopped one among them) are killed with it, and it exits with STALLED_EXIT at once."""
    script = tmp_path / "ends_itself.py"
    stop = "import os, signal; os.kill(child.pid, signal.SIGSTOP)" if stopped else "pass"
    script.write_text(ENDS_ITSELF.replace("child.start()", f"child.start(); {stop}"))
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == STALLED_EXIT, done.stderr
    assert "still here" not in done.stdout
    child = int(done.stdout.split()[0])
    wait_until(lambda: not pid_alive(child), 10, f"child {child} to end with its stalled parent")
