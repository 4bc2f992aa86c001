"""The embedded default end to end: SQLite, kombu's SQLAlchemy broker, a local checkpoint directory,
a real Celery worker process and the API with its reaper thread; nothing configured but a data dir."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from e2e_jobs import check_job_runs_to_success, tiny_config
from e2e_procs import code_root, free_port, service_env
from e2e_stack import Stack, embedded_default

pytestmark = pytest.mark.e2e


@pytest.fixture
def embedded_stack(tmp_path: Path, e2e_dir: Path) -> Iterator[Stack]:  # e2e_dir: the code snapshot is taken
    stack = embedded_default(tmp_path)
    try:
        yield stack.start()
    finally:
        stack.stop()


def test_job_runs_end_to_end_on_the_embedded_default(embedded_stack: Stack) -> None:
    health = embedded_stack.client.get("/healthz").json()
    assert health["status"] == "ok", health
    checkpoints = Path(embedded_stack.env["VEERNET_DATA_DIR"]) / "checkpoints"

    def stored(key: str) -> bytes:
        return (checkpoints / key).read_bytes()

    check_job_runs_to_success(embedded_stack, tiny_config(), stored)


# What `make run` must not show a newcomer: Celery's banners and its advice against running as root, the
# profiler's trace markers and warnings, Celery's shutdown notices.
DEMO_NOISE = ("-------------- [queues]", "v5.", "SecurityWarning", "superuser", "USDT:", "profiler_start",
              "CPUAllocator", "Warm shutdown")


def test_make_run_trains_downloads_and_digitises_and_with_keep_serves_until_ctrl_c(tmp_path: Path,
                                                                                e2e_dir: Path) -> None:
    """`make run` is `veernet demo`: the whole product on the embedded default, nothing configured. One run,
    with --keep (`make run KEEP=1`), checks both: all the demo says and makes up to its report is the same
    with and without it (`run_demo`; the ending without it: tests/cli/test_demo_ending.py), and then the
    service stays up with the job's dashboard page until Ctrl-C."""
    import lasio

    data = tmp_path / "data"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    demo = subprocess.Popen([sys.executable, "-m", "api.cli", "demo", "--port", str(port), "--keep"],
                            env=service_env(VEERNET_DATA_DIR=data),  # the defaults users get: no fast leases
                            cwd=code_root(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal has it
    try:
        said = []
        assert demo.stdout is not None
        for line in demo.stdout:  # until the demo says the service stays
            said.append(line.rstrip("\n"))
            if "press Ctrl-C" in line:
                break
        out = "\n".join(said)
        assert said and "press Ctrl-C" in said[-1], out + demo.communicate(timeout=60)[1]
        said += [demo.stdout.readline().rstrip("\n") for _ in range(2)]
        assert "succeeded" in out and "sha256 verified" in out, out
        las_files = list(data.glob("segment-*.las"))
        assert len(las_files) == 1 and len(list(data.glob("segment-*.csv"))) == 1, out
        las = lasio.read(str(las_files[0]))
        assert las.index.size > 100 and len(las.curves) == 3, las.curves  # depth and the scan's two curves
        errors = [float(line.split("mean error ")[1].split(" %")[0]) for line in said if "mean error" in line]
        assert len(errors) == 2 and max(errors) < 5.0, out  # the bundled model reads the held-out scan's curves

        # While it runs, the job's dashboard page; in the report, where everything is, and no service link.
        job_id = int(re.findall(rf"watch it in the dashboard: {base}/#/jobs/(\d+)$", out, re.M)[0])
        assert re.search(rf"job {job_id} succeeded: epochs done 2/2, step (\d+)/\1, ", out), out
        assert re.search(rf"^job {job_id} succeeded in ", out, re.M), out
        ending = out.split("where everything is:")[1].split("the service keeps running")[0]
        assert "http://" not in ending, ending
        # --keep: the links, and the service answering on them.
        assert said[-2] == f"  dashboard       {base}/#/jobs/{job_id}  (this job's page)", said
        assert httpx.get(f"{base}/jobs/{job_id}").json()["status"] == "succeeded"
        assert '<main id="view"' in httpx.get(f"{base}/").text  # the dashboard's page
        os.killpg(demo.pid, signal.SIGINT)  # Ctrl-C reaches the terminal's whole process group
        demo.wait(timeout=90)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
    rest, errors_said = demo.communicate()
    assert demo.returncode == 0, errors_said
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{base}/livez", timeout=2)
    for noise in DEMO_NOISE:
        assert noise not in out + rest + errors_said, f"{noise!r} in the demo's output:\n{out}\n{errors_said}"
    # stderr holds the API's one notice that keys are off, and nothing else on a run that went well.
    notices = [line for line in errors_said.splitlines() if line.strip()]
    assert len(notices) == 1 and "API keys are off" in notices[0], errors_said


def test_demo_refuses_a_busy_port_before_starting_anything(tmp_path: Path, e2e_dir: Path) -> None:
    """A second `veernet demo` must not report success while talking to the service already on the port."""
    data = tmp_path / "data"
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "api.cli", "demo", "--port", str(port)],
                              env=service_env(VEERNET_DATA_DIR=data), cwd=code_root(), capture_output=True,
                              text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "", done
    line = done.stderr.strip()
    assert "\n" not in line and f"port {port} on 127.0.0.1 is in use (another service?)" in line, line
    assert "choose another with --port" in line, line
    assert not data.exists(), "nothing may start, nor write, before the port is known to be free"


def test_a_planned_run_runs_as_planned_and_then_calibrates_the_next_plan(embedded_stack: Stack) -> None:
    """Plan a small run on a fresh fleet: the plan answers at once and queues a probe job, which the training
    worker runs; plan again from its measurement, run the job, compare; then plan it again from that run."""
    from e2e_jobs import job_row, submit, wait_finished

    config = tiny_config(epochs=3, pixel_budget=0)  # the budget from the memory model, as the worker measures it
    pending = embedded_stack.client.post("/plan", json={"config": config, "interruptions": 0}, timeout=30)
    assert pending.status_code == 200, pending.text
    probe = pending.json()["measurement"]["probe"]
    assert probe["status"] == "pending" and pending.json()["time"] is None, pending.json()["measurement"]
    probe_job = wait_finished(embedded_stack, probe["job_id"], timeout_s=180)
    assert (probe_job.kind, probe_job.status) == ("probe", "succeeded"), probe_job.error
    probed = embedded_stack.client.post("/plan", json={"config": config, "interruptions": 0}, timeout=30)
    assert probed.status_code == 200, probed.text
    plan = probed.json()
    assert plan["throughput"]["source"] == "probe" and plan["measurement"]["probe"] is None, plan["measurement"]
    assert plan["device_class"] == probe_job.device_class
    assert plan["memory"]["source"].startswith(f"measured on {probe_job.device_class} by the worker of job "
                                               f"{probe_job.id}")
    job_id = submit(embedded_stack, config)
    job = wait_finished(embedded_stack, job_id, timeout_s=180)
    assert job.status == "succeeded", job.error
    actual_s = (job.finished_at - job.started_at).total_seconds()
    assert job.total_steps == plan["time"]["total_steps"] and job.steps_per_epoch == plan["data"]["steps_per_epoch"]
    assert job_row(embedded_stack.database_url, job_id).device_class == plan["device_class"]
    # Wall-clock on a shared CPU moves with the load: an order-of-magnitude check here; bench/plan_accuracy.py
    # measures the ratio itself.
    assert actual_s / 4 < plan["time"]["compute_s"] < actual_s * 4, (plan["time"], actual_s)

    calibrated = embedded_stack.client.post("/plan", json={"config": config, "interruptions": 0, "probe": False})
    assert calibrated.status_code == 200, calibrated.text
    again = calibrated.json()
    assert again["throughput"]["source"] == "completed_jobs", "calibrated from the completed job, not the probe"
    # The worker recorded the memory model it measured at the job's start; the plan now uses it.
    assert again["memory"]["source"].startswith(f"measured on {plan['device_class']} by the worker of job {job_id}")
    assert again["memory"]["extrapolated"] is False
    assert actual_s / 2 < again["time"]["compute_s"] < actual_s * 2, (again["time"], actual_s)


def test_a_job_no_pool_process_starts_restarts_the_worker_in_place_and_then_runs(embedded_stack: Stack) -> None:
    """A job message the worker hands to a pool process that never starts it (here one stopped before the job
    arrives; Celery's prefork pool also loses one now and then as it replaces its process) is not left waiting
    for ever behind the message the worker holds: after WORKER_HANDOFF_SECONDS the worker ends its pool and
    restarts itself in place, and the job runs, as its first attempt."""
    from e2e_jobs import submit, timeline, wait_finished
    from e2e_procs import child_pids, wait_until

    worker = embedded_stack.workers[0]
    main_pid = worker.pid
    pool = wait_until(lambda: child_pids(main_pid), 60, "the worker's pool process")
    assert len(pool) == 1, pool
    os.kill(pool[0], signal.SIGSTOP)
    job_id = submit(embedded_stack, tiny_config())
    job = wait_finished(embedded_stack, job_id, timeout_s=180)
    assert (job.status, job.attempt) == ("succeeded", 1), timeline(embedded_stack.database_url, job_id)
    assert "started by no pool process" in worker.output() and "restarting this worker" in worker.output()
    assert worker.alive() and worker.pid == main_pid, "restarted in place: the same process, still serving"
    assert pool[0] not in child_pids(main_pid), "the stopped pool process was ended, not left behind"
    with pytest.raises(ProcessLookupError):
        os.kill(pool[0], 0)
