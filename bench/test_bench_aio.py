"""fastlock.aio under concurrency (issue 12's targets), interleaved in one run (``aio_bench.py``):
100 tasks vs redis.asyncio, 1000 tasks on one connection vs ``redis-benchmark -c 1 -P 64``,
the client CPU per call and the event loop's lag. The ratios are printed, not gated (spread
on shared machines is too wide for a time gate: docs/benchmarks.md)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import Any

import pytest
from aio_bench import AioSides, new_runner, p99, pipelined_floor
from conftest import CLIENT_CPU, record
from gate import interleaved_ratios

from fastlock.tools.bench import Figures

ROUNDS = 7


@pytest.fixture(params=["asyncio", "uvloop"])
def sides(request: pytest.FixtureRequest, server_url: str) -> Iterator[AioSides]:
    if request.param == "uvloop":
        pytest.importorskip("uvloop")
    with new_runner(request.param) as runner:
        made = AioSides(server_url, runner, request.param)
        yield made
        made.close()


def _figures(name: str, seconds_per_op: list[float], cpu: list[float] | None = None) -> Figures:
    median = statistics.median(seconds_per_op)
    cpu_us = statistics.median(cpu) * 1e6 if cpu else float("nan")
    return Figures(name, ops_per_s=1 / median, cpu_us_per_op=cpu_us, user_us_per_op=float("nan"))


def _timed(side: Any) -> tuple[Any, list[float]]:
    """``side`` whose per-round seconds per op are also kept."""
    kept: list[float] = []
    inner = side.run_round

    def run_round() -> float:
        kept.append(inner())
        return kept[-1]

    return type(side)(side.name, run_round), kept


def test_aio_100_tasks_vs_redis_asyncio(benchmark: Any, sides: AioSides) -> None:
    ours, our_times = _timed(sides.fastlock(100, 200, watch_lag=True))
    theirs, their_times = _timed(sides.redis_asyncio(100, 20))
    ours.run_round(), theirs.run_round()  # warm-up
    sides.lags.clear()
    ratios: list[float] = []
    benchmark.pedantic(
        lambda: ratios.extend(interleaved_ratios(ours, theirs, 1)), rounds=ROUNDS, iterations=1
    )
    record(benchmark, _figures(f"aio ({sides.loop}): {ours.name}", our_times[1:], sides.cpu[1:]))
    record(benchmark, _figures(f"aio ({sides.loop}): {theirs.name}", their_times[1:]))
    lag = p99(sides.lags)
    benchmark.extra_info.update(ratio_vs_redis_asyncio=statistics.median(ratios), loop_lag_p99_s=lag)
    print(
        f"\n100 tasks: fastlock.aio / redis.asyncio = median {statistics.median(ratios):.1f}x {ratios}; "
        f"loop lag p99 {lag * 1e3:.2f} ms"
    )
    assert statistics.median(ratios) > 1  # a sanity floor, far under the target (10x): not a time gate


def test_aio_1000_tasks_one_connection_vs_pipelined_floor(
    benchmark: Any, sides: AioSides, server_url: str
) -> None:
    floor = pipelined_floor(server_url, CLIENT_CPU, 100_000)
    if floor is None:
        pytest.skip("redis-benchmark/valkey-benchmark not on PATH: no C floor")
    ours, our_times = _timed(sides.fastlock(1000, 100, connections=1, watch_lag=True))
    ours.run_round(), floor.run_round()  # warm-up
    sides.cpu.clear()
    sides.lags.clear()
    ratios: list[float] = []
    benchmark.pedantic(lambda: ratios.extend(interleaved_ratios(ours, floor, 1)), rounds=ROUNDS, iterations=1)
    figures = record(benchmark, _figures(f"aio ({sides.loop}): {ours.name}", our_times[1:], sides.cpu))
    lag = p99(sides.lags)
    benchmark.extra_info.update(ratio_vs_pipelined_floor=statistics.median(ratios), loop_lag_p99_s=lag)
    print(
        f"\n1000 tasks, 1 connection / {floor.name} = median {statistics.median(ratios):.2f}x {ratios}; "
        f"client CPU {figures.cpu_us_per_op:.2f} us/call; loop lag p99 {lag * 1e3:.2f} ms"
    )
