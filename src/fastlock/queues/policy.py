"""The worker's policy, written once for every transport (sans-IO: no socket, thread or sleep).

:class:`WorkerBase` holds a worker's options and its loop as a *plan*: a generator yielding
:class:`Act` requests (a queue method to call, the handler or a hook to run, a pause) and
receiving their results, or their ``Exception`` thrown in; :class:`~fastlock.queues.worker.Worker`
drives it with blocking calls, :class:`~fastlock.aio.AsyncWorker` awaits the same acts, one
plan per loop (the stop too: :meth:`WorkerBase._waking`). The plan decides what happens: batch
completion (each success completed before the next job starts, the last one with the next
claim), renewal of a slow batch, failures (``queue.fail``: retried with backoff or
:class:`Retry`'s delay, dead-lettered with a traceback or :class:`DeadLetter`'s reason), a job
past ``job_timeout`` (:class:`JobTimeout`, from the transport), a cancelled job (ended), the
hooks, the graceful stop (the unstarted rest of a batch handed back at once, ``queue.release``),
burst runs, which errors are :data:`TRANSIENT` (waited out with a jittered pause, warned about
rate-limited, one line when the server is back), recovery about every half lease, the idle
wait; each handler's run time goes to the metrics observer (``timed``)."""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable, Generator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from time import monotonic
from typing import Any, Generic, NamedTuple, Protocol, TypedDict, TypeVar

from ..exceptions import ArgumentTypeError, LeaseLost
from ..protocol.arguments import duration_ms
from .base import MAX_BATCH, MAX_COUNT, QueueBase, checked_int
from .jobs import Batch, Job
from .leases import TRANSIENT, Leases, Warnings
from .outcomes import DeadLetter, JobTimeout, Retry, error_text, timed

__all__ = [
    "WorkerOptions",
    "MAX_RECOVER_CALLS",
    "TRANSIENT",
    "Act",
    "DeadLetter",
    "JobTimeout",
    "Leases",
    "Retry",
    "Tally",
    "Warnings",
    "WorkerBase",
    "error_text",
]

log = logging.getLogger("fastlock.worker")

Q = TypeVar("Q", bound=QueueBase[Any])
Hook = Callable[..., object]

MAX_RECOVER_CALLS = 10  # recover calls per recovery (each of at most recover_limit jobs)
MAX_CONCURRENCY = 10_000


class Act(NamedTuple):
    """A worker plan's request: ``name`` is a queue method (``claim``, ``complete``,
    ``extend``, ``fail``, ``release``, ``recover``, ``wait``, ``interrupt``) called with ``args`` and
    ``kwargs``; ``"handle"`` (the handler on ``args[0]``, for at most ``kwargs["timeout"]``
    seconds: past it the transport raises :class:`JobTimeout`); ``"call"`` (a hook:
    ``args[0](*args[1:])``, awaited if it returns an awaitable); or ``"pause"`` (wait
    ``args[0]`` seconds, or less if the worker is stopped)."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] | None = None


class _Flag(Protocol):
    def is_set(self) -> bool: ...
    def set(self) -> None: ...


class _Held(Protocol):
    def hold(self, queue: Any, jobs: list[Job]) -> None: ...
    def release(self, queue: Any, jobs: list[Job]) -> None: ...


@dataclass
class Tally:
    """One run's count of handled jobs and what it may still claim (``None``: no limit),
    shared by its loops; ``lock`` guards both when the loops are threads."""

    handled: int = 0
    budget: int | None = None
    lock: AbstractContextManager[Any] = field(default_factory=nullcontext)

    def take(self, most: int) -> int:
        """Reserve up to ``most`` jobs of the budget."""
        with self.lock:
            if self.budget is None:
                return most
            count = min(most, self.budget)
            self.budget -= count
            return count

    def give(self, count: int) -> None:
        """Give back ``count`` reserved jobs that were not handled."""
        if count and self.budget is not None:
            with self.lock:
                self.budget += count

    def count(self) -> None:
        with self.lock:
            self.handled += 1

    def open(self) -> bool:
        return self.budget is None or self.budget > 0


@dataclass
class _Loop:
    """One loop's state: its interrupt key; when its batch's leases were last set."""

    interrupt: str
    renewed: float = field(default=0.0)


Plan = Generator[Act, Any, None]


class WorkerOptions(TypedDict, total=False):
    """The options of both workers (see :class:`WorkerBase`), typed for ``**options``."""

    concurrency: int
    batch: int
    idle_wait: float
    recover_limit: int
    job_timeout: float | None
    burst: bool
    before: Hook | None
    after: Hook | None
    on_failure: Hook | None
    on_retry: Hook | None


class WorkerBase(Generic[Q]):
    """A worker's options and loop (see the module docstring); one interrupt key is made
    per concurrent loop. A transport's worker names its queue class and its stop flag's."""

    _queue_type: type[QueueBase[Any]]
    _flag_type: Callable[[], _Flag]

    def __init__(
        self,
        queue: Q,
        handler: Callable[[Job], object],
        *,
        concurrency: int = 1,
        batch: int = 10,
        idle_wait: float = 5.0,
        recover_limit: int = 1000,
        job_timeout: float | None = None,
        burst: bool = False,
        before: Hook | None = None,
        after: Hook | None = None,
        on_failure: Hook | None = None,
        on_retry: Hook | None = None,
        clock: Callable[[], float] = monotonic,
    ) -> None:
        if not isinstance(queue, self._queue_type) or not callable(handler):
            raise ArgumentTypeError(f"{type(self).__name__} takes a {self._queue_type.__name__}, a callable")
        hooks = {"before": before, "after": after, "on_failure": on_failure, "on_retry": on_retry}
        for name, hook in hooks.items():
            if hook is not None and not callable(hook):
                raise ArgumentTypeError(f"{name} must be callable, not {type(hook).__qualname__!r}")
        if not isinstance(burst, bool):
            raise ArgumentTypeError("burst must be a bool")
        self.concurrency = checked_int(concurrency, "concurrency", 1, MAX_CONCURRENCY)
        self.batch = checked_int(batch, "batch", 1, MAX_BATCH)
        self.idle_wait = duration_ms(idle_wait, "idle_wait", minimum_ms=0) / 1000
        self.recover_limit = checked_int(recover_limit, "recover_limit", 1, MAX_BATCH)
        self.job_timeout = None if job_timeout is None else duration_ms(job_timeout, "job_timeout") / 1000
        self.burst = burst
        self._timeout = None if self.job_timeout is None else {"timeout": self.job_timeout}
        self.queue = queue
        self.handler = handler
        self.before, self.after, self.on_failure, self.on_retry = before, after, on_failure, on_retry
        self._clock = clock
        self._next_recovery = 0.0
        self._warnings = Warnings(clock)
        stop = f"{queue.prefix}stop:{os.urandom(8).hex()}"
        self._interrupts = [stop] if concurrency == 1 else [f"{stop}:{i}" for i in range(concurrency)]
        self._stopping = self._flag_type()

    def _tally(self, max_jobs: int | None, lock: AbstractContextManager[Any] | None = None) -> Tally:
        if max_jobs is not None:
            checked_int(max_jobs, "max_jobs", 0, MAX_COUNT)
        return Tally(budget=max_jobs, lock=lock or nullcontext())

    def _looping(self, tally: Tally, leases: _Held, interrupt: str) -> Plan:
        """One loop until the worker stops, the run's budget is spent, or (``burst``) the
        queue has nothing ready and nothing due within ``idle_wait``."""
        loop = _Loop(interrupt)
        jobs: Batch | None = Batch()
        while not self._stopping.is_set() and (jobs or tally.open()):
            if self._clock() >= self._next_recovery:
                yield from self._recover()
            if not jobs:
                jobs = yield from self._claim(loop, tally)
                if jobs is None:  # server trouble, waited out
                    continue
                if not jobs:
                    due = jobs.next_due_in
                    if self.burst and (jobs.paused or due is None or due > self.idle_wait):
                        return
                    yield from self._idle(loop, due, jobs.paused)  # paused: a nap that resume ends
                    continue
            held = list(jobs)
            leases.hold(self.queue, held)
            try:
                last = yield from self._work(loop, tally, leases, held)
                jobs = yield from self._complete(loop, tally, last, claim=True)
            finally:
                leases.release(self.queue, held)

    def _work(
        self, loop: _Loop, tally: Tally, leases: _Held, jobs: list[Job]
    ) -> Generator[Act, Any, list[Job]]:
        """Run the handler on each job, completing each success before the next job starts;
        returns the last job if it succeeded (for the caller to complete with the next
        claim). Once half a lease has passed since the leases were last set (slow jobs, or a
        stall), the rest are renewed in one call first, and lost ones skipped. A stopping
        worker hands the unstarted rest back at once."""
        done: list[Job] = []
        for index, job in enumerate(jobs):
            if done:
                yield from self._complete(loop, tally, done, claim=False)
                leases.release(self.queue, done)
                done = []
            if self._stopping.is_set():
                yield from self._hand_back(tally, jobs[index:])
                break
            if self._clock() - loop.renewed > self.queue.lease / 2:
                yield from self._renew(loop, jobs[index:])
            if job.lost:
                tally.give(1)  # skipped, not handled: may be claimed again
                continue
            tally.count()
            if (yield from self._handle(job, leases)):
                done = [job]
        return done

    def _waking(self) -> Plan:
        """:meth:`stop`: set the flag, then wake every loop (a failed interrupt is logged)."""
        self._stopping.set()
        for key in self._interrupts:
            try:
                yield Act("interrupt", (key,))
            except TRANSIENT as exc:
                self._warn(exc, "could not wake the worker to stop it")

    def _hand_back(self, tally: Tally, jobs: list[Job]) -> Generator[Act, Any, None]:
        """Give the unstarted jobs back to ready, their attempts unspent."""
        tally.give(len(jobs))
        mine = [job for job in jobs if not job.lost]
        if not mine:
            return
        try:
            yield Act("release", (mine,))
            log.info("%r: stopping: handed back %d unstarted job(s)", self.queue, len(mine))
        except TRANSIENT as exc:
            self._warn(exc, f"could not hand back {len(mine)} job(s) (their leases will expire)")

    def _handle(self, job: Job, leases: _Held) -> Generator[Act, Any, bool]:
        """``before``, the handler (for at most ``job_timeout``), ``after``; True on success.
        A failure stops the job's renewal and fails it; a cancelled job is neither failed nor completed."""
        try:
            if self.before is not None:
                yield Act("call", (self.before, job))
            yield from timed(self.queue, self._clock, job, Act("handle", (job,), self._timeout))
        except Exception as exc:  # noqa: BLE001 - any handler error fails the job, the loop goes on
            leases.release(self.queue, [job])
            if not job.cancelled:
                yield from self._fail(job, exc)
            return False
        if self.after is not None and not job.cancelled:
            yield from self._hook(self.after, job)
        return not job.cancelled

    def _fail(self, job: Job, exc: Exception) -> Generator[Act, Any, None]:
        """Fail ``job``: retried (the backoff, or :class:`Retry`'s delay) or dead-lettered
        (attempts used up, or :class:`DeadLetter`); then ``on_retry`` or ``on_failure``."""
        retry_in, dead = None, False
        if isinstance(exc, Retry):
            retry_in, text = exc.in_, error_text(exc)
            log.info("%r: job %s asked for a retry (in %s s): %s", self.queue, job.id, exc.in_, exc)
        elif isinstance(exc, DeadLetter):
            dead, text = True, exc.reason
            log.warning("%r: job %s sent to the dead letters: %s", self.queue, job.id, exc.reason)
        else:
            text = error_text(exc)
            log.warning("%r: job %s failed on attempt %d: %r", self.queue, job.id, job.attempt, exc)
        try:
            retried = yield Act("fail", (job, text), {"retry_in": retry_in, "dead": dead})
        except LeaseLost:
            log.warning("%r: job %s failed after its lease was lost", self.queue, job.id)
            return
        except TRANSIENT as error:
            self._warn(error, f"could not fail job {job.id} (its lease will expire)")
            return
        finally:
            if isinstance(exc, JobTimeout):
                job.lost = True  # no longer the abandoned handler's job
        hook = self.on_retry if retried else self.on_failure
        if hook is not None:
            yield from self._hook(hook, job, exc)

    def _hook(self, hook: Hook, *args: object) -> Generator[Act, Any, None]:
        try:
            yield Act("call", (hook, *args))
        except Exception:
            log.exception("%r: hook %r failed", self.queue, hook)

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
        return 0 if self._stopping.is_set() else tally.take(self.batch)

    def _claim(self, loop: _Loop, tally: Tally) -> Generator[Act, Any, Batch | None]:
        """The next batch (empty: nothing ready); None after server trouble (waited out)."""
        count = self._reserve(tally)
        if count == 0:
            return Batch()
        loop.renewed = self._clock()
        try:
            jobs: Batch = yield Act("claim", (count,))
        except TRANSIENT as exc:
            tally.give(count)
            yield from self._pause(exc)
            return None
        self._warnings.recovered(self.queue)
        tally.give(count - len(jobs))
        return jobs

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
                jobs: Batch = yield Act("complete", (done,), {"claim": count})
            except LeaseLost as exc:
                log.warning("%r: lease lost before completing %s", self.queue, [job.id for job in exc.jobs])
                tally.give(count)
                return Batch()
            except TRANSIENT as exc:
                if not self._stopping.is_set():
                    yield from self._pause(exc)
                    continue
                self._warn(exc, f"stopping without completing {len(done)} job(s)")
                tally.give(count)
                return Batch()
            self._warnings.recovered(self.queue)
            tally.give(count - len(jobs))
            return jobs

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

    def _idle(self, loop: _Loop, next_due_in: float | None, paused: bool) -> Generator[Act, Any, None]:
        timeout = min(float("inf") if paused else self.idle_wait, self._next_recovery - self._clock())
        if next_due_in is not None:
            timeout = min(timeout, next_due_in)
        try:
            yield Act("wait", (max(timeout, 0.0),), {"interrupt": loop.interrupt})
        except TRANSIENT as exc:
            yield from self._pause(exc)
