"""The server-side gauges of the exporters, read with the bounded admin calls and cached:
the job counts of some queues (``queue.stats()``: four counts each) and their claims so far
(``queue.claims()``: a counter, the fleet's throughput) and the age of their oldest ready job
(``queue.oldest_ready()``), and the holders of some locks
(``lock.holders()``: one bounded inspect each), at most once per ``every`` seconds and only
when an exporter asks (a scrape, a metric reader's collection), never on a hot path."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import ConnectionError, ResponseError, TimeoutError

__all__ = ["STATES", "Reading", "Watched"]

STATES = ("ready", "delayed", "active", "dead")
"""The job states of a queue's gauge, as :class:`~fastlock.QueueStats` names them."""


@dataclass(frozen=True)
class Reading:
    """One reading: ``jobs[queue][state]``, ``claims[queue]``, ``oldest[queue]`` (s; a queue
    without a known age is left out), ``holders[lock name]``; ``up`` false when the server
    could not be read (then all are empty)."""

    up: bool
    jobs: dict[str, dict[str, int]] = field(default_factory=dict)
    holders: dict[str, int] = field(default_factory=dict)
    claims: dict[str, int] = field(default_factory=dict)
    oldest: dict[str, float] = field(default_factory=dict)


class Watched:
    """The queues and locks of one sync client (``name`` labels its ``up`` figure), read at
    most every ``every`` seconds on ``clock``; thread-safe."""

    def __init__(
        self, name: str, queues: Sequence[Any], locks: Sequence[Any], every: float, clock: Callable[[], float]
    ) -> None:
        self.name, self.queues, self.locks, self.every, self._clock = name, queues, locks, every, clock
        self._read_at = -float("inf")
        self._reading = Reading(False)
        self._lock = threading.Lock()

    def now(self) -> Reading:
        """The last reading, read again when it is ``every`` seconds old."""
        with self._lock:
            if self._clock() - self._read_at >= self.every:
                self._reading = self._read()
                self._read_at = self._clock()
            return self._reading

    def _read(self) -> Reading:
        try:
            jobs, claims, oldest = {}, {}, {}
            for queue in self.queues:
                stats = queue.stats()
                jobs[queue.name] = {state: getattr(stats, state) for state in STATES}
                claims[queue.name] = queue.claims()
                if (age := queue.oldest_ready()) is not None:
                    oldest[queue.name] = age
            holders = {lock.name or lock.digest: len(lock.holders()) for lock in self.locks}
        except (ConnectionError, TimeoutError, ResponseError):
            return Reading(False)
        return Reading(True, jobs, holders, claims, oldest)
