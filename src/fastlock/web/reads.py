"""The overview's one read, kept apart so that a cached source (server gauges) can replace it:
each queue's :meth:`~fastlock.aio.AsyncQueue.stats`, :meth:`~fastlock.aio.AsyncQueue.claims` and
:meth:`~fastlock.aio.AsyncQueue.oldest_ready` (three bounded round trips per queue, all
concurrent); and :class:`Throughput`, the claims per
minute of each queue from the readings the overview made."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ..aio.queue import AsyncQueue
from ..queues.jobs import QueueStats

__all__ = ["KEPT", "WINDOWS", "QueueRow", "Throughput", "read_overview"]

WINDOWS = (60.0, 900.0)
"""Seconds over which the overview shows claims per minute: the last minute, 15 minutes."""
KEPT = 1024
"""Readings kept per queue (at the overview's 5 s refresh, more than the longest window)."""


class QueueRow(NamedTuple):
    """One queue of the overview: its name, job counts, claims so far and the age of its
    oldest ready job (s; ``None``: not known)."""

    name: str
    stats: QueueStats
    claims: int
    oldest: float | None = None


async def read_overview(queues: Sequence[AsyncQueue]) -> list[QueueRow]:
    """The counts, claims and oldest ready job's age of every queue, read concurrently."""
    stats, claims, oldest = await asyncio.gather(
        asyncio.gather(*(q.stats() for q in queues)),
        asyncio.gather(*(q.claims() for q in queues)),
        asyncio.gather(*(q.oldest_ready() for q in queues)),
    )
    rows = zip(queues, stats, claims, oldest, strict=True)
    return [QueueRow(queue.name, counts, claimed, age) for queue, counts, claimed, age in rows]


class Throughput:
    """Each queue's claims per minute over each of :data:`WINDOWS`, from the readings of
    :func:`read_overview` (the dashboard's own, while someone has the overview open: a
    window is reported once readings span at least a tenth of it)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._readings: dict[str, deque[tuple[float, int]]] = {}

    def add(self, rows: Sequence[QueueRow]) -> dict[str, list[float | None]]:
        """Record ``rows`` and give, per queue, its claims per minute over each window (``None``:
        not yet known; a counter that went back, a flushed server, starts afresh)."""
        now, rates = self._clock(), {}
        for row in rows:
            readings = self._readings.setdefault(row.name, deque(maxlen=KEPT))
            if readings and row.claims < readings[-1][1]:
                readings.clear()
            readings.append((now, row.claims))
            while now - readings[0][0] > WINDOWS[-1]:
                readings.popleft()
            rates[row.name] = [self._rate(readings, now, window) for window in WINDOWS]
        return rates

    @staticmethod
    def _rate(readings: deque[tuple[float, int]], now: float, window: float) -> float | None:
        since, count = next((r for r in readings if now - r[0] <= window), readings[-1])
        span = now - since
        return None if span < window / 10 else (readings[-1][1] - count) * 60 / span
