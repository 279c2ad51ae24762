"""A worker loop over a :class:`~fastlock.queues.queue.Queue`, and the process's lease heartbeat.

:class:`Worker` claims jobs in batches and runs a handler on each. It completes each
successful job before it starts the next (the last one's completion claims the next batch
in the same round trip), so a worker stalled past its leases re-runs at most the job it was
in; it fails the others (retried with backoff, dead-lettered once their attempts are used
up). Leases are renewed by one
:class:`Heartbeat` thread per process, so a handler that blocks its thread keeps its
leases. Every worker runs :meth:`Queue.recover` about every half lease, with jitter. An
idle worker blocks on the queue's wake marker (``BZPOPMIN``) until a producer signals
work, the next delayed job is due, or ``idle_wait`` passes: it does not poll.
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections.abc import Callable, Sequence
from time import monotonic

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
from .calls import MAX_BATCH, MAX_COUNT, checked_int
from .jobs import Batch, Job
from .queue import Queue

__all__ = ["Heartbeat", "Worker", "heartbeat"]

log = logging.getLogger("fastlock.worker")

TRANSIENT = (ConnectionError, PoolTimeoutError, BusyError, LoadingError, ReadOnlyError, OutOfMemoryError)
"""Errors a worker waits out and retries (server restarting, unreachable, busy, a replica
for now, or out of memory)."""
_LOG_EVERY = 5.0  # seconds between two warnings about the same kind of server trouble


class _Warnings:
    """Warnings about server trouble, at most one per ``_LOG_EVERY`` seconds (an outage
    would flood the log otherwise)."""

    def __init__(self) -> None:
        self._next = 0.0

    def __call__(self, message: str, *args: object, exc_info: bool = False) -> None:
        now = monotonic()
        if now >= self._next:
            self._next = now + _LOG_EVERY
            log.warning(message, *args, exc_info=exc_info)


_MAX_RECOVER_CALLS = 10


class Heartbeat:
    """Renews the leases of every job this process holds, from one daemon thread.

    Each queue's held jobs are extended together, one call per queue every
    ``queue.lease / 3`` seconds; a lost lease sets ``job.lost`` and drops the job.
    """

    def __init__(self) -> None:
        self._held: dict[Queue, dict[bytes, Job]] = {}
        self._due: dict[Queue, float] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._warn = _Warnings()

    def hold(self, queue: Queue, jobs: Sequence[Job]) -> None:
        """Start renewing the leases of ``jobs``."""
        with self._cond:
            held = self._held.setdefault(queue, {})
            if not held:
                self._due[queue] = monotonic() + queue.lease / 3
            held.update({job.member: job for job in jobs})
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fastlock-heartbeat", daemon=True)
                self._thread.start()
            self._cond.notify()

    def release(self, queue: Queue, jobs: Sequence[Job]) -> None:
        """Stop renewing the leases of ``jobs`` (completed, failed or lost)."""
        with self._cond:
            held = self._held.get(queue, {})
            for job in jobs:
                held.pop(job.member, None)
            if not held:
                self._held.pop(queue, None)
                self._due.pop(queue, None)

    def _next_round(self) -> list[tuple[Queue, list[Job]]]:
        with self._cond:
            while True:
                now = monotonic()
                due = [queue for queue, at in self._due.items() if at <= now]
                if due:
                    for queue in due:
                        self._due[queue] = now + queue.lease / 3
                    return [(queue, list(self._held[queue].values())) for queue in due]
                self._cond.wait(min(self._due.values()) - now if self._due else None)

    def _run(self) -> None:
        while True:
            for queue, jobs in self._next_round():
                try:
                    lost = queue.extend(jobs)
                except Exception as exc:  # noqa: BLE001 - the heartbeat must outlive any failed call
                    expected = isinstance(exc, TRANSIENT)
                    self._warn("heartbeat for %r failed: %s", queue, exc, exc_info=not expected)
                    continue
                with self._cond:
                    lost = [job for job in lost if job.member in self._held.get(queue, {})]
                if lost:
                    log.warning("%r: lease lost for %d job(s): %s", queue, len(lost), [j.id for j in lost])
                    self.release(queue, lost)


_process_heartbeat: Heartbeat | None = None


def heartbeat() -> Heartbeat:
    """This process's heartbeat (a new one after ``fork()``)."""
    global _process_heartbeat
    if _process_heartbeat is None:
        _process_heartbeat = Heartbeat()
    return _process_heartbeat


def _forget_heartbeat() -> None:
    global _process_heartbeat
    _process_heartbeat = None


os.register_at_fork(after_in_child=_forget_heartbeat)


class Worker:
    """Run ``handler(job)`` on the jobs of ``queue``, ``batch`` claimed at a time.

    A handler that returns completes its job at once; one that raises fails it
    (``queue.fail`` with the exception: retried after the queue's backoff or
    dead-lettered). Before committing an effect, a handler can ask ``queue.holds(job)``
    (one round trip, fenced by the token); ``job.lost`` is only the heartbeat's last view.
    ``idle_wait`` bounds one blocking wait when the queue is empty.
    """

    def __init__(
        self,
        queue: Queue,
        handler: Callable[[Job], object],
        *,
        batch: int = 10,
        idle_wait: float = 5.0,
        recover_limit: int = 1000,
    ) -> None:
        if not isinstance(queue, Queue) or not callable(handler):
            raise ArgumentTypeError("Worker takes a Queue and a callable handler")
        self.batch = checked_int(batch, "batch", 1, MAX_BATCH)
        self.idle_wait = duration_ms(idle_wait, "idle_wait", minimum_ms=0) / 1000
        self.recover_limit = checked_int(recover_limit, "recover_limit", 1, MAX_BATCH)
        self.queue = queue
        self.handler = handler
        self._stopping = threading.Event()
        self._next_recovery = 0.0
        self._renewed = 0.0  # monotonic time before the call that last set the batch's leases
        self._warnings = _Warnings()
        self._interrupt = f"{queue.prefix}stop:{os.urandom(8).hex()}"

    def stop(self) -> None:
        """Ask :meth:`run` to return after the current batch (nothing more is claimed); an
        idle worker is woken at once. A stopped worker stays stopped."""
        self._stopping.set()
        try:
            self.queue.interrupt(self._interrupt)
        except TRANSIENT as exc:
            self._warn(exc, "could not wake the worker to stop it")

    def run(self, *, max_jobs: int | None = None) -> int:
        """Process jobs until :meth:`stop` is called or ``max_jobs`` jobs were handled;
        returns the number of jobs handled (jobs skipped as lost are not counted)."""
        if max_jobs is not None:
            checked_int(max_jobs, "max_jobs", 0, MAX_COUNT)
        beat = heartbeat()
        handled = 0
        jobs = Batch()
        while not self._stopping.is_set() and (max_jobs is None or handled < max_jobs):
            if monotonic() >= self._next_recovery:
                self._recover()
            if not jobs:
                jobs = self._claim(self._wanted(handled, max_jobs))
                if not jobs:
                    self._idle(jobs.next_due_in)
                    continue
            held = jobs
            beat.hold(self.queue, held)
            try:
                last, ran = self._work(held)
                handled += ran
                jobs = self._complete(last, self._wanted(handled, max_jobs))
            finally:
                beat.release(self.queue, held)
        return handled

    def _work(self, jobs: Batch) -> tuple[list[Job], int]:
        """Run the handler on each job, completing each success before the next job starts;
        returns the last job if it succeeded (for the caller to complete with the next
        claim) and how many ran. Once half a lease has passed since the leases were last set
        (slow jobs, or a stall), the rest are renewed in one call first, and lost ones skipped."""
        done: list[Job] = []
        ran = 0
        for index, job in enumerate(jobs):
            if done:
                self._complete(done, 0)
                done = []
            if monotonic() - self._renewed > self.queue.lease / 2:
                self._renew(jobs[index:])
            if job.lost:
                continue
            ran += 1
            if self._handle(job):
                done = [job]
        return done, ran

    def _renew(self, jobs: list[Job]) -> None:
        started = monotonic()
        try:
            lost = self.queue.extend(jobs)
        except TRANSIENT as exc:
            self._warn(exc, "could not check the batch's leases")
            return
        self._renewed = started
        if lost:
            log.warning("%r: skipping %d job(s), lease lost: %s", self.queue, len(lost), [j.id for j in lost])

    def _wanted(self, handled: int, max_jobs: int | None) -> int:
        if self._stopping.is_set():
            return 0
        return self.batch if max_jobs is None else min(self.batch, max_jobs - handled)

    def _handle(self, job: Job) -> bool:
        try:
            self.handler(job)
            return True
        except Exception as exc:  # noqa: BLE001 - any handler error fails the job, the loop goes on
            log.warning("%r: job %s failed on attempt %d: %r", self.queue, job.id, job.attempt, exc)
            try:
                self.queue.fail(job, exc)
            except LeaseLost:
                log.warning("%r: job %s failed after its lease was lost", self.queue, job.id)
            except TRANSIENT as error:
                self._warn(error, f"could not fail job {job.id} (its lease will expire)")
            return False

    def _claim(self, count: int) -> Batch:
        if count == 0:
            return Batch()
        self._renewed = monotonic()
        try:
            return self.queue.claim(count)
        except TRANSIENT as exc:
            self._pause(exc)
            return Batch()

    def _complete(self, done: list[Job], count: int) -> Batch:
        """Complete ``done`` and claim ``count`` more; a transient error is waited out and the
        call repeated (completing is idempotent; jobs claimed by a lost reply come back when
        their lease expires)."""
        while True:
            if count:
                self._renewed = monotonic()
            try:
                return self.queue.complete(done, claim=count)
            except LeaseLost as exc:
                log.warning("%r: lease lost before completing %s", self.queue, [job.id for job in exc.jobs])
                return Batch()
            except TRANSIENT as exc:
                if not self._stopping.is_set():
                    self._pause(exc)
                    continue
                self._warn(exc, f"stopping without completing {len(done)} job(s)")
                return Batch()

    def _pause(self, exc: Exception) -> None:
        """Wait out transient server trouble for a short jittered pause."""
        self._warn(exc, "server unavailable, retrying")
        self._stopping.wait(random.uniform(0.05, 0.25))

    def _warn(self, exc: Exception, what: str) -> None:
        """Log transient server trouble (rate-limited)."""
        self._warnings("%r: %s: %s", self.queue, what, exc)

    def _recover(self) -> None:
        try:
            self.queue.recover(self.recover_limit, rounds=_MAX_RECOVER_CALLS)
        except TRANSIENT as exc:
            self._warn(exc, "recovery failed")
        self._next_recovery = monotonic() + self.queue.lease / 2 * random.uniform(0.5, 1.5)

    def _idle(self, next_due_in: float | None) -> None:
        timeout = min(self.idle_wait, self._next_recovery - monotonic())
        if next_due_in is not None:
            timeout = min(timeout, next_due_in)
        try:
            self.queue.wait(max(timeout, 0.0), interrupt=self._interrupt)
        except TRANSIENT as exc:
            self._pause(exc)
