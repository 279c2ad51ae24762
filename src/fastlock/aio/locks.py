"""Locks on asyncio: :class:`AsyncLock`, :class:`AsyncLockManager` and :class:`AsyncReaper`,
thin shells over the same lock logic as the blocking ones (:mod:`fastlock.locks.base`, the
admin operations of :mod:`fastlock.locks.admin`, the reaper's pass).

Every method builds a call or an operation, awaits it on the runner
(:class:`~fastlock.aio.Client`) and parses the reply. A wait for a release is the same
``BLPOP`` wait-loop operation (no polling), on a dedicated connection. Conflict strategies
receive an :class:`~fastlock.locks.conflict.AsyncConflict` (``await conflict.evict(...)``);
a strategy may be a plain function or a coroutine function (its result is then awaited).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

from .. import _ids
from ..exceptions import LockConflictError, LockNotOwnedError, UsageError
from ..locks import admin
from ..locks.base import EXECUTIONS, LockBase, lost_before_release, new_lock, token
from ..locks.conflict import ASYNC_STRATEGIES, AsyncConflict, StrategySpec
from ..locks.keys import ChangelogEntry, LockEntry, Scope
from ..locks.namespace import Namespace
from ..locks.reaper import MUTEX, ReaperBase, ReapResult
from ..locks.replies import token_reply
from ..locks.types import TTL_REQUIRED, Holder, LockInfo, LockType, check_job_id
from ..operations import AsyncRunner

__all__ = ["AsyncLock", "AsyncLockManager", "AsyncReaper"]

T = TypeVar("T")
logger = logging.getLogger("fastlock.reaper")

_HELD_KEPT = 1024  # default holders an AsyncLock remembers (for refusing another task's release)
_task_tags: weakref.WeakKeyDictionary[asyncio.Task[Any], str] = weakref.WeakKeyDictionary()


def _task_tag() -> str:
    """The calling task's own tag (the thread's outside a task, or outside a running loop)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop: a coroutine made before asyncio.run(...)
        task = None
    if task is None:
        return _ids.local.tag
    tag = _task_tags.get(task)
    if tag is None:
        tag = _task_tags[task] = _ids.next_id() + "-"
    return tag


class AsyncLock(LockBase[AsyncRunner]):
    """A lock on one digest over an :class:`~fastlock.operations.AsyncRunner`: the methods of
    :class:`~fastlock.Lock`, awaited (``async with lock:``). The default holder id is this
    object's in the *task that calls* ``acquire``, ``release`` or ``extend`` (resolved when
    the method is called, not when its coroutine runs: ``asyncio.wait_for(lock.acquire(), 1)``,
    which runs it in another task on Python 3.11, acts for the caller), so tasks sharing the
    object are distinct holders. A release without a job id from a task that took nothing
    through this object, while another task holds the lock through it, raises
    ``LockNotOwnedError`` (hand a lock over between tasks with a ``job_id``)."""

    __slots__ = ("_held",)
    _conflict_type = AsyncConflict
    _held: dict[str, int]
    """The default holders (of calling tasks) whose acquire through this object succeeded and
    whose release has not been seen; set on first use (the core's ``new_lock`` leaves it unset)."""

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

    def extend(self, job_id: str | None = None, ttl: float | None = None) -> Coroutine[Any, Any, int | None]:
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
        return token_reply("lock_extend", await self.manager.runner.call(step.name, step.keys, step.args))

    def _held_by(self) -> dict[str, int]:
        try:
            return self._held
        except AttributeError:
            held = self._held = {}
            return held

    async def locked(self) -> bool:
        """True when anyone holds the lock (for until_and_while_executing: either scope)."""
        self._main_scope or await self._bound()
        return bool(await self.manager.runner.execute(*self._locked_command().args))

    async def holders(self) -> list[Holder]:
        """Who holds the lock now (until_and_while_executing: queue-time, then runtime)."""
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
        """:meth:`Lock.enqueue <fastlock.Lock.enqueue>`, awaited."""
        check_job_id(job_id)
        if not self._queued:
            return True
        queue = self._queue if self._main_scope else await self._bound()
        reply = await self._take(queue, job_id, 0.0)
        return type(reply) is int or type(await self._resolved("enqueue", queue, job_id, reply, job)) is int

    async def execute(self, job_id: str, fn: Callable[[], Awaitable[T]], *, job: Any = None) -> T | Any:
        """:meth:`Lock.execute <fastlock.Lock.execute>` of an async ``fn`` (awaited); the
        steps of :data:`~fastlock.locks.base.EXECUTIONS` (cancelling ``fn`` counts as raising)."""
        check_job_id(job_id)
        self._main_scope or await self._bound()
        steps = EXECUTIONS[self.type]
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
            lost_before_release(job_id, self.digest)
        return result

    # --- internals --------------------------------------------------------------------

    async def _take(self, scope: Scope, job_id: str, wait: float, handoff: bool = False) -> Any:
        """The fencing token, or the last conflict reply: the acquire (or wait) operation."""
        taking = (
            self._waiting(scope, job_id, wait, handoff) if wait > 0 else self._attempt(scope, job_id, handoff)
        )
        return await self.manager.runner.run(taking)

    async def _release(self, scope: Scope, job_id: str) -> int | None:
        args = self.manager.release_args(scope, job_id)
        return token_reply("lock_release", await self.manager.runner.call("lock_release", scope.keys, args))

    async def _resolved(self, side: str, scope: Scope, job_id: str, reply: list[Any], job: Any) -> Any:
        """The side's strategy's result for this conflict (awaited if it is awaitable)."""
        found = self._resolve(side, scope, job_id, reply, job)
        result = None if found is None else found[0](found[1])
        return await result if inspect.isawaitable(result) else result


class AsyncLockManager(Namespace[AsyncRunner]):
    """:class:`~fastlock.LockManager` over an :class:`~fastlock.operations.AsyncRunner` (the
    same options, key layout and admin operations), its methods awaited. Its locks'
    ``replace`` strategy awaits its steps (:data:`~fastlock.locks.conflict.ASYNC_STRATEGIES`)."""

    default_strategies = ASYNC_STRATEGIES

    def lock(
        self,
        name: str | None = None,
        *,
        digest: str | None = None,
        queue: str | None = None,
        args: Any = None,
        type: str | LockType = LockType.UNTIL_EXECUTED,  # noqa: A002 - the public keyword is type=
        ttl: float | None = TTL_REQUIRED,
        timeout: float = 0.0,
        limit: int = 1,
        job_id: str | None = None,
        on_conflict: StrategySpec | Mapping[str, StrategySpec] = None,
    ) -> AsyncLock:
        """An :class:`AsyncLock` (arguments of :meth:`LockManager.lock <fastlock.LockManager.lock>`)."""
        digest = self.lock_digest(name, digest, queue, args)
        return new_lock(AsyncLock, self, digest, name, type, ttl, timeout, limit, job_id, on_conflict)

    def reaper(self, **options: Any) -> AsyncReaper:
        """An :class:`AsyncReaper` for this namespace (options of :class:`~fastlock.locks.reaper.Reaper`)."""
        return AsyncReaper(self, **options)

    async def entry_scope(self, entry: LockEntry) -> Scope:
        """The keys of a tracked scope."""
        return await self.runner.run(admin.entry_scope(self, entry))

    async def scan(
        self, cursor: str = "0", *, match: str | None = None, count: int = 100
    ) -> tuple[str, list[LockEntry]]:
        """One bounded page of tracked lock scopes (:meth:`LockManager.scan <fastlock.LockManager.scan>`)."""
        return await self.runner.run(admin.scan(self, cursor, match, count))

    async def page(self, bucket: int, after: str, count: int) -> list[LockEntry]:
        """Up to ``count`` index entries of ``bucket`` after member ``after`` ("": from the start)."""
        return await self.runner.run(admin.page(self, bucket, after, count))

    async def entries(self, *, match: str | None = None, count: int = 100) -> AsyncIterator[LockEntry]:
        """Every tracked lock scope, page by page (each page a bounded :meth:`scan`)."""
        cursor = "0"
        while True:
            cursor, found = await self.scan(cursor, match=match, count=count)
            for entry in found:
                yield entry
            if cursor == "0":
                return

    async def limit_of(self, digest: str, runtime: bool = False) -> int | None:
        """The limit recorded in the index for a tracked scope (``None``: not tracked)."""
        return await self.runner.run(admin.limit_of(self, digest, runtime))

    async def inspect(self, digest: str, *, runtime: bool = False, limit: int | None = None) -> list[Holder]:
        """Holders of a digest's scope; ``limit`` defaults to the one tracked (else 1)."""
        return await self.runner.run(admin.inspect(self, digest, runtime, limit))

    async def delete(self, digest: str, *, limit: int | None = None) -> int:
        """Delete a digest's locks (both scopes) whoever holds them: the holders removed."""
        return await self.runner.run(admin.delete(self, digest, limit))

    async def delete_matching(self, match: str, cursor: str = "0", *, count: int = 100) -> tuple[str, int]:
        """Delete one bounded page of the tracked scopes matching ``match``: ``(next_cursor, removed)``."""
        return await self.runner.run(admin.delete_matching(self, match, cursor, count))

    async def changelog(self, digest: str, *, count: int = 100) -> list[ChangelogEntry]:
        """The digest's changelog entries, newest first (empty unless ``max_history`` > 0)."""
        return await self.runner.run(admin.changelog(self, digest, count))

    def __repr__(self) -> str:
        return f"<fastlock.aio.AsyncLockManager prefix={self.prefix!r} buckets={self.buckets}>"


class AsyncReaper(ReaperBase[AsyncRunner]):
    """:class:`~fastlock.locks.reaper.Reaper` on asyncio: ``await run_once()`` for one pass,
    ``start()`` for a task passing every ``interval`` seconds (``await stop()`` ends it)."""

    def __init__(self, manager: Namespace[AsyncRunner], **options: Any) -> None:
        super().__init__(manager, **options)
        job_id = f"reaper-{_ids.next_id()}"  # one holder, whichever task runs the pass
        self._mutex = AsyncLock(manager, self.mutex_digest, name=MUTEX, ttl=self.lease, job_id=job_id)
        self._task: asyncio.Task[None] | None = None

    async def run_once(self) -> ReapResult | None:
        """One pass from where the last one stopped, or ``None`` if another runner holds the
        reaper lock."""
        if await self._mutex.acquire(blocking=False) is None:
            return None
        try:
            return await self.manager.runner.run(self.passing())
        finally:
            await self._mutex.release()

    def start(self) -> asyncio.Task[None]:
        """Run a pass now and every ``interval`` seconds in a task."""
        if self._task is not None and not self._task.done():
            raise UsageError("this reaper is already running")
        self._task = asyncio.create_task(self._loop(), name="fastlock-reaper")
        return self._task

    async def stop(self) -> None:
        """Stop the task (a pass under way is cancelled; its reaper lock expires after ``lease``)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:
                logger.exception("reaper pass failed")
            await asyncio.sleep(self.interval)
