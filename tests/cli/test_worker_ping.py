"""`veernet worker ... --ping` and `veernet reaper --ping`, the compose stack's health checks, against real
Celery workers on a real Redis: `veernet worker --gpus all` on a box whose nvidia-smi lists two GPUs (a
script on PATH: this machine has none), and `veernet reaper`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_procs import Proc, service_env, wait_until
from e2e_stack import redis_db

pytestmark = pytest.mark.e2e
VEERNET = str(Path(sys.executable).with_name("veernet"))
TWO_GPUS = ("GPU 0: NVIDIA L4 (UUID: GPU-8a1c2f3e-0b4d-11ee-9c1a-0242ac120002)\n"
            "GPU 1: NVIDIA L4 (UUID: GPU-8a1c2f3e-0b4d-11ee-9c1a-0242ac120003)\n")


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment of a two-GPU box's veernet processes, on a Redis db of this test's own."""
    tmp = tmp_path_factory.mktemp("ping")
    (tmp / "bin").mkdir()
    nvidia_smi = tmp / "bin" / "nvidia-smi"
    nvidia_smi.write_text(f"#!/bin/sh\nprintf '%s' '{TWO_GPUS}'\n")
    nvidia_smi.chmod(0o755)
    try:
        with redis_db() as broker:
            env = service_env(BROKER_URL=broker, VEERNET_DATA_DIR=tmp / "var")
            env.pop("CUDA_VISIBLE_DEVICES")  # the GPUs come from nvidia-smi, as on a box nobody restricted
            env["PATH"] = f"{tmp / 'bin'}:{env['PATH']}"
            yield env
    except ConnectionError as exc:
        pytest.skip(str(exc))


def ping(env: dict[str, str], *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([VEERNET, *command, "--ping"], env=env, capture_output=True, text=True, timeout=60)


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return sorted(found)


def test_every_gpu_worker_answers_and_a_stuck_one_is_named(box: dict[str, str], tmp_path: Path) -> None:
    host = socket.gethostname()
    down = ping(box, "worker", "--gpus", "all", "--queue", "train")
    assert down.returncode == 1
    assert f"no answer within 5 s from train-gpu0@{host}, train-gpu1@{host} (of 2 node(s))" in down.stderr
    workers = Proc("workers", [VEERNET, "worker", "--gpus", "all", "--queue", "train"], box, tmp_path / "w.log")
    workers.start()
    try:
        # Both Celery workers logged ready first: a ping before then waits out its 5 s for nothing.
        wait_until(lambda: workers.output().count("ready.") >= 2 or not workers.alive(), 120,
                   "both GPU workers to log ready", diagnose=workers.tail)
        wait_until(lambda: ping(box, "worker", "--gpus", "all").returncode == 0 or not workers.alive(), 120,
                   "both GPU workers to answer", every_s=1, diagnose=workers.tail)
        assert workers.alive(), workers.tail()
        children = children_of(workers.pid)
        visible = [dict(line.split("=", 1) for line in Path(f"/proc/{pid}/environ").read_text().split("\0")
                        if "=" in line)["CUDA_VISIBLE_DEVICES"] for pid in children]
        assert sorted(visible) == ["0", "1"], "one Celery worker per GPU nvidia-smi lists"
        stuck = children[visible.index("1")]
        os.kill(stuck, signal.SIGSTOP)  # a frozen Celery worker: its pool child may be mid-job, it answers nothing
        try:
            answer = ping(box, "worker", "--gpus", "all")
        finally:
            os.kill(stuck, signal.SIGCONT)
        assert answer.returncode == 1 and f"from train-gpu1@{host} (of 2 node(s))" in answer.stderr, answer
    finally:
        workers.stop()
    assert workers.popen is not None and workers.popen.returncode == 0, workers.tail()


def test_the_reaper_answers_while_it_runs(box: dict[str, str], tmp_path: Path) -> None:
    reaper = Proc("reaper", [VEERNET, "reaper"], box, tmp_path / "reaper.log")
    reaper.start()
    try:
        reaper.wait_logged(r"ready\.", 120)  # a ping before then waits out its 5 s for nothing
        wait_until(lambda: ping(box, "reaper").returncode == 0 or not reaper.alive(), 120, "the reaper to answer",
                   every_s=1, diagnose=reaper.tail)
        assert reaper.alive(), reaper.tail()
        assert ping(box, "reaper").stdout.strip() == f"1 node(s) answered: reaper@{socket.gethostname()}"
    finally:
        reaper.stop()
    assert "no answer" in ping(box, "reaper").stderr
