"""A worker over a :class:`~fastlock.queues.queue.Queue` in threads, and the process's lease heartbeat.

:class:`Worker` claims jobs in batches and runs a handler on each. It completes each
successful job before it starts the next (the last one's completion claims the next batch
in the same round trip), so a worker stalled past its leases re-runs at most the job it was
in; it fails the others (retried with backoff, dead-lettered once their attempts are used
up). Leases are renewed by one
:class:`Heartbeat` thread per process, so a handler that blocks its thread keeps its
leases. Every worker runs :meth:`Queue.recover` about every half lease, with jitter. An
idle worker blocks on the queue's wake marker (``BZPOPMIN``) until a producer signals
work, the next delayed job is due, or ``idle_wait`` passes: it does not poll.

Transport only lives here (the policy is :class:`~fastlock.queues.policy.WorkerBase`'s):
``concurrency`` loops as threads sharing the process's heartbeat; ``job_timeout`` as a
handler thread the loop stops waiting for (Python cannot kill a thread: a handler past its
timeout is *abandoned*, left running in its daemon thread while its job is failed and the
loop moves on; its ``job.lost`` is set so that it can notice); SIGTERM/SIGINT handlers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any

from ..operations import run_plan
from .jobs import Job
from .leases import extend
from .outcomes import DeadLetter, JobTimeout, Retry
from .policy import TRANSIENT, Act, Leases, Plan, Tally, WorkerBase
from .queue import Queue
from .signals import SIGNALS, installed

__all__ = ["TRANSIENT", "DeadLetter", "Heartbeat", "JobTimeout", "Retry", "Worker", "heartbeat"]


class Heartbeat:
    """Renews the leases of every job this process holds, from one daemon thread.

    Each queue's held jobs are extended together, one call per queue every
    ``queue.lease / 3`` seconds; a lost lease sets ``job.lost`` and drops the job
    (the bookkeeping: :class:`~fastlock.queues.policy.Leases`).
    """

    def __init__(self) -> None:
        self._leases = Leases()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def hold(self, queue: Queue, jobs: Sequence[Job]) -> None:
        """Start renewing the leases of ``jobs``."""
        with self._cond:
            self._leases.hold(queue, jobs)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fastlock-heartbeat", daemon=True)
                self._thread.start()
            self._cond.notify()

    def release(self, queue: Queue, jobs: Sequence[Job]) -> None:
        """Stop renewing the leases of ``jobs`` (completed, failed or lost)."""
        with self._cond:
            self._leases.release(queue, jobs)

    def _next_round(self) -> list[tuple[Queue, list[Job]]]:
        with self._cond:
            while True:
                due, wait = self._leases.due()
                if due:
                    return due
                self._cond.wait(wait)

    def _run(self) -> None:
        while True:
            run_plan(self._leases.renewing(self._next_round(), self._cond), extend)


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


class Worker(WorkerBase[Queue]):
    """Run ``handler(job)`` on the jobs of ``queue`` in ``concurrency`` threads, ``batch``
    claimed at a time by each.

    A handler that returns completes its job at once; one that raises fails it
    (``queue.fail``: retried after the queue's backoff or dead-lettered with its traceback;
    :class:`Retry` picks the delay, :class:`DeadLetter` buries the job now). Before
    committing an effect, a handler can ask ``queue.holds(job)`` (one round trip, fenced by
    the token); ``job.lost`` is only the heartbeat's last view. A job cancelled while it runs
    (:meth:`Queue.cancel`) is ended, neither failed nor completed, once the handler stops:
    it checks ``job.cancelled`` or ``job.raise_if_cancelled()``. ``job_timeout``: seconds a
    handler may run before its job is failed with :class:`JobTimeout` (the handler is then
    abandoned in its thread, see the module docstring). ``burst``: return once nothing is
    ready nor due within ``idle_wait``. Hooks: ``before(job)`` (raising fails the job),
    ``after(job)`` on success, ``on_retry(job, exc)``, ``on_failure(job, exc)`` once dead.
    ``idle_wait`` bounds one blocking wait when the queue is empty. The loop is the plan of
    :class:`~fastlock.queues.policy.WorkerBase`, driven here with blocking calls.
    """

    _queue_type = Queue
    _flag_type = threading.Event
    _stopping: threading.Event

    def stop(self) -> None:
        """Ask :meth:`run` to return once each loop finished its current job (the unstarted
        rest of its batch is handed back, nothing more is claimed); idle loops are woken at
        once. A stopped worker stays stopped."""
        self._drive(self._waking())

    def run(
        self, *, max_jobs: int | None = None, schedules: bool = False, install_signals: bool = False
    ) -> int:
        """Process jobs until :meth:`stop` is called, ``max_jobs`` jobs were handled (by all
        loops together) or, in ``burst`` mode, the queue is empty; returns the number of jobs
        handled (jobs skipped as lost or handed back are not counted). ``install_signals``
        (main thread only): SIGTERM and SIGINT call :meth:`stop`, and the previous handlers
        are back at once, so a second signal acts as it would have (SIGINT raises
        KeyboardInterrupt, SIGTERM ends the process); restored when run returns. ``schedules``:
        also be a scheduler of the queue's periodic jobs (:meth:`Queue.run_schedules`, in a
        thread) while it runs; its error is raised."""
        tally = self._tally(max_jobs, threading.Lock())
        with installed(install_signals, self._arm), self._scheduling(schedules):
            if self.concurrency == 1:
                self._drive(self._looping(tally, heartbeat(), self._interrupts[0]))
            else:
                self._run_threads(tally)
        return tally.handled

    @contextlib.contextmanager
    def _scheduling(self, schedules: bool) -> Iterator[None]:
        """A scheduler thread while the block runs (when ``schedules``); its error is raised."""
        if not schedules:
            yield
            return
        done, errors, wake = threading.Event(), [], self._interrupts[0] + ":schedules"

        def schedule() -> None:
            try:
                self.queue.run_schedules(stop=done.is_set, interrupt=wake)
            except BaseException as exc:  # noqa: BLE001 - raised once the loops return
                errors.append(exc)

        thread = threading.Thread(target=schedule, name="fastlock-scheduler", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            self.queue.interrupt(wake)
            thread.join()
        if errors:
            raise errors[0]

    def _arm(self) -> Callable[[], None]:
        """SIGTERM and SIGINT call :meth:`stop`; what puts the previous handlers back (at the
        first signal, or when run returns)."""
        previous = {sig: signal.getsignal(sig) for sig in SIGNALS}

        def disarm() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        def graceful(signum: int, frame: FrameType | None) -> None:
            disarm()
            self._stopping.set()  # the interrupts are sent from a thread: never I/O in a handler
            threading.Thread(target=self.stop, name="fastlock-stop", daemon=True).start()

        for sig in SIGNALS:
            signal.signal(sig, graceful)
        return disarm

    def _run_threads(self, tally: Tally) -> None:
        """Each loop in its thread; the first error of one stops the others and is raised."""
        errors: list[BaseException] = []

        def loop(key: str) -> None:
            try:
                self._drive(self._looping(tally, heartbeat(), key))
            except BaseException as exc:  # noqa: BLE001 - raised by run() once every loop returned
                errors.append(exc)
                self.stop()

        threads = [
            threading.Thread(target=loop, args=(key,), name=f"fastlock-worker-{i}", daemon=True)
            for i, key in enumerate(self._interrupts)
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                thread.join()
        except BaseException:
            self.stop()
            raise
        if errors:
            raise errors[0]

    def _drive(self, plan: Plan) -> None:
        """Run the plan: each act's result sent in, its ``Exception`` thrown in; anything
        else (KeyboardInterrupt, ...) closes it."""
        run_plan(plan, self._perform)

    def _perform(self, act: Act) -> Any:
        if act.name == "handle":
            timeout = act.kwargs["timeout"] if act.kwargs else None
            return (
                self.handler(*act.args)
                if timeout is None
                else _call_within(self.handler, act.args[0], timeout)
            )
        if act.name == "call":
            return act.args[0](*act.args[1:])
        if act.name == "pause":
            return self._stopping.wait(*act.args)
        return getattr(self.queue, act.name)(*act.args, **(act.kwargs or {}))


def _call_within(handler: Callable[[Job], object], job: Job, timeout: float) -> object:
    """``handler(job)`` in a daemon thread, waited for ``timeout`` seconds: its result or
    exception, or :class:`JobTimeout` (the thread is left to finish on its own)."""
    outcome: list[tuple[bool, Any]] = []
    finished = threading.Event()

    def target() -> None:
        try:
            outcome.append((True, handler(job)))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting loop
            outcome.append((False, exc))
        finally:
            finished.set()

    threading.Thread(target=target, name=f"fastlock-job-{job.id}", daemon=True).start()
    if not finished.wait(timeout):
        raise JobTimeout(f"job {job.id} ran past its {timeout} s timeout (its handler was abandoned)")
    ok, value = outcome[0]
    if ok:
        return value
    raise value
