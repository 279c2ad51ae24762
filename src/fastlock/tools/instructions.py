"""Client instructions per operation under callgrind: deterministic counts of fastlock's paths.

:func:`measure` runs each :class:`Path_` in a child Python (GC off, a fixed environment with
``PYTHONHASHSEED=0``, no address space randomisation) under ``valgrind --tool=callgrind``
against a private server on a unix socket (not instrumented). For each path the child sets up
and warms up uninstrumented (fast), starts instrumentation, collects exactly ``ops`` operations
between two ``CALLGRIND_TOGGLE_COLLECT`` client requests, dumps them
(``CALLGRIND_DUMP_STATS_AT``) and stops instrumentation: a tiny C shim compiled here with gcc
against ``valgrind/callgrind.h``, called through ctypes. Instructions per op = collected Ir / ops.

Used by ``python -m fastlock bench`` (its instructions column: :func:`workload_paths`) and by the
perf gate in a checkout's ``bench/instructions.py`` (budgets per toolchain, :data:`PATHS`).
The child is ``python -m fastlock.tools.instructions --child ...``.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import hashlib
import importlib.util
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CLUSTER_PATHS",
    "NO_CORE",
    "PATHS",
    "Measurement",
    "Path_",
    "Unavailable",
    "hiredis_command",
    "measure",
    "raw_socket_hiredis",
    "unavailable",
    "workload_paths",
]

SHIM = r"""
#include <valgrind/callgrind.h>
void fl_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void fl_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
void fl_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
void fl_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
"""
NO_CORE = "not measured: the Cython core (fastlock._core) is not built here (pure-Python install)"

Op = Callable[[], object]


# --------------------------------------------------------------------------- the paths (child side)


def _reference() -> tuple[str, tuple[str, ...], tuple[Any, ...]]:
    from fastlock.tools.bench import EVALSHA_ARGS, EVALSHA_KEYS, EVALSHA_SCRIPT

    return hashlib.sha1(EVALSHA_SCRIPT.encode()).hexdigest(), EVALSHA_KEYS, EVALSHA_ARGS


def hiredis_command() -> tuple[Any, ...]:
    """The reference EVALSHA as a hiredis command (hiredis refuses bool: True is sent as 1)."""
    sha, keys, _ = _reference()
    return ("EVALSHA", sha, len(keys), *keys, 1, "two", 3.5, b"four", 1)


def raw_socket_hiredis(path: str) -> Op:
    """The floor: a raw unix socket + ``hiredis.Reader`` sending a prepacked EVALSHA."""
    import hiredis

    from fastlock.tools.bench import EVALSHA_SCRIPT

    sock = socket.socket(socket.AF_UNIX)
    sock.connect(path)
    sock.sendall(hiredis.pack_command(("SCRIPT", "LOAD", EVALSHA_SCRIPT)))  # type: ignore[arg-type] # stub: a 1-tuple
    sock.recv(128)
    reader, buf = hiredis.Reader(), bytearray(65536)
    payload = hiredis.pack_command(hiredis_command())

    def op() -> Any:
        sock.sendall(payload)
        reply = False
        while reply is False:
            reader.feed(buf, 0, sock.recv_into(buf))  # type: ignore[arg-type] # any buffer (stub: bytes)
            reply = reader.gets()
        return reply

    return op


def _encode_cython(path: str) -> Op:
    from fastlock._core import encode_evalsha

    sha, keys, args = _reference()
    return lambda: encode_evalsha(sha, keys, args)


def _pack_command(path: str) -> Op:
    import hiredis

    pack, command = hiredis.pack_command, hiredis_command()
    return lambda: pack(command)


def _client(where: str, impl: str | None = None) -> Any:
    """A client of the server ``where`` names: a unix socket path (standalone), or a
    ``redis://`` URL of a standalone server (``tcp``) or of a cluster seed (``cluster``)."""
    from fastlock import Client
    from fastlock.cluster import ClusterClient

    if where.startswith("cluster+"):
        return ClusterClient(where.removeprefix("cluster+"), impl=impl)
    return Client(where if "://" in where else f"unix://{where}", impl=impl)


def _call(impl: str | None) -> Callable[[str], Op]:
    """``client.call`` of the reference script; ``impl=None`` is the default core."""

    def setup(path: str) -> Op:
        from fastlock.tools.bench import EVALSHA_SCRIPT

        _, keys, args = _reference()
        client = _client(path, impl)
        name = client.register_script(EVALSHA_SCRIPT).name
        call = client.call
        return lambda: call(name, keys, args)

    return setup


PIPELINE = 64


def _pipeline(impl: str | None) -> Callable[[str], Op]:
    """``Client.pipeline()`` of ``PIPELINE`` calls of the reference script (``pipe.call``), one op."""

    def setup(path: str) -> Op:
        from fastlock.tools.bench import EVALSHA_SCRIPT

        _, keys, args = _reference()
        client = _client(path, impl)
        name = client.register_script(EVALSHA_SCRIPT).name
        client.call(name, keys, args)  # loaded

        def op() -> Any:
            with client.pipeline() as pipe:
                call = pipe.call
                for _ in range(PIPELINE):
                    call(name, keys, args)
                return pipe.execute()

        return op

    return setup


def _core_evalsha(path: str) -> Op:
    from fastlock._core import Connection
    from fastlock.tools.bench import EVALSHA_SCRIPT

    sha, keys, args = _reference()
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(path)
    conn = Connection(sock)
    conn.execute(("SCRIPT", "LOAD", EVALSHA_SCRIPT))
    return lambda: conn.evalsha(sha, keys, args)


def _workload(name: str) -> Callable[[str], Op]:
    """A workload of ``fastlock.tools.workloads`` (the ones ``python -m fastlock bench`` times)."""

    def setup(path: str) -> Op:
        from fastlock.tools.workloads import ALL

        (workload,) = (w for w in ALL if w.name == name)
        return workload.setup(_client(path))

    return setup


@dataclass(frozen=True)
class Path_:
    """One measured path: ``setup(where)`` returns the operation (``where``: see
    :func:`_client`, chosen by ``server``); ``warmup`` and ``ops`` are multiples of a batch
    where the path batches."""

    name: str
    setup: Callable[[str], Op]
    ops: int
    warmup: int
    cython: bool = True  # needs fastlock._core (or is budgeted on it: the default core)
    server: str = "unix"  # "unix": the private server's socket; "tcp": its TCP port; "cluster"


PATHS = (
    Path_("encode: cython core", _encode_cython, ops=3000, warmup=500),
    Path_("encode: hiredis.pack_command", _pack_command, ops=1000, warmup=500, cython=False),
    Path_("client.call: cython core (default)", _call(None), ops=1000, warmup=300),
    Path_("core evalsha: cython Connection", _core_evalsha, ops=1500, warmup=300),
    Path_("client.call: python core", _call("python"), ops=300, warmup=300, cython=False),
    Path_("pipeline of 64 script calls: cython core", _pipeline(None), ops=60, warmup=30),
    Path_("pipeline of 64 script calls: python core", _pipeline("python"), 10, 10, cython=False),
    Path_("raw socket + hiredis (floor)", raw_socket_hiredis, ops=2000, warmup=300, cython=False),
    Path_("lock acquire + release", _workload("lock acquire + release"), ops=400, warmup=200),
    Path_("lock lifecycle: until_executed", _workload("lock lifecycle: until_executed"), ops=200, warmup=100),
    Path_("job: unbatched", _workload("job enqueue -> claim -> complete, unbatched"), ops=300, warmup=200),
    Path_("job: batches of 100", _workload("job enqueue -> claim -> complete, batches of 100"), 1000, 300),
)
CLUSTER_PATHS = (
    Path_("tcp client.call: cython core", _call(None), ops=1000, warmup=300, server="tcp"),
    Path_("cluster client.call: cython core", _call(None), ops=1000, warmup=300, server="cluster"),
    Path_("tcp client.call: python core", _call("python"), 300, 300, cython=False, server="tcp"),
    Path_("cluster client.call: python core", _call("python"), 300, 300, cython=False, server="cluster"),
    Path_("tcp lock acquire + release", _workload("lock acquire + release"), 400, 200, server="tcp"),
    Path_("cluster lock acquire + release", _workload("lock acquire + release"), 400, 200, server="cluster"),
)
"""The router's overhead: each cluster path beside the same path on a standalone server over
TCP (the cluster's transport), measured in the same run; a 3x3 cluster of the harness
(``fastlock.testing.cluster``) is started only when one of them is measured. Their overhead
ratios are gated on every toolchain; their budgets only where the toolchain's table has
them (``--update`` on that toolchain writes them): a table without them is still complete."""


def workload_paths() -> tuple[Path_, ...]:
    """A path per counted workload of :mod:`fastlock.tools.workloads`, named as the workload
    (the instructions column of ``python -m fastlock bench``), on the core the child loads by
    default (see :func:`measure`'s ``impl``); a batched one collects whole batches."""
    from .workloads import ALL

    return tuple(
        Path_(w.name, _workload(w.name), max(300, 10 * w.batch), max(100, 3 * w.batch), cython=False)
        for w in ALL
        if w.counted
    )


def _by_name() -> dict[str, Path_]:
    """Every path by name (a gated path before a workload's of the same name)."""
    found: dict[str, Path_] = {}
    for path in (*PATHS, *CLUSTER_PATHS, *workload_paths()):
        found.setdefault(path.name, path)
    return found


def run_child(servers: dict[str, str], shim: str, names: Sequence[str]) -> None:
    """In the child under callgrind: set up and warm up each path uninstrumented (fast), then
    instrument, collect and dump its region. ``servers``: where each kind of path connects."""
    gc.disable()
    lib = ctypes.CDLL(shim)
    paths = _by_name()
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


def measure(names: Sequence[str] | None = None, jobs: int = 1, impl: str | None = None) -> Measurement:
    """Measure ``names`` (default: :data:`PATHS` and :data:`CLUSTER_PATHS`, those this install
    can run; any name of :func:`workload_paths` too) in ``jobs`` children run side by side. One
    child is the default: with two, ``hiredis.pack_command`` moved by up to 0.8% from run to run
    (it does not in one child). ``impl`` sets the child's ``FASTLOCK_IMPL`` (default: unset, so
    the best core available)."""
    from fastlock.testing.cluster import TempCluster
    from fastlock.testing.servers import TempServer

    started, cpu = time.monotonic(), _children_cpu()
    result = Measurement()
    core = has_core()
    paths = _by_name()
    todo = []
    for path in (paths[n] for n in names) if names else (*PATHS, *CLUSTER_PATHS):
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
            command += [sys.executable, "-m", __name__, "--child", *servers.values(), str(shim), *group]
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
                result.per_op[name] = counts[name] / paths[name].ops
    result.seconds, result.cpu_seconds = time.monotonic() - started, _children_cpu() - cpu
    return result


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":  # the instrumented child of measure()
    _, flag, unix, tcp, cluster, shim, *names = sys.argv
    assert flag == "--child", "python -m fastlock.tools.instructions is the child of measure()"
    run_child({"unix": unix, "tcp": tcp, "cluster": cluster}, shim, names)
