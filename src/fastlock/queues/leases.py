"""The bookkeeping a worker's transport shares with its plan, sans-IO: :class:`Leases` (the
leases a heartbeat renews) and :class:`Warnings` (server-trouble warnings, rate-limited,
with one line when the server is back)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Generator, Sequence
from time import monotonic
from typing import Any

from ..exceptions import (
    BusyError,
    ConnectionError,
    LoadingError,
    OutOfMemoryError,
    PoolTimeoutError,
    ReadOnlyError,
)
from .base import QueueBase
from .jobs import Job

__all__ = ["LOG_EVERY", "TRANSIENT", "Leases", "Warnings", "extend"]

log = logging.getLogger("fastlock.worker")

TRANSIENT = (ConnectionError, PoolTimeoutError, BusyError, LoadingError, ReadOnlyError, OutOfMemoryError)
"""Errors a worker waits out and retries (server restarting, unreachable, busy, a replica
for now, or out of memory)."""
LOG_EVERY = 5.0  # seconds between two warnings about the same kind of server trouble


class Warnings:
    """Warnings about server trouble: the first of an outage at once, then at most one per
    :data:`LOG_EVERY` seconds; :meth:`recovered` logs one line when the server answers again
    after a logged warning (a server failing one call in two logs no more than that). Shared
    by a worker's threads (its heartbeat, its ``concurrency`` loops): the state is changed
    under a lock, so a recovery seen by two threads at once is logged once."""

    def __init__(self, clock: Callable[[], float] = monotonic) -> None:
        self._next = 0.0
        self._since: float | None = None
        self._logged = False
        self._clock = clock
        self._lock = threading.Lock()

    def __call__(self, message: str, *args: object, exc_info: bool = False) -> None:
        with self._lock:
            now = self._clock()
            if self._since is None:
                self._since = now
            if now < self._next:
                return
            self._next = now + LOG_EVERY
            self._logged = True
        log.warning(message, *args, exc_info=exc_info)

    def recovered(self, what: object, *, quiet: bool = False) -> None:
        """The server answered: if a warning was logged, say after how long (once; ``quiet``:
        only reset, another part of the worker says it)."""
        if self._since is None:  # the common case, without the lock
            return
        with self._lock:
            since, logged = self._since, self._logged
            self._since = None
            self._logged = False
        if since is not None and logged and not quiet:
            log.warning("%r: server back, recovered after %.1f s", what, self._clock() - since)


class Leases:
    """The leases a heartbeat renews: held jobs per queue, each queue's renewal due every
    ``queue.lease / 3`` seconds, one extend call per queue and round."""

    def __init__(self, clock: Callable[[], float] = monotonic) -> None:
        self._held: dict[Any, dict[bytes, Job]] = {}
        self._due: dict[Any, float] = {}
        self._clock = clock
        self._warn = Warnings(clock)

    def hold(self, queue: QueueBase[Any], jobs: Sequence[Job]) -> None:
        """Start renewing the leases of ``jobs``."""
        held = self._held.setdefault(queue, {})
        if not held:
            self._due[queue] = self._clock() + queue.lease / 3
        held.update({job.member: job for job in jobs})

    def release(self, queue: QueueBase[Any], jobs: Sequence[Job]) -> None:
        """Stop renewing the leases of ``jobs`` (completed, failed, handed back or lost)."""
        held = self._held.get(queue, {})
        for job in jobs:
            held.pop(job.member, None)
        if not held:
            self._held.pop(queue, None)
            self._due.pop(queue, None)

    def due(self) -> tuple[list[tuple[Any, list[Job]]], float | None]:
        """The queues due now with their held jobs (their next round scheduled), and the
        seconds until the next round (``None``: nothing held)."""
        now = self._clock()
        due = [queue for queue, at in self._due.items() if at <= now]
        for queue in due:
            self._due[queue] = now + queue.lease / 3
        wait = min(self._due.values()) - now if self._due else None
        return [(queue, list(self._held[queue].values())) for queue in due], wait

    def renewed(self, queue: QueueBase[Any], lost: list[Job]) -> None:
        """After an extend: drop (and log) the still-held jobs whose lease was lost or that
        were cancelled."""
        self._warn.recovered(queue, quiet=True)  # the worker says it
        lost = [job for job in lost if job.member in self._held.get(queue, {})]
        cancelled = [job.id for job in lost if job.cancelled]
        if cancelled:
            log.info("%r: %d job(s) cancelled while running: %s", queue, len(cancelled), cancelled)
        if len(cancelled) < len(lost):
            gone = [job.id for job in lost if not job.cancelled]
            log.warning("%r: lease lost for %d job(s): %s", queue, len(gone), gone)
        if lost:
            self.release(queue, lost)

    def failed(self, queue: QueueBase[Any], exc: Exception) -> None:
        """An extend failed: warned (rate-limited; a traceback unless :data:`TRANSIENT`)."""
        self._warn("heartbeat for %r failed: %s", queue, exc, exc_info=not isinstance(exc, TRANSIENT))

    def renewing(
        self, due: list[tuple[Any, list[Job]]], guard: contextlib.AbstractContextManager[Any] | None = None
    ) -> Generator[tuple[Any, list[Job]], list[Job], None]:
        """One heartbeat round as a plan (``operations.run_plan``): each request ``(queue,
        jobs)`` is answered by ``queue.extend(jobs)``; a failed one is warned and skipped, a
        lost lease dropped under ``guard``."""
        for queue, jobs in due:
            try:
                lost = yield queue, jobs
            except Exception as exc:  # noqa: BLE001 - the heartbeat must outlive any failed call
                self.failed(queue, exc)
                continue
            with guard or contextlib.nullcontext():
                self.renewed(queue, lost)


def extend(request: tuple[Any, list[Job]]) -> Any:
    """A :meth:`Leases.renewing` request answered: ``queue.extend(jobs)`` (awaitable for an
    asyncio queue)."""
    queue, jobs = request
    return queue.extend(jobs)
