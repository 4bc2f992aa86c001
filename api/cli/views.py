"""How `veernet`'s client commands show jobs and checkpoints: rich tables, a live progress bar on a
terminal, and plain lines (one per change) when the output is a pipe or a file.

Every value shown comes from the API's JSON; nothing the server sends is read as rich markup.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TransferSpeedColumn,
)
from rich.table import Table


def _console(stderr: bool = False) -> Console:
    """Rich on a terminal; into a pipe or a file, every line whole: rich would wrap at 80 columns there,
    and a line per change is what grep, awk and log collectors read."""
    console = Console(stderr=stderr, highlight=False)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=UNWRAPPED_WIDTH)


UNWRAPPED_WIDTH = 1_000_000  # tables laid out at their content's width, never folded
out = _console()
err = _console(stderr=True)


def print_json(data: Any) -> None:
    out.print_json(json.dumps(data))


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def progress_parts(job: dict[str, Any]) -> list[str]:
    """Epoch, step, loss, images/s, attempt, recoveries and ETA, as far as the job has them."""
    progress, eta = job.get("progress") or {}, job.get("eta") or {}
    parts = []
    epochs = progress.get("epochs") or (job.get("config") or {}).get("epochs")
    if progress.get("epoch") is not None and epochs:
        # Work done, as for steps (README: "Epochs count work done").
        parts.append(f"epochs done {progress['epoch']}/{epochs}")
    if progress.get("total_steps"):
        parts.append(f"step {progress.get('global_step') or 0}/{progress['total_steps']}")
    if progress.get("loss") is not None:
        parts.append(f"loss {progress['loss']:.4f}")
    if progress.get("images_per_s"):
        parts.append(f"{progress['images_per_s']:.1f} img/s")
    parts.append(f"attempt {job.get('attempt', 0)}")
    parts.append(f"recoveries {job.get('recoveries', 0)}")
    if eta.get("seconds") is not None:
        parts.append(f"ETA {duration(eta['seconds'])}")
    elif eta.get("expected_start_seconds") is not None:
        parts.append(f"starts in about {duration(eta['expected_start_seconds'])}")
    return parts


def describe(job: dict[str, Any]) -> str:
    """One line: ``job 7 running: epochs done 0/2, step 5/16, loss 0.4321, ...``."""
    return f"job {job['id']} {job['status']}: " + ", ".join(progress_parts(job))


class JobProgress:
    """A live bar of a job's steps on a terminal; elsewhere a line whenever its status, attempt or step moves."""

    def __init__(self, job_id: int) -> None:
        self.live = out.is_terminal
        self.progress = Progress(SpinnerColumn(), TextColumn("job {task.fields[job]} [bold]{task.fields[state]}"),
                                 BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                                 console=out, disable=not self.live, transient=False)
        self.task = self.progress.add_task("", total=None, job=job_id, state="", info="")
        self.last: tuple[Any, ...] | None = None

    def __enter__(self) -> JobProgress:
        self.progress.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.progress.stop()

    def update(self, job: dict[str, Any]) -> None:
        progress = job.get("progress") or {}
        if self.live:
            info = ", ".join(p for p in progress_parts(job) if not p.startswith("step "))
            self.progress.update(self.task, total=progress.get("total_steps"),
                                 completed=progress.get("global_step") or 0, state=escape(job["status"]),
                                 info=escape(info))
            return
        state = (job["status"], job.get("attempt"), progress.get("global_step"))
        if state != self.last and job["status"] not in ("succeeded", "failed", "cancelled"):
            out.print(describe(job), markup=False)
        self.last = state


class ByteProgress:
    """A download's bar (bytes, speed) on a terminal; nothing elsewhere."""

    def __init__(self, what: str) -> None:
        self.progress = Progress(TextColumn(escape(what)), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                                 console=err, disable=not err.is_terminal, transient=True)
        self.task = self.progress.add_task("", total=None)

    def __enter__(self) -> ByteProgress:
        self.progress.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.progress.stop()

    def update(self, done: int, total: int) -> None:
        self.progress.update(self.task, completed=done, total=total)


class Spinner:
    """A spinner with the job's status while a segment job runs (terminal only)."""

    def __init__(self, what: str) -> None:
        self.what = escape(what)
        self.status = err.status(self.what) if err.is_terminal else None

    def __enter__(self) -> Spinner:
        if self.status is not None:
            self.status.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.status is not None:
            self.status.stop()

    def update(self, job: dict[str, Any]) -> None:
        if self.status is not None:
            self.status.update(f"{self.what}: job {job['id']} {escape(job['status'])}")


def jobs_table(page: dict[str, Any]) -> None:
    items = page["items"]
    table = Table("id", "kind", "status", "attempt", "step", "loss", "ETA", "created (UTC)", box=None)
    for job in items:
        progress = job.get("progress") or {}
        step = f"{progress.get('global_step') or 0}/{progress['total_steps']}" if progress.get("total_steps") else "-"
        loss = f"{progress['loss']:.4f}" if progress.get("loss") is not None else "-"
        table.add_row(str(job["id"]), escape(job["kind"]), escape(job["status"]), str(job["attempt"]), step, loss,
                      duration((job.get("eta") or {}).get("seconds")), str(job["created_at"])[:19].replace("T", " "))
    out.print(table)
    first = page["offset"] + 1 if items else page["offset"]
    out.print(f"jobs {first}-{page['offset'] + len(items)} of {page['total']}", markup=False)


def job_panel(job: dict[str, Any]) -> None:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    rows = [("job", f"{job['id']} ({job['kind']}, tenant {job['tenant']})"), ("status", job["status"]),
            ("progress", ", ".join(progress_parts(job))),
            ("recovery time", f"{job.get('recovery_seconds', 0):.1f} s"),
            ("created (UTC)", str(job["created_at"])[:19].replace("T", " "))]
    if job.get("metrics"):
        rows.append(("metrics", metrics_line(job)))
    last = job.get("last_checkpoint")
    if last:
        rows.append(("last checkpoint", f"{last['id']} (epoch {last['epoch']}, step {last['global_step']}, "
                     f"{last['size']} bytes, sha256 {last['sha256'][:16]}...)"))
    if job.get("error"):
        rows.append(("error", job["error"]))
    for name, value in rows:
        grid.add_row(name, escape(str(value)))
    out.print(grid)
    events = job.get("events") or []
    if events:
        table = Table("time (UTC)", "attempt", "event", "message", box=None, title="recent events",
                      title_justify="left")
        for event in events:
            table.add_row(str(event["created_at"])[11:19], str(event["attempt"]), escape(event["kind"]),
                          escape(event["message"]))
        out.print(table)


def metrics_line(job: dict[str, Any]) -> str:
    """``after 2/2 epochs: iou_fg_mean 0.0763, ...``: the newest epoch's record, its epoch counted as done."""
    metrics = dict(job["metrics"])
    epoch = metrics.pop("epoch", None)
    epochs = (job.get("progress") or {}).get("epochs") or (job.get("config") or {}).get("epochs")
    values = ", ".join(f"{k} {_number(v)}" for k, v in sorted(metrics.items()))
    return values if epoch is None else f"after {int(epoch)}/{epochs or '?'} epochs: {values}"


def checkpoints_table(job_id: int, rows: list[dict[str, Any]]) -> None:
    if not rows:
        out.print(f"job {job_id} has no committed checkpoint yet", markup=False)
        return
    table = Table("id", "attempt", "epoch", "step", "global step", "bytes", "sha256", "best", "IoU", box=None)
    for row in rows:
        iou = (row.get("metrics") or {}).get("iou_fg_mean")
        table.add_row(str(row["id"]), str(row["attempt"]), str(row["epoch"]), str(row["step"]),
                      str(row["global_step"]), str(row["size"]), row["sha256"][:12], "*" if row["is_best"] else "",
                      _number(iou) if iou is not None else "-")
    out.print(table)


def _number(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def plan_summary(plan: dict[str, Any]) -> list[str]:
    """A plan in a dozen lines: what fits, how long, what interruptions cost, what it costs, and what the
    throughput is (measured, an estimate, or pending a probe job)."""
    mem, data = plan["memory"], plan["data"]
    widest = mem["widest_log"]
    fits = {True: "fits", False: "DOES NOT FIT", None: "not measured"}[widest["fits"]]
    measurement = plan.get("measurement") or {}
    lines = [
        f"device          {plan['device_class']} ({mem['source']})",
        f"throughput      {measurement.get('status', 'measured').upper()}: {measurement.get('message', '')}",
        f"memory          pixel budget {mem['pixel_budget']:,} px per micro-batch; widest log "
        f"{widest['width']} x {widest['height']} px {fits}",
        f"data            {data['train_images']} training / {data['val_images']} validation images, "
        f"{data['steps_per_epoch']} steps per epoch x {data['epochs']}, up to {data['accumulation_steps_max']} "
        f"micro-batches per step, padding waste {data['padding_waste']:.1%}",
    ]
    if plan.get("time") is not None:
        lines += _timed_lines(plan)
    lines += [f"warning         {warning}" for warning in plan.get("warnings", [])
              if warning != measurement.get("message")]
    return lines


def _timed_lines(plan: dict[str, Any]) -> list[str]:
    times, stops, ckpt = plan["time"], plan["interruptions"], plan["checkpointing"]
    estimate = "ESTIMATED " if (plan.get("throughput") or {}).get("source") == "gpu_table_estimate" else ""
    lines = [
        f"compute         {estimate}{duration(times['compute_s'])} (start-up {duration(times['startup_s'])}, training "
        f"{duration(times['train_s'])}, validation {duration(times['validation_s'])}, checkpoints "
        f"{duration(times['checkpoint_s'])}); {times['images_per_s']:.1f} images/s",
        f"interruptions   k = {stops['k']:.2f}, each {duration(stops['resume_tax_s'])} resume tax + "
        f"{duration(stops['redone_work_s_each'])} redone: finish in {duration(stops['finish_s'])}, "
        f"{'inside' if stops['fits_window'] else 'OUTSIDE'} the {plan['window_s'] / 3600:g} h window",
    ]
    if ckpt["optimal_interval_s"] is not None:
        best = duration(ckpt["optimal_interval_s"])
        lines.append(f"checkpoints     every {duration(ckpt['interval_s'])} now; the failure rate "
                     f"({ckpt['failure_rate_per_h']:.2f}/h) is best served every {best}")
    for cost in plan["costs"]:
        lines.append(f"cost            {estimate}{cost['tier']}: {cost['eur']:.2f} EUR ({cost['eur_per_month']:g} "
                     f"EUR/month at {cost['utilisation']:.0%} use = {cost['eur_per_hour']:.2f} EUR/h)")
    return lines


def show_plan(plan: dict[str, Any]) -> None:
    for line in plan_summary(plan):
        out.print(escape(line))
