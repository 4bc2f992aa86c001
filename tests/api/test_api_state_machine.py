"""The job-ownership protocol on real databases: claim, lease, fencing, caps, release, reaper."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from api_testkit import SMALL_CONFIG, upload_checkpoint
from sqlalchemy import select

from api import checkpoints, jobs
from api.db import session_scope
from api.models import Checkpoint, Job, JobEvent, utcnow
from api.reaper import reap_once
from api.settings import Settings


def new_job() -> int:
    with session_scope() as session:
        return jobs.create_job(session, "train", SMALL_CONFIG).id


def claim(job_id: int, owner: str, **kwargs: Any) -> int | None:
    with session_scope() as session:
        return jobs.claim(session, job_id, owner, lease_s=kwargs.pop("lease_s", 60), **kwargs)


def job_row(job_id: int) -> Job:
    with session_scope() as session:
        return jobs.get_job(session, job_id)


def events(job_id: int) -> list[str]:
    with session_scope() as session:
        stmt = select(JobEvent.kind).where(JobEvent.job_id == job_id).order_by(JobEvent.id)
        return list(session.scalars(stmt))


def test_concurrent_claims_have_exactly_one_winner(service: Settings) -> None:
    job_id = new_job()
    barrier, results = threading.Barrier(6), []

    def contender(name: str) -> None:
        barrier.wait()
        results.append(claim(job_id, name))

    threads = [threading.Thread(target=contender, args=(f"w{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results, key=str) == [1] + [None] * 5
    job = job_row(job_id)
    assert job.status == "running" and job.attempt == 1 and job.started_at is not None
    assert events(job_id) == ["queued", "claimed"]


def test_a_duplicate_delivery_of_a_live_job_is_ignored(service: Settings) -> None:
    job_id = new_job()
    t0 = utcnow()
    assert claim(job_id, "w1", now=t0) == 1
    assert claim(job_id, "w2", now=t0 + timedelta(seconds=59)) is None
    with session_scope() as session:  # the heartbeat keeps the lease from running out
        assert jobs.heartbeat(session, job_id, 1, lease_s=60, now=t0 + timedelta(seconds=50))
    assert claim(job_id, "w2", now=t0 + timedelta(seconds=100)) is None
    job = job_row(job_id)
    assert job.lease_owner == "w1" and job.lease_expires_at == t0 + timedelta(seconds=110)


def test_expired_lease_is_reclaimed_and_every_write_of_the_old_attempt_is_refused(
        service: Settings, store: Any) -> None:
    job_id, t0 = new_job(), utcnow()
    assert claim(job_id, "zombie", now=t0) == 1
    with session_scope() as session:
        assert jobs.record_progress(session, job_id, 1, global_step=3, total_steps=8,
                                    now=t0 + timedelta(seconds=5))
    assert claim(job_id, "fresh", now=t0 + timedelta(seconds=30)) is None  # lease still live
    later = t0 + timedelta(seconds=61)
    assert claim(job_id, "fresh", now=later) == 2
    ref, _ = upload_checkpoint(store, job_id, 1, epoch=1)
    with session_scope() as session:
        assert not jobs.heartbeat(session, job_id, 1, lease_s=60)
        assert not jobs.record_progress(session, job_id, 1, global_step=7)
        assert not checkpoints.register_checkpoint(session, job_id, 1, ref)
        assert not checkpoints.forget_checkpoint(session, job_id, 1, ref.key)
        assert not jobs.finish(session, job_id, 1, "succeeded")
        assert jobs.record_job_failure(session, job_id, 1, "boom") == "refused"
        assert not jobs.release(session, job_id, 1, "SIGTERM")
        assert not jobs.record_event(session, job_id, 1, "resumed")
    job = job_row(job_id)
    assert (job.status, job.attempt, job.lease_owner, job.global_step) == ("running", 2, "fresh", 3)
    assert job.infra_failures == 1 and job.job_failures == 0 and job.recovering_from_step == 3
    with session_scope() as session:
        assert session.scalar(select(Checkpoint.id)) is None
        assert jobs.heartbeat(session, job_id, 2, lease_s=60)  # the new attempt is unaffected
    assert events(job_id) == ["queued", "claimed", "lease_lost", "claimed"] + ["stale_write_refused"] * 8


def test_a_refusal_is_stamped_when_refused_not_with_the_stale_writers_time(service: Settings) -> None:
    """A writer that took its time, was frozen, and wrote after losing the job: its refusal follows the loss."""
    job_id, t0 = new_job(), utcnow() - timedelta(seconds=10)
    assert claim(job_id, "frozen", now=t0, lease_s=1) == 1
    writers_now = t0 + timedelta(seconds=0.5)  # taken while the lease was still held
    assert claim(job_id, "fresh", now=t0 + timedelta(seconds=5)) == 2
    with session_scope() as session:
        assert not jobs.heartbeat(session, job_id, 1, lease_s=60, now=writers_now)
    with session_scope() as session:
        stamped = dict(session.execute(select(JobEvent.kind, JobEvent.created_at)
                                       .where(JobEvent.job_id == job_id, JobEvent.attempt == 1)).all())
    assert stamped["stale_write_refused"] > stamped["lease_lost"] > writers_now


def test_progress_of_the_new_attempt_closes_the_recovery_and_counts_its_time(service: Settings) -> None:
    job_id, t0 = new_job(), utcnow()
    claim(job_id, "w1", now=t0)
    with session_scope() as session:
        jobs.record_progress(session, job_id, 1, global_step=10, total_steps=40,
                             now=t0 + timedelta(seconds=10))
    assert claim(job_id, "w2", now=t0 + timedelta(seconds=80)) == 2
    with session_scope() as session:  # resumed from a checkpoint at step 8: not yet back at step 10
        jobs.record_progress(session, job_id, 2, global_step=9, now=t0 + timedelta(seconds=95))
    assert job_row(job_id).recovery_seconds == 0
    with session_scope() as session:
        jobs.record_progress(session, job_id, 2, global_step=10, now=t0 + timedelta(seconds=100))
    job = job_row(job_id)
    assert job.recovery_seconds == 90.0 and job.recovering_since is None
    assert events(job_id)[-1] == "recovered"


def test_infra_cap_fails_the_job_with_a_clear_error(service: Settings, reconfigure: Any) -> None:
    settings = reconfigure(MAX_INFRA_ATTEMPTS=2)
    job_id, t0 = new_job(), utcnow()
    assert claim(job_id, "w1", now=t0) == 1
    assert claim(job_id, "w2", now=t0 + timedelta(seconds=61)) == 2  # first lost attempt
    assert claim(job_id, "w3", now=t0 + timedelta(seconds=122)) is None  # second: cap reached
    job = job_row(job_id)
    assert job.status == "failed" and job.infra_failures == 2 and job.finished_at is not None
    assert "MAX_INFRA_ATTEMPTS=2" in (job.error or "") and "lost 2 attempts" in (job.error or "")
    assert events(job_id)[-2:] == ["lease_lost", "failed"]
    with session_scope() as session:
        assert jobs.reap_expired(session, t0 + timedelta(days=1), settings=settings) == []


def test_job_failures_requeue_until_the_cap_then_fail_once(service: Settings) -> None:
    job_id = new_job()  # MAX_JOB_FAILURES defaults to 2
    assert claim(job_id, "w1") == 1
    with session_scope() as session:
        assert jobs.record_job_failure(session, job_id, 1, "loss is NaN at step 3") == "queued"
    assert job_row(job_id).status == "queued"
    assert claim(job_id, "w1") == 2
    with session_scope() as session:
        assert jobs.record_job_failure(session, job_id, 2, "loss is NaN at step 3") == "failed"
    job = job_row(job_id)
    assert job.status == "failed" and job.job_failures == 2 and job.infra_failures == 0
    assert "MAX_JOB_FAILURES=2" in (job.error or "") and "loss is NaN" in (job.error or "")
    assert claim(job_id, "w1") is None
    assert events(job_id).count("failed") == 1


def test_release_requeues_at_once_without_costing_an_infra_attempt(service: Settings) -> None:
    job_id = new_job()
    assert claim(job_id, "w1") == 1
    with session_scope() as session:
        assert jobs.release(session, job_id, 1, "SIGTERM")
    job = job_row(job_id)
    assert (job.status, job.lease_owner, job.infra_failures) == ("queued", None, 0)
    assert events(job_id)[-1] == "requeued"
    assert claim(job_id, "w2") == 2  # no lease to wait out


def test_claim_of_a_cancel_requested_job_cancels_it(service: Settings) -> None:
    job_id, t0 = new_job(), utcnow()
    claim(job_id, "w1", now=t0)
    with session_scope() as session:
        jobs.request_cancel(session, job_id)
    assert claim(job_id, "w2", now=t0 + timedelta(seconds=61)) is None
    assert job_row(job_id).status == "cancelled"


def test_reaper_requeues_expired_leases_and_resends_unclaimed_jobs(
        service: Settings, broker_messages: Any) -> None:
    running, stale, fresh = new_job(), new_job(), new_job()
    t0 = utcnow()
    assert claim(running, "w1", now=t0 - timedelta(seconds=120)) == 1
    with session_scope() as session:
        session.get(Job, stale).queued_at = t0 - timedelta(seconds=61)  # type: ignore[union-attr]
    report = reap_once(now=t0)
    assert report.requeued == [running] and report.resent == [stale] and report.send_failed == []
    assert sorted(broker_messages("train")) == [("veernet.train", [running]), ("veernet.train", [stale])]
    job = job_row(running)
    assert job.status == "queued" and job.infra_failures == 1 and job.queued_at == t0
    assert events(running)[-2:] == ["lease_lost", "requeued"]
    assert events(stale)[-1] == "resent" and job_row(fresh).status == "queued"
    assert reap_once(now=t0 + timedelta(seconds=1)).requeued == []  # nothing left to do


def test_reap_expired_fails_past_the_cap_and_cancels_cancel_requested(
        service: Settings, reconfigure: Any) -> None:
    settings = reconfigure(MAX_INFRA_ATTEMPTS=1)
    failing, cancelling, t0 = new_job(), new_job(), utcnow()
    for job_id in (failing, cancelling):
        claim(job_id, "w1", now=t0)
    with session_scope() as session:
        jobs.request_cancel(session, cancelling)
    with session_scope() as session:
        assert jobs.reap_expired(session, t0 + timedelta(seconds=61), settings=settings) == []
    assert job_row(failing).status == "failed" and "MAX_INFRA_ATTEMPTS=1" in (job_row(failing).error or "")
    assert job_row(cancelling).status == "cancelled"


def test_a_stalled_attempt_is_lost_to_infrastructure_at_once_and_only_by_its_holder(
        service: Settings, reconfigure: Any) -> None:
    settings = reconfigure(MAX_INFRA_ATTEMPTS=2)
    job_id = new_job()
    assert claim(job_id, "w1") == 1
    with session_scope() as session:  # a stale attempt's report changes nothing
        assert jobs.give_up_stalled(session, job_id, 7, "no progress", settings=settings) == "refused"
    assert job_row(job_id).status == "running" and events(job_id)[-1] == "stale_write_refused"
    with session_scope() as session:
        assert jobs.give_up_stalled(session, job_id, 1, "no progress", {"phase": "train"},
                                    settings=settings) == "queued"
    job = job_row(job_id)
    assert (job.status, job.infra_failures, job.lease_owner, job.lease_expires_at) == ("queued", 1, None, None)
    assert events(job_id)[-2:] == ["stalled", "requeued"]
    assert claim(job_id, "w2") == 2  # no lease to wait out
    with session_scope() as session:  # the second stall reaches MAX_INFRA_ATTEMPTS=2
        assert jobs.give_up_stalled(session, job_id, 2, "no progress", settings=settings) == "failed"
    job = job_row(job_id)
    assert job.status == "failed" and "MAX_INFRA_ATTEMPTS=2" in (job.error or "")


def test_a_stalled_attempt_of_a_cancel_requested_job_cancels_it(service: Settings) -> None:
    job_id = new_job()
    assert claim(job_id, "w1") == 1
    with session_scope() as session:
        jobs.request_cancel(session, job_id)
    with session_scope() as session:
        assert jobs.give_up_stalled(session, job_id, 1, "no progress") == "cancelled"
    assert job_row(job_id).status == "cancelled" and events(job_id)[-2:] == ["stalled", "cancelled"]


def test_stale_queued_bumps_queued_at_so_each_job_is_resent_once_per_interval(service: Settings) -> None:
    job_id, t0 = new_job(), utcnow()
    with session_scope() as session:
        assert jobs.stale_queued(session, t0 + timedelta(seconds=30), older_than_s=60) == []
        assert jobs.stale_queued(session, t0 + timedelta(seconds=61), older_than_s=60) == [job_id]
    with session_scope() as session:
        assert jobs.stale_queued(session, t0 + timedelta(seconds=62), older_than_s=60) == []
    assert job_row(job_id).queued_at == t0 + timedelta(seconds=61)


def test_finish_succeeded_clears_the_lease_and_sets_eta_zero(service: Settings) -> None:
    job_id = new_job()
    claim(job_id, "w1")
    with session_scope() as session:
        assert jobs.finish(session, job_id, 1, "succeeded", result={"best_iou": 0.9})
    job = job_row(job_id)
    assert (job.status, job.lease_owner, job.eta_seconds) == ("succeeded", None, 0.0)
    assert job.result == {"best_iou": 0.9}
    assert job.finished_at is not None and job.error is None
