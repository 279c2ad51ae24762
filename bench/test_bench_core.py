"""Core benchmarks: encoding a 3-key/5-arg EVALSHA, and one EVALSHA round trip, against
hiredis, redis-py, a raw socket + hiredis floor and the C ``redis-benchmark`` floor."""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable
from typing import Any

import hiredis
import pytest
from instructions import hiredis_command, raw_socket_hiredis

import fastlock
from fastlock import _core_py
from fastlock.benchmark import EVALSHA_ARGS as ARGS
from fastlock.benchmark import EVALSHA_KEYS as KEYS
from fastlock.benchmark import EVALSHA_SCRIPT as SCRIPT
from fastlock.benchmark import Figures

SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()
ENCODE_OPS = 20_000
ROUND_TRIP_OPS = 5_000


def _cython_core() -> Any:
    try:
        return importlib.import_module("fastlock._core")
    except ImportError:
        pytest.skip("Cython core not built")


@pytest.mark.parametrize("packer", ["fastlock cython", "fastlock python", "hiredis.pack_command", "redis-py"])
def test_encode_evalsha(measure: Callable[..., Figures], packer: str) -> None:
    command = hiredis_command()
    if packer == "fastlock cython":
        encode = _cython_core().encode_evalsha
        fn = lambda: encode(SHA, KEYS, ARGS)  # noqa: E731
    elif packer == "fastlock python":
        fn = lambda: _core_py.encode_evalsha(SHA, KEYS, ARGS)  # noqa: E731
    elif packer == "hiredis.pack_command":
        fn = lambda: hiredis.pack_command(command)  # noqa: E731
    else:
        redis = pytest.importorskip("redis")
        pack = redis.Connection().pack_command
        fn = lambda: pack(*command)  # noqa: E731
    measure(f"encode: {packer}", fn, ops=ENCODE_OPS)


CLIENTS = ["fastlock cython", "fastlock python", "redis-py + hiredis", "raw socket + hiredis"]


@pytest.mark.parametrize("client", CLIENTS)
def test_evalsha_round_trip(measure: Callable[..., Figures], server_url: str, client: str) -> None:
    if client.startswith("fastlock"):
        impl = client.split()[1]
        if impl == "cython":
            _cython_core()
        fl = fastlock.Client(server_url, impl=impl)
        script = fl.register_script(SCRIPT)
        fn = lambda: script(KEYS, ARGS)  # noqa: E731
    elif client.startswith("redis-py"):
        redis = pytest.importorskip("redis")
        r = redis.Redis(unix_socket_path=server_url.removeprefix("unix://"))
        rs = r.register_script(SCRIPT)
        fn = lambda: rs(keys=KEYS, args=(1, "two", 3.5, b"four", 1))  # noqa: E731
    else:
        fn = raw_socket_hiredis(server_url.removeprefix("unix://"))

    assert fn() == 1
    measure(
        f"round trip: {client}", fn, ops=ROUND_TRIP_OPS, cost=fl if client.startswith("fastlock") else None
    )


def test_c_floor(floor: Figures) -> None:
    """The C floor of this machine at this moment: redis-benchmark, one connection, no pipelining."""
    assert floor.ops_per_s > 0
