"""The acquire calls of a lock and its waiting acquire, built without I/O: the
:class:`Acquiring` part of :class:`~fastlock.locks.base.LockBase`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _ids, metrics
from ..operations import Call, Operation
from .keys import Scope
from .types import DEQUEUED, FENCING, FRESH, LISTENS, QUEUED, WAITED, WAITING, LockSpec
from .waiting import WaitPlan, attempt, wait_for

if TYPE_CHECKING:
    from .namespace import Namespace

__all__ = ["Acquiring"]


class Acquiring:
    """What a lock sends to take a slot: a direct attempt, a listening waiter's queued one, and
    the wait operation (:func:`~fastlock.locks.waiting.wait_for`) that goes on after a conflict."""

    __slots__ = ()
    manager: Namespace[Any]
    _flags: int
    _ttl_ms: int
    _spec: LockSpec
    _queue: Scope

    def _acquire_call(self, scope: Scope, job_id: str, flags: int, handoff: bool) -> tuple[str, Any, Any]:
        """The acquire script call for ``job_id`` in ``scope``: (name, keys, args). With
        ``handoff``, ``lock_handoff`` releases the job's queue-time slot in the same script.
        ``max_history`` is the last argument, left out when 0 (the scripts' default)."""
        history = self.manager.max_history
        if handoff:
            queue = self._queue
            keys = (*queue.keys, *scope.keys[3:])
            args = (job_id, queue.name, scope.name, self._ttl_ms, flags, *((history,) if history else ()))
            return "lock_handoff", keys, args
        if history:
            return "lock_acquire", scope.keys, (job_id, scope.name, self._ttl_ms, flags, history)
        return "lock_acquire", scope.keys, (job_id, scope.name, self._ttl_ms, flags)

    def _attempt(self, scope: Scope, job_id: str, handoff: bool = False) -> Operation[Any]:
        """One acquire (re-sent once if its reply was lost): the token or the conflict reply."""
        return attempt(Call(*self._acquire_call(scope, job_id, self._flags, handoff)))

    def _wait_flags(self, listener: Any) -> int:
        """A waiting acquire's first flags (``LISTENS`` tells the scripts which waiter it is)."""
        return self._flags | WAITING | (0 if listener is None else LISTENS)

    def _patience(self, started: float) -> float:
        """What is left of the manager's patience for a wait begun at ``started``
        (``time.monotonic``; a wait for a local turn counts: :mod:`fastlock.locks.gate`)."""
        return max(self.manager.patience - (time.monotonic() - started), 0.0)

    def _joining(self, scope: Scope, job_id: str, listener: Any, patience: float) -> tuple[str, str, Call]:
        """A new listening wait of ``job_id`` in ``scope`` (:meth:`_new_wait`: its id and queue
        member) and its first attempt, which queues it (``FRESH``: the member is not queued
        yet, so taking a slot dequeues nothing)."""
        waiter, member = self._new_wait(job_id, listener, patience)
        return waiter, member, self._queued_call(scope, job_id, listener, QUEUED | FRESH, member)

    def _new_wait(self, job_id: str, listener: Any, patience: float) -> tuple[str, str]:
        """A new listening wait's id (the listener's mark, ``s`` for a shard channel, then a
        fresh id: a late message reaches no later wait, then the job) and its queue member
        (``shared/_lock_wake.lua``), with the ``patience`` it grants running callers."""
        waiter = f"{listener.wait_mark}{_ids.next_id()}:{job_id}"
        fenced = 1 if self._flags & FENCING else 0
        return waiter, f"{listener.db}:{self._ttl_ms}:{fenced}:{round(patience * 1000)}:{waiter}"

    def _queued_call(self, scope: Scope, job_id: str, listener: Any, flag: int, member: str) -> Call:
        """A listening waiter's attempt with queue ``flag`` (``QUEUED``, ``DEQUEUED``) for its
        queue ``member``."""
        flags = self._wait_flags(listener) | WAITED | flag
        args = (job_id, scope.name, self._ttl_ms, flags, self.manager.max_history, member)
        return Call("lock_acquire", scope.keys, args)

    def _waiting(
        self,
        scope: Scope,
        job_id: str,
        wait: float,
        handoff: bool = False,
        listener: Any = None,
        conflict: list[Any] | None = None,
        joined: tuple[str, str, Any] | None = None,
        patience: float | None = None,
    ) -> Operation[Any]:
        """An acquire waiting up to ``wait`` s for releases (woken by ``listener``, if given):
        the token or the last conflict reply. Given the ``conflict`` reply of its first attempt
        (flags :meth:`_wait_flags`, sent by the caller), it goes on from there; ``joined``: that
        attempt was a listening wait's first, queued one, ``(waiter, member, signal)``
        (:meth:`_joining`, and the signal the waiter was entered with); ``patience``: the
        waiter's (:meth:`_patience`; default the manager's)."""
        flags = self._wait_flags(listener)
        first = Call(*self._acquire_call(scope, job_id, flags, handoff))
        if listener is None:
            again = Call(*self._acquire_call(scope, job_id, flags | WAITED, False))
            return wait_for(WaitPlan(first, again, scope.wake), wait, conflict=conflict)
        if patience is None:
            patience = self.manager.patience
        if joined is None:
            waiter, member = self._new_wait(job_id, listener, patience)
            signal = None
        else:
            waiter, member, signal = joined
        plan = WaitPlan(
            first,
            self._queued_call(scope, job_id, listener, QUEUED, member),
            scope.wake,
            last=self._queued_call(scope, job_id, listener, DEQUEUED, member),
            job=waiter,
            leave=self._leave_call(scope, job_id, member),
            handed=None if (observer := metrics.observer) is None else self._handed(observer),
            patience=patience,
        )
        return wait_for(plan, wait, listener, conflict=conflict, signal=signal)

    def _leave_call(self, scope: Scope, job_id: str, member: str) -> Call:
        """The release a listening waiter queued as ``member`` runs when it leaves cancelled or
        failed (it may have been queued, or handed the lock): it leaves the queue first."""
        history = self.manager.max_history
        release = self.manager.release_args(scope, job_id)
        return Call("lock_release", scope.keys, (*release, *(() if history else (0,)), member))

    def _handed(self, observer: metrics.Observer) -> Callable[[], None]:
        """What tells ``observer`` that a release handed this lock over to the waiter."""
        return lambda: observer.lock_handed_over(self._spec.label)
