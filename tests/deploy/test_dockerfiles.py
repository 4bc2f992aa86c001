"""Dockerfile and Dockerfile.gpu: hadolint, the user they run as, torch and the pinned dependencies they install,
the api's health check, and what they copy: a wheel built from it alone, installed apart, whose entry points
import and run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from fnmatch import fnmatch
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from deploy_files import DOCKERFILES, ROOT, arguments, dockerfile_json, healthcheck_command, instructions, parsed
from packaging.requirements import Requirement

from api.settings import Settings

# Dockerfile ENV names that configure Python, pip or the shell rather than the service.
IMAGE_ENV = {"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PIP_NO_CACHE_DIR", "PIP_DISABLE_PIP_VERSION_CHECK",
             "PATH", "NUMBA_CACHE_DIR", "NUMBA_CPU_NAME"}
PROJECT_INSTALL = "pip install --constraint constraints.txt ."


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_hadolint_passes(dockerfile: str) -> None:
    beside_python = Path(sys.executable).parent / "hadolint"
    hadolint = str(beside_python) if beside_python.exists() else shutil.which("hadolint")
    assert hadolint, "hadolint not found: install the test extras (pip install -e '.[test]')"
    result = subprocess.run([hadolint, "--no-color", dockerfile], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_images_run_veernet_as_a_non_root_user_by_default(dockerfile: str) -> None:
    assert dockerfile_json(dockerfile, "ENTRYPOINT") == ["veernet"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "veernet" in scripts
    parsed(dockerfile_json(dockerfile, "CMD"))
    user = arguments(dockerfile, "USER")[-1].split(":")[0]  # the last USER is the one containers run as
    assert user not in ("root", "0")


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_dockerfile_env_names_are_settings_or_tool_variables(dockerfile: str) -> None:
    settings = {field.upper() for field in Settings.model_fields}
    for line in arguments(dockerfile, "ENV"):
        for name in re.findall(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=", line):
            assert name in settings | IMAGE_ENV, f"{dockerfile} sets {name}: not a setting nor a tool's variable"


# ---- torch, then the project at pinned versions --------------------------------------------------------

def run_index(dockerfile: str, text: str) -> int:
    found = [i for i, (key, rest) in enumerate(instructions(dockerfile)) if key == "RUN" and text in rest]
    assert found, f"{dockerfile} has no RUN with {text!r}"
    return found[0]


def torch_install(dockerfile: str) -> tuple[int, str, str]:
    """(instruction index, version, index URL) of the RUN that installs torch."""
    for index, (key, rest) in enumerate(instructions(dockerfile)):
        match = re.search(r"pip install --no-deps torch==(\S+) --index-url (\S+)", rest)
        if key == "RUN" and match:
            return index, match[1], match[2]
    raise AssertionError(f"{dockerfile} installs no pinned torch from an explicit index (--no-deps: its "
                         "dependencies come with the project's, at the versions of constraints.txt)")


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_torch_is_installed_first_in_a_version_the_project_accepts(dockerfile: str) -> None:
    index, version, _ = torch_install(dockerfile)
    assert index < run_index(dockerfile, PROJECT_INSTALL), "torch first, or pip pulls another build"
    requirements = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch = next(Requirement(r) for r in requirements if Requirement(r).name == "torch")
    assert torch.specifier.contains(version)
    assert version == torch_install("Dockerfile")[1], "the CPU and GPU images run the same torch release"


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_the_project_installs_at_the_pinned_versions_and_pip_checks_them(dockerfile: str) -> None:
    project = instructions(dockerfile)[run_index(dockerfile, PROJECT_INSTALL)][1]
    assert "pip check" in project, "a requirement left unmet (torch's, installed --no-deps) must stop the build"
    copied = [rest.split()[:-1] for key, rest in instructions(dockerfile)[:run_index(dockerfile, PROJECT_INSTALL)]
              if key == "COPY"]
    assert any("constraints.txt" in sources for sources in copied), f"{dockerfile} installs before it copies"


def image_env(dockerfile: str) -> dict[str, str]:
    return dict(re.findall(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=(\S+)", " ".join(arguments(dockerfile, "ENV"))))


COMPILE_LOOPS = "compile_loops()"


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_the_images_compile_the_tracers_loops_as_their_user_into_a_cache_it_owns(dockerfile: str) -> None:
    """numba uses a cache only where it may write: the loops are compiled after the install, as the user the
    containers run as, into NUMBA_CACHE_DIR, made for that user; for any x86-64 CPU, not the build machine's."""
    env = image_env(dockerfile)
    assert env.get("NUMBA_CPU_NAME") == "generic"
    user = arguments(dockerfile, "USER")[-1]
    steps = instructions(dockerfile)
    user_at = max(i for i, (key, _) in enumerate(steps) if key == "USER")
    made = run_index(dockerfile, f"install -d -o {user.replace(':', ' -g ')} {env['NUMBA_CACHE_DIR']}")
    assert run_index(dockerfile, PROJECT_INSTALL) < made < user_at < run_index(dockerfile, COMPILE_LOOPS)


def test_the_cpu_image_uses_a_cpu_build_of_torch() -> None:
    assert arguments("Dockerfile", "FROM")[0].startswith("python:3.11")
    assert torch_install("Dockerfile")[2].rstrip("/").endswith("/whl/cpu")


def test_the_gpu_image_is_a_cuda_image_with_the_matching_cuda_build_of_torch() -> None:
    base = re.fullmatch(r"nvidia/cuda:(\d+)\.(\d+)\.\d+-\S+", arguments("Dockerfile.gpu", "FROM")[0])
    assert base, "Dockerfile.gpu must start from an nvidia/cuda image"
    cuda = re.search(r"/whl/cu(\d+)$", torch_install("Dockerfile.gpu")[2].rstrip("/"))
    assert cuda, "Dockerfile.gpu must install a CUDA build of torch"
    assert cuda[1] == base[1] + base[2], f"torch cu{cuda[1]} on a CUDA {base[1]}.{base[2]} base image"
    assert any("python3.11" in rest for rest in arguments("Dockerfile.gpu", "RUN")), "Python 3.11, as on the CPU image"


# ---- the api's health check ----------------------------------------------------------------------------

def test_the_api_health_check_probes_healthz_which_checks_the_dependencies() -> None:
    from api.main import app

    probe = " ".join(healthcheck_command("Dockerfile"))
    url = re.search(r"http://[^'\"]+", probe)
    assert url, f"the HEALTHCHECK names no URL: {probe}"
    path = urlsplit(url[0]).path
    # /livez answers while the database is gone; /healthz checks database, broker and checkpoint store and
    # answers 503 when one is down (tests/api/test_api_health.py), as the schema says.
    operation = app.openapi()["paths"].get(path, {}).get("get", {})
    assert "503" in operation.get("responses", {}), f"probes {path}, which never fails: probe /healthz"
    _, options = parsed(dockerfile_json("Dockerfile", "CMD"))
    assert urlsplit(url[0]).port == options["port"] == int(arguments("Dockerfile", "EXPOSE")[0])


# ---- what the images copy, and the wheel it makes ------------------------------------------------------

def copied_sources(dockerfile: str) -> list[str]:
    return [source for rest in arguments(dockerfile, "COPY") for source in rest.split()[:-1]]


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_dockerignore_keeps_what_the_images_copy(dockerfile: str) -> None:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for source in copied_sources(dockerfile):
        assert not any(fnmatch(source, pattern) for pattern in patterns), f".dockerignore drops {source}"


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip install .` builds in the image from the COPYed files alone, installed into a folder of its
    own (its dependencies are this environment's)."""
    tmp = tmp_path_factory.mktemp("wheel")
    context = tmp / "context"
    context.mkdir()
    assert copied_sources("Dockerfile") == copied_sources("Dockerfile.gpu")
    for source in copied_sources("Dockerfile"):
        if (ROOT / source).is_dir():
            shutil.copytree(ROOT / source, context / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / source, context / source)
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(tmp / "dist"),
                    str(context)], check=True, timeout=120)
    wheel = next((tmp / "dist").glob("*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "-q", "--target", str(tmp / "site"), str(wheel)],
                   check=True, timeout=120)
    return wheel


def test_the_wheel_holds_the_cli_the_migrations_and_the_dashboard(installed_wheel: Path) -> None:
    names = set(zipfile.ZipFile(installed_wheel).namelist())
    migrations = {f"migrations/versions/{p.name}" for p in (ROOT / "migrations" / "versions").glob("*.py")}
    dashboard = {f"api/dashboard/{p.name}" for p in (ROOT / "api" / "dashboard").iterdir() if p.is_file()}
    assert migrations and dashboard and migrations | dashboard | {
        "migrations/env.py", "migrations/script.py.mako", "api/main.py", "api/cli/main.py", "api/cli/__main__.py",
    } <= names
    entry_points = next(name for name in names if name.endswith(".dist-info/entry_points.txt"))
    assert re.search(r"^veernet = api\.cli\.main:main$", zipfile.ZipFile(installed_wheel).read(entry_points).decode(),
                     re.MULTILINE)


ENTRY_POINTS = """
import importlib, pathlib, sys
site = pathlib.Path(sys.argv[1])
from api.cli.main import main                     # ENTRYPOINT ["veernet"]
from api.main import app                          # `veernet api`: uvicorn api.main:app
from worker.celery_app import app as celery       # `veernet worker` and `reaper`: celery -A worker.celery_app
import worker.tasks                               # the tasks the Celery workers import (include)
from api.db import alembic_config                 # `veernet migrate`
script_location = pathlib.Path(alembic_config("sqlite://").get_main_option("script_location"))
modules = [sys.modules[name] for name in ("api.cli.main", "api.main", "worker.celery_app", "worker.tasks")]
outside = [m.__name__ for m in modules if site not in pathlib.Path(m.__file__).parents]
assert not outside, f"imported from outside the installed wheel: {outside}"
assert site in script_location.parents and (script_location / "env.py").is_file(), script_location
print("ok", callable(main), type(app).__name__, celery.main)
"""


def test_the_images_entry_points_import_from_the_installed_wheel(installed_wheel: Path, tmp_path: Path) -> None:
    site = installed_wheel.parents[1] / "site"
    env = {**os.environ, "PYTHONPATH": str(site), "VEERNET_DATA_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", ENTRY_POINTS, str(site)], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok", "True", "FastAPI", "veernet"]
    script = subprocess.run([str(site / "bin" / "veernet"), "worker", "--help"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert script.returncode == 0 and "--ping" in script.stdout and "all" in script.stdout, script.stderr


def test_the_images_compile_step_fills_numbas_cache_for_the_installed_wheel(installed_wheel: Path,
                                                                              tmp_path: Path) -> None:
    """The images' RUN that compiles the tracer's loops, on the installed wheel: it writes them to
    NUMBA_CACHE_DIR, and a later process (a worker) loads every one from there instead of compiling."""
    command = instructions("Dockerfile")[run_index("Dockerfile", COMPILE_LOOPS)][1]
    assert command == instructions("Dockerfile.gpu")[run_index("Dockerfile.gpu", COMPILE_LOOPS)][1]
    argv = shlex.split(command)
    assert argv[0] == "python"
    site = installed_wheel.parents[1] / "site"
    cache = tmp_path / "numba"
    env = {**os.environ, "PYTHONPATH": str(site), "NUMBA_CACHE_DIR": str(cache),
           "NUMBA_CPU_NAME": image_env("Dockerfile")["NUMBA_CPU_NAME"], "NUMBA_DEBUG_CACHE": "1"}
    first = subprocess.run([sys.executable, *argv[1:]], env=env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stderr
    assert "data saved" in first.stdout and any(cache.rglob("tracer_loop.follow-*.nbi")), first.stdout[-2000:]
    again = subprocess.run([sys.executable, *argv[1:]], env=env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stderr
    assert "data loaded" in again.stdout and "data saved" not in again.stdout, again.stdout[-2000:]
