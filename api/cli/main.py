"""`veernet`: run the service's processes, and drive it.

Every command configures itself from the environment (see api/settings.py); with nothing set it
runs the embedded default: SQLite, an embedded broker and a local checkpoint directory.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from api.cli.analyse import register as register_analyse
from api.cli.client_commands import register as register_client_commands
from api.cli.gpus import parse_gpus
from api.cli.processes import Managed, supervise, worker_processes

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_enable=False)
keys = typer.Typer(no_args_is_help=True, help="Create, revoke and list API keys (needed once VEERNET_ADMIN_KEY "
                   "is set). Only a hash of each key is stored.")
app.add_typer(keys, name="keys")
register_client_commands(app)  # submit, list, status, watch, ... (api/cli/client_commands.py)
register_analyse(app)  # analyse (api/cli/analyse.py)
log = logging.getLogger("api.cli")


def _logging(level: str) -> None:
    """Text, or JSON lines with VEERNET_LOG_FORMAT=json (api/logs.py)."""
    from api.logs import configure
    from api.settings import get_settings

    configure(level, get_settings().veernet_log_format)


@app.command()
def migrate() -> None:
    """Create or upgrade the database schema (alembic upgrade head)."""
    from api.db import migrate as run_migrations
    from api.settings import get_settings, redact_url

    run_migrations()
    typer.echo(f"database at {redact_url(get_settings().database_url)} is at the newest schema")


@app.command()
def api(host: str = "127.0.0.1", port: int = 8000,
        reaper: Annotated[bool, typer.Option(help="run the reaper in this process (embedded default)")] = False,
        workers: Annotated[int, typer.Option(min=1, envvar="API_WORKERS",
                                             help="API processes sharing the port (about one per core)")] = 1,
        loglevel: str = "info") -> None:
    """Serve the HTTP API (uvicorn api.main:app). Without VEERNET_ADMIN_KEY it binds loopback addresses only.

    On the embedded default (no DATABASE_URL) it migrates its SQLite database first; any other database
    is migrated with `veernet migrate`, and /healthz answers 503 until it is."""
    import uvicorn

    from api.settings import get_settings

    _logging(loglevel)
    notice = _checked_bind(host)
    _checked_port(host, port)
    if get_settings().uses_embedded_database:  # nothing configured: no separate `veernet migrate` to forget
        from api.db import migrate as run_migrations

        run_migrations()
    log.log(logging.INFO if get_settings().keys_required else logging.WARNING, notice)
    thread = None
    if reaper:
        from api.reaper import ReaperThread

        thread = ReaperThread()
        thread.start()
    # JSON: no logging config of uvicorn's own, so its lines (access log included) reach the root's JSON handler.
    log_config = None if get_settings().veernet_log_format == "json" else uvicorn.config.LOGGING_CONFIG
    try:
        uvicorn.run("api.main:app", host=host, port=port, log_level=loglevel, log_config=log_config, workers=workers)
    finally:
        if thread is not None:
            thread.stop()


PING_HELP = ("instead of starting them, ping the Celery workers this command starts and exit 0 if every one "
             "answers (a container's health check; needs the Redis broker)")


@app.command()
def worker(gpus: Annotated[str, typer.Option(help="GPU indices, one worker process each: 0,1; or all: every GPU "
                                                  "of this machine (or container)")] = "",
           cpu: Annotated[bool, typer.Option(help="one worker on the CPU")] = False,
           queue: Annotated[str, typer.Option(help="train (its workers also run the planner's probe jobs) or "
                                                   "segment")] = "train",
           loglevel: str = "INFO",
           ping: Annotated[bool, typer.Option(help=PING_HELP)] = False) -> None:
    """Start one Celery worker process per GPU (or one on the CPU), and keep them running."""
    _logging(loglevel)
    if queue not in ("train", "segment"):
        raise typer.BadParameter(f"--queue must be train or segment, got {queue!r}")
    if bool(gpus) == cpu:
        raise typer.BadParameter("give exactly one of --gpus 0,1 (or all) or --cpu")
    children = worker_processes(_gpus(gpus), queue, loglevel)
    raise typer.Exit(_ping(children) if ping else supervise(children))


@app.command()
def reaper(loglevel: str = "INFO", ping: Annotated[bool, typer.Option(help=PING_HELP)] = False) -> None:
    """Celery beat plus a worker on the reaper queue: requeue expired leases, re-send lost messages."""
    import os

    from api.cli.processes import celery_worker_argv

    _logging(loglevel)
    child = Managed("reaper", celery_worker_argv("reaper", "reaper@%h", loglevel, beat=True), dict(os.environ))
    raise typer.Exit(_ping([child]) if ping else supervise([child]))


def _gpus(text: str) -> list[str] | None:
    """--gpus as indices (``all`` found on this machine), None when not given; a usage error saying what to fix."""
    try:
        return parse_gpus(text) if text else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--gpus") from exc


def _ping(children: list[Managed]) -> int:
    from api.cli.ping import ping_report

    ok, line = ping_report(children)
    typer.echo(line, err=not ok)
    return 0 if ok else 1


@app.command()
def up(host: str = "127.0.0.1", port: int = 8000,
       gpus: Annotated[str, typer.Option(help="GPU indices for training workers, or all; none = one CPU worker")] = "",
       loglevel: str = "INFO") -> None:
    """Migrate, then run the API, the workers and the reaper until Ctrl-C."""
    from api.cli.stack import run_stack

    _logging(loglevel)
    _checked_bind(host)  # the API process logs the notice itself
    _checked_port(host, port)
    raise typer.Exit(run_stack(host, port, _gpus(gpus), loglevel))


@app.command()
def demo(port: Annotated[int, typer.Option(help="the API's port on 127.0.0.1; it must be free")] = 8000,
         keep: Annotated[bool, typer.Option(help="then keep the service running, for its dashboard, until "
                                            "Ctrl-C (make run KEEP=1)")] = False) -> None:
    """What `make run` runs: start the service, train a small job over HTTP, download and verify its checkpoint,
    digitise a scan."""
    from api.cli.demo import run_demo

    _logging("WARNING")
    _checked_port("127.0.0.1", port, " (make run PORT=8001)")
    raise typer.Exit(run_demo(port, keep))


def _checked_port(host: str, port: int, make_hint: str = "") -> None:
    """A usage error naming the port if something already listens on it."""
    from api.cli.processes import port_taken

    problem = port_taken(host, port)
    if problem is not None:
        raise typer.BadParameter(f"{problem}; stop it, or choose another with --port{make_hint}", param_hint="--port")


def _checked_bind(host: str) -> str:
    """The start-up notice about keys; a usage error if keys are off and ``host`` is not loopback."""
    from api.auth import startup_notice
    from api.settings import get_settings

    try:
        return startup_notice(get_settings(), host)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--host") from exc


@keys.command("create")
def keys_create(tenant: Annotated[str, typer.Option(help="who the key acts for: its jobs are this tenant's")],
                name: Annotated[str, typer.Option(help="a note: who or what uses the key")] = "") -> None:
    """Create a key and print it, once: only its hash is stored."""
    from api import auth
    from api.db import session_scope
    from api.settings import get_settings

    try:
        with _keys_table(), session_scope() as session:
            row, key = auth.create_key(session, tenant, name)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--tenant") from exc
    typer.echo(key)
    typer.echo(f"key {row.id} ({row.prefix}...) for tenant {row.tenant!r}. It is shown only now: store it "
               "safely. Send it as 'Authorization: Bearer <key>'.", err=True)
    if not get_settings().keys_required:
        typer.echo("note: keys are off until VEERNET_ADMIN_KEY is set; until then every caller is tenant "
                   "'local'", err=True)


@keys.command("revoke")
def keys_revoke(id_or_prefix: Annotated[str, typer.Argument(help="the key's id or prefix, from `keys list`")]) -> None:
    """Revoke a key: requests with it get 401 within API_KEY_CACHE_SECONDS."""
    from api import auth
    from api.db import session_scope
    from api.settings import get_settings

    try:
        with _keys_table(), session_scope() as session:
            row = auth.revoke_key(session, id_or_prefix)
    except auth.KeyNotFound as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"revoked key {row.id} ({row.prefix}...) of tenant {row.tenant!r} at "
               f"{row.revoked_at:%Y-%m-%d %H:%M:%S} UTC")
    typer.echo(f"API processes refuse it within API_KEY_CACHE_SECONDS ({get_settings().api_key_cache_seconds:g} s)",
               err=True)


@keys.command("list")
def keys_list() -> None:
    """Every key: id, tenant, name, prefix, created, revoked (the keys themselves are not stored)."""
    from api import auth
    from api.db import session_scope

    with _keys_table(), session_scope() as session:
        rows = auth.list_keys(session)
    typer.echo(f"{'id':>4}  {'tenant':<20} {'prefix':<14} {'created (UTC)':<16}  {'revoked (UTC)':<16}  name")
    for row in rows:
        revoked = f"{row.revoked_at:%Y-%m-%d %H:%M}" if row.revoked_at else "-"
        typer.echo(f"{row.id:>4}  {row.tenant:<20} {row.prefix + '...':<14} {row.created_at:%Y-%m-%d %H:%M}  "
                   f"{revoked:<16}  {row.name}")


@contextmanager
def _keys_table() -> Iterator[None]:
    """A database error becomes one line saying what to do, with the URL's password hidden."""
    from sqlalchemy.exc import DBAPIError

    from api.settings import get_settings, redact_url

    try:
        yield
    except DBAPIError as exc:
        url = redact_url(get_settings().database_url)
        typer.echo(f"cannot use the API keys of {url}: {type(exc.orig).__name__}: {exc.orig}. Check "
                   "DATABASE_URL, and run `veernet migrate` if the schema is older than the keys.", err=True)
        raise typer.Exit(1) from exc


def main() -> None:
    """`veernet`: a command's own errors and a mistyped command line alike end as one ``error:`` line."""
    try:
        code = app(standalone_mode=False)
    except (KeyboardInterrupt, typer.Abort):
        sys.exit(130)
    except typer.TyperException as exc:  # a usage error: an unknown option, a missing or bad argument
        message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
        context = getattr(exc, "ctx", None)
        typer.echo(f"error: {message} (see `{context.command_path if context else 'veernet'} --help`)", err=True)
        sys.exit(getattr(exc, "exit_code", 2))
    sys.exit(code if isinstance(code, int) else 0)
