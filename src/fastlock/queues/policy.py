"""The worker's policy, written once for every transport (sans-IO: no socket, thread or sleep).

:class:`WorkerBase` holds a worker's options and its loop as a *plan*: a generator yielding
:class:`Act` requests (a queue method to call, the handler to run, a pause) and receiving
their results, or their ``Exception`` thrown in; :class:`~fastlock.queues.worker.Worker`
drives it with blocking calls, :class:`~fastlock.aio.AsyncWorker` awaits the same acts,
one plan per task. The plan decides what happens: batch completion (each success completed
before the next job starts, the last one with the next claim), renewal of a slow batch,
failures (``queue.fail``: retried with backoff or dead-lettered), which errors are
:data:`TRANSIENT` (waited out with a jittered pause), recovery about every half lease, the
idle wait. :class:`Leases` is the heartbeats' bookkeeping; :class:`Warnings` rate-limits
warnings about server trouble.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from time import monotonic
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from ..exceptions import (
    ArgumentTypeError,
    BusyError,
    ConnectionError,
    LeaseLost,
    LoadingError,
    OutOfMemoryError,
    PoolTimeoutError,
    ReadOnlyError,
)
from ..protocol.arguments import duration_ms
from .calls import MAX_BATCH, MAX_COUNT, QueueBase, checked_int
from .jobs import Batch, Job

__all__ = ["MAX_RECOVER_CALLS", "TRANSIENT", "Act", "Leases", "Tally", "Warnings", "WorkerBase"]

log = logging.getLogger("fastlock.worker")

Q = TypeVar("Q", bound=QueueBase[Any])

TRANSIENT = (ConnectionError, PoolTimeoutError, BusyError, LoadingError, ReadOnlyError, OutOfMemoryError)
"""Errors a worker waits out and retries (server restarting, unreachable, busy, a replica
for now, or out of memory)."""
LOG_EVERY = 5.0  # seconds between two warnings about the same kind of server trouble
MAX_RECOVER_CALLS = 10  # recover calls per recovery (each of at most recover_limit jobs)


class Warnings:
    """Warnings about server trouble, at most one per :data:`LOG_EVERY` seconds (an outage
    would flood the log otherwise)."""

    def __init__(self, clock: Callable[[], float] = monotonic) -> None:
        self._next = 0.0
        self._clock = clock

    def __call__(self, message: str, *args: object, exc_info: bool = False) -> None:
        now = self._clock()
        if now >= self._next:
            self._next = now + LOG_EVERY
            log.warning(message, *args, exc_info=exc_info)


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
        """Stop renewing the leases of ``jobs`` (completed, failed or lost)."""
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
        """After an extend: drop (and log) the still-held jobs whose lease was lost."""
        lost = [job for job in lost if job.member in self._held.get(queue, {})]
        if lost:
            log.warning("%r: lease lost for %d job(s): %s", queue, len(lost), [j.id for j in lost])
            self.release(queue, lost)

    def failed(self, queue: QueueBase[Any], exc: Exception) -> None:
        """An extend failed: warned (rate-limited; a traceback unless :data:`TRANSIENT`)."""
        self._warn("heartbeat for %r failed: %s", queue, exc, exc_info=not isinstance(exc, TRANSIENT))


class Act(NamedTuple):
    """A worker plan's request: ``name`` is a queue method (``claim``, ``complete``,
    ``extend``, ``fail``, ``recover``, ``wait``) called with ``args`` and ``kwargs``,
    ``"handle"`` (the handler on ``args[0]``) or ``"pause"`` (wait ``args[0]`` seconds, or
    less if the worker is stopped)."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] | None = None


class _Flag(Protocol):
    def is_set(self) -> bool: ...


@dataclass
class Tally:
    """One run's count of handled jobs and what it may still claim (``None``: no limit),
    shared by its loops."""

    handled: int = 0
    budget: int | None = None


@dataclass
class _Loop:
    """One loop's state: its interrupt key; when its batch's leases were last set."""

    interrupt: str
    renewed: float = field(default=0.0)


Plan = Generator[Act, Any, None]


class WorkerBase(Generic[Q]):
    """A worker's options and loop (see the module docstring); ``loops`` interrupt keys are
    made, one per concurrent loop. A transport's worker sets ``_stopping`` (an event)."""

    _stopping: _Flag

    def __init__(
        self,
        queue: Q,
        handler: Callable[[Job], object],
        *,
        batch: int = 10,
        idle_wait: float = 5.0,
        recover_limit: int = 1000,
        loops: int = 1,
        clock: Callable[[], float] = monotonic,
    ) -> None:
        if not callable(handler):
            raise ArgumentTypeError("a worker takes a callable handler")
        self.batch = checked_int(batch, "batch", 1, MAX_BATCH)
        self.idle_wait = duration_ms(idle_wait, "idle_wait", minimum_ms=0) / 1000
        self.recover_limit = checked_int(recover_limit, "recover_limit", 1, MAX_BATCH)
        self.queue = queue
        self.handler = handler
        self._clock = clock
        self._next_recovery = 0.0
        self._warnings = Warnings(clock)
        stop = f"{queue.prefix}stop:{os.urandom(8).hex()}"
        self._interrupts = [stop] if loops == 1 else [f"{stop}:{i}" for i in range(loops)]

    def _tally(self, max_jobs: int | None) -> Tally:
        if max_jobs is not None:
            checked_int(max_jobs, "max_jobs", 0, MAX_COUNT)
        return Tally(budget=max_jobs)

    def _looping(self, tally: Tally, leases: Leases | Any, interrupt: str) -> Plan:
        """One loop until the worker stops or the run's budget is spent."""
        loop = _Loop(interrupt)
        jobs = Batch()
        while not self._stopping.is_set() and (jobs or tally.budget is None or tally.budget > 0):
            if self._clock() >= self._next_recovery:
                yield from self._recover()
            if not jobs:
                jobs = yield from self._claim(loop, tally)
                if not jobs:
                    yield from self._idle(loop, jobs.next_due_in)
                    continue
            held = jobs
            leases.hold(self.queue, held)
            try:
                last = yield from self._work(loop, tally, held)
                jobs = yield from self._complete(loop, tally, last, claim=True)
            finally:
                leases.release(self.queue, held)

    def _work(self, loop: _Loop, tally: Tally, jobs: Batch) -> Generator[Act, Any, list[Job]]:
        """Run the handler on each job, completing each success before the next job starts;
        returns the last job if it succeeded (for the caller to complete with the next
        claim). Once half a lease has passed since the leases were last set (slow jobs, or a
        stall), the rest are renewed in one call first, and lost ones skipped."""
        done: list[Job] = []
        for index, job in enumerate(jobs):
            if done:
                yield from self._complete(loop, tally, done, claim=False)
                done = []
            if self._clock() - loop.renewed > self.queue.lease / 2:
                yield from self._renew(loop, jobs[index:])
            if job.lost:
                if tally.budget is not None:
                    tally.budget += 1  # skipped, not handled: may be claimed again
                continue
            tally.handled += 1
            if (yield from self._handle(job)):
                done = [job]
        return done

    def _handle(self, job: Job) -> Generator[Act, Any, bool]:
        try:
            yield Act("handle", (job,))
            return True
        except Exception as exc:  # noqa: BLE001 - any handler error fails the job, the loop goes on
            log.warning("%r: job %s failed on attempt %d: %r", self.queue, job.id, job.attempt, exc)
            try:
                yield Act("fail", (job, exc))
            except LeaseLost:
                log.warning("%r: job %s failed after its lease was lost", self.queue, job.id)
            except TRANSIENT as error:
                self._warn(error, f"could not fail job {job.id} (its lease will expire)")
            return False

    def _renew(self, loop: _Loop, jobs: list[Job]) -> Generator[Act, Any, None]:
        started = self._clock()
        try:
            lost = yield Act("extend", (jobs,))
        except TRANSIENT as exc:
            self._warn(exc, "could not check the batch's leases")
            return
        loop.renewed = started
        if lost:
            log.warning("%r: skipping %d job(s), lease lost: %s", self.queue, len(lost), [j.id for j in lost])

    def _reserve(self, tally: Tally) -> int:
        """How many jobs the next claim asks for, taken from the run's budget."""
        if self._stopping.is_set():
            return 0
        if tally.budget is None:
            return self.batch
        count = min(self.batch, tally.budget)
        tally.budget -= count
        return count

    @staticmethod
    def _unreserve(tally: Tally, count: int, jobs: Batch) -> Batch:
        if tally.budget is not None:
            tally.budget += count - len(jobs)
        return jobs

    def _claim(self, loop: _Loop, tally: Tally) -> Generator[Act, Any, Batch]:
        count = self._reserve(tally)
        if count == 0:
            return Batch()
        loop.renewed = self._clock()
        try:
            return self._unreserve(tally, count, (yield Act("claim", (count,))))
        except TRANSIENT as exc:
            yield from self._pause(exc)
            return self._unreserve(tally, count, Batch())

    def _complete(
        self, loop: _Loop, tally: Tally, done: list[Job], claim: bool
    ) -> Generator[Act, Any, Batch]:
        """Complete ``done`` and (``claim``) claim the next batch; a transient error is waited
        out and the call repeated (completing is idempotent; jobs claimed by a lost reply
        come back when their lease expires)."""
        count = self._reserve(tally) if claim else 0
        while True:
            if count:
                loop.renewed = self._clock()
            try:
                return self._unreserve(tally, count, (yield Act("complete", (done,), {"claim": count})))
            except LeaseLost as exc:
                log.warning("%r: lease lost before completing %s", self.queue, [job.id for job in exc.jobs])
                return self._unreserve(tally, count, Batch())
            except TRANSIENT as exc:
                if not self._stopping.is_set():
                    yield from self._pause(exc)
                    continue
                self._warn(exc, f"stopping without completing {len(done)} job(s)")
                return self._unreserve(tally, count, Batch())

    def _pause(self, exc: Exception) -> Generator[Act, Any, None]:
        """Wait out transient server trouble for a short jittered pause."""
        self._warn(exc, "server unavailable, retrying")
        yield Act("pause", (random.uniform(0.05, 0.25),))

    def _warn(self, exc: Exception, what: str) -> None:
        """Log transient server trouble (rate-limited)."""
        self._warnings("%r: %s: %s", self.queue, what, exc)

    def _recover(self) -> Generator[Act, Any, None]:
        """Recover expired leases; the next recovery in about half a lease (jittered)."""
        self._next_recovery = self._clock() + self.queue.lease / 2 * random.uniform(0.5, 1.5)
        try:
            yield Act("recover", (self.recover_limit,), {"rounds": MAX_RECOVER_CALLS})
        except TRANSIENT as exc:
            self._warn(exc, "recovery failed")

    def _idle(self, loop: _Loop, next_due_in: float | None) -> Generator[Act, Any, None]:
        timeout = min(self.idle_wait, self._next_recovery - self._clock())
        if next_due_in is not None:
            timeout = min(timeout, next_due_in)
        try:
            yield Act("wait", (max(timeout, 0.0),), {"interrupt": loop.interrupt})
        except TRANSIENT as exc:
            yield from self._pause(exc)
