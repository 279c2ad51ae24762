"""Benchmark fixtures: a private pinned server, the C floor, per-op CPU, commands and round trips.

Regimes (see docs/benchmarks.md): ``FASTLOCK_BENCH_REGIME=same`` (default)
pins the client and the server to one CPU, where client overhead shows; ``cross`` puts
the client on CPU 0 and the server on CPU 1. ``FASTLOCK_BENCH_URL`` measures an existing
server instead (the server is then not pinned).

Every benchmark goes through ``measure``, which stores its figures in ``extra_info``
(so ``--benchmark-json`` carries them) and in ``RESULTS`` for the summary table printed
at the end, with each figure's ratio to its group's baseline. The perf gate's pairs go
through ``gate`` (interleaved, ``bench/gate.py``; rules in docs/benchmarks.md).
"""

from __future__ import annotations

import math
import os
import shutil
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gate import FLOOR_RETRIED, TRIES, PairResult, Side, measure_pair

from fastlock import Client
from fastlock.testing.servers import TempServer
from fastlock.tools.bench import Figures, SameBytes, Timing, pin, time_loop
from fastlock.tools.c_floor import FLOOR_RETRIES, CFloorError, c_floor_command, load_floor_script, run_c_floor
from fastlock.tools.costs import command_calls
from fastlock.tools.floor import build_replay

REGIME = os.environ.get("FASTLOCK_BENCH_REGIME", "same")
SERVER_CPU, CLIENT_CPU = (1, 1) if REGIME == "same" else (1, 0)

FLOOR_REQUESTS, FLOOR_ROUNDS = 20_000, 3

RESULTS: dict[str, Figures] = {}
GATE: dict[str, PairResult] = {}
BUDGETS = Path(__file__).with_name("budgets.toml")
BUDGETS_TOML = tomllib.loads(BUDGETS.read_text())
RATIOS: dict[str, float] = BUDGETS_TOML["ratios"]
BASELINES = {
    "round trip": "round trip: C floor",
    "encode": "encode: hiredis.pack_command",
    "lock": "lock: redis-py Lock",
    "queue": "round trip: C floor",
}
INSTRUCTION_PATHS = {
    "round trip: fastlock cython": "client.call: cython core (default)",
    "lock: fastlock cython": "lock acquire + release",
    "lock lifecycle: fastlock cython, until_executed": "lock lifecycle: until_executed",
    "queue: cython, unbatched": "job: unbatched",
    "queue: cython, batches of 100": "job: batches of 100",
    "pipeline: fastlock cython, 64 script calls": "pipeline of 64 script calls: cython core",
}
"""Benchmarks whose client instructions per op the summary shows (this toolchain's budgets in
budgets.toml, measured by bench/instructions.py)."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """No xdist workers for ``-n auto`` (pyproject's addopts): benchmarks run serial and pinned."""
    return 0


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
    with TempServer(shutil.which("redis-server"), cpu=SERVER_CPU) as server:
        yield server.unix_url


def record(benchmark: Any, figures: Figures) -> Figures:
    """Store ``figures`` in the benchmark's ``extra_info`` and in the summary."""
    benchmark.extra_info.update(regime=REGIME, **figures.as_dict())
    RESULTS[figures.name] = figures
    return figures


@pytest.fixture(scope="session")
def replay(tmp_path_factory: Any) -> str | None:
    """The same-bytes floor's C replay (``fastlock/tools/replay.c``), compiled for this session."""
    return build_replay(str(tmp_path_factory.mktemp("replay")))


@pytest.fixture
def measure(benchmark: Any, server_url: str, replay: str | None) -> Callable[..., Figures]:
    """``measure(name, op, ops=N, rounds=5, cost=client, clients=[...], same_bytes=setup)``:
    time ``rounds`` loops of ``ops`` calls of ``op`` under pytest-benchmark (GC off); with
    ``cost``, also count server commands and round trips per op (``fastlock.tools.costs``);
    with ``same_bytes`` (``setup(client)`` returning the same operation on a new client), also
    its same-bytes floor, replayed from C and Python before each round (``SameBytes``)."""

    def run(
        name: str,
        op: Callable[[], object],
        *,
        ops: int,
        rounds: int = 5,
        cost: Client | None = None,
        clients: Iterable[Client] = (),
        same_bytes: Callable[[Client], Callable[[], object]] | None = None,
    ) -> Figures:
        if same_bytes is None or replay is None:

            def drive(one_round: Callable[[], None]) -> None:
                benchmark.pedantic(one_round, rounds=rounds, iterations=1)

            return record(benchmark, time_loop(name, op, ops=ops, cost=cost, clients=clients, on_round=drive))
        with SameBytes(server_url, same_bytes, ops, replay, CLIENT_CPU) as floor:

            def drive_with_floor(one_round: Callable[[], None]) -> None:
                benchmark.pedantic(floor.timed(one_round), setup=floor.replays, rounds=rounds, iterations=1)

            figures = time_loop(name, op, ops=ops, cost=cost, clients=clients, on_round=drive_with_floor)
            figures.vs_same_bytes_c, figures.vs_same_bytes_python = floor.ratios()
        return record(benchmark, figures)

    return run


@dataclass(frozen=True)
class FloorRun:
    """The C floor's figures and what proves them consistent: totals over its runs."""

    figures: Figures
    requests: int  # over all runs
    replies: int  # replies the server wrote while they ran (writes: pipelined ones count once)
    startup_commands: int  # commands other than EVALSHA they sent (CONFIG GET ...)
    reported: float  # seconds, as redis-benchmark reports its own timed part
    elapsed: float  # seconds, the processes' whole lifetimes
    cpu: float  # seconds of user + system CPU of the processes
    cpus: int  # CPUs the processes could run on

    def assert_consistent(self) -> None:
        """One EVALSHA per request, one round trip each (plus at most one per start-up
        command); ops/s finite and positive; the reported time within the processes'
        lifetimes; CPU within what their CPUs allow."""
        f = self.figures
        assert f.commands_per_op == 1, f
        assert self.requests <= self.replies <= self.requests + self.startup_commands, self
        assert 0 < f.ops_per_s < math.inf, f.ops_per_s
        assert self.reported <= self.elapsed, (self.reported, self.elapsed)
        assert self.cpu <= self.elapsed * self.cpus * 1.05 + 0.05, (self.cpu, self.elapsed, self.cpus)


def _replies_written(client: Client) -> int:
    """Writes the server has made to its clients: one per reply, unless replies were pipelined."""
    stats = client.execute("INFO", "stats").decode()
    return int(stats.partition("total_writes_processed:")[2].split()[0])


def _measure_floor(url: str, command: list[str]) -> tuple[Timing, float, int, dict[str, int]]:
    """``FLOOR_ROUNDS`` runs of the C floor (no retry: :class:`CFloorError` at the first
    failed run), and what the server counted meanwhile: the timing, the processes' lifetimes,
    the replies written and the commands called."""
    with Client(url) as client:
        client.execute("CONFIG", "RESETSTAT")
        before, timing = _replies_written(client), Timing(FLOOR_REQUESTS)
        elapsed = sum(run_c_floor(command, timing, retries=0) for _ in range(FLOOR_ROUNDS))
        replies = _replies_written(client) - before - 1  # minus the reply to the first INFO
        calls = command_calls(client)
    return timing, elapsed, replies, calls


@pytest.fixture(scope="session")
def floor(server_url: str) -> FloorRun:
    """The C floor of this machine at this moment (redis-benchmark, 1 connection, no
    pipelining), measured once per session, with the server's count of what it received."""
    requests = FLOOR_REQUESTS * FLOOR_ROUNDS
    command = c_floor_command(server_url, cpu=CLIENT_CPU, requests=FLOOR_REQUESTS)
    if command is None:
        pytest.skip("redis-benchmark/valkey-benchmark not on PATH: no C floor")
    for attempt in range(FLOOR_RETRIES + 1):
        load_floor_script(server_url)
        try:
            timing, elapsed, replies, calls = _measure_floor(server_url, command)
            break
        except CFloorError as exc:  # measured again from the start: the counts must be of one try
            if attempt == FLOOR_RETRIES:
                raise
            FLOOR_RETRIED.append(f"round trip: C floor: {exc.attempts[-1]}")
    figures = timing.figures("round trip: C floor")
    evalsha = calls.pop("evalsha", 0)
    figures.commands_per_op = evalsha / requests
    figures.round_trips_per_op = replies / requests
    RESULTS[figures.name] = figures
    return FloorRun(
        figures,
        requests,
        replies,
        startup_commands=sum(calls.values()),
        reported=sum(timing.wall),
        elapsed=elapsed,
        cpu=sum(timing.user) + sum(timing.system),
        cpus=1 if shutil.which("taskset") else os.cpu_count() or 1,  # c_floor_command pins with taskset
    )


def _instruction_budgets() -> dict[str, int]:
    """This toolchain's instruction budgets (empty when it has none)."""
    from instructions import toolchain

    return dict(BUDGETS_TOML["instructions"]["budgets"].get(toolchain(), {}))


def _figure_lines() -> Iterator[str]:
    """The summary table: every recorded figure, with its ops/s ratio to its group's
    baseline (measured apart from it: for reading, not gating), to its same-bytes floor
    (C and Python, per round) and the client instructions per op of this toolchain."""
    budgets = _instruction_budgets()
    yield f"fastlock benchmarks (regime {REGIME}: client CPU {CLIENT_CPU}, server CPU {SERVER_CPU}; medians)"
    yield f"{'benchmark':48s} {'ops/s':>11s} {'CPU us/op':>10s} {'x ops/s':>8s}"
    for name, row in RESULTS.items():
        line = f"{name:48s} {row.ops_per_s:11,.0f} {row.cpu_us_per_op:10.3f}"
        base = None if row.vs_same_bytes_c is not None else RESULTS.get(BASELINES.get(name.split(":")[0], ""))
        line += f" {row.ops_per_s / base.ops_per_s:8.2f}" if base else " " * 9
        if row.vs_same_bytes_c is not None and row.vs_same_bytes_python is not None:
            line += f"  x same bytes: C {row.vs_same_bytes_c:.2f}, Python {row.vs_same_bytes_python:.2f}"
        if row.commands_per_op is not None and row.round_trips_per_op is not None:
            line += f"  commands/op {row.commands_per_op:.2f}, round trips/op {row.round_trips_per_op:.2f}"
        if name in INSTRUCTION_PATHS and INSTRUCTION_PATHS[name] in budgets:
            line += f"  instructions/op {budgets[INSTRUCTION_PATHS[name]]:,}"
        yield line


def pytest_terminal_summary(terminalreporter: Any, config: Any) -> None:
    """Print the figures, then every try of every gated pair, and the pairs not measured."""
    write = terminalreporter.write_line
    for line in ["", *_figure_lines()] if RESULTS else []:
        write(line)
    if FLOOR_RETRIED:
        write("")
        write(f"C floor runs that failed and were run again ({len(FLOOR_RETRIED)}):", yellow=True)
        for line in FLOOR_RETRIED:
            write(f"  {line}")
    if GATE or config.getoption("--perf-gate"):
        write("")
        write(f"perf gate (interleaved pairs, median of per-round ratios; {_gate_mode(config)}):")
        for result in GATE.values():
            for line in result.lines():
                write(f"  {line}")
        for label in RATIOS.keys() - GATE.keys():
            write(f"  {label}: NOT MEASURED in this run (failed first, skipped or deselected)", red=True)


def pytest_configure(config: Any) -> None:
    # Benchmarks keep clients and raw sockets open for the whole session and leave them to the
    # garbage collector; closing them is what tests/ checks (where ResourceWarning is an error).
    config.addinivalue_line("filterwarnings", "ignore::ResourceWarning")


def pytest_addoption(parser: Any) -> None:
    parser.addoption(
        "--perf-gate",
        action="store_true",
        help="fail when an interleaved ratio stays below bench/budgets.toml [ratios] in every try",
    )


def _gate_mode(config: Any) -> str:
    """Whether the gate is enforced in this run, and if not, why."""
    if not config.getoption("--perf-gate"):
        return "reported, not enforced: no --perf-gate"
    if REGIME != "same":
        return f"reported, not enforced: the minimums are for the same-core regime, not {REGIME!r}"
    return f"enforced, up to {TRIES} tries per pair"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    """With the gate enforced, a gated pair that skips (no Cython core, no redis-benchmark)
    fails: a build without the extension must not pass the gate with nothing measured."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    enforced = _gate_mode(item.config).startswith("enforced")
    if report.skipped and item.name.startswith("test_gate_") and enforced:
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"perf gate enforced (--perf-gate), but this pair could not be measured: {why}"


@pytest.fixture
def gate(benchmark: Any, request: Any) -> Callable[[str, Side, Side], PairResult]:
    """``gate(label, subject, reference)``: measure the pair interleaved (``bench/gate.py``)
    against its minimum in budgets.toml [ratios]; with ``--perf-gate`` (same-core regime) a
    pair failing every try fails the test, otherwise one try is reported."""
    enforced = _gate_mode(request.config).startswith("enforced")

    def run(label: str, subject: Side, reference: Side) -> PairResult:
        if label not in RATIOS:
            pytest.fail(f"{label}: no minimum in {BUDGETS} [ratios]")
        result: PairResult = benchmark.pedantic(
            measure_pair,
            args=(label, subject, reference, RATIOS[label]),
            kwargs={"tries": TRIES if enforced else 1},
            rounds=1,
            iterations=1,
        )
        GATE[label] = result
        benchmark.extra_info.update(minimum=result.minimum, per_round_ratios=result.tries)
        assert all(0 < median < math.inf for median in result.medians), result.lines()
        if enforced and not result.passed:
            pytest.fail(
                f"perf gate: {label} below {result.minimum} in every try:\n" + "\n".join(result.lines())
            )
        return result

    return run
