"""Core benchmarks: encoding a 3-key/5-arg EVALSHA, one EVALSHA round trip and a pipeline of 64
script calls, against hiredis, redis-py, a raw socket + hiredis floor and the C
``redis-benchmark`` floors (``-P 1``, ``-P 64``); and the perf gate's interleaved pairs of them
(``test_gate_*``, see ``bench/gate.py``)."""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable
from typing import Any

import hiredis
import pytest
from aio_bench import pipelined_floor
from conftest import CLIENT_CPU, FloorRun
from gate import PairResult, Side, c_floor_side, loop_side
from instructions import hiredis_command, raw_socket_hiredis

import fastlock
from fastlock import _core_py
from fastlock.tools.bench import EVALSHA_ARGS as ARGS
from fastlock.tools.bench import EVALSHA_KEYS as KEYS
from fastlock.tools.bench import EVALSHA_SCRIPT as SCRIPT
from fastlock.tools.bench import Figures
from fastlock.tools.c_floor import c_floor_command

SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()
WIRE_ARGS = (1, "two", 3.5, b"four", 1)  # ARGS as hiredis and redis-py take them (they refuse bool)
PAYLOAD = hiredis.pack_command(("EVALSHA", SHA, len(KEYS), *KEYS, *WIRE_ARGS))
ENCODE_OPS = 20_000
ROUND_TRIP_OPS = 5_000
GATE_ENCODE_OPS, GATE_ROUND_TRIP_OPS, GATE_FLOOR_REQUESTS = 20_000, 1_000, 5_000


def _cython_core() -> Any:
    try:
        return importlib.import_module("fastlock._core")
    except ImportError:
        pytest.skip("Cython core not built")


def encoder(packer: str) -> Callable[[], bytes | list[bytes]]:
    """``packer``'s encoding of the reference EVALSHA, as a no-argument call."""
    if packer == "fastlock cython":
        encode = _cython_core().encode_evalsha
        return lambda: encode(SHA, KEYS, ARGS)
    if packer == "fastlock python":
        return lambda: _core_py.encode_evalsha(SHA, KEYS, ARGS)
    if packer == "hiredis.pack_command":
        command = hiredis_command()
        return lambda: hiredis.pack_command(command)
    redis = pytest.importorskip("redis")
    pack = redis.Connection().pack_command
    return lambda: pack(*hiredis_command())


@pytest.mark.parametrize("packer", ["fastlock cython", "fastlock python", "hiredis.pack_command", "redis-py"])
def test_encode_evalsha(measure: Callable[..., Figures], packer: str) -> None:
    fn = encoder(packer)
    encoded = fn()
    assert (b"".join(encoded) if isinstance(encoded, list) else encoded) == PAYLOAD
    measure(f"encode: {packer}", fn, ops=ENCODE_OPS)


CLIENTS = ["fastlock cython", "fastlock python", "redis-py + hiredis", "raw socket + hiredis"]


def round_tripper(server_url: str, client: str) -> tuple[Callable[[], Any], fastlock.Client | None]:
    """``client``'s reference EVALSHA round trip as a no-argument call, and the fastlock
    client doing it (``None`` for the others)."""
    if client.startswith("fastlock"):
        impl = client.split()[1]
        if impl == "cython":
            _cython_core()
        fl = fastlock.Client(server_url, impl=impl)
        script = fl.register_script(SCRIPT)
        return lambda: script(KEYS, ARGS), fl
    if client.startswith("redis-py"):
        redis = pytest.importorskip("redis")
        rs = redis.Redis(unix_socket_path=server_url.removeprefix("unix://")).register_script(SCRIPT)
        return lambda: rs(keys=KEYS, args=WIRE_ARGS), None
    return raw_socket_hiredis(server_url.removeprefix("unix://")), None


def _script_call(client: fastlock.Client) -> Callable[[], Any]:
    script = client.register_script(SCRIPT)
    return lambda: script(KEYS, ARGS)


@pytest.mark.parametrize("client", CLIENTS)
def test_evalsha_round_trip(measure: Callable[..., Figures], server_url: str, client: str) -> None:
    fn, fl = round_tripper(server_url, client)
    assert fn() == 1
    same_bytes = _script_call if client == "fastlock cython" else None
    figures = measure(f"round trip: {client}", fn, ops=ROUND_TRIP_OPS, cost=fl, same_bytes=same_bytes)
    if fl is not None:
        assert (figures.commands_per_op, figures.round_trips_per_op) == (1, 1)


PIPELINE = 64
PIPELINE_OPS, GATE_PIPELINE_OPS, GATE_PIPELINED_FLOOR_REQUESTS = 300, 100, 64 * 1_000


def _pipeline(client: fastlock.Client) -> Callable[[], Any]:
    """``PIPELINE`` calls of the reference script in one ``Client.pipeline()`` write (``pipe.call``,
    the fastest public way: each call encoded as it is queued, no Python frame)."""
    name = client.register_script(SCRIPT).name
    client.call(name, KEYS, ARGS)  # loaded: EVALSHA finds it

    def run() -> Any:
        with client.pipeline() as pipe:
            for _ in range(PIPELINE):
                pipe.call(name, KEYS, ARGS)
            return pipe.execute()

    return run


def test_pipeline(measure: Callable[..., Figures], server_url: str) -> None:
    """``Client.pipeline()`` of 64 script calls per op, against the same bytes from C."""
    _cython_core()
    client = fastlock.Client(server_url)
    run = _pipeline(client)
    assert run() == [1] * PIPELINE
    figures = measure(
        f"pipeline: fastlock cython, {PIPELINE} script calls",
        run,
        ops=PIPELINE_OPS,
        cost=client,
        same_bytes=_pipeline,
    )
    assert (figures.commands_per_op, figures.round_trips_per_op) == (PIPELINE, 1)


def test_gate_pipeline_vs_pipelined_floor(
    gate: Callable[[str, Side, Side], PairResult], server_url: str
) -> None:
    """Per script call, ``Client.pipeline()`` of 64 against ``redis-benchmark -c 1 -P 64``
    sending the same EVALSHA, interleaved."""
    _cython_core()
    floor = pipelined_floor(server_url, CLIENT_CPU, GATE_PIPELINED_FLOOR_REQUESTS, PIPELINE)
    if floor is None:
        pytest.skip("redis-benchmark/valkey-benchmark not on PATH: pipeline_vs_c_pipelined not measured")
    client = fastlock.Client(server_url)
    run = _pipeline(client)
    pipelines = loop_side("fastlock cython", run, GATE_PIPELINE_OPS)
    gate(
        "pipeline_vs_c_pipelined",
        Side(f"fastlock cython, {PIPELINE} per pipeline", lambda: pipelines.run_round() / PIPELINE),
        floor,
    )


def test_c_floor(benchmark: Any, floor: FloorRun) -> None:
    """The C floor of this machine at this moment: redis-benchmark, one connection, no
    pipelining; its figures are consistent (see ``FloorRun.assert_consistent``)."""
    benchmark.extra_info.update(floor.figures.as_dict())
    benchmark.pedantic(floor.assert_consistent, rounds=1, iterations=1)


def test_gate_encode_vs_hiredis(gate: Callable[[str, Side, Side], PairResult]) -> None:
    gate(
        "encode_vs_hiredis",
        loop_side("fastlock cython", encoder("fastlock cython"), GATE_ENCODE_OPS),
        loop_side("hiredis.pack_command", encoder("hiredis.pack_command"), GATE_ENCODE_OPS),
    )


def test_gate_round_trip_vs_redis_py(gate: Callable[[str, Side, Side], PairResult], server_url: str) -> None:
    fastlock_call, _ = round_tripper(server_url, "fastlock cython")
    redis_py_call, _ = round_tripper(server_url, "redis-py + hiredis")
    assert fastlock_call() == redis_py_call() == 1
    gate(
        "fastlock_vs_redis_py",
        loop_side("fastlock cython", fastlock_call, GATE_ROUND_TRIP_OPS),
        loop_side("redis-py + hiredis", redis_py_call, GATE_ROUND_TRIP_OPS),
    )


def test_gate_round_trip_vs_c_floor(gate: Callable[[str, Side, Side], PairResult], server_url: str) -> None:
    command = c_floor_command(server_url, cpu=CLIENT_CPU, requests=GATE_FLOOR_REQUESTS)
    if command is None:
        pytest.skip("redis-benchmark/valkey-benchmark not on PATH: fastlock_vs_c_floor not measured")
    fastlock_call, _ = round_tripper(server_url, "fastlock cython")
    assert fastlock_call() == 1
    gate(
        "fastlock_vs_c_floor",
        loop_side("fastlock cython", fastlock_call, GATE_ROUND_TRIP_OPS),
        c_floor_side("C floor", command, GATE_FLOOR_REQUESTS, server_url),  # loads its script
    )
