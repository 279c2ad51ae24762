"""Client instructions per operation under callgrind: deterministic counts of fastlock's paths.

:func:`measure` runs each named path (:class:`Path_`: the workload paths here, and those of a
``source`` file) in a child Python (GC off, a fixed environment with ``PYTHONHASHSEED=0``, no
address space randomisation) under ``valgrind --tool=callgrind`` against a private server on a
unix socket (not instrumented). For each path the child sets up and warms up uninstrumented
(fast), starts instrumentation, collects exactly ``ops`` operations between two
``CALLGRIND_TOGGLE_COLLECT`` client requests, dumps them (``CALLGRIND_DUMP_STATS_AT``) and stops
instrumentation: a tiny C shim compiled here with gcc against ``valgrind/callgrind.h``, called
through ctypes. Instructions per op = collected Ir / ops.

Used by ``python -m fastlock bench`` (its instructions column: :func:`workload_paths`) and by
the perf gate in a checkout's ``bench/instructions.py`` (its paths in
``bench/instruction_paths.py``, the ``source``; budgets per toolchain). The child is
``python -m fastlock.tools.instructions --child ...``.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib.util
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "AIO",
    "AIO_EACH",
    "NO_CORE",
    "WORKLOAD",
    "Measurement",
    "Op",
    "Path_",
    "Unavailable",
    "aio_workload_paths",
    "client_of",
    "measure",
    "unavailable",
    "workload",
    "workload_paths",
]

Op = Callable[[], object]

SHIM = r"""
#include <valgrind/callgrind.h>
void fl_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void fl_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
void fl_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
void fl_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
"""
NO_CORE = "not measured: the Cython core (fastlock._core) is not built here (pure-Python install)"


@dataclass(frozen=True)
class Path_:
    """One measured path: ``setup(where)`` returns the operation (``where``: see
    :func:`client_of`, chosen by ``server``); ``warmup`` and ``ops`` are multiples of a batch
    where the path batches; each call of the operation does ``per`` operations (an asyncio
    round of many tasks: its instructions are counted per operation)."""

    name: str
    setup: Callable[[str], Op]
    ops: int
    warmup: int
    cython: bool = True  # needs fastlock._core (or is budgeted on it: the default core)
    server: str = "unix"  # "unix": the private server's socket; "tcp": its TCP port; "cluster"
    per: int = 1


def client_of(where: str, impl: str | None = None) -> Any:
    """A client of the server ``where`` names: a unix socket path (standalone), or a
    ``redis://`` URL of a standalone server (``tcp``) or of a cluster seed (``cluster``)."""
    from fastlock import Client
    from fastlock.cluster import ClusterClient

    if where.startswith("cluster+"):
        return ClusterClient(where.removeprefix("cluster+"), impl=impl)
    return Client(where if "://" in where else f"unix://{where}", impl=impl)


def workload(name: str) -> Callable[[str], Op]:
    """The setup of a workload of ``fastlock.tools.workloads`` (the ones ``python -m fastlock
    bench`` times) on the server ``where`` names."""

    def setup(where: str) -> Op:
        from fastlock.tools.workloads import ALL

        (chosen,) = (w for w in ALL if w.name == name)
        return chosen.setup(client_of(where))

    return setup


WORKLOAD = "workload: "
"""The prefix of a workload path's name: ``WORKLOAD + workload.name``."""
AIO = "aio "
"""The prefix of an asyncio workload path's name: ``AIO + "(<loop>): " + workload.name``."""
AIO_EACH = 50
"""Operations per task in a round of an asyncio workload path (bench/instruction_paths.py's too)."""


def workload_paths() -> tuple[Path_, ...]:
    """A path per counted workload of :mod:`fastlock.tools.workloads`, named ``WORKLOAD`` +
    its name (the instructions column of ``python -m fastlock bench``), on the core the child
    loads by default (see :func:`measure`'s ``impl``); a batched one collects whole batches."""
    from .workloads import ALL

    paths = []
    for w in (w for w in ALL if w.counted):
        ops, warmup = w.batch * max(10, 300 // w.batch), w.batch * max(3, 100 // w.batch)
        paths.append(Path_(WORKLOAD + w.name, workload(w.name), ops, warmup, cython=False))
    return tuple(paths)


def aio_workload_paths() -> tuple[Path_, ...]:
    """A path per asyncio workload of fastlock (:mod:`.aio_workloads`, redis.asyncio's left
    out) and event loop (``asyncio``, ``uvloop``), named ``AIO + "(<loop>): " + its name``: a
    round of its tasks doing :data:`AIO_EACH` operations each (a fifth of that with 1,000 tasks)
    is one op, counted per operation."""
    from .aio_workloads import ALL, path_setup

    paths = []
    for loop in ("asyncio", "uvloop"):
        for w in (w for w in ALL if not w.name.startswith("redis")):
            each = AIO_EACH if w.tasks <= 100 else AIO_EACH // 5
            setup = path_setup(w.name, each, loop)
            paths.append(Path_(f"{AIO}({loop}): {w.name}", setup, 2, 1, cython=False, per=w.tasks * each))
    return tuple(paths)


def by_name(source: str | None = None) -> dict[str, Path_]:
    """Every path by name: the workload paths, and the ``GATED`` paths of the Python file
    ``source``."""
    paths: tuple[Path_, ...] = ()
    if source:
        spec = importlib.util.spec_from_file_location(Path(source).stem, source)
        assert spec is not None and spec.loader is not None, source
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        paths = tuple(module.GATED)
    return {path.name: path for path in (*paths, *workload_paths(), *aio_workload_paths())}


def run_child(servers: dict[str, str], shim: str, names: Sequence[str], source: str | None = None) -> None:
    """In the child under callgrind: set up and warm up each path uninstrumented (fast), then
    instrument, collect and dump its region. ``servers``: where each kind of path connects."""
    gc.disable()
    lib = ctypes.CDLL(shim)
    paths = by_name(source)
    for name in names:
        path = paths[name]
        op = path.setup(servers[path.server])
        for _ in range(path.warmup):
            op()
        region = range(path.ops)
        lib.fl_start()
        lib.fl_toggle()
        for _ in region:
            op()
        lib.fl_toggle()
        lib.fl_dump(name.encode())
        lib.fl_stop()


# --------------------------------------------------------------------------- measuring (parent side)


def has_core() -> bool:
    """Whether the Cython core is importable by this interpreter (an in-place .so of another
    interpreter's ABI does not count)."""
    return importlib.util.find_spec("fastlock._core") is not None


def unavailable() -> str | None:
    """Why the gate cannot run here, or None."""
    missing = [tool for tool in ("valgrind", "gcc") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not on PATH (Debian: apt-get install valgrind gcc)"
    try:
        _server_binary()
    except FileNotFoundError as exc:
        return str(exc)
    return None


class Unavailable(RuntimeError):
    """The gate cannot run on this machine (the message says why)."""


def build_shim(directory: Path) -> Path:
    """Compile the client-request shim; raise :class:`Unavailable` saying why it failed."""
    source, library = directory / "shim.c", directory / "shim.so"
    source.write_text(SHIM)
    proc = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-o", str(library), str(source)], capture_output=True, text=True
    )
    if proc.returncode:
        raise Unavailable(f"cannot compile the callgrind shim (valgrind/callgrind.h missing?): {proc.stderr}")
    return library


def _parse_dumps(directory: Path) -> dict[str, int]:
    """Ir collected per dump, by the name given to CALLGRIND_DUMP_STATS_AT."""
    counts = {}
    for dump in directory.glob("callgrind.out.*"):
        text = dump.read_text(errors="replace")
        trigger = re.search(r"^desc: Trigger: Client Request: (.+)$", text, re.M)
        total = re.search(r"^totals: (\d+)", text, re.M)  # summary: is wrong when started mid-call
        if trigger and total:
            counts[trigger.group(1)] = int(total.group(1))
    return counts


def _no_aslr() -> None:
    """In the forked child before exec: no address-space randomisation (personality
    ADDR_NO_RANDOMIZE). With it, counts moved by up to 0.8% from run to run (addresses
    decide alignment and object hashes); without it they repeat exactly. Refused in some
    sandboxes: then the counts are merely noisier."""
    ctypes.CDLL(None).personality(0x0040000)


def _child_env() -> dict[str, str]:
    """A fixed environment: its size shifts the child's memory layout, and with it a few
    counts (the caller's variables, ``FASTLOCK_IMPL`` included, are not passed on)."""
    return {"PYTHONHASHSEED": "0", "LC_ALL": "C.UTF-8"}


def _server_binary() -> str:
    from fastlock.testing.servers import find_server_binary

    return shutil.which("redis-server") or find_server_binary()


@dataclass
class Measurement:
    """Instructions per op by path, the paths not measured (with why) and the toolchain."""

    per_op: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0  # wall time
    cpu_seconds: float = 0.0  # user + system of the children (valgrind included)


def measure(
    names: Sequence[str],
    *,
    source: os.PathLike[str] | None = None,
    jobs: int = 1,
    impl: str | None = None,
) -> Measurement:
    """Measure the paths ``names`` (workload paths, or paths of the file ``source``: see
    :func:`by_name`; one this install cannot run is skipped) in ``jobs`` children side by side.
    One child is the default: with two, ``hiredis.pack_command`` moved by up to 0.8% from run to run
    (it does not in one child). ``impl`` sets the child's ``FASTLOCK_IMPL`` (default: unset, so
    the best core available)."""
    from fastlock.testing.cluster import TempCluster
    from fastlock.testing.servers import TempServer

    started, cpu = time.monotonic(), _children_cpu()
    result = Measurement()
    core = has_core()
    where = os.fspath(source) if source else "-"
    paths = by_name(None if source is None else where)
    todo = []
    for path in (paths[n] for n in names):
        if path.cython and not core:
            result.skipped[path.name] = NO_CORE
        else:
            todo.append(path)
    groups = [[p.name for p in todo[i::jobs]] for i in range(jobs)]
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="fastlock-instr-"))
        server = stack.enter_context(TempServer(_server_binary()))
        servers = {"unix": server.unix_path, "tcp": server.url, "cluster": "-"}
        if any(p.server == "cluster" for p in todo):
            servers["cluster"] = "cluster+" + stack.enter_context(TempCluster(_server_binary())).url
        shim, valgrind = build_shim(Path(tmp)), shutil.which("valgrind") or "valgrind"
        children = []
        for i, group in enumerate(g for g in groups if g):
            out = Path(tmp) / f"child{i}"
            out.mkdir()
            command = [valgrind, "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no"]
            command += ["--dump-line=no", "--dump-instr=no", f"--callgrind-out-file={out}/callgrind.out.%p"]
            command += [sys.executable, "-m", __name__, "--child", where, *servers.values(), str(shim)]
            command += group
            env = {**_child_env(), **({"FASTLOCK_IMPL": impl} if impl else {})}
            child = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, preexec_fn=_no_aslr)
            children.append((out, group, child))
        for out, group, child in children:
            _, stderr = child.communicate()
            if child.returncode:
                raise RuntimeError(
                    f"instrumented child failed ({child.returncode}): {stderr.decode()[-3000:]}"
                )
            counts = _parse_dumps(out)
            for name in group:
                if name not in counts:
                    raise RuntimeError(f"no callgrind dump for {name!r}: {stderr.decode()[-3000:]}")
                result.per_op[name] = counts[name] / (paths[name].ops * paths[name].per)
    result.seconds, result.cpu_seconds = time.monotonic() - started, _children_cpu() - cpu
    return result


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":  # the instrumented child of measure()
    _, flag, source, unix, tcp, cluster, shim, *names = sys.argv
    assert flag == "--child", "python -m fastlock.tools.instructions is the child of measure()"
    run_child({"unix": unix, "tcp": tcp, "cluster": cluster}, shim, names, None if source == "-" else source)
