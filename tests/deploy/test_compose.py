"""docker-compose.yml against the code it runs: services, settings, workers and GPUs, health checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from deploy_files import (
    VEERNET_SERVICES,
    celery_services,
    command,
    compose,
    dockerfile_json,
    dockerfile_of,
    environment,
    fake_nvidia_smi,
    has_healthcheck,
    healthcheck_command,
    parsed,
    seconds,
    service_names,
    services,
    veernet_cli,
    workers,
)

from api.cli.gpus import parse_gpus
from api.cli.ping import PING_TIMEOUT_S
from api.cli.processes import FORWARD_DELAY_S, STOP_GRACE_S, worker_processes
from api.settings import Settings
from worker.celery_app import celery_config

# Variables on veernet services that are not veernet settings, each read by a named third party.
THIRD_PARTY_ENV = {
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",  # boto3's own credentials and region
    "CUDA_VISIBLE_DEVICES",  # the CUDA runtime: which GPUs a process sees
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",  # the NVIDIA Container Toolkit
}
MIN_CHECKPOINT_GRACE_S = 60  # a GPU worker must get time to write a checkpoint on SIGTERM
MIN_WORKER_START_S = 60  # a worker loads torch (and CUDA) before it answers its first ping
# Long-running services with no health check, each for a stated reason.
UNCHECKED = {"flower": "a monitoring page nothing depends on"}


def settings_of(name: str) -> Settings:
    env = environment(services()[name])
    return Settings.model_validate({key.lower(): value for key, value in env.items() if key not in THIRD_PARTY_ENV})


def test_the_compose_file_parses() -> None:
    compose.cache_clear()
    assert isinstance(compose()["services"], dict)


def test_the_stack_has_every_part_design_md_names() -> None:
    parts = {"postgres", "redis", "minio", "minio-init", "migrate", "api", "reaper", "flower"}
    assert parts <= set(services()), f"missing: {sorted(parts - set(services()))}"
    assert {"migrate", "api", "reaper"} <= set(VEERNET_SERVICES)
    assert any(options["gpus"] for options in workers().values()), "training workers on the GPUs"


@pytest.mark.parametrize("name", VEERNET_SERVICES)
def test_every_variable_on_a_veernet_service_is_a_setting_or_named_third_party(name: str) -> None:
    settings = {field.upper() for field in Settings.model_fields}
    unknown = set(environment(services()[name])) - settings - THIRD_PARTY_ENV
    assert not unknown, f"{name} sets {sorted(unknown)}: neither a field of api.settings.Settings nor allow-listed"


@pytest.mark.parametrize("name", VEERNET_SERVICES)
def test_the_environment_of_each_veernet_service_is_valid_settings_for_the_real_stack(name: str) -> None:
    settings = settings_of(name)
    assert settings.database_url.startswith("postgresql+psycopg://")
    assert not settings.uses_embedded_broker
    assert settings.checkpoint_url.startswith("s3://")
    assert settings.datasets_url.startswith("s3://"), "labelled datasets need a home shared by every container"


def test_flower_sees_the_workers_tasks_and_is_reachable_from_this_machine_only() -> None:
    flower = services()["flower"]
    config = celery_config(settings_of("api"))
    assert config["worker_send_task_events"] and config["task_send_sent_event"], "flower shows tasks from events"
    assert f"--broker={settings_of('api').broker_url}" in command("flower"), "flower must watch BROKER_URL"
    assert command("flower")[-2:] == ["flower", "--port=5555"] and flower["depends_on"]["redis"]
    assert flower["ports"] == ["127.0.0.1:5555:5555"], "flower has no authentication: loopback only"


def test_redis_keeps_queued_messages_across_a_restart() -> None:
    redis = services()["redis"]
    assert command("redis")[-2:] == ["--appendonly", "yes"]
    assert any(volume.endswith(":/data") for volume in redis["volumes"])


# ---- GPUs: one training container takes them all -------------------------------------------------------

def gpu_devices(service: dict[str, Any]) -> list[dict[str, Any]]:
    devices = service.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
    return [device for device in devices if "gpu" in device.get("capabilities", [])]


def test_one_training_service_reserves_every_gpu_and_runs_a_worker_per_gpu_found() -> None:
    gpu_services = [name for name, svc in services().items() if gpu_devices(svc)]
    assert len(gpu_services) == 1, f"one container takes the box's GPUs, not one per GPU id: {gpu_services}"
    name = gpu_services[0]
    assert dockerfile_of(services()[name]) == "Dockerfile.gpu", f"{name} reserves GPUs: it needs a CUDA build of torch"
    [device] = gpu_devices(services()[name])
    assert device == {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}, "every GPU, none named by id"
    options = workers()[name]
    assert (options["gpus"], options["queue"]) == ("all", "train")
    assert seconds(services()[name]["stop_grace_period"]) >= MIN_CHECKPOINT_GRACE_S
    # `veernet worker` kills a process that outlives its own grace, and says which, before Docker kills them all.
    assert seconds(services()[name]["stop_grace_period"]) > STOP_GRACE_S + FORWARD_DELAY_S
    assert "shm_size" in services()[name], "DataLoader workers need more than Docker's 64 MB of /dev/shm"


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_the_training_command_runs_one_celery_worker_per_gpu_of_the_box_unedited(tmp_path: Path, gpus: int) -> None:
    """What `veernet worker --gpus all` starts inside the container, its nvidia-smi listing ``gpus`` GPUs."""
    [(name, options)] = [(n, o) for n, o in workers().items() if gpu_devices(services()[n])]
    box = fake_nvidia_smi(tmp_path / "bin", gpus)
    children = worker_processes(parse_gpus(options["gpus"], box, tmp_path), options["queue"])
    assert sorted(child.env["CUDA_VISIBLE_DEVICES"] for child in children) == sorted(str(i) for i in range(gpus))


def test_no_cpu_image_reserves_a_gpu() -> None:
    for name, svc in services().items():
        if dockerfile_of(svc) == "Dockerfile":
            assert not gpu_devices(svc), f"{name} reserves a GPU but runs the CPU image (a CPU build of torch)"


def test_worker_queues_exist_in_the_celery_config() -> None:
    queues = {queue.name for queue in celery_config(Settings.model_validate({}))["task_queues"]}
    named = {name: options["queue"] for name, options in workers().items()}
    assert set(named.values()) == {"train", "segment"}, "training and inference each need a worker"
    assert set(named.values()) <= queues, f"worker queues {named} vs Celery's {sorted(queues)}"


# ---- health checks --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(celery_services()))
def test_each_celery_service_pings_exactly_the_nodes_its_command_starts(name: str) -> None:
    healthcheck = services()[name]["healthcheck"]
    assert healthcheck["test"] == ["CMD", "veernet", *command(name), "--ping"], (
        f"{name}: the health check must be its own command plus --ping, so it pings the nodes that command starts")
    subcommand, options = parsed(healthcheck["test"][2:])
    assert options["ping"] and subcommand == parsed(command(name))[0]
    assert seconds(healthcheck["timeout"]) > PING_TIMEOUT_S + 5, "the ping's own wait, plus starting `veernet`"
    assert seconds(healthcheck["start_period"]) >= MIN_WORKER_START_S


def test_the_gpu_images_own_health_check_pings_the_workers_of_its_own_command() -> None:
    cmd = ["worker", "--gpus", "all", "--queue", "train"]
    assert dockerfile_json("Dockerfile.gpu", "CMD") == cmd
    assert healthcheck_command("Dockerfile.gpu") == ["veernet", *cmd, "--ping"]


@pytest.mark.parametrize("name", service_names(veernet_only=False))
def test_every_long_running_service_has_a_health_check(name: str) -> None:
    if services()[name].get("restart", "no") in ("no", "on-failure") or name in UNCHECKED:
        return  # a one-shot
    assert has_healthcheck(name), f"{name} runs for good but nothing tells whether it works"


def test_the_api_keeps_the_images_health_check_which_probes_its_dependencies() -> None:
    assert "healthcheck" not in services()["api"], "the image's HEALTHCHECK (GET /healthz) applies"
    assert dockerfile_of(services()["api"]) == "Dockerfile"
    # that probe's path and port: tests/deploy/test_dockerfiles.py


@pytest.mark.parametrize("name", VEERNET_SERVICES)
def test_only_the_api_keeps_the_images_api_healthcheck(name: str) -> None:
    if name == "api" or name in celery_services():
        return
    assert services()[name].get("healthcheck", {}).get("disable"), f"{name} would probe an api it does not run"


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


# ---- the API's port and the commands --------------------------------------------------------------------

def test_the_api_port_is_published() -> None:
    _, options = parsed(command("api"))
    assert options["host"] == "0.0.0.0", "inside a container the api must listen on every interface"
    published = [str(port["target"]) if isinstance(port, dict) else str(port).rsplit(":", 1)[-1]
                 for port in services()["api"]["ports"]]
    assert str(options["port"]) in published


@pytest.mark.parametrize("name", VEERNET_SERVICES)
def test_each_veernet_command_is_a_real_subcommand(name: str) -> None:
    subcommand, _ = parsed(command(name))
    assert subcommand in veernet_cli().commands


def test_the_s3_endpoint_is_the_minio_service() -> None:
    endpoint = urlsplit(settings_of("api").s3_endpoint_url or "")
    assert (endpoint.hostname, endpoint.port) == ("minio", 9000) and "minio" in services()
