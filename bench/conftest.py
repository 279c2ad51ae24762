"""Benchmark fixtures: a private pinned server, the C floor, per-op CPU, commands and round trips.

Regimes (see ../shared/notes/benchmarking.md): ``FASTLOCK_BENCH_REGIME=same`` (default)
pins the client and the server to one CPU, where client overhead shows; ``cross`` puts
the client on CPU 0 and the server on CPU 1. ``FASTLOCK_BENCH_URL`` measures an existing
server instead (the server is then not pinned).

Every benchmark goes through ``measure``, which stores its figures in ``extra_info``
(so ``--benchmark-json`` carries them) and in ``RESULTS`` for the summary table printed
at the end, with each figure's ratio to its group's baseline.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fastlock import Client
from fastlock.benchmark import EVALSHA_SCRIPT, Figures, c_floor, pin, time_loop
from fastlock.embedded import EmbeddedServer

REGIME = os.environ.get("FASTLOCK_BENCH_REGIME", "same")
SERVER_CPU, CLIENT_CPU = (1, 1) if REGIME == "same" else (1, 0)

RESULTS: dict[str, Figures] = {}
BUDGETS = Path(__file__).with_name("budgets.toml")
BASELINES = {
    "round trip": "round trip: C floor",
    "encode": "encode: hiredis.pack_command",
    "lock": "lock: redis-py Lock",
    "queue": "round trip: C floor",
}


@pytest.fixture(scope="session", autouse=True)
def pinned() -> Iterator[None]:
    """Pin this process to the client CPU for the whole benchmark session."""
    before = pin(CLIENT_CPU)
    yield
    os.sched_setaffinity(0, before)


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """URL of the benchmark server: private (pinned to the server CPU) or FASTLOCK_BENCH_URL."""
    if os.environ.get("FASTLOCK_BENCH_URL"):
        yield os.environ["FASTLOCK_BENCH_URL"]
        return
    with EmbeddedServer(binary=shutil.which("redis-server"), cpu=SERVER_CPU) as server:
        yield server.url


def record(benchmark: Any, figures: Figures) -> Figures:
    """Store ``figures`` in the benchmark's ``extra_info`` and in the summary."""
    benchmark.extra_info.update(regime=REGIME, **figures.as_dict())
    RESULTS[figures.name] = figures
    return figures


@pytest.fixture
def measure(benchmark: Any) -> Callable[..., Figures]:
    """``measure(name, op, ops=N, rounds=7, cost=client, clients=[...])``: time ``rounds``
    loops of ``ops`` calls of ``op`` under pytest-benchmark (GC off); with ``cost``, also
    count server commands and round trips per op (``fastlock.commandstats``)."""

    def run(
        name: str,
        op: Callable[[], object],
        *,
        ops: int,
        rounds: int = 7,
        cost: Client | None = None,
        clients: Iterable[Client] = (),
    ) -> Figures:
        def drive(one_round: Callable[[], None]) -> None:
            benchmark.pedantic(one_round, rounds=rounds, iterations=1)

        figures = time_loop(name, op, ops=ops, cost=cost, clients=clients, on_round=drive)
        return record(benchmark, figures)

    return run


@pytest.fixture
def floor(benchmark: Any, server_url: str) -> Figures:
    """The C floor of this machine at this moment (redis-benchmark, 1 connection, no pipelining)."""
    with Client(server_url) as client:
        client.execute("SCRIPT", "LOAD", EVALSHA_SCRIPT)
    figures = benchmark.pedantic(
        c_floor, args=(server_url,), kwargs={"cpu": CLIENT_CPU}, rounds=1, iterations=1
    )
    if figures is None:
        pytest.skip("redis-benchmark/valkey-benchmark not on PATH: no C floor")
    figures.name = "round trip: C floor"
    return record(benchmark, figures)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print every recorded figure with its ratio to its group's baseline (C floor, hiredis)."""
    if not RESULTS:
        return
    write = terminalreporter.write_line
    write("")
    write(f"fastlock benchmarks (regime {REGIME}: client CPU {CLIENT_CPU}, server CPU {SERVER_CPU}; medians)")
    write(f"{'benchmark':48s} {'ops/s':>11s} {'CPU us/op':>10s} {'user us/op':>10s} {'x ops/s':>8s} x CPU")
    for name, row in RESULTS.items():
        line = f"{name:48s} {row.ops_per_s:11,.0f} {row.cpu_us_per_op:10.3f} {row.user_us_per_op:10.3f}"
        base = RESULTS.get(BASELINES.get(name.split(":")[0], ""))
        if base:
            line += f" {row.ops_per_s / base.ops_per_s:8.2f} {row.cpu_us_per_op / base.cpu_us_per_op:6.2f}"
        if row.commands_per_op is not None:
            line += f"  commands/op {row.commands_per_op:.2f}, round trips/op {row.round_trips_per_op:.2f}"
        write(line)


def pytest_addoption(parser: Any) -> None:
    parser.addoption(
        "--perf-gate", action="store_true", help="fail when a ratio falls below bench/budgets.toml [ratios]"
    )


def gate_failures(results: dict[str, Figures], ratios: dict[str, list[Any]]) -> list[str]:
    """The [ratios] lines of budgets.toml that ``results`` do not meet. A ratio whose side
    could not be measured here (no redis-benchmark for the C floor) is reported, not failed."""
    failures = []
    for label, (numerator, denominator, metric, minimum) in ratios.items():
        top, bottom = results.get(numerator), results.get(denominator)
        if top is None or bottom is None:
            print(f"perf gate: {label}: not measured on this machine ({numerator!r} / {denominator!r})")
            continue
        if metric == "ops":
            ratio = top.ops_per_s / bottom.ops_per_s
        else:
            ratio = bottom.cpu_us_per_op / top.cpu_us_per_op
        verdict = "ok" if ratio >= minimum else "BELOW"
        line = f"{label}: {ratio:.2f} (minimum {minimum}) {verdict}"
        print(f"perf gate: {line}")
        if ratio < minimum:
            failures.append(line)
    return failures


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """With --perf-gate, fail the run when a same-run ratio is below its committed minimum."""
    if not session.config.getoption("--perf-gate"):
        return
    ratios = tomllib.loads(BUDGETS.read_text())["ratios"]
    failures = gate_failures(RESULTS, ratios)
    if failures:
        print("\nperf gate FAILED:\n  " + "\n  ".join(failures))
        session.exitstatus = 1
