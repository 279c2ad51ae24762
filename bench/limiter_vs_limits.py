"""fastlock's limiters beside the ``limits`` package (its moving window, Redis storage) in the
same run (issue 26's target: at least 2x its decisions/s).

Sides, each one decision per call on one connection: fastlock GCRA (``try_acquire``),
fastlock's sliding window (``kind="window"``) and ``limits``' ``MovingWindowRateLimiter.hit``
over ``RedisStorage`` (redis-py). Two scenarios: ``admit`` (limits far above the request
rate: every decision admits, so writes) and ``flood`` (100 per second asked flat out: nearly
every decision denies). Rounds interleave the sides, their order rotating; the figure is the
median over rounds of each side's decisions/s, and of the per-round ratio to ``limits``.
A private server pinned to CPU 1; the client on CPU 1 (``same``) or CPU 0 (``cross``),
docs/benchmarks.md and /work/shared/notes/benchmarking.md's regimes.

``python bench/limiter_vs_limits.py [--rounds 15] [--ops 2000] [--regime same|cross]``
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from collections.abc import Callable

import limits
import limits.storage
import limits.strategies

import fastlock
from fastlock.testing.servers import TempServer

SCENARIOS: dict[str, tuple[int, float]] = {"admit": (10_000, 0.1), "flood": (100, 1.0)}
"""Scenario -> (limit, seconds): the window kinds' limit per window (the GCRA's rate per it)."""


def sides(client: fastlock.Client, url: str, scenario: str) -> dict[str, Callable[[], object]]:
    limit, seconds = SCENARIOS[scenario]
    gcra = client.limiter(f"gcra-{scenario}", rate=limit, per=seconds)
    window = client.limiter(f"window-{scenario}", rate=limit, per=seconds, kind="window")
    storage = limits.storage.RedisStorage(url)
    moving = limits.strategies.MovingWindowRateLimiter(storage)
    # limits' items count whole seconds: the admit scenario's 10,000 per 100 ms as 100,000 per second
    item = limits.RateLimitItemPerSecond(round(limit / seconds) if seconds < 1 else limit)
    return {
        "fastlock gcra": gcra.try_acquire,
        "fastlock window": window.try_acquire,
        "limits moving window": lambda: moving.hit(item, scenario),
    }


def timed(op: Callable[[], object], ops: int) -> float:
    gc.disable()
    try:
        started = time.perf_counter()
        for _ in range(ops):
            op()
        return ops / (time.perf_counter() - started)
    finally:
        gc.enable()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--regime", choices=["same", "cross"], default="same")
    args = parser.parse_args(argv)
    os.sched_setaffinity(0, {1 if args.regime == "same" else 0})
    with TempServer(cpu=1) as server, fastlock.Client(server.url) as client:
        url = f"redis://{server.host}:{server.port}"
        for scenario in SCENARIOS:
            ops = sides(client, url, scenario)
            names = list(ops)
            for op in ops.values():  # warm up: scripts loaded, connections open
                timed(op, 200)
            rates: dict[str, list[float]] = {name: [] for name in names}
            ratios: dict[str, list[float]] = {name: [] for name in names}
            for i in range(args.rounds):
                order = names[i % len(names) :] + names[: i % len(names)]
                this = {name: timed(ops[name], args.ops) for name in order}
                for name in names:
                    rates[name].append(this[name])
                    ratios[name].append(this[name] / this["limits moving window"])
            print(f"{scenario} ({args.regime} core, {args.rounds} rounds of {args.ops}):")
            for name in names:
                low, high = min(ratios[name]), max(ratios[name])
                print(
                    f"  {name:22} {statistics.median(rates[name]):9,.0f} decisions/s"
                    f"  x{statistics.median(ratios[name]):.2f} limits (rounds {low:.2f}-{high:.2f})"
                )


if __name__ == "__main__":
    main()
