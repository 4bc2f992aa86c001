"""Prometheus metrics (GET /metrics), read from the database at scrape time. FastAPI-free.

Why the database: the API process is not where the work happens. Claims, heartbeats, checkpoint
uploads and refused zombie writes happen in Celery workers (one process per GPU, on other hosts in
the compose stack) and in the reaper, so counters kept in the API's memory would never see them,
and counters kept in each worker's memory would die with the worker that a recovery is about.
Every one of those events already leaves a durable trace in the database, written in the same
transaction as the change it records:

- the job row: status and kind, the step time and images/s of a running job, the time recoveries cost;
- the job's timeline (``job_events``, append-only): ``claimed``, ``lease_lost`` (an attempt lost to
  infrastructure: a recovery), ``resent``, ``stale_write_refused`` (a zombie's write refused by the
  fence), and ``checkpoint`` with the object's size and, from the worker, its upload time.

So a custom collector derives every figure with a few aggregate queries when Prometheus scrapes,
and any number of API replicas report the same figures. Counts and sums over an append-only table
only go up, as Prometheus counters must (they would drop only if jobs were deleted, which the
service never does; Prometheus would read that as a counter reset). Histograms are built the same
way: one ``SUM(CASE WHEN value <= bound ...)`` per bucket, in SQL.

The alternative, prometheus-client's multiprocess mode, shares files in one directory: it only
works when every process is on one host, which the compose stack is not, and it loses nothing we
need here. The price of our way is a scan of ``job_events`` per scrape (a few ms per 100,000 events
on Postgres); scrape every 15 s or slower.

Access: the figures cover every tenant, so when API keys are on only the admin key may scrape
(Prometheus: ``authorization: {credentials: <VEERNET_ADMIN_KEY>}`` in the scrape config); a tenant's
key gets 403. With keys off the API is loopback-only and /metrics is open like the rest of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector
from sqlalchemy import ColumnElement, Connection, case, extract, func, select

from api.db import get_engine
from api.models import Job, JobEvent, JobKind, JobStatus
from api.settings import Settings, get_settings

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4  # the text format generate_latest writes (classic metric names)
# Seconds. Checkpoint uploads: a few MB to a local disk up to GBs to S3. Segment: upload to result.
UPLOAD_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
SEGMENT_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
# Timeline entries counted, and the counter they feed: (event kinds, metric, help).
EVENT_COUNTERS = (
    (("claimed",), "veernet_job_claims", "Jobs claimed by a worker (each claim starts an attempt)"),
    (("lease_lost", "stalled"), "veernet_job_recoveries",
     "Attempts lost to infrastructure (lease expired, worker lost, attempt stalled); the job goes back on the "
     "queue and resumes from its last checkpoint"),
    (("stalled",), "veernet_job_stalls",
     "Attempts that made no progress for STALL_SECONDS (a hung device call or data read) and ended their "
     "process, handing the job back"),
    (("resent",), "veernet_job_messages_resent", "Queued jobs whose broker message was sent again (lost message)"),
    (("stale_write_refused",), "veernet_zombie_writes_refused",
     "Writes refused because the writer's attempt no longer held the job (a zombie worker)"),
)


def exposition(settings: Settings | None = None) -> bytes:
    """The metrics page in Prometheus' text format, read from ``settings``' database now."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(settings or get_settings()))
    return generate_latest(registry)


class DatabaseCollector(Collector):
    """Every figure of the service, from one autocommit connection per scrape."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def collect(self) -> Iterator[Metric]:
        engine = get_engine(self.settings.database_url).execution_options(isolation_level="AUTOCOMMIT")
        with engine.connect() as connection:
            families = [*_job_gauges(connection), *_event_counters(connection), *_checkpoint_metrics(connection),
                        *_running_jobs(connection), _segment_latency(connection)]
        yield from families


def _job_gauges(connection: Connection) -> Iterator[Metric]:
    counts = {(kind, status): n for kind, status, n in connection.execute(
        select(Job.kind, Job.status, func.count()).group_by(Job.kind, Job.status))}
    jobs = GaugeMetricFamily("veernet_jobs", "Jobs by kind and status", labels=["kind", "status"])
    for kind in JobKind:
        for status in JobStatus:  # every pair, zeros included: a series that vanishes breaks rate() and alerts
            jobs.add_metric([kind.value, status.value], counts.get((kind.value, status.value), 0))
    yield jobs
    depth = GaugeMetricFamily("veernet_queue_depth", "Jobs waiting for a worker, by queue", labels=["queue"])
    for kind in JobKind:  # each kind has its own queue (worker.celery_app.TASK_FOR_KIND)
        depth.add_metric([kind.value], counts.get((kind.value, JobStatus.QUEUED.value), 0))
    yield depth


def _event_counters(connection: Connection) -> Iterator[Metric]:
    kinds = sorted({kind for events, _, _ in EVENT_COUNTERS for kind in events})
    counts = {(event, job_kind): n for event, job_kind, n in connection.execute(
        select(JobEvent.kind, Job.kind, func.count()).join(Job, Job.id == JobEvent.job_id)
        .where(JobEvent.kind.in_(kinds)).group_by(JobEvent.kind, Job.kind))}
    for events, name, help_text in EVENT_COUNTERS:
        counter = CounterMetricFamily(name, help_text, labels=["kind"])
        for kind in JobKind:
            counter.add_metric([kind.value], sum(counts.get((event, kind.value), 0) for event in events))
        yield counter
    seconds = connection.execute(select(func.coalesce(func.sum(Job.recovery_seconds), 0.0))).scalar_one()
    yield CounterMetricFamily("veernet_job_recovery_seconds", "Wall time recoveries cost: from a lost attempt's "
                              "last progress until a later attempt is back at that step", value=float(seconds))


def _checkpoint_metrics(connection: Connection) -> Iterator[Metric]:
    committed = JobEvent.kind == "checkpoint"
    uploads, size = connection.execute(select(func.count(), func.coalesce(
        func.sum(JobEvent.data["size"].as_integer()), 0)).where(committed)).one()
    yield CounterMetricFamily("veernet_checkpoint_uploads", "Checkpoints uploaded and committed", value=uploads)
    yield CounterMetricFamily("veernet_checkpoint_upload_bytes", "Bytes of the checkpoints uploaded and committed",
                              value=size)
    yield _histogram(connection, "veernet_checkpoint_upload_seconds",
                     "Time to upload one checkpoint to the store (committed checkpoints)",
                     JobEvent.data["upload_seconds"].as_float(), [committed], UPLOAD_BUCKETS)


def _running_jobs(connection: Connection) -> Iterator[Metric]:
    rows = connection.execute(select(Job.id, Job.step_time_s, Job.images_per_s).where(
        Job.status == JobStatus.RUNNING, Job.kind == JobKind.TRAIN).order_by(Job.id)).all()
    step = GaugeMetricFamily("veernet_train_step_seconds", "Seconds per optimiser step of a running training "
                             "job: the mean of the steps still to come, fitted to the recent ones by their pixels",
                             labels=["job_id"])
    speed = GaugeMetricFamily("veernet_train_images_per_second", "Training images per second of a running job",
                              labels=["job_id"])
    for job_id, step_time_s, images_per_s in rows:
        if step_time_s is not None:
            step.add_metric([str(job_id)], step_time_s)
        if images_per_s is not None:
            speed.add_metric([str(job_id)], images_per_s)
    yield step
    yield speed


def _segment_latency(connection: Connection) -> Metric:
    latency = _seconds_between(connection, Job.created_at, Job.finished_at)
    return _histogram(connection, "veernet_segment_latency_seconds",
                      "Segment jobs that succeeded: seconds from the upload to the result (queueing included)",
                      latency, [Job.kind == JobKind.SEGMENT, Job.status == JobStatus.SUCCEEDED], SEGMENT_BUCKETS)


def _seconds_between(connection: Connection, start: Any, end: Any) -> ColumnElement[float]:
    if connection.dialect.name == "postgresql":
        return cast(ColumnElement[float], extract("epoch", end - start))
    return (func.julianday(end) - func.julianday(start)) * 86400.0  # SQLite keeps UTC text; julianday reads it


def _histogram(connection: Connection, name: str, help_text: str, value: ColumnElement[Any],
               where: Iterable[ColumnElement[bool]], bounds: Sequence[float]) -> HistogramMetricFamily:
    """A cumulative histogram of ``value`` over the rows matching ``where``, counted in one query."""
    columns = [func.coalesce(func.sum(case((value <= bound, 1), else_=0)), 0) for bound in bounds]
    stmt = select(*columns, func.count(value), func.coalesce(func.sum(value), 0.0)).where(*where, value.is_not(None))
    *in_buckets, count, total = connection.execute(stmt).one()
    buckets = [(_bound(bound), int(n)) for bound, n in zip(bounds, in_buckets, strict=True)]
    return HistogramMetricFamily(name, help_text, buckets=[*buckets, ("+Inf", int(count))], sum_value=float(total))


def _bound(bound: float) -> str:
    return repr(float(bound))
