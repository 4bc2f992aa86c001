"""constraints.txt, the exact versions the images install: every package the project needs at run time on the
images' Python (3.11, Linux) is pinned there, within what pyproject.toml allows, so a dependency added or
loosened without `make constraints` fails here instead of drifting silently in the next image build.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

import pytest
from deploy_files import ROOT
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;#]+)$")
UNPINNED = {"torch"}  # each Dockerfile pins it: a CPU build in one, a CUDA build in the other
# The images' interpreter: requirements' markers are evaluated for it, whatever runs the tests.
IMAGE_MARKERS = {"python_version": "3.11", "python_full_version": "3.11.14", "sys_platform": "linux",
                 "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
                 "implementation_name": "cpython", "platform_python_implementation": "CPython"}


def pins() -> dict[str, Version]:
    found: dict[str, Version] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = PIN.match(line.strip())
        assert match, f"constraints.txt: {line!r} is not NAME==VERSION"
        name = canonicalize_name(match["name"])
        assert name not in found, f"constraints.txt pins {name} twice"
        found[name] = Version(match["version"])
    return found


def project_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in project["dependencies"]]


def applies(requirement: Requirement, extras: set[str]) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({**IMAGE_MARKERS, "extra": extra}) for extra in extras or {""})


def runtime_closure() -> dict[str, list[Requirement]]:
    """{package: the requirements naming it}, over everything the project's dependencies need in turn (with
    the extras asked for), read from the metadata of the packages installed here."""
    needed: dict[str, list[Requirement]] = {}
    extras_of: dict[str, set[str]] = {}
    queue = list(project_requirements())
    while queue:
        requirement = queue.pop()
        name = canonicalize_name(requirement.name)
        new_extras = set(requirement.extras) - extras_of.get(name, set())
        first = name not in needed
        needed.setdefault(name, []).append(requirement)
        if not first and not new_extras:
            continue
        extras_of[name] = extras_of.get(name, set()) | set(requirement.extras)
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue  # still checked to be pinned; its own dependencies are unknown here
        queue += [dep for dep in map(Requirement, requires) if applies(dep, extras_of[name])]
    return needed


def test_every_line_pins_one_package_and_torch_is_left_to_the_dockerfiles() -> None:
    assert pins(), "constraints.txt pins nothing"
    assert not UNPINNED & set(pins()), "torch is pinned in each Dockerfile, as a CPU or a CUDA build"


def test_every_dependency_of_pyproject_is_pinned_within_its_range() -> None:
    for requirement in project_requirements():
        name = canonicalize_name(requirement.name)
        if name in UNPINNED:
            continue
        assert name in pins(), f"{name} is not in constraints.txt: run `make constraints`"
        assert requirement.specifier.contains(pins()[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins()[name]}, outside pyproject.toml's {requirement}: "
            "run `make constraints`")


def test_everything_the_dependencies_need_in_turn_is_pinned() -> None:
    closure = runtime_closure()
    assert {"starlette", "kombu", "botocore", "sympy"} <= set(closure), "the walk reaches transitive dependencies"
    missing = sorted(set(closure) - set(pins()) - UNPINNED)
    assert not missing, f"needed at run time but not pinned in constraints.txt: {missing}; run `make constraints`"


@pytest.mark.parametrize("name", sorted(set(runtime_closure()) - UNPINNED))
def test_each_pin_satisfies_what_the_project_and_its_dependencies_ask_of_it(name: str) -> None:
    """Against the requirements of the versions installed here: a pin this environment's packages refuse
    would make the image a different set of packages than the one tested."""
    if name not in pins():
        pytest.skip(f"{name} is not pinned: test_everything_the_dependencies_need_in_turn_is_pinned says so")
    refused = [str(r) for r in runtime_closure()[name] if not r.specifier.contains(pins()[name], prereleases=True)]
    assert not refused, f"constraints.txt pins {name}=={pins()[name]}, which {refused} refuse: run `make constraints`"
