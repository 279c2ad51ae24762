"""Locks under contention (issue 27): fastlock beside redis-py's ``Lock`` in the same run.

- asyncio: K tasks looping ``async with client.lock(one of N names, ttl=10, timeout=5)``
  (redis.asyncio: ``Lock(timeout=10, blocking_timeout=5)``), on one client per side;
- sync: P processes x T threads looping ``with client.lock(...)`` (redis-py ``Lock``).

Each side runs for a fixed window; the figure is the lifecycles *finished inside it* (a
polling lock's drain tail would otherwise decide it), with the acquire wait p50/p99, the
peak ``connected_clients`` of the server (sampled every 10 ms by a monitor connection, not
counted) and the two-holder violations, checked inside the critical section with a server
counter (``INCR`` on entry > 1, ``DECR`` on exit), and what the server spent per lifecycle:
its CPU and the commands it ran (inside scripts too; the check's two are among them, on both
sides, and so is the drain after the window). Sides alternate round by round; medians.

``python bench/contention.py [--rounds 3] [--window 2] [--tasks 100] [--names 20]
[--processes 4] [--threads 8] [--sync-names 4] [--only aio|sync] [--patience S]
[--local-queue on|off]`` (a private redis-server on a unix socket; ``--patience`` and
``--local-queue``: fastlock's manager options, else their defaults).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import threading
import time
from typing import Any

import redis
import redis.asyncio
from redis.exceptions import LockError as RedisLockError

import fastlock
import fastlock.aio
from fastlock.testing.servers import TempServer
from fastlock.tools.contention import Result, crowd

TTL, TIMEOUT = 10, 5


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Monitor:
    """Samples the server's ``connected_clients`` (minus its own connection) in a thread, and
    reads what the server spent on a round: its CPU seconds (``INFO cpu``) and the commands it
    ran, those inside scripts included (``INFO commandstats``, reset at the round's start; the
    monitor's own ``INFO`` and ``CONFIG`` left out)."""

    def __init__(self, path: str) -> None:
        self._conn = redis.Redis(unix_socket_path=path)
        self.peak = 0
        self.server_cpu = 0.0
        self.commands = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _cpu(self) -> float:
        cpu = self._conn.info("cpu")
        return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            clients = int(self._conn.info("clients")["connected_clients"]) - 1
            self.peak = max(self.peak, clients)

    def __enter__(self) -> Monitor:
        self.peak = 0
        self._conn.config_resetstat()
        self._cpu_start = self._cpu()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.server_cpu = self._cpu() - self._cpu_start
        stats = self._conn.info("commandstats")
        own = {"cmdstat_info", "cmdstat_config|resetstat"}
        self.commands = sum(int(v["calls"]) for k, v in stats.items() if k not in own)


# --- asyncio ---------------------------------------------------------------------------


async def _aio_round(
    kind: str, path: str, tasks: int, names: int, window: float, options: dict[str, Any] | None = None
) -> Result:
    result = Result()
    if kind == "fastlock":
        client: Any = fastlock.aio.Client(f"unix://{path}")
        locks = fastlock.aio.AsyncLockManager(client, **options) if options else client.locks

        def lock(name: str) -> Any:
            return locks.lock(name, ttl=TTL, timeout=TIMEOUT)

        async def check(key: str, delta: int) -> int:
            return int(await client.execute("INCRBY", key, delta))
    else:
        client = redis.asyncio.Redis(unix_socket_path=path, max_connections=tasks + 10)

        def lock(name: str) -> Any:
            return client.lock(name, timeout=TTL, blocking_timeout=TIMEOUT)

        async def check(key: str, delta: int) -> int:
            return int(await client.incrby(key, delta))

    loop = asyncio.get_running_loop()
    end = loop.time() + window

    async def one(i: int) -> None:
        name = f"c{kind}:{i % names}"
        held = f"held:{name}"
        while loop.time() < end:
            started = time.perf_counter()
            try:
                async with lock(name):
                    result.waits.append(time.perf_counter() - started)
                    if await check(held, 1) > 1:
                        result.violations += 1
                    await check(held, -1)
            except (fastlock.LockConflictError, RedisLockError):
                result.failed += 1
                continue
            if loop.time() < end:
                result.lifecycles += 1

    await asyncio.gather(*(one(i) for i in range(tasks)))
    if kind == "fastlock":
        await client.close()
    else:
        await client.aclose()
    return result


# --- sync: processes x threads ---------------------------------------------------------


def _sync_worker(
    kind: str, path: str, threads: int, names: int, start: float, window: float, out: Any,
    options: dict[str, Any] | None = None,
) -> None:  # fmt: skip
    if kind == "fastlock":
        client: Any = fastlock.Client(f"unix://{path}")
        locks = fastlock.LockManager(client, **options) if options else client.locks

        def lock(name: str) -> Any:
            return locks.lock(name, ttl=TTL, timeout=TIMEOUT)

        def check(key: str, delta: int) -> int:
            return int(client.execute("INCRBY", key, delta))
    else:
        client = redis.Redis(unix_socket_path=path, max_connections=threads + 4)

        def lock(name: str) -> Any:
            return client.lock(name, timeout=TTL, blocking_timeout=TIMEOUT)

        def check(key: str, delta: int) -> int:
            return int(client.incrby(key, delta))

    names_of = [f"s{kind}:{n}" for n in range(names)]
    failure = (fastlock.LockConflictError, RedisLockError)
    total = crowd(lock, check, failure, threads=threads, names=names_of, start=start, end=start + window)
    out.put(total)


def _sync_round(
    kind: str,
    path: str,
    processes: int,
    threads: int,
    names: int,
    window: float,
    options: dict[str, Any] | None = None,
) -> Result:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start = time.time() + 1.5  # the spawned interpreters import first
    procs = [
        ctx.Process(target=_sync_worker, args=(kind, path, threads, names, start, window, out, options))
        for _ in range(processes)
    ]
    for proc in procs:
        proc.start()
    total = Result()
    for _ in procs:
        total.merge(out.get())
    for proc in procs:
        proc.join()
    return total


# --- driver ----------------------------------------------------------------------------


def _line(label: str, rounds: list[Result], server: list[tuple[float, int]], window: float) -> str:
    rates = [r.lifecycles / window for r in rounds]
    waits = [w for r in rounds for w in r.waits]
    cpu = statistics.median(c / max(r.lifecycles, 1) for r, (c, _) in zip(rounds, server, strict=True))
    commands = statistics.median(n / max(r.lifecycles, 1) for r, (_, n) in zip(rounds, server, strict=True))
    return (
        f"| {label} | {statistics.median(rates):,.0f} | {_quantile(waits, 0.5) * 1e3:.1f} ms "
        f"| {_quantile(waits, 0.99) * 1e3:.1f} ms | {max(r.peak_clients for r in rounds)} "
        f"| {cpu * 1e6:.0f} µs | {commands:.1f} "
        f"| {sum(r.failed for r in rounds)} | {sum(r.violations for r in rounds)} |"
    )


def run(args: argparse.Namespace) -> str:
    options: dict[str, Any] = {}
    if args.patience is not None:
        options["patience"] = args.patience
    if args.local_queue is not None:
        options["local_queue"] = args.local_queue == "on"
    server = TempServer().start()
    lines = [
        "| side | lifecycles/s | wait p50 | wait p99 | peak clients | server CPU / lifecycle "
        "| server commands / lifecycle | timed out | two holders |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    try:
        path = server.unix_path
        monitor = Monitor(path)
        sides: list[tuple[str, Any]] = []
        if args.only in (None, "aio"):
            for kind in ("fastlock", "redis"):
                side = "fastlock.aio" if kind == "fastlock" else "redis.asyncio Lock"
                label = f"{side}, {args.tasks} tasks / {args.names} names"
                sides.append(
                    (
                        label,
                        lambda k=kind: asyncio.run(
                            _aio_round(k, path, args.tasks, args.names, args.window, options)
                        ),
                    )
                )
        if args.only in (None, "sync"):
            for kind in ("fastlock", "redis"):
                label = (
                    f"{'fastlock' if kind == 'fastlock' else 'redis-py Lock'}, "
                    f"{args.processes}x{args.threads} threads / {args.sync_names} names"
                )
                sides.append(
                    (
                        label,
                        lambda k=kind: _sync_round(
                            k, path, args.processes, args.threads, args.sync_names, args.window, options
                        ),
                    )
                )
        results: dict[str, list[Result]] = {label: [] for label, _ in sides}
        spent: dict[str, list[tuple[float, int]]] = {label: [] for label, _ in sides}
        for _ in range(args.rounds):
            for label, side in sides:
                with monitor:
                    result = side()
                result.peak_clients = monitor.peak
                results[label].append(result)
                spent[label].append((monitor.server_cpu, monitor.commands))
        lines += [_line(label, rounds, spent[label], args.window) for label, rounds in results.items()]
    finally:
        server.stop()
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=2.0)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--names", type=int, default=20)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--sync-names", type=int, default=4)
    parser.add_argument("--only", choices=("aio", "sync"))
    parser.add_argument("--patience", type=float, help="fastlock's (seconds; default: the namespace default)")
    parser.add_argument("--local-queue", choices=("on", "off"), help="fastlock's (default: on)")
    print(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
