"""The layout's rules (DESIGN.md, "Layout and the dependency rule"), read from the source itself.

Every import counts, a function-level one too: a circle hidden inside a function is still a circle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.syntax import parsed

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("api", "worker", "veernet_core")


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project's packages."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = module_files()


def imported_names(module: str, path: Path) -> Iterator[str]:
    """Every dotted name `module` imports, anywhere in its file; `from a import b` gives a.b as well as a."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package, `level` packages up
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[:len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def project_imports(module: str) -> set[str]:
    """The project's modules that `module` imports (a name that is no module counts as its module)."""
    found = set()
    for name in imported_names(module, MODULES[module]):
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)
    return found


GRAPH = {module: project_imports(module) for module in MODULES}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))
    return cycles


def test_the_cycle_finder_finds_a_circle_through_three_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_from_imports_resolve_to_modules() -> None:
    assert "worker.attempt" in GRAPH["worker.runner"]  # `from worker.attempt import ...`
    assert "api.jobs" in GRAPH["worker.runner"]  # `from api import jobs`: the module, not just the package


def test_no_module_imports_itself_back_through_others() -> None:
    cycles = import_cycles(GRAPH)
    assert not cycles, "import circles (each a group of modules that import one another):\n" + "\n".join(
        " <-> ".join(group) for group in cycles)


def test_routes_never_import_routes() -> None:
    offenders = {module: sorted(i for i in imports if i.startswith("api.routes."))
                 for module, imports in GRAPH.items() if module.startswith("api.routes.")}
    assert not {module: found for module, found in offenders.items() if found}


@pytest.mark.parametrize(("package", "forbidden"), [
    ("veernet_core", ("fastapi", "celery", "sqlalchemy", "pydantic_settings", "api", "worker")),
    ("worker", ("fastapi", "api.routes", "api.main", "api.cli")),
    ("api", ("worker.tasks", "worker.runner", "worker.segment_runner", "worker.attempt", "worker.callbacks")),
])
def test_dependency_rule(package: str, forbidden: tuple[str, ...]) -> None:
    offenders = sorted(
        f"{module} imports {name}"
        for module, path in MODULES.items() if module == package or module.startswith(package + ".")
        for name in set(imported_names(module, path))
        if any(name == bad or name.startswith(bad + ".") for bad in forbidden))
    assert not offenders


def test_veernet_core_never_reads_the_environment() -> None:
    readers = sorted(module for module, path in MODULES.items()
                     if module.startswith("veernet_core") and ("os.environ" in path.read_text()
                                                               or "getenv(" in path.read_text()))
    assert not readers
