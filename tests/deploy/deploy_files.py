"""Reading docker-compose.yml, .env.example and the Dockerfiles as Compose and Docker read them, for the tests
beside this module.

There is no Docker engine where the tests run, so the files are parsed (PyYAML resolves anchors and merge keys
as Compose does; ``${VAR:?message}`` and ``${VAR:-default}`` are interpolated here as Compose does) and
compared with the real settings class, the real `veernet` CLI and the real Celery queues.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = ("Dockerfile", "Dockerfile.gpu")
INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*)|:\?(?P<required>[^}]*))?\}")
# What a variable's name says it holds: such a variable must be required, never defaulted.
SECRET_NAME = re.compile(r"PASSWORD|SECRET|_KEY$|AUTH")


class ComposeLoader(yaml.SafeLoader):
    """PyYAML's safe loader (anchors, merge keys), but a key repeated in one mapping is an error, as in
    Compose; PyYAML alone would silently keep the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [key.value for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge"]
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        if repeated:
            raise yaml.constructor.ConstructorError(None, None, f"keys repeated: {repeated}", node.start_mark)
        return super().construct_mapping(node, deep=deep)


def compose_text() -> str:
    return (ROOT / "docker-compose.yml").read_text()


@cache
def compose() -> dict[str, Any]:
    return yaml.load(compose_text(), Loader=ComposeLoader)  # a SafeLoader


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


# ---- interpolation: what compose reads from .env -------------------------------------------------------

def references() -> list[re.Match[str]]:
    """Every ``${...}`` in docker-compose.yml (``$$`` is a literal dollar); each must be one Compose understands."""
    found = re.findall(r"\$\{[^}]*\}", compose_text().replace("$$", ""))
    matches = [INTERPOLATION.fullmatch(ref) for ref in found]
    bad = [ref for ref, match in zip(found, matches, strict=True) if match is None]
    assert not bad, f"not ${{VAR:-default}} nor ${{VAR:?message}}: {bad}"
    return [match for match in matches if match is not None]


def required_variables() -> dict[str, set[str]]:
    """{variable: the messages compose stops with while it is unset or empty}."""
    required: dict[str, set[str]] = {}
    for match in references():
        if match["required"] is not None:
            required.setdefault(match["name"], set()).add(match["required"])
    return required


def secret_for(name: str) -> str:
    """What the tests put in .env for a required variable: distinct per variable, so that a service reading
    the wrong one is caught."""
    return f"test-{name.lower().replace('_', '-')}"


def resolve(value: str) -> str:
    """Compose's interpolation with a .env holding a test value for each required variable and nothing else."""
    def substitute(match: re.Match[str]) -> str:
        if match["required"] is not None:
            return secret_for(match["name"])
        assert match["default"] is not None, f"${{{match['name']}}} has no default: set one, or require it with :?"
        return match["default"]

    return INTERPOLATION.sub(substitute, value.replace("$$", "\0")).replace("\0", "$")


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: resolve(str(value)) for key, value in env.items()}


def command(name: str) -> list[str]:
    """A service's command (interpolated), or its image's CMD."""
    svc = services()[name]
    cmd = svc.get("command")
    if cmd is None:
        return dockerfile_json(dockerfile_of(svc) or "", "CMD")
    return [resolve(arg) for arg in (cmd if isinstance(cmd, list) else cmd.split())]


# ---- Dockerfiles ---------------------------------------------------------------------------------------

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


def healthcheck_command(dockerfile: str) -> list[str]:
    """The exec form of the image's HEALTHCHECK CMD, its options (--interval ...) dropped."""
    probe = arguments(dockerfile, "HEALTHCHECK")
    assert probe, f"{dockerfile} has no HEALTHCHECK"
    exec_form = re.search(r"\bCMD\s+(\[.*\])\s*$", probe[-1])
    assert exec_form, f"{dockerfile}: HEALTHCHECK CMD must be in exec form: {probe[-1]}"
    return json.loads(exec_form[1])


def has_healthcheck(name: str) -> bool:
    healthcheck = services()[name].get("healthcheck")
    if healthcheck is not None:
        return not healthcheck.get("disable", False)
    dockerfile = dockerfile_of(services()[name])
    return dockerfile is not None and bool(arguments(dockerfile, "HEALTHCHECK"))


def seconds(duration: str) -> float:
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration))


# ---- the CLI the images run ----------------------------------------------------------------------------

@cache
def veernet_cli() -> Any:
    """The real `veernet` command group (Typer's click group)."""
    import typer.main

    import api.cli.main

    group = typer.main.get_command(api.cli.main.app)
    assert hasattr(group, "commands"), "api.cli.main.app must be a Typer app with subcommands"
    return group


def parsed(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """(subcommand, its parsed options), parsed by the real CLI: an unknown option fails."""
    assert argv, "an empty command"
    name, rest = argv[0], argv[1:]
    group = veernet_cli()
    assert name in group.commands, f"{name!r} is not a veernet subcommand; there are {sorted(group.commands)}"
    return name, group.commands[name].make_context(name, list(rest)).params


def celery_services() -> dict[str, tuple[str, dict[str, Any]]]:
    """{service: (subcommand, options)} for each veernet service that runs Celery nodes (workers, reaper)."""
    found = {}
    for name in VEERNET_SERVICES:
        subcommand, options = parsed(command(name))
        if subcommand in ("worker", "reaper"):
            found[name] = (subcommand, options)
    return found


def workers() -> dict[str, dict[str, Any]]:
    return {name: options for name, (subcommand, options) in celery_services().items() if subcommand == "worker"}


def fake_nvidia_smi(bin_dir: Path, gpus: int) -> dict[str, str]:
    """An environment whose PATH has an `nvidia-smi` listing ``gpus`` GPUs, as the driver's `-L` does."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08x}-5e6f-7a8b-9c0d-1e2f3a4b5c6d)\\n"
                    for i in range(gpus))
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!/bin/sh\nprintf '{lines}'\n")
    script.chmod(0o755)
    return {"PATH": str(bin_dir)}
