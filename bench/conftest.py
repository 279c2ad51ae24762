"""Benchmark fixtures: a private server, CPU pinning, the C floor and per-op CPU accounting.

Regimes (see ../shared/notes/benchmarking.md): ``FASTLOCK_BENCH_REGIME=same`` (default)
pins the client and the server to one CPU, where client overhead shows; ``cross`` puts
the client on CPU 0 and the server on CPU 1. ``FASTLOCK_BENCH_URL`` measures an existing
server instead (no pinning of the server, no C floor unless it is local).
"""

from __future__ import annotations

import gc
import os
import resource
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from fastlock import Client
from fastlock.commandstats import measure_cost
from fastlock.embedded import EmbeddedServer

REGIME = os.environ.get("FASTLOCK_BENCH_REGIME", "same")
SERVER_CPU, CLIENT_CPU = (1, 1) if REGIME == "same" else (1, 0)
SCRIPT = "return 1"
KEYS = ("{b}:k1", "{b}:k2", "{b}:k3")
ARGS = (1, "two", 3.5, b"four", True)

RESULTS: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="session", autouse=True)
def pinned() -> Iterator[None]:
    """Pin this process to the client CPU for the whole benchmark session."""
    before = os.sched_getaffinity(0)
    if os.cpu_count() and os.cpu_count() > CLIENT_CPU:  # type: ignore[operator]
        os.sched_setaffinity(0, {CLIENT_CPU})
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


@dataclass
class Measured:
    """Medians over rounds of a loop of ``ops`` operations: wall time, and the client's
    user and system CPU (``getrusage``; the server's CPU is not included)."""

    ops: int
    wall: list[float] = field(default_factory=list)
    user: list[float] = field(default_factory=list)
    system: list[float] = field(default_factory=list)

    @property
    def ops_per_s(self) -> float:
        return self.ops / statistics.median(self.wall)

    @property
    def cpu_us(self) -> float:
        return statistics.median(u + s for u, s in zip(self.user, self.system, strict=False)) / self.ops * 1e6

    @property
    def user_us(self) -> float:
        return statistics.median(self.user) / self.ops * 1e6

    def row(self) -> dict[str, float]:
        return {"ops_per_s": self.ops_per_s, "cpu_us_per_op": self.cpu_us, "user_us_per_op": self.user_us}


@pytest.fixture
def measure(benchmark: Any) -> Callable[..., Measured]:
    """``measure(name, op, ops=N, rounds=R, cost=client, clients=[...])``: time ``rounds``
    loops of ``ops`` calls of ``op`` under pytest-benchmark with GC off; record ops/s and
    client CPU per op in ``extra_info``. With ``cost`` (the client whose server is being
    measured), also record server commands and round trips per op (``measure_cost``)."""

    def run(
        name: str,
        op: Callable[[], object],
        *,
        ops: int,
        rounds: int = 7,
        cost: Client | None = None,
        clients: Iterable[Client] = (),
    ) -> Measured:
        result = Measured(ops)
        op()  # warm-up: connections, script load, caches

        def one_round() -> None:
            before, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            for _ in range(ops):
                op()
            wall, after = time.perf_counter() - wall, resource.getrusage(resource.RUSAGE_SELF)
            result.wall.append(wall)
            result.user.append(after.ru_utime - before.ru_utime)
            result.system.append(after.ru_stime - before.ru_stime)

        gc.disable()
        try:
            benchmark.pedantic(one_round, rounds=rounds, iterations=1)
        finally:
            gc.enable()
        row = result.row()
        if cost is not None:
            spent = measure_cost(cost, op, min(ops, 200), clients=clients)
            row |= {"commands_per_op": spent.commands_per_op, "round_trips_per_op": spent.round_trips_per_op}
        benchmark.extra_info.update(name=name, regime=REGIME, ops_per_round=ops, **row)
        RESULTS[name] = row
        return result

    return run


def redis_benchmark_floor(url: str, sha: str, requests: int = 50_000) -> dict[str, float]:
    """``redis-benchmark -c 1 -P 1`` running the same EVALSHA against the same server, pinned
    like the server: its ops/s and its CPU per request (user + system of the child)."""
    binary = shutil.which("redis-benchmark") or shutil.which("valkey-benchmark")
    if binary is None:
        pytest.skip("redis-benchmark/valkey-benchmark not on PATH: no C floor")
    target = ["-s", url.removeprefix("unix://")] if url.startswith("unix://") else []
    if not target:
        host, _, port = url.removeprefix("redis://").split("/")[0].rpartition(":")
        target = ["-h", host, "-p", port]
    command = [binary, *target, "-c", "1", "-P", "1", "-n", str(requests), "--csv"]
    command += ["EVALSHA", sha, str(len(KEYS)), *KEYS, *(str(a) for a in ("1", "two", "3.5", "four", "1"))]
    if shutil.which("taskset"):
        command = ["taskset", "-c", str(CLIENT_CPU), *command]
    rounds = []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120).stdout
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        user = after.ru_utime - before.ru_utime
        cpu = user + after.ru_stime - before.ru_stime
        rps = float(out.strip().splitlines()[-1].split(",")[1].strip('"'))
        rounds.append((rps, cpu / requests * 1e6, user / requests * 1e6))
    return {
        key: statistics.median(r[i] for r in rounds)
        for i, key in enumerate(("ops_per_s", "cpu_us_per_op", "user_us_per_op"))
    }


BASELINES = {"round trip": "round trip: redis-benchmark (C floor)", "encode": "encode: hiredis.pack_command"}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print every recorded figure with its ratio to its group's baseline (C floor, hiredis)."""
    if not RESULTS:
        return
    write = terminalreporter.write_line
    write("")
    write(f"fastlock benchmarks (regime {REGIME}: client CPU {CLIENT_CPU}, server CPU {SERVER_CPU}; medians)")
    write(
        f"{'benchmark':48s} {'ops/s':>11s} {'CPU us/op':>10s} {'user us/op':>10s}"
        f" {'ops/s ratio':>12s} {'CPU ratio':>10s}"
    )
    for name, row in RESULTS.items():
        base = RESULTS.get(BASELINES.get(name.split(":")[0], ""))
        ratio = ""
        if base:
            ops_ratio = row["ops_per_s"] / base["ops_per_s"]
            ratio = f"{ops_ratio:12.2f} {row['cpu_us_per_op'] / base['cpu_us_per_op']:10.2f}"
        figures = f"{row['ops_per_s']:11,.0f} {row['cpu_us_per_op']:10.3f} {row['user_us_per_op']:10.3f}"
        if "commands_per_op" in row:
            ratio += f"  cmds/op {row['commands_per_op']:.2f} round trips/op {row['round_trips_per_op']:.2f}"
        write(f"{name:48s} {figures} {ratio}")
