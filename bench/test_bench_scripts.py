"""Script layer overhead: ``client.call`` of a named script against the bare core EVALSHA
of the same script on one connection (client CPU per call, getrusage).

The "no I/O" pair replaces the core's EVALSHA by a stub, so what remains is exactly the
layer's own CPU (name lookup, pool checkout and return, timing, counters):
``extra_info["overhead_us_per_op"]`` is the issue's target (≤ 0.5 µs).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
from conftest import RESULTS

import fastlock
from fastlock.benchmark import EVALSHA_ARGS as ARGS
from fastlock.benchmark import EVALSHA_KEYS as KEYS
from fastlock.benchmark import EVALSHA_SCRIPT as SCRIPT
from fastlock.benchmark import Figures, time_loop

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
def test_script_call(
    measure: Callable[..., Figures], benchmark: Any, server_url: str, impl: str, path: str
) -> None:
    client = _client(server_url, impl)
    if path == "client.call":
        call = client.call
        figures = measure(f"script: {path} {impl}", lambda: call("bench_return_1", KEYS, ARGS), ops=OPS)
        bare = RESULTS.get(f"script: bare Connection.evalsha {impl}")
        if bare is not None:
            benchmark.extra_info["overhead_us_per_op"] = figures.cpu_us_per_op - bare.cpu_us_per_op
    else:
        conn, sha = client.pool.get(), client.scripts.get("bench_return_1").sha
        evalsha = client._core.Connection.evalsha
        measure(f"script: {path} {impl}", lambda: evalsha(conn, sha, KEYS, ARGS), ops=OPS)
        client.pool.put(conn)
    client.close()


@pytest.mark.parametrize("impl", IMPLS)
def test_script_layer_without_io(
    measure: Callable[..., Figures], benchmark: Any, server_url: str, impl: str
) -> None:
    client = _client(server_url, impl)

    def stub_evalsha(conn: Any, sha: str, keys: Any, args: Any) -> int:
        return 1

    stub = time_loop("stub", lambda: stub_evalsha(None, "0" * 40, KEYS, ARGS), ops=NO_IO_OPS, rounds=7)
    client._evalsha = stub_evalsha  # the pool still hands out a real connection
    client.pool.health_check_interval = None  # no reply is read, so the connection never looks fresh
    call = client.call
    figures = measure(
        f"script: client.call, no I/O {impl}", lambda: call("bench_return_1", KEYS, ARGS), ops=NO_IO_OPS
    )
    benchmark.extra_info["overhead_us_per_op"] = figures.cpu_us_per_op - stub.cpu_us_per_op
    client.close()
