"""The lock shell :class:`AsyncLock`, thin over :class:`~fastlock.locks.base.LockBase`.

Each method builds a call (or takes a plan), runs it on the manager's runner and parses the
reply. acquire and release stay direct calls on the blocking side: its hot path makes no
generator. (The source of both shells: ``aio/lock.py``, see ``docs/architecture.md``.)
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .. import metrics
from ..exceptions import ConnectionError, LockConflictError, LockNotOwnedError
from ..locks.base import LockBase
from ..locks.conflict import AsyncConflict, Conflict
from ..locks.gate import Gate
from ..locks.keys import Scope
from ..locks.replies import acquire_reply, lost_before_release, token_reply
from ..locks.types import QUEUED, Holder, LockInfo, check_job_id
from ..locks.waiting import resend
from ..operations import AsyncRunner, Call, Operation

if True:  # ASYNC
    import asyncio
    import inspect
    import weakref
    from collections.abc import Coroutine

    from .. import _ids
    from ..locks.replies import token

__all__ = ["AsyncLock"]

T = TypeVar("T")

if True:  # ASYNC
    _HELD_KEPT = 1024  # default holders an AsyncLock remembers (for refusing another task's release)
    _task_tags: weakref.WeakKeyDictionary[asyncio.Task[Any], str] = weakref.WeakKeyDictionary()

    def _current_task() -> asyncio.Task[Any] | None:
        try:
            return asyncio.current_task()
        except RuntimeError:  # no running loop: a coroutine made before asyncio.run(...)
            return None

    def _task_tag() -> str:
        """The calling task's own tag (the thread's outside a task, or outside a running loop)."""
        task = _current_task()
        if task is None:
            return _ids.local.tag
        tag = _task_tags.get(task)
        if tag is None:
            tag = _task_tags[task] = _ids.next_id() + "-"
        return tag


class AsyncLock(LockBase[AsyncRunner]):
    """A lock on one digest over a runner (:class:`~fastlock.operations.AsyncRunner`); see
    :class:`~fastlock.locks.base.LockBase` and ``docs/locks.md``.

    The default holder id is this object's in the calling thread, and on asyncio in the *task
    that calls* ``acquire``, ``release`` or ``extend`` (resolved when the method is called, not
    when its coroutine runs: ``asyncio.wait_for(lock.acquire(), 1)``, which runs it in another
    task on Python 3.11, acts for the caller), so tasks sharing the object are distinct
    holders. On asyncio a release without a job id from a task that took nothing through this
    object, while another task holds the lock through it, raises ``LockNotOwnedError`` (hand a
    lock over between tasks with a ``job_id``); conflict strategies receive an
    :class:`~fastlock.locks.conflict.AsyncConflict` and may be coroutine functions (their
    result is then awaited).
    """

    if True:  # ASYNC
        __slots__ = ("_held",)
        _held: dict[str, int]
        """The default holders (of calling tasks) whose acquire through this object succeeded and
        whose release has not been seen; set on first use (the core's ``_lock_new`` leaves it unset)."""
        _conflict_type = AsyncConflict
    else:
        __slots__ = ()
        _conflict_type = Conflict

    if True:  # ASYNC

        def _holder(self, job_id: str | None) -> str:
            if job_id is None:
                return self._job_id or _task_tag() + (self._serial or self._draw_serial())
            return check_job_id(job_id)

    async def _bound(self) -> Scope:
        """Check the namespace's eviction policy (once) and bind the scopes: the main one."""
        manager = self.manager
        if not manager.policy_checked:
            await manager.runner.run(manager.check_eviction_policy())
        return self._bind()

    # --- primitives -------------------------------------------------------------------

    if True:  # ASYNC: the holder resolved at the call, in the calling task

        def acquire(
            self, job_id: str | None = None, *, blocking: bool | None = None, timeout: float | None = None
        ) -> Coroutine[Any, Any, int | None]:
            """:meth:`Lock.acquire <fastlock.Lock.acquire>`, awaited: the fencing token, or ``None``
            (the default holder is the calling task's, whichever task runs the coroutine)."""
            wait, holder = self._wait(blocking, timeout), self._holder(job_id)
            return self._acquire(holder, wait, job_id is None and self._job_id is None)

        def release(self, job_id: str | None = None) -> Coroutine[Any, Any, int | None]:
            """Release what ``job_id`` holds: the fencing token freed, or ``None`` if it held
            nothing. Without a job id, the calling task's holder; if that task took nothing
            through this object while another task holds the lock through it, ``LockNotOwnedError``."""
            return self._released(self._holder(job_id), job_id is None and self._job_id is None)

        def extend(
            self, job_id: str | None = None, ttl: float | None = None
        ) -> Coroutine[Any, Any, int | None]:
            """:meth:`Lock.extend <fastlock.Lock.extend>`, awaited (the calling task's holder)."""
            return self._extended(self._holder(job_id), ttl)

        async def _acquire(self, holder: str, wait: float, default: bool) -> int | None:
            found = token(await self._take(self._main_scope or await self._bound(), holder, wait))
            if default and found is not None:
                held = self._held_by()
                held[holder] = found
                if len(held) > _HELD_KEPT:  # tasks that never released (expired): the oldest go
                    del held[next(iter(held))]
            return found

        async def _released(self, holder: str, default: bool) -> int | None:
            freed = await self._release(self._main_scope or await self._bound(), holder)
            if not default:
                return freed
            held = self._held_by()
            if held.pop(holder, None) is None and freed is None and held:  # this task took nothing here
                others = {h.job_id for h in await self.manager.runner.run(self._holding())} & held.keys()
                for gone in held.keys() - others:  # expired or deleted meanwhile
                    del held[gone]
                if others:
                    raise LockNotOwnedError(
                        f"lock {self.name or self.digest}: this task holds nothing, another task holds it "
                        "through this object (the default holder is the calling task): release it in "
                        "the task that acquired it, or hand it over with a job_id (client.lock(..., "
                        "job_id=...), or release(job_id) with the holder's lock.job_id)"
                    )
            return freed

        async def _extended(self, holder: str, ttl: float | None) -> int | None:
            self._main_scope or await self._bound()
            step = self._extend_call(holder, ttl)
            return token_reply("lock_extend", await self._call("lock_extend", step.keys, step.args))

        def _held_by(self) -> dict[str, int]:
            try:
                return self._held
            except AttributeError:
                held = self._held = {}  # type: ignore[misc]  # (mypy reads no __slots__ in an if)
                return held

    else:  # the holder is the thread's (LockBase._holder); the hot path in direct calls

        def acquire(
            self, job_id: str | None = None, *, blocking: bool | None = None, timeout: float | None = None
        ) -> int | None:
            """Take the lock for ``job_id`` (default: this object's): its fencing token, or ``None``.

            Waits up to ``timeout`` seconds (default: the lock's) for a release, woken by it;
            ``blocking=False`` never waits. A job that already holds the lock gets its token back.
            """
            wait = self.timeout if blocking is None and timeout is None else self._wait(blocking, timeout)
            if job_id is None or job_id.__class__ is not str or not job_id:  # a given str passes
                job_id = self._holder(job_id)
            reply = self._take(self._main_scope or self._bound(), job_id, wait)
            return reply if type(reply) is int else None

        def release(self, job_id: str | None = None) -> int | None:
            """Release what ``job_id`` holds: the fencing token freed, or ``None`` if it held nothing."""
            if job_id is None or job_id.__class__ is not str or not job_id:  # a given str passes
                job_id = self._holder(job_id)
            return self._release(self._main_scope or self._bound(), job_id)

        def extend(self, job_id: str | None = None, ttl: float | None = None) -> int | None:
            """Reset the expiry of ``job_id``'s slot to ``ttl`` seconds (default: the lock's):
            its fencing token, or ``None`` when it no longer holds the lock. For
            until_and_while_executing, whichever scope the job holds (the runtime lock while
            it runs): that token."""
            self._main_scope or self._bound()
            step = self._extend_call(job_id, ttl)
            return token_reply("lock_extend", self._call("lock_extend", step.keys, step.args))

    async def locked(self) -> bool:
        """True when anyone holds the lock (for until_and_while_executing: either scope)."""
        self._main_scope or await self._bound()
        return bool(await self.manager.runner.execute(*self._locked_command().args))

    async def holders(self) -> list[Holder]:
        """Who holds the lock now, with their tokens and time left (for
        until_and_while_executing: the queue-time holders, then the runtime ones)."""
        self._main_scope or await self._bound()
        return await self.manager.runner.run(self._holding())

    async def info(self) -> LockInfo:
        """Settings and holders (queue-time and runtime scopes)."""
        self._main_scope or await self._bound()
        return await self.manager.runner.run(self._informing())

    async def __aenter__(self) -> int:
        token = await self.acquire()
        if token is None:
            raise LockConflictError(f"lock {self.digest} not acquired (waited {self.timeout} s)")
        return token

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if await self.release() is None and exc_type is None:
            raise LockNotOwnedError(f"lock {self.digest} was lost before release (expired or deleted)")

    # --- job helpers ------------------------------------------------------------------

    async def enqueue(self, job_id: str, *, job: Any = None) -> bool:
        """Producer side: take the queue-time lock the type asks for. True means enqueue the
        job; on a conflict the enqueue-side strategy runs (a token it returns counts as taken)."""
        if job_id.__class__ is not str or not job_id:  # a given str passes without a call
            check_job_id(job_id)
        if not self._spec.queued:
            return True
        queue = self._queue if self._main_scope else await self._bound()
        reply = await self._take(queue, job_id, 0.0)
        return type(reply) is int or type(await self._resolved("enqueue", queue, job_id, reply, job)) is int

    async def execute(self, job_id: str, fn: Callable[[], Awaitable[T]], *, job: Any = None) -> T | Any:
        """Worker side: run ``fn`` under the type's semantics and return its result, or the
        execute-side strategy's result when the runtime lock could not be taken.

        until_executing releases before running and re-locks if ``fn`` raises;
        until_executed releases after success and keeps the lock if ``fn`` raises;
        until_expired never releases; the while_executing types hold the runtime lock
        around ``fn`` (waiting up to ``timeout``); until_and_while_executing swaps the
        queue-time lock for the runtime lock in one script and re-locks if ``fn`` raises
        (the type's :attr:`~fastlock.locks.types.LockSpec.execution`). On asyncio ``fn`` is
        awaited (cancelling it counts as raising).
        """
        if job_id.__class__ is not str or not job_id:  # a given str passes without a call
            check_job_id(job_id)
        self._main_scope or await self._bound()
        steps = self._spec.execution
        if steps.release_first:
            await self._release(self._queue, job_id)
        if steps.runtime:
            reply = await self._take(self._runtime, job_id, self.timeout, steps.handoff)
            if type(reply) is not int:
                return await self._resolved("execute", self._runtime, job_id, reply, job)
        try:
            result = await fn()
        except BaseException:
            if steps.relock:
                await self._take(self._queue, job_id, 0.0)
            raise
        finally:
            if steps.runtime:
                await self._release(self._runtime, job_id)
        if steps.release_after and await self._release(self._queue, job_id) is None:
            lost_before_release(job_id, self.digest, self.type)
        return result

    # --- internals --------------------------------------------------------------------

    async def _take(
        self, scope: Scope, job_id: str, wait: float, handoff: bool = False, turn: float = 0.0
    ) -> Any:
        """The fencing token, or the last conflict reply ``[ms to expiry, holders...]``: one
        direct call, re-sent once if its reply was lost; with ``wait`` > 0 and a conflict, the
        wait operation, woken through the client's listener (if it has one). A waiter takes its
        turn on the manager's gate (:meth:`_in_turn`; ``turn``: when it began to wait for it)
        first if this client has turns on the lock, else once its attempt finds the lock held (a
        free lock costs no turn); one whose listener has waiters on its channel already joins
        them (:meth:`_joined`)."""
        flags, listener, started = self._flags, None, 0.0
        if wait > 0:
            gate = None if turn or handoff else self.manager.gate  # (a turn taken, or none to take)
            if gate is not None and scope.name in gate.turns:  # this client's waiters take turns on it
                return await self._in_turn(gate, scope, job_id, wait)
            started = turn or time.monotonic()
            listener = getattr(self.manager.runner, "listener", None)
            if listener is not None and not handoff:  # (a job's start frees its queue-time lock first)
                channel = listener.channel(scope.wake)
                if listener.joins(channel):
                    return await self._joined(scope, job_id, wait, listener, channel, started)
            flags = self._wait_flags(listener)
        name, keys, args = self._acquire_call(scope, job_id, flags, handoff)
        try:
            reply = await self._call(name, keys, args)
        except ConnectionError as lost:
            reply = await self.manager.runner.run(resend(lost, Call(name, keys, args)))
        if type(reply) is int and reply > 0:  # taken: the common reply, checked without a call
            if metrics.observer is not None:
                metrics.observer.lock_acquired(self._spec.label, 0.0)
            return reply
        reply = acquire_reply(name, reply)
        if wait > 0:
            if gate is not None:  # the first of this client's waiters on the lock: in turn from here
                return await self._in_turn(gate, scope, job_id, max(started + wait - time.monotonic(), 0.0))
            patience = self._patience(started)
            return await self._waited(
                self._waiting(scope, job_id, wait, handoff, listener, reply, None, patience), started
            )
        self._report(reply, None)
        return reply

    async def _in_turn(self, gate: Gate, scope: Scope, job_id: str, wait: float) -> Any:
        """:meth:`_take` in ``job_id``'s turn on the manager's ``gate`` (:mod:`fastlock.locks.gate`):
        waited for in-process, then the acquire, waiting what is left of ``wait``; without a
        turn by then, one last direct attempt. The turn lasts while the lock is held."""
        key, started = scope.name, time.monotonic()
        deadline = started + wait
        signal = gate.enter(key, job_id, self.limit, deadline)
        if signal is None or await self.manager.runner.run(gate.wait(key, signal, deadline)):
            wait = max(deadline - time.monotonic(), 0.0)
        else:  # no turn by the deadline
            wait = 0.0
        try:
            reply = await self._take(scope, job_id, wait, False, started)
        except BaseException:
            gate.leave(key, job_id)
            raise
        if type(reply) is int:
            lease = self._ttl_ms / 1000 if self._ttl_ms > 0 else math.inf
            gate.hold(key, job_id, self.limit, time.monotonic() + lease)
        else:
            gate.leave(key, job_id)
        return reply

    async def _joined(
        self, scope: Scope, job_id: str, wait: float, listener: Any, channel: bytes, started: float
    ) -> Any:
        """A wait on a ``channel`` where this client has waiters: the waiter is entered on the
        ``listener`` first (no I/O) and its first attempt queues it (the release's message cannot
        come before it is entered); the wait operation is built only after a conflict. A failed
        or cancelled attempt leaves as the wait does (its release runs: it may have been queued)."""
        patience = self._patience(started)
        waiter, member, first = self._joining(scope, job_id, listener, patience)
        signal = listener.join(channel, waiter)
        if signal is None:  # the channel went meanwhile (a sync reader's): enter as a new waiter
            waiting = self._waiting(scope, job_id, wait, False, listener, patience=patience)
            return await self._waited(waiting, started)
        try:
            try:
                reply = await self._call(first.name, first.keys, first.args)
            except ConnectionError as lost:  # re-sent without FRESH: the first may have queued it
                again = self._queued_call(scope, job_id, listener, QUEUED, member)
                reply = await self.manager.runner.run(resend(lost, again))
            if type(reply) is not int or reply <= 0:
                reply = acquire_reply(first.name, reply)
        except BaseException:
            listener.leave(channel, signal)
            listener.abandon(self._leave_call(scope, job_id, member))
            raise
        if type(reply) is int:
            listener.leave(channel, signal)
            self._report(reply, started)
            return reply
        joined = (waiter, member, signal)
        waiting = self._waiting(scope, job_id, wait, False, listener, reply, joined, patience)
        return await self._waited(waiting, started)

    async def _waited(self, waiting: Operation[Any], started: float) -> Any:
        """Run the wait operation ``waiting`` (begun at ``started``), its end reported."""
        reply = await self.manager.runner.run(waiting)
        self._report(reply, started)
        return reply

    async def _release(self, scope: Scope, job_id: str) -> int | None:
        try:
            reply = await self._call("lock_release", scope.keys, self.manager.release_args(scope, job_id))
        finally:
            if self.manager.turns and (gate := self.manager.gate) is not None:  # the next local waiter's turn
                gate.leave(scope.name, job_id)
        return reply if type(reply) is int and reply > 0 else token_reply("lock_release", reply)

    async def _resolved(self, side: str, scope: Scope, job_id: str, reply: list[Any], job: Any) -> Any:
        """The side's strategy's result for this conflict (``None`` without one; on asyncio
        awaited if it is awaitable)."""
        found = self._resolve(side, scope, job_id, reply, job)
        result = None if found is None else found[0](found[1])
        if True:  # ASYNC
            return await result if inspect.isawaitable(result) else result
        else:
            return result
