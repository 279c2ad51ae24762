"""Locks under contention, measured: threads looping ``with lock(name)`` on a few names, the
acquire waits and the two-holder check inside the critical section (a server counter:
``INCRBY`` +1 on entry > 1 is a violation, -1 on exit). Used by ``bench/contention.py``
(processes x threads in a fixed window, beside redis-py) and by the contention rows of
``python -m fastlock bench`` (a fixed count of lifecycles)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Result", "crowd"]


@dataclass
class Result:
    """One side's round: lifecycles (in the window), waits (s), violations, peak connections."""

    lifecycles: int = 0
    failed: int = 0
    violations: int = 0
    waits: list[float] = field(default_factory=list)
    peak_clients: int = 0

    def merge(self, other: Result) -> None:
        self.lifecycles += other.lifecycles
        self.failed += other.failed
        self.violations += other.violations
        self.waits.extend(other.waits)


def crowd(
    lock: Callable[[str], AbstractContextManager[Any]],
    check: Callable[[str, int], int],
    failure: tuple[type[BaseException], ...],
    *,
    threads: int,
    names: list[str],
    start: float = 0.0,
    end: float | None = None,
    each: int | None = None,
) -> Result:
    """``threads`` threads, thread ``i`` on ``names[i % len(names)]``, from ``start`` (a
    ``time.time()``) until ``end`` (counting the lifecycles finished by then), or ``each``
    lifecycles apiece. An acquire that raises one of ``failure`` (timed out) counts as failed."""
    results = [Result() for _ in range(threads)]

    def one(i: int) -> None:
        result = results[i]
        name = names[i % len(names)]
        held = f"held:{name}"
        while time.time() < start:
            time.sleep(0.001)
        done = 0
        while (end is None or time.time() < end) and (each is None or done < each):
            done += 1
            started = time.perf_counter()
            try:
                with lock(name):
                    result.waits.append(time.perf_counter() - started)
                    if check(held, 1) > 1:
                        result.violations += 1
                    check(held, -1)
            except failure:
                result.failed += 1
                continue
            if end is None or time.time() < end:
                result.lifecycles += 1

    workers = [threading.Thread(target=one, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    total = Result()
    for result in results:
        total.merge(result)
    return total
