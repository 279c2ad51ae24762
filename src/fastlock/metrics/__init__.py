"""The observability hooks: the events fastlock emits, one surface for every transport (sans-IO).

The places that emit are written once for sync and asyncio (``scripts/calling.py`` and the
script stats, ``locks/base.py`` and the lock shell's source, ``queues/`` and the worker plan), so
both get the same events. Each reads :data:`observer` once: while it is ``None`` (nothing
installed) an event costs that one check, and the paths that are only taken with an observer
(a failure's class, a wait's duration) are not taken at all. ``client.call`` in the Cython
core reads nothing: its calls are counted by the stats it keeps anyway. Script calls that succeed are
not an event each: their durations reach :meth:`Observer.script_calls` in batches, when a
script's stats fold them (every ``ScriptStats.FOLD_AT`` calls, and whenever an exporter reads);
an observer that sets :attr:`Observer.per_call` (a tracer) also gets each call of the clients
made after it was installed (:meth:`Observer.script_call`).

Traces need two hooks around work, context managers: :meth:`Observer.producing` around an
enqueue (its value, a W3C ``traceparent``, travels inside each fresh job id, after ``@``) and
:meth:`Observer.processing` around a worker's handler (given the job, so it finds that context).

An exporter is an :class:`Observer` subclass: ``fastlock.metrics.prometheus`` (extra
``fastlock[prometheus]``) and ``fastlock.metrics.otel`` (extra ``fastlock[otel]``). Labels are
bounded by construction: a script's name, a lock type, a queue's name, an exception class;
never a job id or a digest. The observer is one per process, shared by every thread, task and
client; a forked child keeps its parent's until it installs another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from typing import Any

from ..exceptions import ArgumentTypeError

__all__ = ["Fanout", "Observer", "install", "installed", "observer", "uninstall"]


class Observer:
    """Receives fastlock's events; every method here does nothing, a subclass overrides the
    ones it records. Methods run on the thread (or event loop) of the operation, so they
    must be quick and thread-safe. Durations are seconds; ``lock_type`` is a
    :class:`~fastlock.LockType`'s value; ``queue`` a queue's name."""

    per_call: bool = False
    """True: clients made while this observer is installed report every script call
    (:meth:`script_call`, while :meth:`call_gate` holds), not only batches."""

    def script_call(self, name: str, seconds: float) -> None:
        """One call of ``name`` succeeded after ``seconds`` (only when :attr:`per_call`)."""

    def call_gate(self) -> tuple[Callable[[], Mapping[str, Any]], str] | None:
        """``(current, key)``: :meth:`script_call` is called only while ``current().get(key)``
        is not ``None`` (a tracer: the current span), both C calls so a call outside any trace
        costs no Python frame; ``None``: always called."""
        return None

    def producing(self, queue: str) -> AbstractContextManager[str | None]:
        """Around an enqueue (one job or many): its value is the trace context to carry in
        the fresh ids of these jobs (``None``: none)."""
        return nullcontext()

    def processing(self, queue: str, job: Any) -> AbstractContextManager[object]:
        """Around a worker's handler running ``job`` (a :class:`~fastlock.Job`)."""
        return nullcontext()

    def script_calls(self, name: str, durations: Sequence[float]) -> None:
        """Calls of script ``name`` that succeeded, with their durations (a batch)."""

    def script_failed(self, name: str, seconds: float, error: str) -> None:
        """A call of ``name`` raised the exception class named ``error`` after ``seconds``."""

    def script_reloaded(self, name: str) -> None:
        """``NOSCRIPT``: ``name`` was loaded again (restart, failover, ``SCRIPT FLUSH``)."""

    def busy_waited(self, name: str, seconds: float) -> None:
        """A call of ``name`` slept ``seconds`` while the server ran another script (``BUSY``)."""

    def redirected(self, kind: str) -> None:
        """A cluster redirect was followed: ``kind`` is ``MOVED`` or ``ASK``."""

    def lock_acquired(self, lock_type: str, waited: float) -> None:
        """A lock was taken after waiting ``waited`` (0.0: taken at once)."""

    def lock_conflict(self, lock_type: str) -> None:
        """An acquire that does not wait found the lock held."""

    def lock_timed_out(self, lock_type: str, waited: float) -> None:
        """An acquire waited ``waited`` and did not get the lock."""

    def lock_handed_over(self, lock_type: str) -> None:
        """A waiter was handed the lock by a release, in one step (before its
        :meth:`lock_acquired`)."""

    def lock_lost(self, lock_type: str) -> None:
        """A job finished without holding its lock any more (expired or deleted)."""

    def reconnected(self) -> None:
        """A client's pool opened a connection in place of one it lost (a dropped connection,
        a restart, a failover)."""

    def jobs_enqueued(self, queue: str, count: int) -> None:
        """``count`` jobs were added."""

    def jobs_claimed(self, queue: str, count: int) -> None:
        """``count`` jobs were leased (a claim, or the claim of a complete)."""

    def jobs_waited(self, queue: str, waits: Sequence[float]) -> None:
        """Jobs claimed for their first attempt waited ``waits`` seconds each since they were
        due (their enqueue, plus its delay: the producer's clock; the claim: the server's). Only
        fresh ids carry that time (``fastlock.queues.jobs.due_ms``)."""

    def jobs_completed(self, queue: str, count: int) -> None:
        """``count`` jobs were completed."""

    def job_failed(self, queue: str, retried: bool) -> None:
        """A job was given back: to be retried, or dead-lettered (``retried`` false)."""

    def jobs_recovered(self, queue: str, requeued: int, dead: int) -> None:
        """Expired leases were recovered: ``requeued`` jobs ready again, ``dead`` buried."""

    def job_ran(self, queue: str, seconds: float, error: str | None) -> None:
        """A worker's handler ran a job for ``seconds`` (``error``: the exception class it
        raised, ``JobTimeout`` when it overran ``job_timeout``; ``None``: it succeeded)."""


class Fanout(Observer):
    """Several observers as one (``install(a, b)`` makes one): each event goes to each, in
    order; the trace context an enqueue carries is the first one's that gives one."""

    def __init__(self, *observers: Observer) -> None:
        self.observers = observers
        self._per_call = [each for each in observers if each.per_call]
        self.per_call = bool(self._per_call)

    def call_gate(self) -> tuple[Callable[[], Mapping[str, Any]], str] | None:
        gates = {each.call_gate() for each in self._per_call}
        return gates.pop() if len(gates) == 1 else None  # several: each checks its own

    def script_call(self, name: str, seconds: float) -> None:
        for each in self._per_call:
            each.script_call(name, seconds)

    @contextmanager
    def producing(self, queue: str) -> Iterator[str | None]:
        with ExitStack() as stack:
            carried = [stack.enter_context(each.producing(queue)) for each in self.observers]
            yield next((value for value in carried if value is not None), None)

    @contextmanager
    def processing(self, queue: str, job: Any) -> Iterator[None]:
        with ExitStack() as stack:
            for each in self.observers:
                stack.enter_context(each.processing(queue, job))
            yield


def _forwarding(name: str) -> Callable[..., None]:
    def forward(self: Fanout, *args: Any) -> None:
        for each in self.observers:
            getattr(each, name)(*args)

    forward.__name__ = name
    return forward


for _event in (
    *("script_calls", "script_failed", "script_reloaded", "busy_waited", "redirected"),
    *("lock_acquired", "lock_conflict", "lock_timed_out", "lock_handed_over", "lock_lost", "reconnected"),
    *("jobs_enqueued", "jobs_claimed", "jobs_waited", "jobs_completed", "job_failed", "jobs_recovered"),
    "job_ran",
):
    setattr(Fanout, _event, _forwarding(_event))


observer: Observer | None = None
"""The installed observer, or ``None``: the one thing an emitting place reads."""


def install(*observers: Observer) -> None:
    """Send every event of this process to ``observers`` from now on (replacing any other;
    several: a :class:`Fanout` of them, e.g. Prometheus metrics and OpenTelemetry traces)."""
    global observer
    for each in observers:
        if not isinstance(each, Observer):
            raise ArgumentTypeError(
                f"install() takes fastlock.metrics.Observer objects, not {type(each).__name__}"
            )
    if not observers:
        raise ArgumentTypeError("install() takes at least one observer")
    observer = observers[0] if len(observers) == 1 else Fanout(*observers)


def uninstall() -> None:
    """Stop sending events (the hot paths are back to one ``None`` check)."""
    global observer
    observer = None


def installed() -> Observer | None:
    """The observer events go to now, or ``None``."""
    return observer
