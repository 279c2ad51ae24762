"""The paths whose client instructions per operation :mod:`fastlock.tools.instructions`
measures: the gated ones (:data:`PATHS`, :data:`CLUSTER_PATHS`: encoders, ``client.call`` on
both cores, a pipeline, the raw socket floor, lock and job paths, the cluster router beside a
standalone server) and one per workload of ``python -m fastlock bench``
(:func:`workload_paths`). Each path's ``setup(where)`` runs in the instrumented child and
returns the operation it repeats."""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CLUSTER_PATHS",
    "PATHS",
    "PIPELINE",
    "Op",
    "WORKLOAD",
    "Path_",
    "by_name",
    "hiredis_command",
    "raw_socket_hiredis",
    "workload_paths",
]

Op = Callable[[], object]


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


WORKLOAD = "workload: "
"""The prefix of a workload path's name: ``WORKLOAD + workload.name``."""


def workload_paths() -> tuple[Path_, ...]:
    """A path per counted workload of :mod:`fastlock.tools.workloads`, named ``WORKLOAD`` +
    its name (the instructions column of ``python -m fastlock bench``), on the core the child
    loads by default (see :func:`measure`'s ``impl``); a batched one collects whole batches."""
    from .workloads import ALL

    paths = []
    for w in (w for w in ALL if w.counted):
        ops, warmup = w.batch * max(10, 300 // w.batch), w.batch * max(3, 100 // w.batch)
        paths.append(Path_(WORKLOAD + w.name, _workload(w.name), ops, warmup, cython=False))
    return tuple(paths)


def by_name() -> dict[str, Path_]:
    """Every path by name."""
    return {path.name: path for path in (*PATHS, *CLUSTER_PATHS, *workload_paths())}
