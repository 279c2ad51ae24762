"""``python -m fastlock bench --asyncio``: the asyncio client's table, the same as the sync
one's, beside redis.asyncio doing the same jobs (:mod:`.aio_workloads`), on the default event
loop and on uvloop (when installed): ops/s, client CPU per operation, the ratio to
redis.asyncio, the one-connection row's ratio to ``redis-benchmark -c 1 -P 64`` (timed in the
same rounds) and client instructions per operation (callgrind, when valgrind is on PATH)."""

from __future__ import annotations

import argparse
import importlib.util
import math
from collections.abc import Callable, Sequence

from .aio_workloads import ALL, PIPELINED_FLOOR, AioWorkload, time_workloads
from .bench import Figures, Timing
from .c_floor import c_floor_command, load_floor_script, run_c_floor

__all__ = ["LOOPS", "bench_asyncio", "pipelined_floor", "render_aio_table"]

LOOPS = ("asyncio", "uvloop")


def pipelined_floor(
    url: str, cpu: int | None, requests: int, pipeline: int = 64
) -> Callable[[], float] | None:
    """A round of ``redis-benchmark -c 1 -P pipeline`` sending the reference EVALSHA: its
    seconds per request (``None``: no redis-benchmark/valkey-benchmark on PATH)."""
    command = c_floor_command(url, cpu=cpu, requests=requests)
    if command is None:
        return None
    command[command.index("-P") + 1] = str(pipeline)
    load_floor_script(url)

    def one_round() -> float:
        timing = Timing(requests)
        run_c_floor(command, timing, on_retry=lambda _why: load_floor_script(url))
        return timing.wall[0] / requests

    return one_round


def render_aio_table(figures: Sequence[Figures], workloads: Sequence[AioWorkload]) -> str:
    """A Markdown table of one loop's figures (named ``aio (<loop>): <workload>``)."""
    by_name = {f.name.partition("): ")[2] or f.name: f for f in figures}
    rows = [
        "| operation | ops/s | client CPU µs/op | vs redis.asyncio | vs " + PIPELINED_FLOOR
        + " | client instructions/op |",
        "|---|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    versus = {w.name: w.versus for w in workloads}
    for f in figures:
        name = f.name.partition("): ")[2] or f.name
        other = by_name.get(versus.get(name) or "")
        cells = [
            f.name,
            f"{f.ops_per_s:,.0f}",
            "" if math.isnan(f.cpu_us_per_op) else f"{f.cpu_us_per_op:.2f}",
            f"{f.ops_per_s / other.ops_per_s:.2f}x" if other and other.name != PIPELINED_FLOOR else "",
            f"{f.ops_per_s / other.ops_per_s:.2f}x" if other and other.name == PIPELINED_FLOOR else "",
            "" if f.instructions_per_op is None else f"{f.instructions_per_op:,.0f}",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def bench_asyncio(url: str, args: argparse.Namespace, client_cpu: int | None) -> int:
    """Time the asyncio workloads on each loop and print their tables."""
    from . import instructions

    loops = [loop for loop in LOOPS if loop == "asyncio" or importlib.util.find_spec(loop) is not None]
    for loop in loops:
        floor = pipelined_floor(url, client_cpu, max(1_000, int(100_000 * args.scale)))
        figures, skipped = time_workloads(
            url, ALL, loop=loop, rounds=args.rounds, scale=args.scale, floor=floor
        )
        why = None if args.no_instructions else instructions.unavailable()
        if not args.no_instructions and why is None:
            names = [instructions.AIO + f"({loop}): " + w.name for w in ALL if not w.name.startswith("redis")]
            measured = instructions.measure(names)
            for f in figures:
                f.instructions_per_op = measured.per_op.get(instructions.AIO + f.name.removeprefix("aio "))
        print(f"\nfastlock.aio on the {loop} loop ({url}); medians of {args.rounds} rounds, interleaved")
        print(render_aio_table(figures, ALL))
        for line in skipped:
            print(f"skipped {line}")
        if why:
            print(f"client instructions/op not measured: {why}")
        if floor is None:
            print(f"no redis-benchmark/valkey-benchmark on PATH: no {PIPELINED_FLOOR} row")
    return 0
