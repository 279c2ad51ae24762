"""The shape of the package, checked: what ``import fastlock`` loads, the import graph of
``src/fastlock`` (no cycles, the rooms layered one way) and the size of its modules.

The graph counts every import: module level, under ``if TYPE_CHECKING:`` and inside functions.
``.py``/``.pyi`` files are read with :mod:`ast`; Cython files (``.pyx``, ``.pxd``, and the
``.pxi`` files a ``.pyx`` includes, which belong to it) line by line.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from harness.cores import core_params

SRC = Path(__file__).resolve().parents[1] / "src" / "fastlock"
MAX_LINES = 400
LONG_MODULES: dict[str, str] = {
    "exceptions.py": "the whole public exception tree under one root, read as one page; the reply"
    " classification that used to share it is in protocol/replies.py",
}
"""Modules allowed over ``MAX_LINES`` (path under src/fastlock -> why)."""

# ---------------------------------------------------------------------------- what loads

NEVER_LOADED = (
    *("fastlock.tools", "fastlock.testing", "fastlock.interop", "fastlock.contrib", "fastlock.aio"),
    *("fastlock.cluster", "fastlock.web", "starlette", "uvicorn"),
    *("asyncio", "redis", "valkey", "rq", "celery", "kombu"),
    *("prometheus_client", "opentelemetry", "fastlock.metrics.prometheus", "fastlock.metrics.otel"),
)
_PROGRAM = """
import sys
import fastlock

client = fastlock.Client("redis://127.0.0.1:1", impl=sys.argv[1])
client.lock("architecture", ttl=None)
client.queue("architecture")
client.close()
print("\\n".join(sorted(sys.modules)))
"""


@pytest.mark.parametrize("impl", core_params("cython", "python"))
def test_the_runtime_loads_no_tools_testing_interop_contrib_or_other_clients(impl: str) -> None:
    """A fresh interpreter: ``import fastlock`` and building a client, a lock and a queue
    (no I/O yet) load none of ``NEVER_LOADED`` (asyncio included: ``fastlock.AsyncClient``
    is imported on first use)."""
    run = subprocess.run([sys.executable, "-c", _PROGRAM, impl], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    loaded = [
        name
        for name in run.stdout.split()
        if any(name == banned or name.startswith(banned + ".") for banned in NEVER_LOADED)
    ]
    assert loaded == []


# ---------------------------------------------------------------------------- the graph


@dataclass(frozen=True)
class Import:
    """One import of a fastlock module (``target``) by another (``source``)."""

    source: str
    target: str
    path: str  # file and line, for messages
    lazy: bool  # inside a function
    type_only: bool  # under ``if TYPE_CHECKING:``

    def __str__(self) -> str:
        how = " (in a function)" if self.lazy else " (TYPE_CHECKING)" if self.type_only else ""
        return f"{self.path}: {self.source} imports {self.target}{how}"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(path: Path) -> bool:
    return path.stem == "__init__"


@cache
def _modules() -> frozenset[str]:
    return frozenset(_module_name(p) for p in SRC.rglob("*") if p.suffix in (".py", ".pyi", ".pyx", ".pxd"))


def _resolve(module: str, package: bool, level: int, base: str | None) -> str:
    """The absolute name of ``from <level dots><base> import ...`` written in ``module``."""
    if level == 0:
        return base or ""
    parts = module.split(".") if package else module.split(".")[:-1]
    parts = parts[: len(parts) - (level - 1)]
    return ".".join([*parts, *([base] if base else [])])


def _targets(base: str, names: list[str]) -> Iterator[str]:
    """``from base import names``: each name that is a module of its own, else ``base``."""
    modules = _modules()
    for name in names:
        yield f"{base}.{name}" if f"{base}.{name}" in modules else base


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _python_imports(path: Path) -> Iterator[Import]:
    module, package = _module_name(path), _is_package(path)
    where = path.relative_to(SRC.parent)

    def visit(node: ast.AST, lazy: bool, type_only: bool) -> Iterator[Import]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, f"{where}:{node.lineno}", lazy, type_only)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, package, node.level, node.module)
            for target in _targets(base, [alias.name for alias in node.names]):
                yield Import(module, target, f"{where}:{node.lineno}", lazy, type_only)
        for child in ast.iter_child_nodes(node):
            child_lazy = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            child_type_only = type_only or (
                isinstance(node, ast.If) and _is_type_checking(node.test) and child in node.body
            )
            yield from visit(child, child_lazy, child_type_only)

    yield from visit(ast.parse(path.read_text(), str(path)), False, False)


_CYTHON_IMPORT = re.compile(
    r"^(?P<indent>[ \t]*)(?:from[ \t]+(?P<base>[\w.]+)[ \t]+c?import[ \t]+(?P<names>\([^)]*\)|[^\n]*)"
    r"|c?import[ \t]+(?P<modules>[^\n]*)|include[ \t]+['\"](?P<include>[^'\"]+)['\"])",
    re.MULTILINE,
)


def _cython_imports(path: Path, module: str | None = None) -> Iterator[Import]:
    """Imports and cimports of a Cython file, and of the ``.pxi`` files it includes (as ``module``'s)."""
    module = module or _module_name(path)
    text = re.sub(r"#[^\n]*", "", path.read_text())
    for match in _CYTHON_IMPORT.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        where, lazy = f"{path.relative_to(SRC.parent)}:{line}", bool(match["indent"])
        if match["include"]:
            yield from _cython_imports(path.parent / match["include"], module)
            continue
        if match["base"]:
            level = len(match["base"]) - len(match["base"].lstrip("."))
            base = _resolve(module, False, level, match["base"].lstrip(".") or None)
            names = [
                n.split()[0] for n in match["names"].strip("()").replace("\n", " ").split(",") if n.strip()
            ]
            targets = list(_targets(base, names))
        else:
            targets = [n.split()[0] for n in match["modules"].split(",") if n.strip()]
        for target in targets:
            yield Import(module, target, where, lazy, False)


@cache
def imports() -> tuple[Import, ...]:
    """Every import of a fastlock module by a fastlock module."""
    found: list[Import] = []
    for path in sorted(SRC.rglob("*")):
        if path.suffix in (".py", ".pyi"):
            found += _python_imports(path)
        elif path.suffix in (".pyx", ".pxd"):
            found += _cython_imports(path)
    return tuple(
        dict.fromkeys(i for i in found if i.target.split(".")[0] == "fastlock" and i.target != i.source)
    )


def _room(module: str) -> str:
    """``fastlock.locks.lock`` -> ``locks``; ``fastlock.operations`` -> ``operations``."""
    return module.split(".")[1] if "." in module else ""


def _components(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components (Tarjan) of more than one module: each is a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = {stack.pop()}
            while node not in component:
                component.add(stack.pop())
            if len(component) > 1:
                components.append(component)

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return components


def _cycle_through(start: str, component: set[str], edges: dict[str, set[str]]) -> list[str]:
    """The shortest path from ``start`` back to itself inside ``component`` (breadth first)."""
    paths = {start: [start]}
    queue = [start]
    for node in queue:
        for nxt in sorted(edges.get(node, set()) & component):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    raise AssertionError(f"no cycle through {start}")


def test_the_graph_sees_the_imports() -> None:
    """The parser itself: known edges of each kind are found."""
    found = {(i.source, i.target, i.lazy) for i in imports()}
    assert ("fastlock", "fastlock.sync.client", False) in found  # from .sync.client import ...
    assert ("fastlock._core", "fastlock.protocol.arguments", False) in found  # Cython
    assert ("fastlock.scripts.clients", "fastlock.interop.redis_py", True) in found  # in a function


def test_the_cycle_finder() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": set()}
    assert _components(edges) == [{"a", "b", "c"}]
    assert _cycle_through("b", {"a", "b", "c"}, edges) == ["b", "c", "a", "b"]


def test_no_import_cycles() -> None:
    """No cycle, not even through TYPE_CHECKING or function-level imports; a failure shows one
    cycle per tangle and every import inside it."""
    edges: dict[str, set[str]] = {}
    for i in imports():
        edges.setdefault(i.source, set()).add(i.target)
    report = []
    for component in _components(edges):
        report.append("cycle: " + " -> ".join(_cycle_through(min(component), component, edges)))
        report += [f"  {i}" for i in imports() if i.source in component and i.target in component]
    assert report == [], "import cycles:\n" + "\n".join(report)


TRANSPORTS = {"sync", "aio", "cluster"}
FORBIDDEN: dict[str, set[str]] = {
    "protocol": {"operations", "scripts", "locks", "queues", "interop", "testing", "tools", *TRANSPORTS},
    "operations": {"scripts", "locks", "queues", *TRANSPORTS},
    "scripts": TRANSPORTS,
    "locks": TRANSPORTS,
    "queues": TRANSPORTS,
    "limits": TRANSPORTS,
    "params": {"operations", "scripts", "locks", "queues", *TRANSPORTS},
    "_coreparts": {"operations", "scripts", "locks", "queues", "interop", "testing", "tools", *TRANSPORTS},
    "metrics": {"interop", "testing", "tools", *TRANSPORTS},
    "sync": TRANSPORTS - {"sync"},
    "aio": TRANSPORTS - {"aio"},
}
"""Rooms each room must not import (beside the rules for tools, testing and interop): the
transports share what is transport-neutral (``params``, ``protocol``, ``scripts``, ...), never
each other; the cores' parts (``_coreparts``) use only exceptions and protocol, so every room
may use a core."""
SANS_IO = {"protocol", "operations"}
SANS_IO_MODULES = {
    "fastlock.cluster.topology",
    "fastlock.cluster.routing",
    "fastlock.cluster.commands",
    "fastlock.cluster.asking",
    *(f"fastlock._coreparts.{part}" for part in ("resp_numbers", "resp_writer", "resp_reader", "resp_py")),
    *(
        f"fastlock._coreparts.{part}"
        for part in ("domain_digest", "domain_keys", "domain_new", "domain_jobs")
    ),
    "fastlock._coreparts.domain_py",
}
"""Sans-IO modules in rooms that do I/O: the cluster router, driven by the sync and async clients;
the cores' RESP and domain parts."""
IO_MODULES = {"socket", "ssl", "select", "selectors", "threading", "time", "asyncio", "subprocess", "posix"}
TOOLING = {"tools", "testing"}
INTEGRATIONS = "contrib"  # fastlock.contrib: the job-framework integrations, on top of everything
DASHBOARD = "web"  # fastlock.web: the dashboard, on top of the transports; the CLI serves it
SHIM = "fastlock.__main__"  # ``python -m fastlock``: three lines handing over to tools.cli


def _layering_violations() -> list[str]:
    bad = []
    for i in imports():
        source, target = _room(i.source), _room(i.target)
        if source == target:
            continue
        if target in FORBIDDEN.get(source, ()):
            bad.append(f"{i}: {source} must not import {target}")
        elif target in TOOLING and source not in TOOLING and i.source != SHIM:
            bad.append(f"{i}: only tools and testing import {target}")
        elif target == INTEGRATIONS and source not in TOOLING:
            bad.append(f"{i}: only contrib, tools and testing import contrib")
        elif target == DASHBOARD and source not in TOOLING:
            bad.append(f"{i}: only web, tools and testing import web")
        elif target == "interop" and not i.lazy:
            bad.append(f"{i}: interop is imported only inside functions")
    return bad


def test_rooms_import_one_way() -> None:
    bad = _layering_violations()
    assert bad == [], "layering violations:\n" + "\n".join(bad)


def test_each_integration_alone_imports_its_framework() -> None:
    """``fastlock.contrib.rq`` alone imports rq, ``fastlock.contrib.celery`` alone celery (and
    kombu): an integration never needs another's framework, the runtime none."""
    frameworks = {"rq": "rq", "celery": "celery", "kombu": "celery"}
    bad = [
        f"{i}: only fastlock.contrib.{frameworks[framework]} imports {framework}"
        for path in sorted(SRC.rglob("*.py"))
        for i in _python_imports(path)
        if (framework := i.target.split(".")[0]) in frameworks
        and i.source != f"fastlock.contrib.{frameworks[framework]}"
    ]
    assert bad == [], "\n".join(bad)


def test_each_exporter_alone_imports_its_library() -> None:
    """prometheus_client is imported by ``fastlock.metrics.prometheus`` (and the standalone
    exporter, in a function), opentelemetry by ``fastlock.metrics.otel`` only: the runtime
    needs neither extra; the hook surface ``fastlock.metrics`` imports nothing but fastlock."""
    owners = {
        "prometheus_client": {"fastlock.metrics.prometheus", "fastlock.tools.exporter"},
        "opentelemetry": {"fastlock.metrics.otel"},
    }
    bad = [
        f"{i}: only {', '.join(sorted(owners[library]))} import {library}"
        for path in sorted(SRC.rglob("*.py"))
        for i in _python_imports(path)
        if (library := i.target.split(".")[0]) in owners and i.source not in owners[library]
    ]
    assert bad == [], "\n".join(bad)
    hooks = [i for i in imports() if i.source == "fastlock.metrics"]
    assert {i.target for i in hooks} <= {"fastlock.exceptions"}, hooks


def test_sans_io_rooms_import_no_io() -> None:
    """protocol, operations and the cluster router hold no socket, clock, thread or sleep."""
    bad = []
    for path in sorted(SRC.rglob("*")):
        room = _room(_module_name(path))
        sans_io = room in SANS_IO or _module_name(path) in SANS_IO_MODULES
        if sans_io and path.suffix in (".py", ".pyx", ".pxi", ".pxd"):
            found = _python_imports(path) if path.suffix == ".py" else _cython_imports(path)
            bad += [f"{i}: {room} is sans-IO" for i in found if i.target.split(".")[0] in IO_MODULES]
    assert bad == [], "\n".join(bad)


# ---------------------------------------------------------------------------- sizes


def test_modules_stay_small() -> None:
    sizes = {
        str(path.relative_to(SRC)): len(path.read_text().splitlines())
        for path in sorted(SRC.rglob("*"))
        if path.suffix in (".py", ".pyi", ".pyx", ".pxi", ".pxd")
    }
    long = {path: lines for path, lines in sizes.items() if lines > MAX_LINES and path not in LONG_MODULES}
    assert long == {}, f"modules over {MAX_LINES} lines (split them, or list them in LONG_MODULES with why)"
    assert set(LONG_MODULES) <= {path for path, lines in sizes.items() if lines > MAX_LINES}, (
        "stale LONG_MODULES"
    )
