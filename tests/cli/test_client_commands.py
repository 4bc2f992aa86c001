"""`veernet submit | list | status | watch | cancel | checkpoints | download | segment` against a real
embedded service (tests/cli/conftest.py): what a user types, what they see, what lands on disk."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import lasio
import numpy as np
import pytest
import yaml
from cli_stack import PRESIGN_BUCKET, Cli, CliService, Presigning
from e2e_jobs import tiny_config
from e2e_procs import free_port, wait_until
from PIL import Image

from veernet_core.synth import generate

pytestmark = pytest.mark.e2e


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(ok(result))


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The command failed with exactly one ``error: ...`` line on stderr and no traceback."""
    assert result.returncode == 1, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), f"not one error line:\n{result.stderr}"
    return lines[0]


def submit(cli: Cli, *args: str) -> int:
    said = ok(cli("submit", *args))
    match = re.fullmatch(r"submitted job (\d+) \((queued|running)\); follow it with: veernet watch \1\n", said)
    assert match, said
    return int(match.group(1))


@pytest.fixture(scope="module")
def trained(cli_service: CliService, presigning: Presigning) -> dict[str, Any]:
    """A tiny job submitted from a YAML file plus flags with `--watch`, followed to its end, and
    `veernet watch` on it once it has ended.

    `submit --watch` follows the job from the process that submitted it: a separate `veernet watch`
    started afterwards would, on a loaded machine, still be importing when the tiny job has finished,
    and see none of its steps. long.json, a tiny model's config with many epochs, is left for the tests
    that need a job that keeps going.
    """
    cli = cli_service.cli
    config = tiny_config(epochs=5)  # the flag below wins: 2 epochs
    config["data"]["scale"] = 0.08  # the file's value is kept where no flag overrides it
    path = cli.cwd / "tiny.yaml"
    path.write_text(yaml.safe_dump({"kind": "train", "config": config}))
    long = cli.cwd / "long.json"
    long.write_text(json.dumps(tiny_config(epochs=50)))
    watched = cli("submit", str(path), "--epochs", "2", "--dataset-size", "24", "--watch", "--interval", "0.2",
                  timeout_s=240)
    first, _, rest = watched.stdout.partition("\n")
    # The status POST /jobs answered with: an idle worker may have claimed the job already.
    match = re.fullmatch(r"submitted job (\d+) \((queued|running)\); follow it with: veernet watch \1", first)
    assert match, watched.stdout
    job_id = int(match.group(1))
    return {"id": job_id, "watch": subprocess.CompletedProcess(watched.args, watched.returncode, rest, watched.stderr),
            "watch_ended": cli("watch", str(job_id), "--interval", "0.2"),
            "detail": as_json(cli("status", str(job_id), "--json")),
            "checkpoints": as_json(cli("checkpoints", str(job_id), "--json"))}


def test_submit_merges_flags_over_the_file_and_watch_follows_to_success(trained: dict[str, Any]) -> None:
    watched, detail = trained["watch"], trained["detail"]
    assert watched.returncode == 0, f"{watched.stdout}\n{watched.stderr}"
    assert detail["status"] == "succeeded"
    assert detail["config"]["epochs"] == 2 and detail["config"]["data"]["dataset_size"] == 24
    assert detail["config"]["data"]["scale"] == 0.08 and detail["config"]["model"]["widths"] == [8, 8, 16, 16, 32, 32]

    lines = watched.stdout.splitlines()
    running = [line for line in lines if line.startswith(f"job {trained['id']} running: ")]
    steps = [int(m.group(1)) for line in running if (m := re.search(r"step (\d+)/\d+", line))]
    assert len(set(steps)) >= 2 and steps == sorted(steps), f"the steps should be seen moving:\n{watched.stdout}"
    assert any(re.search(r"epochs done [01]/2, step \d+/\d+, loss \d+\.\d{4}, [\d.]+ img/s, attempt 1, "
                         r"recoveries 0, ETA \d:\d\d:\d\d$", line) for line in running), watched.stdout
    total = detail["progress"]["total_steps"]
    assert lines[-1].startswith(f"job {trained['id']} succeeded: epochs done 2/2, step {total}/{total}, loss "), lines
    assert watched.stderr == ""
    ended = trained["watch_ended"]  # watch on a job that has ended: its last line, and the exit code of success
    assert ended.returncode == 0 and ended.stdout == lines[-1] + "\n" and ended.stderr == "", ended


def test_piped_watch_prints_one_whole_line_per_change(trained: dict[str, Any]) -> None:
    """stdout is a pipe and COLUMNS=80 (cli_stack.py): every change is one line, however long."""
    lines = trained["watch"].stdout.splitlines()
    whole = re.compile(rf"job {trained['id']} (queued|running|succeeded): .*attempt \d+, recoveries \d+"
                       r"(, ETA \d:\d\d:\d\d|, starts in about \d:\d\d:\d\d)?")
    assert all(whole.fullmatch(line) for line in lines), "\n".join(lines)
    assert max(len(line) for line in lines) > 80, "the lines this checks must be longer than the 80 columns"


def test_the_epoch_is_counted_done_in_the_api_and_the_cli(cli_service: CliService, trained: dict[str, Any]) -> None:
    """One convention (README, "Epochs"): a finished two-epoch job is at epoch 2 of 2 everywhere."""
    detail = trained["detail"]
    assert (detail["progress"]["epoch"], detail["progress"]["epochs"]) == (2, 2)
    assert detail["metrics"]["epoch"] == 2 and detail["last_checkpoint"]["epoch"] == 2
    shown = ok(cli_service.cli("status", str(trained["id"])))
    assert re.search(r"progress\s+epochs done 2/2, step ", shown), shown
    assert re.search(r"metrics\s+after 2/2 epochs: dice_", shown), shown


def test_list_and_status_show_the_job(cli_service: CliService, trained: dict[str, Any]) -> None:
    cli, job_id = cli_service.cli, trained["id"]
    # The URL and key given as flags instead of the environment.
    table = ok(cli("list", "--url", cli.url, "--key", cli.key, VEERNET_URL=None, VEERNET_API_KEY=None))
    row = next(line.split() for line in table.splitlines() if line.split()[:1] == [str(job_id)])
    assert row[1:4] == ["train", "succeeded", "1"], table
    assert re.search(r"jobs 1-\d+ of \d+", table), table

    succeeded = as_json(cli("list", "--status", "succeeded", "--json"))
    assert job_id in [job["id"] for job in succeeded["items"]]
    assert all(job["status"] == "succeeded" for job in succeeded["items"])
    page = as_json(cli("list", "--limit", "1", "--offset", "0", "--json"))
    assert (page["limit"], len(page["items"])) == (1, 1)

    shown = ok(cli("status", str(job_id)))
    last = trained["detail"]["last_checkpoint"]
    assert re.search(r"status\s+succeeded", shown), shown
    assert re.search(rf"last checkpoint\s+{last['id']} \(epoch 2, step {last['global_step']}", shown), shown
    assert "recent events" in shown and "succeeded" in shown.split("recent events")[1], shown


def test_checkpoints_and_a_verified_download(cli_service: CliService, trained: dict[str, Any]) -> None:
    cli, job_id = cli_service.cli, trained["id"]
    rows = as_json(cli("checkpoints", str(job_id), "--json"))
    assert [(r["epoch"], r["step"]) for r in rows] == [(1, 0), (2, 0)]
    table = ok(cli("checkpoints", str(job_id)))
    for row in rows:
        assert re.search(rf"^\s*{row['id']}\s+1\s+{row['epoch']}\s+0\s+{row['global_step']}\s+{row['size']}\s+"
                         rf"{row['sha256'][:12]}", table, re.M), table

    saved = ok(cli("download", str(rows[0]["id"]), "-o", "first.pt"))
    assert saved == f"saved first.pt ({rows[0]['size']} bytes, sha256 {rows[0]['sha256']} verified)\n"
    data = (cli.cwd / "first.pt").read_bytes()
    assert hashlib.sha256(data).hexdigest() == rows[0]["sha256"]
    assert data == (cli_service.checkpoints / rows[0]["storage_key"]).read_bytes()

    best = max(rows, key=lambda r: (r["is_best"], r["global_step"]))
    folder = cli.cwd / "downloads"
    folder.mkdir()
    ok(cli("download", "--job", str(job_id), "--out", str(folder)))
    expected = folder / f"job-{job_id}-checkpoint-{best['id']}.pt"
    assert hashlib.sha256(expected.read_bytes()).hexdigest() == best["sha256"]
    assert sorted(p.name for p in folder.iterdir()) == [expected.name]


@pytest.fixture
def first_is_best(cli_service: CliService, trained: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
    """The trained job's registry with its first checkpoint flagged best (restored afterwards): best and
    newest differ, whichever epoch validated better."""
    from sqlalchemy import update

    from api import db
    from api.models import Checkpoint

    rows = trained["checkpoints"]
    url = cli_service.stack.database_url
    with db.session_scope(url) as session:
        session.execute(update(Checkpoint).where(Checkpoint.job_id == trained["id"])
                        .values(is_best=Checkpoint.id == rows[0]["id"]))
    try:
        yield rows
    finally:
        with db.session_scope(url) as session:
            for row in rows:
                session.execute(update(Checkpoint).where(Checkpoint.id == row["id"]).values(is_best=row["is_best"]))


def test_download_job_takes_the_best_checkpoint_and_latest_the_newest(
        cli_service: CliService, trained: dict[str, Any], first_is_best: list[dict[str, Any]]) -> None:
    cli, job_id, rows = cli_service.cli, trained["id"], first_is_best
    said = ok(cli("download", "--job", str(job_id), "-o", "best.pt"))
    assert said == f"saved best.pt ({rows[0]['size']} bytes, sha256 {rows[0]['sha256']} verified)\n"
    said = ok(cli("download", "--job", str(job_id), "--latest", "-o", "newest.pt"))
    assert said == f"saved newest.pt ({rows[-1]['size']} bytes, sha256 {rows[-1]['sha256']} verified)\n"
    assert rows[0]["global_step"] < rows[-1]["global_step"]
    help_text = ok(cli("download", "--help"))
    assert "best checkpoint" in help_text and "--latest" in help_text


@pytest.fixture
def tampered(cli_service: CliService, trained: dict[str, Any]) -> Iterator[tuple[dict[str, Any], Path]]:
    """The job's first checkpoint with bytes changed in the store (restored afterwards)."""
    row = trained["checkpoints"][0]
    stored = cli_service.checkpoints / row["storage_key"]
    original = stored.read_bytes()
    try:
        yield row, stored
    finally:
        stored.write_bytes(original)


def test_a_download_that_does_not_match_its_sha256_is_rejected_and_not_kept(
        cli_service: CliService, tampered: tuple[dict[str, Any], Path]) -> None:
    cli, (row, stored) = cli_service.cli, tampered
    original = stored.read_bytes()
    middle = len(original) // 2
    stored.write_bytes(original[:middle] + bytes([original[middle] ^ 0xFF]) + original[middle + 1:])
    dest = cli.cwd / "kept.pt"
    dest.write_bytes(b"what was here before")

    line = one_error_line(cli("download", str(row["id"]), "-o", str(dest)))
    assert f"checkpoint {row['id']} downloaded as {row['size']} bytes with sha256 " in line, line
    assert "corrupt" in line and "nothing was saved" in line, line
    assert dest.read_bytes() == b"what was here before", "a rejected download must leave the old file alone"
    assert not dest.with_name("kept.pt.part").exists(), "the partial download must be deleted"

    stored.write_bytes(original[:middle])  # a truncated object: the API refuses it before sending a byte
    line = one_error_line(cli("download", str(row["id"]), "-o", str(dest)))
    assert "503" in line and "corrupt" in line, line
    assert not dest.with_name("kept.pt.part").exists()


@pytest.fixture
def presigned_bucket(cli_service: CliService, presigning: Presigning, trained: dict[str, Any]) -> tuple[str, Any]:
    """The presigning API up, its bucket holding the trained job's checkpoints; its URL and a boto3 client."""
    s3 = presigning.ready()
    for row in trained["checkpoints"]:
        body = (cli_service.checkpoints / row["storage_key"]).read_bytes()
        s3.put_object(Bucket=PRESIGN_BUCKET, Key=f"ckpt/{row['storage_key']}", Body=body)
    return presigning.url, s3


def test_download_follows_a_presigned_redirect_and_still_checks_the_sha256(
        cli_service: CliService, trained: dict[str, Any], presigned_bucket: tuple[str, Any]) -> None:
    cli, (url, s3) = cli_service.cli, presigned_bucket
    row = trained["checkpoints"][-1]
    redirect = httpx.get(f"{url}/checkpoints/{row['id']}/download", follow_redirects=False,
                         headers={"Authorization": f"Bearer {cli.key}"})
    assert redirect.status_code == 307 and redirect.headers["location"].startswith("http://127.0.0.1:"), redirect

    ok(cli("download", str(row["id"]), "-o", "presigned.pt", "--url", url))
    assert hashlib.sha256((cli.cwd / "presigned.pt").read_bytes()).hexdigest() == row["sha256"]

    key = f"ckpt/{row['storage_key']}"
    body = s3.get_object(Bucket=PRESIGN_BUCKET, Key=key)["Body"].read()
    s3.put_object(Bucket=PRESIGN_BUCKET, Key=key, Body=body[:-1] + bytes([body[-1] ^ 1]))  # same size, one bit off
    line = one_error_line(cli("download", str(row["id"]), "-o", "tampered.pt", "--url", url))
    assert "with sha256" in line and "nothing was saved" in line, line
    assert not (cli.cwd / "tampered.pt").exists() and not (cli.cwd / "tampered.pt.part").exists()


def test_an_interrupted_download_leaves_nothing_behind(cli_service: CliService, trained: dict[str, Any],
                                                       presigning: Presigning,
                                                       presigned_bucket: tuple[str, Any]) -> None:
    cli, (url, s3) = cli_service.cli, presigned_bucket
    row = trained["checkpoints"][0]
    # Bigger than any socket buffer: with the S3 server frozen mid-transfer the download cannot finish.
    s3.put_object(Bucket=PRESIGN_BUCKET, Key=f"ckpt/{row['storage_key']}", Body=bytes(64 << 20))
    dest = cli.cwd / "interrupted.pt"
    part = dest.with_name("interrupted.pt.part")
    download = cli.start("download", str(row["id"]), "-o", str(dest), "--url", url)
    try:
        wait_until(lambda: (part.exists() and part.stat().st_size > 0) or download.poll() is not None, 60,
                   "the download to begin", every_s=0.002)
        presigning.moto.signal(signal.SIGSTOP)
        assert download.poll() is None, download.communicate()
        download.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            _out, err = download.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            download.send_signal(signal.SIGABRT)  # the faulthandler prints where every thread is stuck
            pytest.fail(f"Ctrl-C did not end the download within 30 s:\n{download.communicate(timeout=30)[1]}")
    finally:
        presigning.moto.signal(signal.SIGCONT)
        download.kill()
    assert download.returncode == 130 and "Traceback" not in err, (download.returncode, err)  # ended by Ctrl-C
    assert not part.exists() and not dest.exists(), "an interrupted download must leave no file"


def test_cancel_a_queued_and_a_running_job_and_watch_them_end(cli_service: CliService,
                                                              trained: dict[str, Any]) -> None:
    cli = cli_service.cli
    running = submit(cli, str(cli.cwd / "long.json"))
    wait_until(lambda: as_json(cli("status", str(running), "--json"))["status"] == "running", 60,
               f"job {running} to start")
    queued = submit(cli, str(cli.cwd / "long.json"), "--epochs", "1")  # behind the running job: one train worker
    assert ok(cli("cancel", str(queued))) == f"job {queued} cancelled\n"
    assert ok(cli("cancel", str(running))) == (f"job {running} is running: it stops at its next step and keeps "
                                               "its checkpoints\n")

    for job_id in (queued, running):
        watched = cli("watch", str(job_id), "--interval", "0.2", timeout_s=120)
        assert watched.returncode == 4, f"{watched.stdout}\n{watched.stderr}"
        assert watched.stdout.splitlines()[-1].startswith(f"job {job_id} cancelled: "), watched.stdout
        assert watched.stderr.startswith(f"job {job_id} cancelled: "), watched.stderr

    line = one_error_line(cli("cancel", str(queued)))  # finished: nothing to cancel
    assert "409 Conflict from POST /jobs/" in line, line


def test_submit_and_watch_a_failing_job_exits_non_zero_with_its_error(cli_service: CliService,
                                                                      trained: dict[str, Any]) -> None:
    cli = cli_service.cli
    watched = explained(cli_service, "submit", str(cli.cwd / "long.json"), "--set", "data.kind=manifest", "--set",
                        "data.manifest_url=no-such-dataset", "--watch", timeout_s=120)
    assert watched.returncode == 3, f"{watched.stdout}\n{watched.stderr}"
    job_id = int(re.findall(r"^submitted job (\d+) ", watched.stdout)[0])
    assert watched.stdout.splitlines()[-1].startswith(f"job {job_id} failed: attempt 1, "), watched.stdout
    assert watched.stderr.startswith(f"job {job_id} failed: ") and "no-such-dataset" in watched.stderr


def explained(service: CliService, *args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``veernet *args``; if it outlasts ``timeout_s``, fail with what the service was doing: the jobs,
    every thread of the train worker's main process (Celery prints them on SIGUSR1), its log and the API's."""
    try:
        return service.cli(*args, timeout_s=timeout_s)
    except subprocess.TimeoutExpired as exc:
        jobs = service.cli("list").stdout
        train, children = service.stack.workers[0], ""
        if train.popen is not None and train.alive():  # its pool's children: one stuck ending a job holds the slot
            children = subprocess.run(["ps", "-o", "pid,stat,etime,time,wchan:20,cmd", "--ppid", str(train.popen.pid)],
                                      capture_output=True, text=True).stdout
            train.popen.send_signal(signal.SIGUSR1)
            with contextlib.suppress(AssertionError):  # no dump in 10 s: the logs below still say something
                wait_until(lambda: "MainThread" in train.output()[-20_000:], 10, "the worker's thread dump")
        printed = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
        pytest.fail(f"`veernet {' '.join(args)}` still running after {timeout_s} s; it printed:\n{printed}\n"
                    f"jobs:\n{jobs}\nthe train worker's children:\n{children}\n{train.tail(150)}\n"
                    f"{service.stack.api.tail(40)}")


def synthetic_scan(folder: Path) -> tuple[Path, Path, Any]:
    """A one-curve synthetic log as a PNG scan, and its calibration as a YAML file."""
    # One curve: two curves drawn alike still swap identity at crossings (issue 5's open accuracy work).
    log = next(g for g in (generate(seed=90_210, index=i, scale=0.22, classes=3) for i in range(50))
               if len(g.curves) == 1 and g.curves[0].style == "solid")
    buffer = io.BytesIO()
    Image.fromarray(log.image).save(buffer, format="PNG")
    scan, calibration = folder / "scan.png", folder / "calibration.yaml"
    scan.write_bytes(buffer.getvalue())
    calibration.write_text(yaml.safe_dump(log.calibration()))
    return scan, calibration, log


def test_segment_a_scan_into_las_and_csv(cli_service: CliService) -> None:
    cli = cli_service.cli
    scan, calibration, log = synthetic_scan(cli.cwd)
    result = cli("segment", str(scan), "--calibration", str(calibration), "--well", "SYNTH-CLI", "-o", "log.las",
                 "-o", "log.csv", "-o", "log.json", "--scan-scale", "0.22", timeout_s=240)
    said = ok(result).splitlines()
    for line, name in zip(said, ["las", "csv", "json"], strict=True):
        assert re.fullmatch(rf"wrote log\.{name} \({name.upper()}, \d+ bytes\) from segment job \d+", line), said
    result_json = json.loads((cli.cwd / "log.json").read_text())
    assert [curve["mnemonic"] for curve in result_json["curves"]] == [c.scale.mnemonic for c in log.curves]
    inference = result_json["inference"]  # the stated scale reached the worker: near the model's 0.2, read as it is
    assert inference["scan_scale"] == 0.22 and not inference["scan_scale_estimated"] and not inference["resampled"]

    las = lasio.read(str(cli.cwd / "log.las"))
    truth = log.curves[0]
    assert [c.mnemonic for c in las.curves][1:] == [truth.scale.mnemonic]
    assert las.well["WELL"].value == "SYNTH-CLI"
    assert las.index[0] == pytest.approx(log.depth.top, abs=2 * las.well["STEP"].value)
    # The bundled model reads the curve: a median error within 5 % of the track where the truth is inked.
    cols = np.round((las.index - log.depth.top) / (log.depth.bottom - log.depth.top) * (log.image.shape[1] - 1))
    cols = cols.astype(int)
    values = las.curves[1].data
    keep = truth.inked[cols] & ~truth.wrapped[cols] & ~np.isnan(values)
    assert keep.sum() > 0.5 * len(cols)
    if truth.scale.log:
        error, span = np.abs(np.log10(values[keep]) - np.log10(truth.values[cols][keep])), abs(
            np.log10(truth.scale.right) - np.log10(truth.scale.left))
    else:
        error, span = np.abs(values[keep] - truth.values[cols][keep]), abs(truth.scale.right - truth.scale.left)
    assert float(np.median(error)) < 0.05 * span

    csv_lines = (cli.cwd / "log.csv").read_text().splitlines()
    assert csv_lines[0].split(",")[1] == f"{truth.scale.mnemonic} [{truth.scale.unit}]"
    assert len(csv_lines) == len(las.index) + 1


@pytest.mark.parametrize("case", ["bad key", "unknown job", "bad config", "bad --set", "no API", "missing config",
                                  "broken YAML", "missing scan", "unknown checkpoint", "bad out", "bad URL",
                                  "unwritable download", "latest without a job", "epochs below the range",
                                  "epochs above the range"])
def test_errors_are_one_line(cli_service: CliService, trained: dict[str, Any], tmp_path: Path, case: str) -> None:
    cli = cli_service.cli
    (tmp_path / "broken.yaml").write_text("epochs: [2\n")
    (tmp_path / "calibration.json").write_text(json.dumps({"depth": {"top": 0, "bottom": 10, "unit": "m"}}))
    argv, expected = {
        "bad key": (["list", "--key", "not-a-key"], "401 Unauthorized from GET /jobs: unknown API key"),
        "unknown job": (["status", "987654"], "404 Not Found from GET /jobs/987654: no job 987654"),
        "bad config": (["submit", "--epochs", "0", "--scale", "7"], "422"),
        "bad --set": (["submit", "--set", "epochs"], "--set 'epochs': write it as NAME=VALUE"),
        "no API": (["list", "--url", f"http://127.0.0.1:{free_port()}"], "cannot reach the VeerNet API at "),
        "missing config": (["submit", str(tmp_path / "nope.yaml")], "No such file or directory"),
        "broken YAML": (["submit", str(tmp_path / "broken.yaml")], "is not valid YAML"),
        "missing scan": (["segment", str(tmp_path / "nope.png"), "--calibration", str(tmp_path / "calibration.json")],
                         "cannot read the scan"),
        "unknown checkpoint": (["download", "987654"], "404 Not Found from GET /checkpoints/987654"),
        "bad out": (["segment", "x.png", "--calibration", "c.json", "-o", "x.txt"], "name a .las, .csv or .json"),
        "bad URL": (["list", "--url", "not-a-url"], "missing an 'http://' or 'https://' protocol; start it with"),
        "unwritable download": (["download", "--job", str(trained["id"]), "-o", str(tmp_path / "no" / "x.pt")],
                                f"as {tmp_path / 'no' / 'x.pt'}: No such file or directory"),
        "latest without a job": (["download", "1", "--latest"], "--latest picks among a job's checkpoints"),
        "epochs below the range": (["submit", "--epochs", "-1"],
                                   "config.epochs: must be from 1 to 200 (MAX_EPOCHS), got -1"),
        "epochs above the range": (["submit", "--epochs", "500"],
                                   "config.epochs: must be from 1 to 200 (MAX_EPOCHS), got 500"),
    }[case]
    line = one_error_line(cli(*argv))
    assert expected in line, line
    if case == "bad config":  # every bad field named, in one line
        assert "config.epochs" in line and "config.data.scale" in line, line


def test_plan_prints_the_plan_and_writes_its_chart(cli_service: CliService, trained: dict[str, Any]) -> None:
    """`veernet plan` asks POST /plan; the fleet has the trained job's config measured, so no probe is needed."""
    cli = cli_service.cli
    path = cli.cwd / "plan.json"
    path.write_text(json.dumps({"config": trained["detail"]["config"]}))
    shown = ok(cli("plan", str(path), "--interruptions", "2", "--tier", "spot=420", "--svg", "plan.svg",
                   "--no-probe", timeout_s=300))
    lines = shown.splitlines()
    assert [line.split()[0] for line in lines[:6]] == ["device", "throughput", "memory", "data", "compute",
                                                       "interruptions"], shown
    assert lines[1].split()[1] == "MEASURED:" and "succeeded jobs" in lines[1], shown
    assert "k = 2.00" in shown and "window" in shown
    costs = [line for line in lines if line.startswith("cost")]
    assert len(costs) == 3 and "750 EUR/month" in costs[0] and costs[2].split()[1] == "spot:", shown
    assert lines[-1] == "wrote the chart to plan.svg"
    assert (cli.cwd / "plan.svg").read_text().lstrip().startswith("<svg")
    plan = as_json(cli("plan", str(path), "--json", "--no-probe", timeout_s=300))
    assert plan["data"]["steps_per_epoch"] == trained["detail"]["progress"]["steps_per_epoch"]
    bad = one_error_line(cli("plan", str(path), "--window-hours", "-1", "--no-probe"))
    assert "window_hours" in bad


@pytest.mark.parametrize(("argv", "expected"), [
    (["list", "--stauts", "queued"], "error: No such option: --stauts"),
    (["status"], "error: Missing argument"),
    (["list", "--limit", "many"], "error: Invalid value for '--limit'"),
    (["sumbit"], "error: No such command 'sumbit'"),
])
def test_a_mistyped_command_line_is_one_line_too(cli_service: CliService, argv: list[str], expected: str) -> None:
    result = cli_service.cli(*argv)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected) and lines[0].endswith("--help`)"), result.stderr
