"""The lock watchdog's cost (issue 28): N renewing locks held by one client, the round trips
its renewer spends per renewal period (the target: <= 1), on both cores.

    python bench/renewal.py [--locks N] [--ttl SECONDS] [--periods N]

A private server is started (``fastlock.testing.servers.TempServer``); round trips are the
client pool's count (as ``fastlock.tools.costs`` counts them), read while only the renewer runs.
"""

from __future__ import annotations

import argparse
import time

import fastlock
from fastlock.testing.servers import TempServer


def measure(url: str, impl: str, locks: int, ttl: float, periods: int) -> str:
    with fastlock.Client(url, impl=impl) as client:
        held = [client.lock(f"renewal:{impl}:{n}", ttl=ttl, renew=True) for n in range(locks)]
        for lock in held:
            lock.acquire()
        before, start = client.pool.round_trips, time.monotonic()
        time.sleep(periods * ttl / 3)
        round_trips = client.pool.round_trips - before
        elapsed = (time.monotonic() - start) / (ttl / 3)
        alive = client.execute("EXISTS", *[lock._main_scope.slots[0] for lock in held])
        lost = sum(lock.lost for lock in held)
        for lock in held:
            lock.release()
    return (
        f"{impl}: {locks} locks, ttl {ttl} s: {round_trips} round trips in {elapsed:.1f} periods "
        f"({round_trips / elapsed:.2f} per period); {alive}/{locks} held, {lost} lost"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--locks", type=int, default=1000)
    parser.add_argument("--ttl", type=float, default=1.5)
    parser.add_argument("--periods", type=int, default=12)
    options = parser.parse_args()
    with TempServer() as server:
        for impl in ("cython", "python"):
            print(measure(server.url, impl, options.locks, options.ttl, options.periods))


if __name__ == "__main__":
    main()
