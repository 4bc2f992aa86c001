"""`veernet`: run the service's processes, and drive it.

Every command configures itself from the environment (see api/settings.py); with nothing set it
runs the embedded default: SQLite, an embedded broker and a local checkpoint directory.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from api.processes import parse_gpus, supervise, worker_processes

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_enable=False)


def _logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@app.command()
def migrate() -> None:
    """Create or upgrade the database schema (alembic upgrade head)."""
    from api.db import migrate as run_migrations
    from api.settings import get_settings

    run_migrations()
    typer.echo(f"database at {get_settings().database_url} is at the newest schema")


@app.command()
def api(host: str = "127.0.0.1", port: int = 8000,
        reaper: Annotated[bool, typer.Option(help="run the reaper in this process (embedded default)")] = False,
        loglevel: str = "info") -> None:
    """Serve the HTTP API (uvicorn api.main:app)."""
    import uvicorn

    _logging(loglevel)
    thread = None
    if reaper:
        from api.reaper import ReaperThread

        thread = ReaperThread()
        thread.start()
    try:
        uvicorn.run("api.main:app", host=host, port=port, log_level=loglevel)
    finally:
        if thread is not None:
            thread.stop()


@app.command()
def worker(gpus: Annotated[str, typer.Option(help="GPU indices, one worker process each: 0,1")] = "",
           cpu: Annotated[bool, typer.Option(help="one worker on the CPU")] = False,
           queue: Annotated[str, typer.Option(help="train or segment")] = "train",
           loglevel: str = "INFO") -> None:
    """Start one Celery worker process per GPU (or one on the CPU), and keep them running."""
    _logging(loglevel)
    if queue not in ("train", "segment"):
        raise typer.BadParameter(f"--queue must be train or segment, got {queue!r}")
    if bool(gpus) == cpu:
        raise typer.BadParameter("give exactly one of --gpus 0,1 or --cpu")
    try:
        devices = parse_gpus(gpus) if gpus else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    raise typer.Exit(supervise(worker_processes(devices, queue, loglevel)))


@app.command()
def reaper(loglevel: str = "INFO") -> None:
    """Celery beat plus a worker on the reaper queue: requeue expired leases, re-send lost messages."""
    from api.processes import Managed, celery_worker_argv

    _logging(loglevel)
    import os

    child = Managed("reaper", celery_worker_argv("reaper", "reaper@%h", loglevel, beat=True), dict(os.environ))
    raise typer.Exit(supervise([child]))


@app.command()
def up(host: str = "127.0.0.1", port: int = 8000,
       gpus: Annotated[str, typer.Option(help="GPU indices for training workers; none = one CPU worker")] = "",
       loglevel: str = "INFO") -> None:
    """Migrate, then run the API, the workers and the reaper until Ctrl-C."""
    from api.stack import run_stack

    _logging(loglevel)
    raise typer.Exit(run_stack(host, port, parse_gpus(gpus) if gpus else None, loglevel))


@app.command()
def demo(port: int = 8000,
         keep: Annotated[bool, typer.Option(help="leave the service running afterwards")] = False) -> None:
    """Start the service, train a small synthetic job over HTTP, download and verify its checkpoint."""
    from api.demo import run_demo

    _logging("WARNING")
    raise typer.Exit(run_demo(port, keep))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
