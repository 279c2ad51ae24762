"""Script layer overhead: ``client.call`` of a named script against the bare core EVALSHA
of the same script on one connection.

With I/O the two differ by less than the noise of their client CPU, which is mostly kernel
time (docs/benchmarks.md), so no overhead is computed from them. The "no I/O" pair
replaces the core's fast path (``ScriptCaller.call``: pool checkout and return, EVALSHA,
timing and counters, in C) by a stub, so what remains is the Python layer above it (name
lookup, meta values, dispatch), all in user space: ``extra_info["overhead_us_per_op"]``.
The fast path's own cost beside the bare core EVALSHA is gated in instructions
(``tests/test_instructions.py``: ``client.call`` vs ``core evalsha``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest

import fastlock
from fastlock.tools.bench import EVALSHA_ARGS as ARGS
from fastlock.tools.bench import EVALSHA_KEYS as KEYS
from fastlock.tools.bench import EVALSHA_SCRIPT as SCRIPT
from fastlock.tools.bench import Figures, time_loop

OPS = 5_000
NO_IO_OPS = 200_000
IMPLS = ["cython", "python"]


def _client(server_url: str, impl: str) -> fastlock.Client:
    if impl == "cython":
        try:
            importlib.import_module("fastlock._core")
        except ImportError:
            pytest.skip("Cython core not built")
    client = fastlock.Client(server_url, impl=impl)
    client.register_script(SCRIPT, name="bench_return_1")
    client.call("bench_return_1", KEYS, ARGS)  # loaded, one pooled connection
    return client


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("path", ["bare Connection.evalsha", "client.call"])
def test_script_call(measure: Callable[..., Figures], server_url: str, impl: str, path: str) -> None:
    client = _client(server_url, impl)
    if path == "client.call":
        call = client.call
        fn: Callable[[], object] = lambda: call("bench_return_1", KEYS, ARGS)  # noqa: E731
    else:
        conn, sha = client.pool.get(), client.scripts.get("bench_return_1").sha
        client.pool.put(conn)  # used directly below, one thread: idle, so the pool counts its round trips
        evalsha = client._core.Connection.evalsha
        fn = lambda: evalsha(conn, sha, KEYS, ARGS)  # noqa: E731
    assert fn() == 1
    figures = measure(f"script: {path} {impl}", fn, ops=OPS, cost=client)
    assert (figures.commands_per_op, figures.round_trips_per_op) == (1, 1)
    client.close()


@pytest.mark.parametrize("impl", IMPLS)
def test_script_layer_without_io(
    measure: Callable[..., Figures], benchmark: Any, server_url: str, impl: str
) -> None:
    client = _client(server_url, impl)

    def stub_call(script: Any, keys: Any, args: Any, settings: Any, busy_timeout: Any) -> int:
        return 1

    script = client.scripts.get("bench_return_1")
    settings = client.script_settings
    stub = time_loop("stub", lambda: stub_call(script, KEYS, ARGS, settings, None), ops=NO_IO_OPS, rounds=5)
    client._call = stub_call  # type: ignore[method-assign]  # the core's fast path, I/O included
    call = client.call
    sent = client.pool.round_trips
    figures = measure(
        f"script: client.call, no I/O {impl}", lambda: call("bench_return_1", KEYS, ARGS), ops=NO_IO_OPS
    )
    assert client.pool.round_trips == sent, "the stub was bypassed: client.call did I/O"
    benchmark.extra_info["overhead_us_per_op"] = figures.cpu_us_per_op - stub.cpu_us_per_op
    client.close()
