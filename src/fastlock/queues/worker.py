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

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..exceptions import ArgumentTypeError
from .jobs import Job
from .policy import TRANSIENT, Act, Leases, Plan, WorkerBase
from .queue import Queue

__all__ = ["TRANSIENT", "Heartbeat", "Worker", "heartbeat"]


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
            for queue, jobs in self._next_round():
                try:
                    lost = queue.extend(jobs)
                except Exception as exc:  # noqa: BLE001 - the heartbeat must outlive any failed call
                    self._leases.failed(queue, exc)
                    continue
                with self._cond:
                    self._leases.renewed(queue, lost)


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
    """Run ``handler(job)`` on the jobs of ``queue``, ``batch`` claimed at a time.

    A handler that returns completes its job at once; one that raises fails it
    (``queue.fail`` with the exception: retried after the queue's backoff or
    dead-lettered). Before committing an effect, a handler can ask ``queue.holds(job)``
    (one round trip, fenced by the token); ``job.lost`` is only the heartbeat's last view.
    ``idle_wait`` bounds one blocking wait when the queue is empty. The loop is the plan of
    :class:`~fastlock.queues.policy.WorkerBase`, driven here with blocking calls.
    """

    _stopping: threading.Event

    def __init__(
        self,
        queue: Queue,
        handler: Callable[[Job], object],
        *,
        batch: int = 10,
        idle_wait: float = 5.0,
        recover_limit: int = 1000,
    ) -> None:
        if not isinstance(queue, Queue):
            raise ArgumentTypeError("Worker takes a Queue and a callable handler")
        super().__init__(queue, handler, batch=batch, idle_wait=idle_wait, recover_limit=recover_limit)
        self._stopping = threading.Event()

    def stop(self) -> None:
        """Ask :meth:`run` to return after the current batch (nothing more is claimed); an
        idle worker is woken at once. A stopped worker stays stopped."""
        self._stopping.set()
        try:
            self.queue.interrupt(self._interrupts[0])
        except TRANSIENT as exc:
            self._warn(exc, "could not wake the worker to stop it")

    def run(self, *, max_jobs: int | None = None) -> int:
        """Process jobs until :meth:`stop` is called or ``max_jobs`` jobs were handled;
        returns the number of jobs handled (jobs skipped as lost are not counted)."""
        tally = self._tally(max_jobs)
        self._drive(self._looping(tally, heartbeat(), self._interrupts[0]))
        return tally.handled

    def _drive(self, plan: Plan) -> None:
        """Run the plan: each act's result sent in, its ``Exception`` thrown in; anything
        else (KeyboardInterrupt, ...) closes it."""
        result: Any = None
        failure: Exception | None = None
        while True:
            try:
                act = plan.send(result) if failure is None else plan.throw(failure)
            except StopIteration:
                return
            finally:
                failure = None
            try:
                result = self._perform(act)
            except Exception as exc:  # noqa: BLE001 - thrown into the plan, which decides
                failure, result = exc, None
            except BaseException:
                plan.close()
                raise

    def _perform(self, act: Act) -> Any:
        if act.name == "handle":
            return self.handler(*act.args)
        if act.name == "pause":
            return self._stopping.wait(*act.args)
        return getattr(self.queue, act.name)(*act.args, **(act.kwargs or {}))
