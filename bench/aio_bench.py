"""fastlock.aio under concurrency (issue 12's targets), as interleaved pairs of ``gate.Side``:

- N tasks calling the reference script: fastlock.aio vs redis.asyncio (its default pool: a
  connection per concurrent task);
- N tasks on one fastlock.aio connection vs ``redis-benchmark -c 1 -P 64`` sending the same
  EVALSHA (the C pipelined ceiling), with fastlock's client CPU per call;
- the event loop's lag (p99 lateness of a 1 ms ticker) while N tasks call;
- lock lifecycles (acquire, waiting when another task holds it, then release) from N tasks
  on M names: fastlock.aio's ``AsyncLock`` (waits woken by the release) vs redis.asyncio's
  ``Lock`` (polling every ``sleep`` seconds: its default 100 ms, and 1 ms).

``python bench/aio_bench.py [--url URL] [--rounds 7] [--loop asyncio|uvloop]`` prints them
(a private pinned server by default, like bench/). ``bench/test_bench_aio.py`` runs the same.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from gate import Side, c_floor_side, interleaved_ratios

import fastlock.aio
from fastlock.tools.bench import EVALSHA_ARGS, EVALSHA_KEYS, EVALSHA_SCRIPT, pin
from fastlock.tools.c_floor import c_floor_command

WIRE_ARGS = (1, "two", 3.5, b"four", 1)  # EVALSHA_ARGS as redis-py takes them (it refuses bool)


def new_runner(loop: str = "asyncio") -> asyncio.Runner:
    if loop == "uvloop":
        import uvloop

        return asyncio.Runner(loop_factory=uvloop.new_event_loop)
    return asyncio.Runner()


async def _tasks(tasks: int, calls: int, call: Callable[[], Coroutine[Any, Any, object]]) -> None:
    async def one() -> None:
        for _ in range(calls):
            await call()

    await asyncio.gather(*(one() for _ in range(tasks)))


class AioSides:
    """Sides measured on one event loop (``runner``) against ``url``."""

    def __init__(self, url: str, runner: asyncio.Runner, loop: str = "asyncio") -> None:
        self.url = url
        self.loop = loop
        self.runner = runner
        self.cpu: list[float] = []  # client CPU seconds per call of the fastlock rounds
        self.lags: list[float] = []  # every tick's lateness (seconds) of the lag rounds
        self._closers: list[Callable[[], Coroutine[Any, Any, object]]] = []

    def fastlock(self, tasks: int, calls: int, *, connections: int = 4, watch_lag: bool = False) -> Side:
        client = fastlock.aio.Client(self.url, max_connections=connections, max_in_flight=max(1024, tasks))
        script = client.register_script(EVALSHA_SCRIPT)
        self.runner.run(script(EVALSHA_KEYS, EVALSHA_ARGS))
        self._closers.append(client.close)

        async def call() -> object:
            return await script(EVALSHA_KEYS, EVALSHA_ARGS)

        def run_round() -> float:
            before = resource.getrusage(resource.RUSAGE_SELF)
            seconds = self._timed(_tasks(tasks, calls, call), watch_lag)
            after = resource.getrusage(resource.RUSAGE_SELF)
            used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            self.cpu.append(used / (tasks * calls))
            return seconds / (tasks * calls)

        label = f"fastlock.aio, {tasks} tasks" + (f", {connections} connection(s)" if connections < 4 else "")
        return Side(label, run_round)

    def redis_asyncio(self, tasks: int, calls: int) -> Side:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(self.url)
        script = client.register_script(EVALSHA_SCRIPT)
        self.runner.run(script(keys=EVALSHA_KEYS, args=WIRE_ARGS))
        self._closers.append(client.aclose)

        async def call() -> object:
            return await script(keys=EVALSHA_KEYS, args=WIRE_ARGS)

        def run_round() -> float:
            return self._timed(_tasks(tasks, calls, call), False) / (tasks * calls)

        return Side(f"redis.asyncio, {tasks} tasks", run_round)

    def fastlock_locks(self, tasks: int, names: int, cycles: int) -> Side:
        client = fastlock.aio.Client(self.url, max_connections=4)
        self._closers.append(client.close)
        locks = [client.lock(f"bench:{i % names}", ttl=30, timeout=30) for i in range(tasks)]

        async def lifecycles(lock: Any) -> None:
            for _ in range(cycles):
                async with lock:
                    pass

        def run_round() -> float:
            work = asyncio.gather(*(lifecycles(lock) for lock in locks))
            return self._timed(work, False) / (tasks * cycles)

        return Side(f"fastlock.aio AsyncLock, {tasks} tasks on {names} names", run_round)

    def redis_asyncio_locks(self, tasks: int, names: int, cycles: int, sleep: float = 0.1) -> Side:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(self.url, max_connections=tasks + 10)
        self._closers.append(client.aclose)
        locks = [
            client.lock(f"rbench:{i % names}", timeout=30, sleep=sleep, blocking_timeout=30)
            for i in range(tasks)
        ]

        async def lifecycles(lock: Any) -> None:
            for _ in range(cycles):
                async with lock:
                    pass

        def run_round() -> float:
            work = asyncio.gather(*(lifecycles(lock) for lock in locks))
            return self._timed(work, False) / (tasks * cycles)

        return Side(
            f"redis.asyncio Lock (sleep {sleep * 1e3:g} ms), {tasks} tasks on {names} names", run_round
        )

    def _timed(self, work: Coroutine[Any, Any, None], watch_lag: bool) -> float:
        async def timed() -> float:
            ticker = asyncio.create_task(self._tick()) if watch_lag else None
            started = time.perf_counter()
            await work
            seconds = time.perf_counter() - started
            if ticker is not None:
                ticker.cancel()
            return seconds

        gc.disable()
        try:
            return self.runner.run(timed())
        finally:
            gc.enable()

    async def _tick(self, period: float = 0.001) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + period
            await asyncio.sleep(period)
            self.lags.append(max(0.0, loop.time() - due))

    def close(self) -> None:
        for close in self._closers:
            self.runner.run(close())


def pipelined_floor(url: str, cpu: int | None, requests: int, pipeline: int = 64) -> Side | None:
    """``redis-benchmark -c 1 -P pipeline`` sending the reference EVALSHA (``None``: not on PATH)."""
    command = c_floor_command(url, cpu=cpu, requests=requests)
    if command is None:
        return None
    at = command.index("-P")
    command[at + 1] = str(pipeline)
    return c_floor_side(f"redis-benchmark -c 1 -P {pipeline}", command, requests, url)


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="an existing server (default: a private one, pinned)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--cpu", type=int, default=1, help="client (and private server) CPU")
    options = parser.parse_args()
    from fastlock.testing.servers import TempServer

    server = None if options.url else TempServer(shutil.which("redis-server"), cpu=options.cpu).start()
    url = options.url or server.unix_url  # type: ignore[union-attr]
    pin(options.cpu)
    try:
        with new_runner(options.loop) as runner:
            sides = AioSides(url, runner, options.loop)
            ratios = interleaved_ratios(
                sides.fastlock(100, 200, watch_lag=True), sides.redis_asyncio(100, 20), options.rounds
            )
            print(f"100 tasks, fastlock.aio / redis.asyncio: median {statistics.median(ratios):.1f}x")
            print(f"  event-loop lag p99 {p99(sides.lags) * 1e3:.2f} ms")
            sides.lags.clear()
            floor = pipelined_floor(url, options.cpu, 100_000)
            sides.cpu.clear()
            one = sides.fastlock(1000, 100, connections=1, watch_lag=True)
            if floor is not None:
                ratios = interleaved_ratios(one, floor, options.rounds)
                median = statistics.median(ratios)
                print(f"1000 tasks, 1 connection / redis-benchmark -P 64: median {median:.2f}x")
            print(f"  client CPU per call {statistics.median(sides.cpu) * 1e6:.2f} us")
            print(f"  event-loop lag p99 {p99(sides.lags) * 1e3:.2f} ms, max {max(sides.lags) * 1e3:.2f} ms")
            for sleep, cycles in ((0.1, 2), (0.001, 5)):
                ratios = interleaved_ratios(
                    sides.fastlock_locks(100, 20, 20),
                    sides.redis_asyncio_locks(100, 20, cycles, sleep),
                    options.rounds,
                )
                rounds = ", ".join(f"{r:.1f}" for r in ratios)
                print(
                    f"lock lifecycles, 100 tasks on 20 names, AsyncLock / redis.asyncio Lock (sleep"
                    f" {sleep * 1e3:g} ms): median {statistics.median(ratios):.1f}x ({rounds})"
                )
            sides.close()
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
