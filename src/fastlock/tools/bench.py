"""Measuring fastlock: timed loops with client CPU, the C floor, commands and round trips.

Shared by ``python -m fastlock bench`` and the pytest-benchmark suite in ``bench/``.
Figures are medians over rounds; client CPU is this process's user + system time
(``getrusage``), the server's is not included. Pin the client and the server to CPUs
(:func:`pin`, ``TempServer(cpu=...)``): unpinned loopback figures jump between runs.
"""

from __future__ import annotations

import gc
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .costs import measure_cost

if TYPE_CHECKING:
    from ..sync.client import Client

__all__ = [
    "EVALSHA_ARGS",
    "EVALSHA_KEYS",
    "EVALSHA_SCRIPT",
    "Figures",
    "Timing",
    "Workload",
    "pin",
    "SameBytes",
    "render_table",
    "run_workloads",
    "time_loop",
]

EVALSHA_SCRIPT = "return 1"
EVALSHA_KEYS = ("{b}:k1", "{b}:k2", "{b}:k3")
EVALSHA_ARGS: tuple[Any, ...] = (1, "two", 3.5, b"four", True)
"""The reference EVALSHA of every benchmark: 3 keys, 5 args, a script doing nothing."""


def pin(cpu: int | None) -> set[int]:
    """Pin this process to ``cpu`` (when it exists); return the previous affinity."""
    before = os.sched_getaffinity(0)
    if cpu is not None and cpu < (os.cpu_count() or 1):
        os.sched_setaffinity(0, {cpu})
    return before


@dataclass
class Timing:
    """Per-round wall time and client user/system CPU of ``ops`` operations."""

    ops: int
    wall: list[float] = field(default_factory=list)
    user: list[float] = field(default_factory=list)
    system: list[float] = field(default_factory=list)

    def add_round(self, op: Callable[[], object]) -> None:
        """Run ``op`` ``ops`` times and record the round."""
        before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for _ in range(self.ops):
            op()
        wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
        self.wall.append(wall)
        self.user.append(after.ru_utime - before.ru_utime)
        self.system.append(after.ru_stime - before.ru_stime)

    def figures(self, name: str) -> Figures:
        """Medians of the recorded rounds."""
        cpu = statistics.median(u + s for u, s in zip(self.user, self.system, strict=True))
        return Figures(
            name,
            ops_per_s=self.ops / statistics.median(self.wall),
            cpu_us_per_op=cpu / self.ops * 1e6,
            user_us_per_op=statistics.median(self.user) / self.ops * 1e6,
        )


@dataclass
class Figures:
    """One measured operation. Commands and round trips are per operation, when counted."""

    name: str
    ops_per_s: float
    cpu_us_per_op: float
    user_us_per_op: float
    commands_per_op: float | None = None
    round_trips_per_op: float | None = None
    vs_same_bytes_c: float | None = None
    """Median per-round ratio of ops/s to the same bytes replayed from C (:mod:`.floor`)."""
    vs_same_bytes_python: float | None = None
    """The same, to a raw Python socket loop replaying them."""
    instructions_per_op: float | None = None
    """Client instructions per operation under callgrind (:mod:`.instructions`), when measured."""

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}


def time_loop(
    name: str,
    op: Callable[[], object],
    *,
    ops: int,
    rounds: int = 5,
    cost: Client | None = None,
    clients: Iterable[Client] = (),
    on_round: Callable[[Callable[[], None]], None] | None = None,
) -> Figures:
    """Time ``rounds`` loops of ``ops`` calls of ``op`` with GC off (after one warm-up call).

    With ``cost`` (a client on the measured server, nobody else talking to it), also count
    server commands and round trips per operation. ``on_round(run_one_round)`` lets a
    caller drive the rounds itself (pytest-benchmark's ``pedantic``).
    """
    op()
    timing = Timing(ops)

    def one_round() -> None:
        timing.add_round(op)

    gc.disable()
    try:
        if on_round is None:
            for _ in range(rounds):
                one_round()
        else:
            on_round(one_round)
    finally:
        gc.enable()
    figures = timing.figures(name)
    if cost is not None:
        spent = measure_cost(cost, op, min(ops, 200), clients=clients)
        figures.commands_per_op = spent.commands_per_op
        figures.round_trips_per_op = spent.round_trips_per_op
    return figures


@dataclass(frozen=True)
class Workload:
    """One thing to measure: ``setup(client)`` prepares it and returns the operation.

    ``versus`` names the workload it is compared with (redis-py doing the same job);
    ``counted`` asks for commands and round trips per operation (fastlock workloads);
    ``batch``: the operations come in batches of this many (a measured count is a multiple).
    """

    name: str
    setup: Callable[[Client], Callable[[], object]]
    ops: int = 5_000
    versus: str | None = None
    counted: bool = True
    batch: int = 1


def run_workloads(
    url: str,
    workloads: Sequence[Workload],
    *,
    rounds: int = 5,
    scale: float = 1.0,
    progress: Callable[[int, int, str], None] | None = None,
    replay: str | None = None,
    cpu: int | None = None,
) -> tuple[list[Figures], list[str]]:
    """Measure each workload on its own client; return the figures and the skipped ones
    (with why). ``scale`` multiplies every workload's operation count. With ``replay`` (the
    C replay of :func:`.floor.build_replay`, run pinned to ``cpu``), each fastlock workload
    is also divided by its same-bytes floor, measured interleaved round by round."""
    from ..sync.client import Client

    results: list[Figures] = []
    skipped: list[str] = []
    for done, workload in enumerate(workloads):
        if progress is not None:
            progress(done, len(workloads), workload.name)
        with Client(url) as client:
            try:
                op = workload.setup(client)
            except ImportError as exc:
                skipped.append(f"{workload.name}: {exc}")
                continue
            batch = workload.batch  # whole batches: a round's calls then do as many operations
            ops = max(batch, int(workload.ops * scale) // batch * batch)
            cost = client if workload.counted else None
            if replay is None or not workload.counted:
                results.append(time_loop(workload.name, op, ops=ops, rounds=rounds, cost=cost))
                continue
            with SameBytes(url, workload.setup, ops, replay, cpu) as same_bytes:
                figures = time_loop(workload.name, op, ops=ops, cost=cost, on_round=same_bytes.rounds(rounds))
                figures.vs_same_bytes_c, figures.vs_same_bytes_python = same_bytes.ratios()
            results.append(figures)
    if progress is not None:
        progress(len(workloads), len(workloads), "done")
    return results, skipped


class SameBytes:
    """A workload's same-bytes floor (:mod:`.floor`): ``setup`` recorded once on its own
    client, then replayed from C (``replay``, pinned to ``cpu``) and from Python once per
    round of the workload's own, so that the ratios are per round (:meth:`ratios`). A
    context manager (it holds the recording's file)."""

    def __init__(
        self,
        url: str,
        setup: Callable[[Client], Callable[[], object]],
        ops: int,
        replay: str,
        cpu: int | None,
    ) -> None:
        from . import floor

        self._floor, self._url, self._replay, self._cpu = floor, url, replay, cpu
        self.recording = floor.record(url, setup, ops)
        self._dir = tempfile.TemporaryDirectory(prefix="fastlock-recording-")
        self._file = Path(self._dir.name) / "recording"
        self.recording.save(self._file)
        self._c: list[float] = []
        self._python: list[float] = []
        self._own: list[float] = []

    def __enter__(self) -> SameBytes:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._dir.cleanup()

    def replays(self) -> None:
        """Time one replay from C and one from Python."""
        self._c.append(self._floor.replay_c(self._replay, self._url, self._file, self._cpu))
        self._python.append(self._floor.replay_python(self._url, self.recording))

    def timed(self, one_round: Callable[[], None]) -> Callable[[], None]:
        """``one_round``, its duration recorded as the workload's side of the round."""

        def run() -> None:
            started = time.perf_counter()
            one_round()
            self._own.append(time.perf_counter() - started)

        return run

    def rounds(self, count: int) -> Callable[[Callable[[], None]], None]:
        """A driver for :func:`time_loop`: ``count`` rounds, replays after the workload's
        round in even rounds and before it in odd ones."""

        def drive(one_round: Callable[[], None]) -> None:
            own = self.timed(one_round)
            for i in range(count):
                for step in (own, self.replays) if i % 2 == 0 else (self.replays, own):
                    step()

        return drive

    def ratios(self) -> tuple[float, float]:
        """Median per-round ratios of the workload's ops/s to the C and Python replays'."""
        c = statistics.median(floor / own for floor, own in zip(self._c, self._own, strict=True))
        py = statistics.median(floor / own for floor, own in zip(self._python, self._own, strict=True))
        return c, py


def _versus_floor(f: Figures, floor: Figures | None) -> str:
    """Round trips per second as a fraction of the C floor's (the machine's round-trip rate),
    for a row without its own same-bytes floor (the trivial script's Lua work is not theirs)."""
    if floor is None or f is floor or f.round_trips_per_op is None or f.vs_same_bytes_c is not None:
        return ""
    return f"{f.ops_per_s * f.round_trips_per_op / floor.ops_per_s:.2f}x"


def render_table(figures: Sequence[Figures], workloads: Sequence[Workload], floor: Figures | None) -> str:
    """A Markdown table: ops/s, client CPU, commands and round trips per operation, the
    ops/s ratio to redis-py doing the same job, round trips/s as a ratio to the C floor
    (a trivial script), ops/s as a ratio to the same bytes replayed from C and Python, and
    client instructions per operation."""
    by_name = {f.name: f for f in figures}
    versus = {w.name: w.versus for w in workloads}
    rows = [
        "| operation | ops/s | client CPU µs/op | commands/op | round trips/op | vs redis-py "
        "| vs C floor (return 1) | vs same bytes: C | vs same bytes: Python | client instructions/op |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for f in [*figures, *([floor] if floor else [])]:
        other = by_name.get(versus.get(f.name) or "")
        cells = [
            f.name,
            f"{f.ops_per_s:,.0f}",
            f"{f.cpu_us_per_op:.1f}",
            "" if f.commands_per_op is None else f"{f.commands_per_op:.2f}",
            "" if f.round_trips_per_op is None else f"{f.round_trips_per_op:.2f}",
            f"{f.ops_per_s / other.ops_per_s:.2f}x" if other else "",
            _versus_floor(f, floor),
            "" if f.vs_same_bytes_c is None else f"{f.vs_same_bytes_c:.2f}x",
            "" if f.vs_same_bytes_python is None else f"{f.vs_same_bytes_python:.2f}x",
            "" if f.instructions_per_op is None else f"{f.instructions_per_op:,.0f}",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
