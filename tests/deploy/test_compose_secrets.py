"""The compose stack's secrets and credentials: each one required from .env (no silent default), listed in
.env.example, agreeing across the services that share it; and the service's own MinIO user, made by
deploy/minio-init.sh with access to its two buckets only (run here with a stand-in `mc` that records
what it is asked to do).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from deploy_files import (
    ROOT,
    SECRET_NAME,
    VEERNET_SERVICES,
    command,
    environment,
    references,
    required_variables,
    secret_for,
    service_names,
    services,
)

from api.settings import Settings

ENV_LINE = re.compile(r"^(?P<commented># ?)?(?P<name>[A-Z][A-Z0-9_]*)=(?P<value>\S*)")


def env_example() -> tuple[dict[str, str], dict[str, str]]:
    """(variables set in .env.example, variables shown commented out with their default)."""
    set_here, commented = {}, {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        match = ENV_LINE.match(line)
        if match:
            (commented if match["commented"] else set_here)[match["name"]] = match["value"]
    return set_here, commented


def defaults() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for match in references():
        if match["default"] is not None:
            found.setdefault(match["name"], set()).add(match["default"])
    return found


# ---- required, never defaulted --------------------------------------------------------------------------

def test_every_secret_is_required_and_compose_says_how_to_provide_it() -> None:
    required = required_variables()
    assert {"VEERNET_ADMIN_KEY", "POSTGRES_PASSWORD", "REDIS_PASSWORD", "MINIO_ROOT_PASSWORD",
            "MINIO_APP_PASSWORD"} <= set(required)
    for name, messages in required.items():
        assert SECRET_NAME.search(name), f"{name} is required but is no secret: give it a default"
        assert all(".env.example" in message and "openssl rand" in message and name in message
                   for message in messages), f"{name}: compose's message must say where and how: {messages}"


def test_no_secret_has_a_default() -> None:
    defaulted = {name for name in defaults() if SECRET_NAME.search(name)}
    assert not defaulted, f"secrets with a default a stack would silently run with: {sorted(defaulted)}"
    assert all(len(values) == 1 for values in defaults().values()), f"one default per variable: {defaults()}"


def credentials_in(text: str) -> list[str]:
    """The password of every URL in ``text``."""
    return [password for url in re.findall(r"[a-z0-9+]+://\S+", text)
            if (password := urlsplit(url.rstrip("\",'")).password)]


@pytest.mark.parametrize("name", service_names(veernet_only=False))
def test_every_credential_a_service_is_given_comes_from_a_required_variable(name: str) -> None:
    secrets = {secret_for(variable) for variable in required_variables()}
    env = environment(services()[name])
    for key, value in env.items():
        if SECRET_NAME.search(key):
            assert value in secrets, f"{name}: {key} is not read from a required variable of .env"
    for text in [*env.values(), *(command(name) if "command" in services()[name] else [])]:
        for password in credentials_in(text):
            assert password in secrets, f"{name}: a URL holds a password that is not a required variable"


def test_env_example_lists_every_variable_compose_reads() -> None:
    set_here, commented = env_example()
    assert set(set_here) == set(required_variables()), "set in .env.example: exactly the required secrets"
    assert all(value == "" for value in set_here.values()), ".env.example holds no secret: a copy must be filled in"
    shown = {name: {value} for name, value in commented.items()}
    assert shown == defaults(), "every optional variable, commented out with the default compose uses"


def test_env_files_stay_out_of_git_and_of_the_images() -> None:
    assert ".env" in (ROOT / ".gitignore").read_text().split()
    assert ".env" in (ROOT / ".dockerignore").read_text().split()


# ---- credentials agree across services -----------------------------------------------------------------

def test_the_database_and_broker_credentials_agree_across_services() -> None:
    env = environment(services()["api"])
    postgres, redis = environment(services()["postgres"]), services()["redis"]
    database = urlsplit(env["DATABASE_URL"])
    assert (database.username, database.password, database.hostname, database.path.lstrip("/")) == (
        postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"], "postgres", postgres["POSTGRES_DB"])
    broker = urlsplit(env["BROKER_URL"])
    requirepass = command("redis")[command("redis").index("--requirepass") + 1]
    assert (broker.hostname, broker.password) == ("redis", requirepass)
    assert environment(redis)["REDISCLI_AUTH"] == requirepass, "the health check's redis-cli must authenticate"
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"], "the password stays off the command line"


def test_the_service_uses_its_own_minio_user_never_the_root_account() -> None:
    minio, init = environment(services()["minio"]), environment(services()["minio-init"])
    root = (minio["MINIO_ROOT_USER"], minio["MINIO_ROOT_PASSWORD"])
    mc_host = urlsplit(init["MC_HOST_minio"])
    assert (mc_host.username, mc_host.password) == root, "minio-init administers MinIO as root"
    assert mc_host.netloc.rsplit("@", 1)[-1] == "minio:9000"
    for name in VEERNET_SERVICES:
        env = environment(services()[name])
        app = (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])
        assert app == (init["APP_USER"], init["APP_PASSWORD"]), f"{name} must use the user minio-init makes"
        assert app[0] != root[0] and app[1] != root[1], f"{name} must not hold MinIO's root credentials"


def test_minio_init_makes_the_buckets_of_checkpoint_url_and_datasets_url() -> None:
    init = environment(services()["minio-init"])
    for name in VEERNET_SERVICES:
        settings = Settings.model_validate({k.lower(): v for k, v in environment(services()[name]).items()
                                            if not k.startswith("AWS_")})
        assert urlsplit(settings.checkpoint_url).netloc == init["CHECKPOINT_BUCKET"]
        assert urlsplit(settings.datasets_url).netloc == init["DATASETS_BUCKET"]


# ---- deploy/minio-init.sh, run ---------------------------------------------------------------------------

def minio_init_script() -> Path:
    """The host file compose mounts where minio-init's entrypoint runs it."""
    svc = services()["minio-init"]
    shell, target = svc["entrypoint"]
    assert shell == "/bin/sh", "the mc image has a POSIX shell, not necessarily bash"
    mounts = dict(reversed(volume.removesuffix(":ro").split(":")) for volume in svc["volumes"])
    assert target in mounts, f"minio-init runs {target}, which no volume mounts"
    return ROOT / mounts[target]


def run_minio_init(tmp_path: Path, **unset: None) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """deploy/minio-init.sh with minio-init's environment and an `mc` that records each call (and the policy
    file it is given) instead of talking to MinIO."""
    calls = tmp_path / "calls.jsonl"
    mc = tmp_path / "bin" / "mc"
    mc.parent.mkdir()
    mc.write_text(f"""#!{sys.executable}
import json, pathlib, sys
args = sys.argv[1:]
if args[:3] == ["admin", "policy", "create"]:
    args[-1] = pathlib.Path(args[-1]).read_text()
with open({str(calls)!r}, "a") as out:
    out.write(json.dumps(args) + "\\n")
""")
    mc.chmod(0o755)
    env = {k: v for k, v in environment(services()["minio-init"]).items() if k not in unset}
    env["PATH"] = f"{mc.parent}:{os.environ['PATH']}"
    result = subprocess.run(["/bin/sh", str(minio_init_script())], env=env, capture_output=True, text=True,
                            timeout=30)
    recorded = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
    return result, recorded


def test_minio_init_creates_the_buckets_and_the_services_user_limited_to_them(tmp_path: Path) -> None:
    result, calls = run_minio_init(tmp_path)
    assert result.returncode == 0, result.stderr
    init = environment(services()["minio-init"])
    checkpoints, datasets = f"minio/{init['CHECKPOINT_BUCKET']}", f"minio/{init['DATASETS_BUCKET']}"
    policy_create = [call for call in calls if call[:3] == ["admin", "policy", "create"]]
    assert len(policy_create) == 1
    name, policy = policy_create[0][4], json.loads(policy_create[0][5])
    assert calls == [
        ["mb", "--ignore-existing", checkpoints, datasets],
        ["admin", "policy", "create", "minio", name, policy_create[0][5]],
        ["admin", "user", "add", "minio", init["APP_USER"], init["APP_PASSWORD"]],
        ["admin", "policy", "attach", "minio", name, "--user", init["APP_USER"]],
    ]
    assert granted(policy) == {
        ("s3:ListBucket", f"arn:aws:s3:::{init['CHECKPOINT_BUCKET']}"),
        ("s3:ListBucket", f"arn:aws:s3:::{init['DATASETS_BUCKET']}"),
        ("s3:GetBucketLocation", f"arn:aws:s3:::{init['CHECKPOINT_BUCKET']}"),
        ("s3:GetBucketLocation", f"arn:aws:s3:::{init['DATASETS_BUCKET']}"),
        *((action, f"arn:aws:s3:::{init['CHECKPOINT_BUCKET']}/*")
          for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject")),
        ("s3:GetObject", f"arn:aws:s3:::{init['DATASETS_BUCKET']}/*"),  # datasets: read only
    }


def granted(policy: dict[str, Any]) -> set[tuple[str, str]]:
    """(action, resource) pairs the policy allows; it must deny nothing and set no conditions to be read so."""
    pairs = set()
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow" and set(statement) == {"Effect", "Action", "Resource"}, statement
        pairs |= {(action, resource) for action in statement["Action"] for resource in statement["Resource"]}
    return pairs


def test_minio_init_stops_when_a_variable_it_needs_is_missing(tmp_path: Path) -> None:
    result, calls = run_minio_init(tmp_path, APP_PASSWORD=None)
    assert result.returncode != 0 and "APP_PASSWORD" in result.stderr
    assert calls == [], "nothing is changed in MinIO"


def test_minio_init_passes_shellcheck() -> None:
    shellcheck = Path(sys.executable).with_name("shellcheck")
    found = str(shellcheck) if shellcheck.exists() else shutil.which("shellcheck")
    assert found, "shellcheck not found: install the test extras (pip install -e '.[test]')"
    result = subprocess.run([found, "--shell=sh", str(minio_init_script())], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
