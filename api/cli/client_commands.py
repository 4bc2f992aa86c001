"""`veernet submit | list | status | watch | cancel | checkpoints | download | analyse | segment | plan`: drive a
running service.

Each command talks to the HTTP API through api.cli.client: the URL from --url or VEERNET_URL, the key
from --key or VEERNET_API_KEY. Any failure prints one line, ``error: ...``, on stderr and exits 1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from api.cli import views
from api.cli.client import DEFAULT_URL, ApiError, VeerNetClient

EXIT_ERROR, EXIT_JOB_FAILED, EXIT_JOB_CANCELLED = 1, 3, 4
JOB_EXIT = {"succeeded": 0, "failed": EXIT_JOB_FAILED, "cancelled": EXIT_JOB_CANCELLED}
RESULT_FORMATS = {".las": "las", ".csv": "csv", ".json": "json"}

Url = Annotated[str, typer.Option("--url", envvar="VEERNET_URL", help="the API's base URL")]
Key = Annotated[str | None, typer.Option("--key", envvar="VEERNET_API_KEY", show_default=False,
                                         help="an API key (sent as Authorization: Bearer)")]
AsJson = Annotated[bool, typer.Option("--json", help="print the API's JSON instead of a table")]
JobArg = Annotated[int, typer.Argument(help="the job's id", show_default=False)]


def fail(message: str) -> NoReturn:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    raise typer.Exit(EXIT_ERROR)


@contextmanager
def api(url: str, key: str | None) -> Iterator[VeerNetClient]:
    """A client whose every ApiError becomes one ``error:`` line and exit code 1."""
    try:
        with VeerNetClient(url, key or None) as client:
            yield client
    except ApiError as exc:
        fail(str(exc))


def load_mapping(path: Path, what: str) -> dict[str, Any]:
    """A JSON or YAML file holding one mapping (.json is read as JSON, anything else as YAML)."""
    import yaml

    try:
        text = path.read_text()
    except OSError as exc:
        fail(f"cannot read the {what} {path}: {exc.strerror or exc}")
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        fail(f"the {what} {path} is not valid {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: {exc}")
    if not isinstance(data, dict):
        fail(f"the {what} {path} must hold a mapping (key: value pairs), not {type(data).__name__}")
    return data


def train_config(file: Path | None, flags: dict[str, Any], settings: list[str]) -> dict[str, Any]:
    """The file's config (a TrainConfig, or a whole POST /jobs body), then the flags, then each --set."""
    config = load_mapping(file, "config file") if file else {}
    if set(config) <= {"kind", "config"} and isinstance(config.get("config"), dict):
        config = config["config"]
    for dotted, value in flags.items():
        if value is not None:
            set_path(config, dotted, value)
    if flags.get("data.classes") is not None:  # the model's classes follow the data's
        set_path(config, "model.num_classes", flags["data.classes"])
    for item in settings:
        dotted, sep, raw = item.partition("=")
        if not sep or not dotted.strip():
            fail(f"--set {item!r}: write it as NAME=VALUE, e.g. --set model.transformer_heads=2")
        import yaml

        set_path(config, dotted.strip(), yaml.safe_load(raw) if raw.strip() else raw)
    return config


def set_path(config: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, name = dotted.split(".")
    node = config
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            fail(f"cannot set {dotted}: {part} is {child!r}, not a section")
        node = child
    node[name] = value


def submit(
    file: Annotated[Path | None, typer.Argument(help="a JSON or YAML TrainConfig (or POST /jobs body)",
                                                show_default=False)] = None,
    epochs: Annotated[int | None, typer.Option(help="epochs to train")] = None,
    dataset_size: Annotated[int | None, typer.Option(help="synthetic logs to generate")] = None,
    scale: Annotated[float | None, typer.Option(help="size of the synthetic logs (1.0 = full size)")] = None,
    classes: Annotated[int | None, typer.Option(help="2 = binary, 3 = background + two curves")] = None,
    seed: Annotated[int | None, typer.Option(help="the run's seed")] = None,
    effective_batch: Annotated[int | None, typer.Option(help="images per optimizer step")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu or cuda")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="NAME=VALUE for any config field, e.g. "
                                                   "model.transformer_heads=2 (repeatable)")] = None,
    watch_: Annotated[bool, typer.Option("--watch", help="then follow it, as `veernet watch`")] = False,
    interval: Annotated[float, typer.Option(help="with --watch: seconds between polls")] = 1.0,
    as_json: AsJson = False, url: Url = DEFAULT_URL, key: Key = None,
) -> None:
    """Submit a training job: a config file and/or flags (flags win over the file)."""
    flags = {"epochs": epochs, "seed": seed, "effective_batch": effective_batch, "device": device,
             "data.dataset_size": dataset_size, "data.scale": scale, "data.classes": classes}
    config = train_config(file, flags, set_ or [])
    with api(url, key) as client:
        job = client.submit(config)
        if as_json:
            views.print_json(job)
        else:
            views.out.print(f"submitted job {job['id']} ({job['status']}); follow it with: veernet watch {job['id']}",
                            markup=False, highlight=False)
        if watch_:
            raise typer.Exit(follow(client, job["id"], interval))


def list_jobs(
    status: Annotated[str | None, typer.Option(help="only jobs in this state: queued, running, succeeded, "
                                               "failed, cancelled")] = None,
    limit: Annotated[int, typer.Option(help="jobs per page")] = 20,
    offset: Annotated[int, typer.Option(help="jobs to skip (newest first)")] = 0,
    as_json: AsJson = False, url: Url = DEFAULT_URL, key: Key = None,
) -> None:
    """Your jobs, newest first."""
    with api(url, key) as client:
        page = client.jobs(status, limit, offset)
    views.print_json(page) if as_json else views.jobs_table(page)


def status(job_id: JobArg, as_json: AsJson = False, url: Url = DEFAULT_URL, key: Key = None) -> None:
    """One job: status, attempt, progress, metrics, ETA, last checkpoint and recent events."""
    with api(url, key) as client:
        job = client.job(job_id)
    views.print_json(job) if as_json else views.job_panel(job)


def watch(job_id: JobArg,
          interval: Annotated[float, typer.Option(help="seconds between polls")] = 1.0,
          url: Url = DEFAULT_URL, key: Key = None) -> None:
    """Follow a job to its end. Exit code: 0 succeeded, 3 failed, 4 cancelled, 1 could not follow it."""
    with api(url, key) as client:
        code = follow(client, job_id, interval)
    raise typer.Exit(code)


def follow(client: VeerNetClient, job_id: int, interval_s: float) -> int:
    with views.JobProgress(job_id) as progress:
        job = client.wait(job_id, progress.update, interval_s)
    views.out.print(views.describe(job), markup=False, highlight=False)
    if job["status"] != "succeeded":
        views.err.print(f"job {job_id} {job['status']}: {job.get('error') or 'no error recorded'}", markup=False,
                        highlight=False)
    return JOB_EXIT[job["status"]]


def cancel(job_id: JobArg, url: Url = DEFAULT_URL, key: Key = None) -> None:
    """Cancel a job: a queued one at once; a running one at its next step, keeping its checkpoints."""
    with api(url, key) as client:
        job = client.cancel(job_id)
    if job["status"] == "running":
        message = f"job {job_id} is running: it stops at its next step and keeps its checkpoints"
    else:
        message = f"job {job_id} {job['status']}"
    views.out.print(message, markup=False, highlight=False)


def checkpoints(job_id: JobArg, as_json: AsJson = False, url: Url = DEFAULT_URL, key: Key = None) -> None:
    """A job's committed checkpoints, oldest first."""
    with api(url, key) as client:
        rows = client.checkpoints(job_id)
    views.print_json(rows) if as_json else views.checkpoints_table(job_id, rows)


def download(
    checkpoint_id: Annotated[int | None, typer.Argument(help="the checkpoint's id (see `veernet checkpoints`)",
                                                        show_default=False)] = None,
    job: Annotated[int | None, typer.Option(help="instead: this job's best checkpoint, the one with the highest "
                                            "validation IoU (its newest if none was validated yet)")] = None,
    latest: Annotated[bool, typer.Option("--latest", help="with --job: its newest checkpoint instead of its "
                                         "best")] = False,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="where to save it [default: "
                                             "job-J-checkpoint-C.pt here]", show_default=False)] = None,
    url: Url = DEFAULT_URL, key: Key = None,
) -> None:
    """Download a checkpoint, verified against its registered sha256 (nothing is kept if it does not match).

    `--job N` takes the job's best checkpoint; `--job N --latest` its newest."""
    if (checkpoint_id is None) == (job is None):
        fail("name one checkpoint: `veernet download CHECKPOINT_ID` or `veernet download --job JOB_ID`")
    if latest and job is None:
        fail("--latest picks among a job's checkpoints: `veernet download --job JOB_ID --latest`")
    with api(url, key) as client:
        if checkpoint_id is None:
            checkpoint_id = pick_checkpoint(client, job, latest)  # type: ignore[arg-type]
        row = client.checkpoint(checkpoint_id)
        dest = out or Path(f"job-{row['job_id']}-checkpoint-{checkpoint_id}.pt")
        if dest.is_dir():
            dest = dest / f"job-{row['job_id']}-checkpoint-{checkpoint_id}.pt"
        with views.ByteProgress(f"checkpoint {checkpoint_id}") as progress:
            row = client.download(checkpoint_id, dest, progress.update)
    views.out.print(f"saved {dest} ({row['size']} bytes, sha256 {row['sha256']} verified)", markup=False,
                    highlight=False)


def pick_checkpoint(client: VeerNetClient, job_id: int, latest: bool = False) -> int:
    """The job's best checkpoint (the newest if none is flagged best), or with ``latest`` its newest."""
    rows = client.checkpoints(job_id)
    if not rows:
        fail(f"job {job_id} has no committed checkpoint yet; see `veernet status {job_id}`")
    if latest:
        return int(max(rows, key=lambda r: (r["global_step"], r["id"]))["id"])
    return int(max(rows, key=lambda r: (r["is_best"], r["global_step"], r["id"]))["id"])


def segment(
    scan: Annotated[Path, typer.Argument(help="the scanned log: PNG, TIFF or JPEG", show_default=False)],
    calibration: Annotated[Path, typer.Option(help="JSON or YAML: a track's calibration {depth, curves, ...}, a "
                                              "full page's (the proposal of `veernet analyse`, completed: every "
                                              "curve of one section), or the whole options {calibration or "
                                              "page_calibration, well, model, rotate_portrait, scan_scale}",
                                              show_default=False)],
    out: Annotated[list[Path] | None, typer.Option("--out", "-o", help="a .las, .csv or .json file to write "
                                                   "(repeatable) [default: the scan's name with .las]",
                                                   show_default=False)] = None,
    well: Annotated[str | None, typer.Option(help="the well's name, for the LAS header")] = None,
    model_checkpoint: Annotated[int | None, typer.Option(help="digitise with this checkpoint")] = None,
    model_job: Annotated[int | None, typer.Option(help="digitise with this job's best checkpoint")] = None,
    rotate_portrait: Annotated[bool, typer.Option(help="turn a portrait scan so depth runs along its width")] = False,
    scan_scale: Annotated[float | None, typer.Option(help="the scan's pixel scale: 1.0 = full-resolution logs "
                                                     "(480-640 px tall, about 300 dpi) [default: its height / 560 px]",
                                                     show_default=False)] = None,
    section: Annotated[int | None, typer.Option(help="with a full page's calibration: the section to digitise "
                                                "(0 = the top one)", show_default=False)] = None,
    timeout: Annotated[float, typer.Option(help="seconds to wait for the result")] = 600.0,
    url: Url = DEFAULT_URL, key: Key = None,
) -> None:
    """Digitise a scanned log into curves (the bundled model unless told otherwise), saved as LAS, CSV or JSON."""
    outputs = out or [scan.with_suffix(".las")]
    for path in outputs:
        if path.suffix.lower() not in RESULT_FORMATS:
            fail(f"--out {path}: name a .las, .csv or .json file")
    formats = [RESULT_FORMATS[path.suffix.lower()] for path in outputs]
    options = segment_options(calibration, well, model_checkpoint, model_job, rotate_portrait, scan_scale, section)
    with api(url, key) as client:
        with views.Spinner(f"digitising {scan.name}") as spinner:
            job_id, result = client.segment(scan, options, min(timeout, 30.0))
            if result is None:
                job = client.wait(job_id, spinner.update, 0.5, timeout)
                if job["status"] != "succeeded":
                    fail(f"segment job {job_id} {job['status']}: {job.get('error') or 'no error recorded'}")
        for path, fmt in zip(outputs, formats, strict=True):
            data = json.dumps(result).encode() if fmt == "json" and result is not None else client.result(job_id, fmt)
            write_file(path, data)
            views.out.print(f"wrote {path} ({fmt.upper()}, {len(data)} bytes) from segment job {job_id}",
                            markup=False, highlight=False)
        # Curves named by drawing order alone, or hints the scan contradicts: said where the user looks.
        summary = result if result is not None else json.loads(client.result(job_id, "json"))
        for warning in summary.get("warnings", []):
            views.err.print(f"warning: {warning}", markup=False, highlight=False)


def segment_options(calibration: Path, well: str | None, model_checkpoint: int | None, model_job: int | None,
                    rotate_portrait: bool, scan_scale: float | None = None, section: int | None = None
                    ) -> dict[str, Any]:
    """POST /segment's options from a calibration file: the whole options as they are, a page calibration
    (it lists `sections`, as a proposal of `veernet analyse` does) as `page_calibration`, else `calibration`."""
    loaded = load_mapping(calibration, "calibration file")
    if "calibration" in loaded or "page_calibration" in loaded:
        options: dict[str, Any] = dict(loaded)
    else:
        options = {"page_calibration" if "sections" in loaded else "calibration": loaded}
    if section is not None:
        if not isinstance(options.get("page_calibration"), dict):
            fail("--section is for a full page's calibration (one that lists sections)")
        options["page_calibration"] = {**options["page_calibration"], "section": section}
    if model_checkpoint is not None and model_job is not None:
        fail("give one of --model-checkpoint or --model-job, not both")
    if model_checkpoint is not None:
        options["model"] = {"checkpoint_id": model_checkpoint}
    if model_job is not None:
        options["model"] = {"job_id": model_job}
    if well is not None:
        options["well"] = well
    if rotate_portrait:
        options["rotate_portrait"] = True
    if scan_scale is not None:
        options["scan_scale"] = scan_scale
    return options


def write_file(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data)
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}")


def plan(
    config_file: Annotated[Path, typer.Argument(help="a training config (or a POST /jobs body) as JSON or YAML",
                                                show_default=False)],
    device_class: Annotated[str | None, typer.Option(
        help="a device class the fleet's workers reported, or a known GPU ('A100 80GB', 'L4': an estimate if "
             "nothing measured it)")] = None,
    gpu_memory_gb: Annotated[float | None, typer.Option(help="instead: a GPU of this many GiB")] = None,
    window_hours: Annotated[float, typer.Option(help="the window the run must finish in")] = 12.0,
    interruptions: Annotated[float | None, typer.Option(help="expected interruptions k [default: from the "
                                                         "failure rate, else the fleet's measured one]")] = None,
    failure_rate: Annotated[float | None, typer.Option(help="interruptions per hour")] = None,
    utilisation: Annotated[float, typer.Option(help="share of a rented month the box is busy (hourly rate)")] = 0.5,
    tier: Annotated[list[str] | None, typer.Option(help="NAME=EUR_PER_MONTH, another tier to cost (repeat)")] = None,
    probe: Annotated[bool, typer.Option(help="queue a probe job for a worker when the fleet has not measured "
                                         "this model config (the plan says it is pending)")] = True,
    svg: Annotated[Path | None, typer.Option(help="also write the plan's chart (SVG) here")] = None,
    as_json: AsJson = False, url: Url = DEFAULT_URL, key: Key = None,
) -> None:
    """Plan a training run (POST /plan): memory, steps, wall-clock with interruptions, cost, checkpoint interval."""
    config = load_mapping(config_file, "config")
    config = config.get("config", config) if "config" in config and isinstance(config["config"], dict) else config
    tiers = []
    for item in tier or []:
        name, _, eur = item.partition("=")
        try:
            tiers.append({"name": name.strip(), "eur_per_month": float(eur)})
        except ValueError:
            fail(f"--tier {item!r}: write NAME=EUR_PER_MONTH, e.g. --tier spot=420")
    body: dict[str, Any] = {"config": config, "device_class": device_class, "gpu_memory_gb": gpu_memory_gb,
                            "window_hours": window_hours, "interruptions": interruptions,
                            "failure_rate_per_hour": failure_rate, "utilisation": utilisation, "tiers": tiers,
                            "probe": probe}
    body = {name: value for name, value in body.items() if value is not None}
    with api(url, key) as client:
        result = client.plan(body)
        if svg is not None:
            write_file(svg, client.plan_chart(body))
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        views.show_plan(result)
    if svg is not None:
        typer.echo(f"wrote the chart to {svg}")


CLIENT_PANEL = "Client (talks to a running API)"


def register(app: typer.Typer) -> None:
    """Add the client commands to `veernet` (`analyse` is api.cli.analyse's)."""
    for name, command in (("submit", submit), ("list", list_jobs), ("status", status), ("watch", watch),
                          ("cancel", cancel), ("checkpoints", checkpoints), ("download", download),
                          ("segment", segment), ("plan", plan)):
        app.command(name, rich_help_panel=CLIENT_PANEL)(command)
