"""Script layer overhead: ``client.call`` of a named script against the bare core EVALSHA
of the same script on one connection.

The two differ by less than the noise of their client CPU, which is mostly kernel time
(docs/benchmarks.md), so no overhead is computed from them. ``client.call`` is the core's
``ScriptCaller.call`` itself (name lookup, meta values, pool checkout and return, EVALSHA,
timing and counters, in C: no Python layer above it); its cost is gated in instructions
(``tests/test_instructions.py``: its budget beside the bare core EVALSHA's, its ratio to the
raw socket floor).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import pytest

import fastlock
from fastlock.tools.bench import EVALSHA_ARGS as ARGS
from fastlock.tools.bench import EVALSHA_KEYS as KEYS
from fastlock.tools.bench import EVALSHA_SCRIPT as SCRIPT
from fastlock.tools.bench import Figures

OPS = 5_000
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
