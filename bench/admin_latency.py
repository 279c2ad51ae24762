"""Latency of every admin command on a queue of 1,000,000 jobs (and a lock namespace of
20,000 locks): the target of issue 14 is < 100 ms each, by bounded server work.

    python bench/admin_latency.py [--url URL] [--jobs N] [--runs N] [--cli]

Without ``--url`` a private server is started (``fastlock.testing.servers.TempServer``); with
one, use a server nobody else talks to (it is flushed). The queue is filled through the
real scripts (``enqueue_many``, 1000 jobs a call): 70 % plain ready, 5 % prioritised,
20 % delayed, 4.9 % leased and 0.1 % dead. Each command runs ``--runs`` times; the table
gives the median and the worst client wall time in ms, and the server's own time per call
(``INFO commandstats``: EVALSHA and the commands around it). ``--cli`` also times
``python -m fastlock`` end to end (interpreter start-up included).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import fastlock
from fastlock.queues.admin import STATES
from fastlock.queues.queue import Queue
from fastlock.testing.servers import TempServer
from fastlock.tools.costs import command_calls


def server_usec(client: fastlock.Client) -> dict[str, float]:
    """Microseconds the server spent in each command so far (INFO commandstats)."""
    text = client.execute("INFO", "commandstats").decode()
    spent = {}
    for line in text.splitlines():
        if line.startswith("cmdstat_") and not line.startswith(("cmdstat_info", "cmdstat_config")):
            spent[line[8:].partition(":")[0]] = float(line.split("usec=")[1].split(",")[0])
    return spent


def server_ms(before: dict[str, float], after: dict[str, float], runs: int) -> float:
    """Server ms per call: the EVALSHA time when scripts ran (it includes their inner
    commands, which commandstats counts again on their own), else every command's."""
    spent = {name: usec - before.get(name, 0.0) for name, usec in after.items()}
    return (spent["evalsha"] if spent.get("evalsha") else sum(spent.values())) / runs / 1000


def fill(queue: Queue, jobs: int) -> dict[str, float]:
    """Fill ``queue`` with ``jobs`` jobs through the real scripts; returns seconds per part.
    Dead and leased jobs first: claims take the oldest ready jobs."""
    payload = b"p" * 16
    shares = {"dead": 0.001, "active": 0.049, "ready": 0.70, "prio": 0.05, "delayed": 0.20}
    spent = {}
    for part, share in shares.items():
        started = time.perf_counter()
        count = int(jobs * share)
        options = {"prio": {"priority": 3}, "delayed": {"delay": 3600}}.get(part, {})
        for start in range(0, count, 1000):
            size = min(1000, count - start)
            queue.enqueue_many([payload] * size, **options)  # type: ignore[arg-type]
            if part in ("dead", "active"):
                for job in queue.claim(size, lease=3600):
                    if part == "dead":
                        queue.fail(job, "RuntimeError: bench", dead=True)
        spent[part] = time.perf_counter() - started
    return spent


def timed(client: fastlock.Client, call: Callable[[], object], runs: int) -> tuple[float, float, float]:
    """(median ms, worst ms, server ms per call) of ``runs`` calls."""
    call()  # scripts loaded
    walls = []
    before = server_usec(client)
    for _ in range(runs):
        started = time.perf_counter()
        call()
        walls.append((time.perf_counter() - started) * 1000)
    return statistics.median(walls), max(walls), server_ms(before, server_usec(client), runs)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="a server nobody else uses (flushed); default: a private one")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--locks", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--cli", action="store_true", help="also time python -m fastlock end to end")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(TempServer()).url
        client = stack.enter_context(fastlock.Client(url))
        client.execute("FLUSHALL")
        queue = client.queue("big", max_attempts=1)
        started = time.perf_counter()
        spent = fill(queue, args.jobs)
        print(f"filled {args.jobs:,} jobs in {time.perf_counter() - started:.1f} s "
              f"({', '.join(f'{k} {v:.1f} s' for k, v in spent.items())}): {queue.stats()}")  # fmt: skip
        manager = client.locks
        for i in range(args.locks):
            manager.lock(f"res{i}", ttl=3600).acquire("job")
        ready, delayed, active, dead = (queue.peek(state, count=1).jobs for state in STATES)
        middle = queue.peek("ready", offset=args.jobs // 3, count=1).jobs[0].id
        victims = iter(queue.peek("ready", count=1000).jobs)
        digest = manager.digest("res7")
        commands: dict[str, Callable[[], object]] = {
            "queue stats": queue.stats,
            "queue peek ready (first 20)": lambda: queue.peek("ready"),
            f"queue peek ready (offset {args.jobs // 2:,})": lambda: queue.peek(
                "ready", offset=args.jobs // 2
            ),
            "queue peek ready (100, prio lane)": lambda: queue.peek(
                "ready", offset=int(args.jobs * 0.7), count=100
            ),
            "queue peek delayed (20)": lambda: queue.peek("delayed"),
            "queue peek active (20)": lambda: queue.peek("active"),
            "queue peek dead (20)": lambda: queue.peek("dead"),
            "queue job (next ready)": lambda: queue.job(ready[0].id),
            "queue job (delayed)": lambda: queue.job(delayed[0].id),
            "queue job (active)": lambda: queue.job(active[0].id),
            "queue job (dead)": lambda: queue.job(dead[0].id),
            "queue job (deep: queued)": lambda: queue.job(middle),
            "queue job (missing)": lambda: queue.job("missing"),
            "queue cancel (ready)": lambda: queue.cancel(next(victims).id),
            "queue cancel (deep: refused)": lambda: queue.cancel(middle),
            "queue dead (100)": lambda: queue.dead(100),
            "queue requeue+purge (1 id)": lambda: (queue.requeue_dead(["none"]), queue.purge_dead(["none"])),
            "queue locks (page of 100)": lambda: queue.unique_locks(count=100),
            f"locks list (100 of {args.locks:,})": lambda: manager.scan("0", count=100),
            "locks inspect": lambda: manager.inspect(digest),
            "locks reap (1000 entries)": lambda: manager.reaper().run_once(),
        }
        print(f"\n| command ({args.jobs:,} jobs) | median ms | worst ms | server ms/call |")
        print("|---|---|---|---|")
        for name, call in commands.items():
            median, worst, server = timed(client, call, args.runs)
            print(f"| {name} | {median:.2f} | {worst:.2f} | {server:.2f} |")
        unbounded = [
            name for name in command_calls(client) if name in ("keys", "scan", "hgetall", "smembers")
        ]
        print(f"\nKEYS, SCAN, HGETALL or SMEMBERS run: {unbounded or 'none'}")
        if args.cli:
            print("\n| CLI, end to end (interpreter start-up included) | ms |\n|---|---|")
            runs = (["queue", "stats", "big"], ["queue", "peek", "big"], ["queue", "job", "big", middle])
            for cli_args in (*runs, ["locks", "list"]):
                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", "fastlock", *cli_args, "--url", url], check=True,
                               capture_output=True)  # fmt: skip
                print(f"| {' '.join(cli_args[:2])} | {(time.perf_counter() - started) * 1000:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
