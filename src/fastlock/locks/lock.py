"""Unique-job locks: the sidekiq-unique-jobs lock model on Lua scripts, one per transition.

A :class:`Lock` is bound to a digest (see :mod:`fastlock.digest`) and has a type, a ``ttl``
(server-side expiry of each holder's slot), a ``timeout`` (how long a blocking acquire
waits, woken by releases rather than polling) and a ``limit`` (concurrent holders).
Holders are job ids; any process releases a job's lock by ``(name, job_id)``. Every
acquisition gets a fencing token, strictly increasing per lock. Acquire is idempotent
for a job, so re-acquiring after a lost reply is safe (fastlock does it once itself).

The job helpers :meth:`Lock.enqueue` (producer side) and :meth:`Lock.execute` (worker side)
apply the type's semantics; see ``docs/locks.md`` for the table. A single call (acquire
without waiting, release, extend) goes straight to the transport; a wait for a release is
the operation :func:`~fastlock.locks.waiting.wait_for`.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .. import _ids
from ..exceptions import ArgumentError, ConnectionError, LockConflictError, LockError, LockNotOwnedError
from ..operations import Call
from ..protocol.arguments import duration_ms
from .conflict import Conflict, Strategy, StrategySpec, resolve_strategy
from .keys import RUNTIME, Scope
from .namespace import Namespace
from .replies import acquire_reply, holders_reply, token_reply
from .types import MAX_LIMIT, WAITED, WAITING, Holder, LockInfo, LockType, check_job_id, check_limit
from .waiting import resend, wait_for

__all__ = ["Lock"]

T = TypeVar("T")
logger = logging.getLogger("fastlock.lock")

# The members as globals: an attribute of an Enum class is slow to read (its metaclass has
# __getattr__), and the hot paths compare types.
_UNTIL_EXECUTING = LockType.UNTIL_EXECUTING
_UNTIL_EXECUTED = LockType.UNTIL_EXECUTED
_UNTIL_EXPIRED = LockType.UNTIL_EXPIRED
_WHILE_EXECUTING_REJECT = LockType.WHILE_EXECUTING_REJECT
_UNTIL_AND_WHILE_EXECUTING = LockType.UNTIL_AND_WHILE_EXECUTING

_serials = itertools.count()  # numbers Lock objects; with the thread's tag, the default job id


def _token(reply: Any) -> int | None:
    return reply if type(reply) is int else None


class Lock:
    """A lock on one digest; build it with :meth:`Client.lock <fastlock.Client.lock>` or
    :meth:`LockManager.lock <fastlock.LockManager.lock>`.

    Every object acting on one digest must use the same ``type`` and ``limit`` (they are
    part of the job's definition, as in sidekiq-unique-jobs). ``job_id`` is the holder id
    the primitives use when called without one: if omitted, an id unique to this object
    *and the calling thread and process*, so threads sharing the object (and processes
    forked after it was built) are distinct holders; a given ``job_id`` is one holder
    wherever it is used.
    """

    __slots__ = (
        "_call",
        "_flags",
        "_job_id",
        "_main_scope",
        "_queue_scope",
        "_queued",
        "_runtime_scope",
        "_serial",
        "_strategies",
        "_ttl_ms",
        "digest",
        "limit",
        "manager",
        "name",
        "timeout",
        "ttl",
        "type",
    )

    def __init__(
        self,
        manager: Namespace,
        digest: str,
        *,
        name: str | None = None,
        type: str | LockType = LockType.UNTIL_EXECUTED,  # noqa: A002 - the public keyword is type=
        ttl: float | None = None,
        timeout: float = 0.0,
        limit: int = 1,
        job_id: str | None = None,
        on_conflict: StrategySpec | Mapping[str, StrategySpec] = None,
    ) -> None:
        kind = self.type = type if isinstance(type, LockType) else LockType.parse(type)
        ttl_ms = 0 if ttl is None else duration_ms(ttl, "ttl")
        if kind is _UNTIL_EXPIRED and ttl is None:
            raise ArgumentError("an until_expired lock needs a ttl")
        duration_ms(timeout, "timeout", minimum_ms=0)
        if limit.__class__ is not int or not 1 <= limit <= MAX_LIMIT:  # (type is the lock type here)
            check_limit(limit)  # raises
        self.manager = manager
        self.digest = digest
        self.name = name
        self.ttl = ttl
        self.timeout = timeout
        self.limit = limit
        self._job_id = None if job_id is None else check_job_id(job_id)
        self._serial = f"{next(_serials):x}"
        self._ttl_ms = ttl_ms
        self._flags = manager.flags
        self._call = manager.call
        self._queued = kind.queued
        # the scopes' keys, built on first use (_main_scope: the queue-time one if queued)
        self._queue_scope: Scope | None = None
        self._runtime_scope: Scope | None = None
        self._main_scope: Scope | None = None
        self._strategies: dict[str, Strategy | None] = {}  # by side; a missing side: None
        forced = "reject" if kind is _WHILE_EXECUTING_REJECT else None
        if on_conflict is not None or forced:
            if self._queued:
                self._strategies["enqueue"] = resolve_strategy(on_conflict, "enqueue", manager.strategies)
            if kind.runtime:
                self._strategies["execute"] = resolve_strategy(
                    forced or on_conflict, "execute", manager.strategies
                )

    @property
    def job_id(self) -> str:
        """The holder id of calls without one: the ``job_id`` given, else this object's id in
        the calling thread and process."""
        return self._holder(None)

    def _holder(self, job_id: str | None) -> str:
        """``job_id`` checked, or the default holder id (see :attr:`job_id`)."""
        if job_id is None:
            return self._job_id or _ids.local.tag + self._serial
        return check_job_id(job_id)

    @property
    def _queue(self) -> Scope:
        scope = self._queue_scope
        if scope is None:
            scope = self._queue_scope = self.manager.scope(self.digest, "", self.limit)
        return scope

    @property
    def _runtime(self) -> Scope:
        scope = self._runtime_scope
        if scope is None:
            scope = self._runtime_scope = self.manager.scope(self.digest, RUNTIME, self.limit)
        return scope

    @property
    def _scope(self) -> Scope:
        """The scope that acquire, release, extend and holders act on."""
        scope = self._main_scope
        if scope is None:
            scope = self._main_scope = self._queue if self._queued else self._runtime
        return scope

    # --- primitives -------------------------------------------------------------------

    def acquire(
        self, job_id: str | None = None, *, blocking: bool | None = None, timeout: float | None = None
    ) -> int | None:
        """Take the lock for ``job_id`` (default: this object's): its fencing token, or ``None``.

        Waits up to ``timeout`` seconds (default: the lock's) for a release, woken by it;
        ``blocking=False`` never waits. A job that already holds the lock gets its token back.
        """
        wait = self._wait(blocking, timeout)
        scope = self._main_scope or self._scope  # the attribute first: no property call once built
        return _token(self._take(scope, self._holder(job_id), wait))

    def release(self, job_id: str | None = None) -> int | None:
        """Release what ``job_id`` holds: the fencing token freed, or ``None`` if it held nothing."""
        return self.manager.release_scope(self._main_scope or self._scope, self._holder(job_id))

    def extend(self, job_id: str | None = None, ttl: float | None = None) -> int | None:
        """Reset the expiry of ``job_id``'s slot to ``ttl`` seconds (default: the lock's):
        its fencing token, or ``None`` when it no longer holds the lock. For
        until_and_while_executing, whichever scope the job holds (the runtime lock while
        it runs): that token."""
        if ttl is None and self.ttl is None:
            raise ValueError("extend needs a ttl (the lock has none)")
        ttl_ms = self._ttl_ms if ttl is None else duration_ms(ttl, "ttl")
        keys = self._scope.keys
        if self.type is _UNTIL_AND_WHILE_EXECUTING:
            keys = (*self._runtime.keys, self._queue.wake, *self._queue.slots)
        return token_reply(
            "lock_extend", self._call("lock_extend", keys, (self._holder(job_id), ttl_ms, self.limit))
        )

    def locked(self) -> bool:
        """True when anyone holds the lock (for until_and_while_executing: either scope)."""
        slots = self._scope.slots
        if self.type is _UNTIL_AND_WHILE_EXECUTING:
            slots = slots + self._runtime.slots
        return bool(self.manager.runner.execute("EXISTS", *slots))

    def holders(self) -> list[Holder]:
        """Who holds the lock now, with their tokens and time left (for
        until_and_while_executing: the queue-time holders, then the runtime ones)."""
        if self.type is _UNTIL_AND_WHILE_EXECUTING:
            return self._inspect(self._queue) + self._inspect(self._runtime)
        return self._inspect(self._scope)

    def _inspect(self, scope: Scope) -> list[Holder]:
        return holders_reply(self._call("lock_inspect", scope.keys, ()), scope is self._runtime_scope)

    def info(self) -> LockInfo:
        """Settings and holders (queue-time and runtime scopes)."""
        return LockInfo(
            self.digest,
            self.name,
            self.type,
            self.limit,
            self.ttl,
            self.timeout,
            self._inspect(self._queue) if self.type.queued else [],
            self._inspect(self._runtime) if self.type.runtime else [],
        )

    def __enter__(self) -> int:
        token = self.acquire()
        if token is None:
            raise LockConflictError(f"lock {self.digest} not acquired (waited {self.timeout} s)")
        return token

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self.release() is None and exc_type is None:
            raise LockNotOwnedError(f"lock {self.digest} was lost before release (expired or deleted)")

    # --- job helpers ------------------------------------------------------------------

    def enqueue(self, job_id: str, *, job: Any = None) -> bool:
        """Producer side: take the queue-time lock the type asks for. True means enqueue the
        job; on a conflict the enqueue-side strategy runs (a token it returns counts as taken)."""
        check_job_id(job_id)
        if not self._queued:
            return True
        reply = self._take(self._queue, job_id, 0.0)
        if type(reply) is int:
            return True
        return type(self._conflict("enqueue", self._queue, job_id, reply, job)) is int

    def execute(self, job_id: str, fn: Callable[[], T], *, job: Any = None) -> T | Any:
        """Worker side: run ``fn`` under the type's semantics and return its result, or the
        execute-side strategy's result when the runtime lock could not be taken.

        until_executing releases before running and re-locks if ``fn`` raises;
        until_executed releases after success and keeps the lock if ``fn`` raises;
        until_expired never releases; the while_executing types hold the runtime lock
        around ``fn`` (waiting up to ``timeout``); until_and_while_executing swaps the
        queue-time lock for the runtime lock in one script and re-locks if ``fn`` raises.
        """
        check_job_id(job_id)
        kind = self.type
        if kind is _UNTIL_EXECUTED:
            result = fn()
            if self.manager.release_scope(self._queue, job_id) is None:
                logger.warning(
                    "job %s finished without holding lock %s (expired or deleted)", job_id, self.digest
                )
            return result
        if kind is _UNTIL_EXPIRED:
            return fn()
        if kind is _UNTIL_EXECUTING:
            self.manager.release_scope(self._queue, job_id)
            try:
                return fn()
            except BaseException:
                self._take(self._queue, job_id, 0.0)
                raise
        handoff = kind is _UNTIL_AND_WHILE_EXECUTING
        reply = self._take(self._runtime, job_id, self.timeout, handoff=handoff)
        if type(reply) is not int:
            return self._conflict("execute", self._runtime, job_id, reply, job)
        try:
            return fn()
        except BaseException:
            if handoff:
                self._take(self._queue, job_id, 0.0)
            raise
        finally:
            self.manager.release_scope(self._runtime, job_id)

    # --- internals --------------------------------------------------------------------

    def _wait(self, blocking: bool | None, timeout: float | None) -> float:
        if timeout is not None:
            duration_ms(timeout, "timeout", minimum_ms=0)
        if blocking is False:
            return 0.0
        wait = self.timeout if timeout is None else timeout
        if blocking and not wait > 0:
            raise LockError("a blocking acquire needs a timeout > 0 seconds")
        return wait

    def _acquire_call(self, scope: Scope, job_id: str, flags: int, handoff: bool) -> tuple[str, Any, Any]:
        """The acquire script call for ``job_id`` in ``scope``: (name, keys, args). With
        ``handoff``, ``lock_handoff`` releases the job's queue-time slot in the same script."""
        if handoff:
            queue = self._queue
            keys = (*queue.keys, *scope.keys[3:])
            args = (job_id, queue.name, scope.name, self._ttl_ms, flags, self.manager.max_history)
            return "lock_handoff", keys, args
        return "lock_acquire", scope.keys, (job_id, scope.name, self._ttl_ms, flags, self.manager.max_history)

    def _take(self, scope: Scope, job_id: str, wait: float, *, handoff: bool = False) -> Any:
        """The fencing token, or the last conflict reply ``[ms to expiry, holders...]``: one
        call, re-sent once if its reply was lost (acquire is idempotent); with ``wait`` > 0 the
        :func:`~fastlock.locks.waiting.wait_for` operation."""
        flags = self._flags
        if wait > 0:
            first = Call(*self._acquire_call(scope, job_id, flags | WAITING, handoff))
            again = Call(*self._acquire_call(scope, job_id, flags | WAITING | WAITED, False))
            return self.manager.runner.run(wait_for(first, again, scope.wake, wait))
        name, keys, args = self._acquire_call(scope, job_id, flags, handoff)
        try:
            reply = self._call(name, keys, args)
        except ConnectionError as lost:
            reply = self.manager.runner.run(resend(lost, Call(name, keys, args)))
        if type(reply) is int and reply > 0:  # taken: the common reply, checked without a call
            return reply
        return acquire_reply(name, reply)

    def _conflict(self, side: str, scope: Scope, job_id: str, reply: list[Any], job: Any) -> Any:
        strategy = self._strategies.get(side)
        if strategy is None:
            return None
        manager = self.manager
        conflict = Conflict(
            self,
            job_id,
            side,
            tuple(holder.decode() for holder in reply[1:]),
            job,
            _runner=manager.runner,
            _release=lambda holder: manager.release_call(scope, holder),
            _acquire=Call(*self._acquire_call(scope, job_id, self._flags, False)),
        )
        return strategy(conflict)

    def __repr__(self) -> str:
        label = self.name or self.digest
        return f"<fastlock.Lock {label} type={self.type.value} limit={self.limit} ttl={self.ttl}>"
