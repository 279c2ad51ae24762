"""The paths of the instruction gate (``instructions.py`` here), measured by
:func:`fastlock.tools.instructions.measure` (which loads this file in its instrumented child):
:data:`PATHS` (encoders, ``client.call`` on both cores, a pipeline, the raw socket floor, lock
and job paths) and :data:`CLUSTER_PATHS` (the cluster router beside a standalone server). Each
path's ``setup(where)`` runs in the instrumented child and returns the operation it repeats."""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Callable
from typing import Any

from fastlock.tools.instructions import Op, Path_, client_of, workload

__all__ = [
    "AIO_PATHS",
    "CLUSTER_PATHS",
    "GATED",
    "OBSERVED_PATHS",
    "PATHS",
    "WAIT_PATHS",
    "PIPELINE",
    "hiredis_command",
    "raw_socket_hiredis",
]


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


def _call(impl: str | None) -> Callable[[str], Op]:
    """``client.call`` of the reference script; ``impl=None`` is the default core."""

    def setup(path: str) -> Op:
        from fastlock.tools.bench import EVALSHA_SCRIPT

        _, keys, args = _reference()
        client = client_of(path, impl)
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
        client = client_of(path, impl)
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


PATHS = (
    Path_("encode: cython core", _encode_cython, ops=3000, warmup=500),
    Path_("encode: hiredis.pack_command", _pack_command, ops=1000, warmup=500, cython=False),
    Path_("client.call: cython core (default)", _call(None), ops=1000, warmup=300),
    Path_("core evalsha: cython Connection", _core_evalsha, ops=1500, warmup=300),
    Path_("client.call: python core", _call("python"), ops=300, warmup=300, cython=False),
    Path_("pipeline of 64 script calls: cython core", _pipeline(None), ops=60, warmup=30),
    Path_("pipeline of 64 script calls: python core", _pipeline("python"), 10, 10, cython=False),
    Path_("raw socket + hiredis (floor)", raw_socket_hiredis, ops=2000, warmup=300, cython=False),
    Path_("lock acquire + release", workload("lock acquire + release"), ops=400, warmup=200),
    Path_("lock lifecycle: until_executed", workload("lock lifecycle: until_executed"), ops=200, warmup=100),
    Path_("job: unbatched", workload("job enqueue -> claim -> complete, unbatched"), ops=300, warmup=200),
    Path_("job: batches of 100", workload("job enqueue -> claim -> complete, batches of 100"), 1000, 300),
)
CLUSTER_PATHS = (
    Path_("tcp client.call: cython core", _call(None), ops=1000, warmup=300, server="tcp"),
    Path_("cluster client.call: cython core", _call(None), ops=1000, warmup=300, server="cluster"),
    Path_("tcp client.call: python core", _call("python"), 300, 300, cython=False, server="tcp"),
    Path_("cluster client.call: python core", _call("python"), 300, 300, cython=False, server="cluster"),
    Path_("tcp lock acquire + release", workload("lock acquire + release"), 400, 200, server="tcp"),
    Path_("cluster lock acquire + release", workload("lock acquire + release"), 400, 200, server="cluster"),
)
"""The router's overhead: each cluster path beside the same path on a standalone server over
TCP (the cluster's transport), measured in the same run; a 3x3 cluster of the harness
(``fastlock.testing.cluster``) is started only when one of them is measured. Their overhead
ratios are gated on every toolchain; their budgets only where the toolchain's table has
them (``--update`` on that toolchain writes them): a table without them is still complete."""


def _waiting_lock(where: str) -> Op:
    """``lock acquire + release`` with a timeout: a wait that finds the lock free."""
    from fastlock.tools.workloads import lock_acquire_release

    return lock_acquire_release(client_of(where), timeout=5)


WAIT_PATHS = (Path_("lock acquire + release, timeout=5", _waiting_lock, ops=400, warmup=200),)
"""A wait (``timeout`` > 0) on a free lock, beside ``lock acquire + release``: the same call
(docs/locks.md), so its ratio to it is gated everywhere; budgeted where the table has it."""


def _observed(kind: str, setup: Callable[[str], Op]) -> Callable[[str], Op]:
    """``setup`` with an observer installed first (before its client is made): ``prometheus``
    (``fastlock.metrics.prometheus.register`` on a private registry) or ``tracing`` (the
    OpenTelemetry SDK's tracer provider sampling nothing, a no-op meter provider)."""

    def observed(path: str) -> Op:
        if kind == "prometheus":
            from prometheus_client import CollectorRegistry

            from fastlock.metrics.prometheus import register

            register(CollectorRegistry())
        else:
            from opentelemetry.metrics import NoOpMeterProvider
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

            from fastlock.metrics import otel

            otel.instrument(
                tracer_provider=TracerProvider(sampler=ALWAYS_OFF), meter_provider=NoOpMeterProvider()
            )
        return setup(path)

    return observed


OBSERVED_PATHS = (
    Path_("client.call: cython core, prometheus on", _observed("prometheus", _call(None)), 1024, 512),
    Path_("client.call: cython core, tracing on, sampling off", _observed("tracing", _call(None)), 1024, 512),
    Path_(
        "lock acquire + release, prometheus on",
        _observed("prometheus", workload("lock acquire + release")),
        ops=512,
        warmup=256,
    ),
)
"""The cost of observing (docs/observability.md): each path beside its unobserved twin, with
an observer installed; measured last (an observer stays installed in the child). Their
ratios to the twins are gated everywhere, their budgets only where the table has them. 1024
calls: four folds of the scripts' stats, as in any 1024 calls."""

AIO_EACH = 50
"""Operations per task in a round of the asyncio paths (``aio_workloads.TASKS`` tasks): enough
that the round's own making of its tasks (asyncio.gather) is a small part of each operation's
count (at 10 it was about a fifth of a call's)."""


def _aio_path(label: str, name: str, ops: int, loop: str = "asyncio", impl: str | None = None) -> Path_:
    """Asyncio workload ``name`` (``fastlock.tools.aio_workloads``): a round of its 100 tasks
    doing ``AIO_EACH`` operations each is one op, counted per operation."""
    from fastlock.tools.aio_workloads import path_setup

    setup = path_setup(name, AIO_EACH, loop, impl)
    return Path_(label, setup, ops=ops, warmup=2, cython=impl is None, per=100 * AIO_EACH)


AIO_PATHS = (
    _aio_path("aio client.call, 100 tasks: cython core", "EVALSHA round trip, 100 tasks", 5),
    _aio_path(
        "aio client.call, 100 tasks: cython core, uvloop", "EVALSHA round trip, 100 tasks", 5, "uvloop"
    ),
    _aio_path("aio client.call, 100 tasks: python core", "EVALSHA round trip, 100 tasks", 2, impl="python"),
    _aio_path("aio lock acquire + release, 100 tasks", "lock acquire + release, 100 tasks", 3),
    _aio_path(
        "aio lock acquire + release, 100 tasks, uvloop", "lock acquire + release, 100 tasks", 3, "uvloop"
    ),
    _aio_path("aio job: unbatched, 100 tasks", "job enqueue -> claim -> complete, unbatched, 100 tasks", 3),
)
"""The asyncio client's paths (issue 22): ``await client.call`` from 100 tasks, a lock
acquire + release and an unbatched job from 100 tasks each on its own lock or queue, per
operation, on the default loop (and uvloop: the call and the lock), beside the sync paths
measured in the same run (their ratios in budgets.toml)."""

GATED = (*PATHS, *WAIT_PATHS, *AIO_PATHS, *CLUSTER_PATHS, *OBSERVED_PATHS)
"""Every path of the gate: what :func:`fastlock.tools.instructions.measure` loads from this file."""
