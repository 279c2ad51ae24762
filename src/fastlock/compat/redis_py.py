"""redis-py's ``Lock`` on fastlock's lock: its signature and, where code relies on them, its
semantics, for a migration that changes the constructor and nothing else::

    # redis-py:  lock = r.lock("report", timeout=30, blocking_timeout=5)
    from fastlock.compat.redis_py import Lock
    lock = Lock(client, "report", timeout=30, blocking_timeout=5)   # client: a fastlock.Client
    with lock:  # blocks up to 5 s (woken by the release, no polling), held for at most 30 s
        ...

``timeout`` is the lock's lifetime (fastlock's ``ttl``; ``None``: it never expires, as in
redis-py), ``blocking`` (default True) and ``blocking_timeout`` (default ``None``: wait for
ever) say how ``acquire`` waits, ``thread_local=False`` makes one holder of every thread (and,
for :class:`AsyncLock`, every task) using the object; ``sleep`` is accepted and ignored (a
waiter is woken by the release). ``acquire`` returns a bool, and False for a holder that
already holds the lock (it is not re-entrant); ``release`` of a lock this thread (task) did
not acquire raises ``LockError``, of one lost meanwhile ``LockNotOwnedError``;
``extend(additional_time)`` adds to the time left, ``replace_ttl=True`` sets it;
``reacquire`` resets it to ``timeout``; ``with lock:`` gives the adapter. The errors are
fastlock's (:class:`~fastlock.LockError`, :class:`~fastlock.LockNotOwnedError`, under
:class:`~fastlock.FastlockError`), not redis-py's classes. The lock is fastlock's lock named
``name`` (its keys are not redis-py's key ``name``): move every process of one lock at once.
``.lock`` is the fastlock lock underneath (``.fencing_token``: this holder's token).
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from .. import _ids
from ..exceptions import ArgumentError, ArgumentTypeError, LockError, LockNotOwnedError
from ..protocol.arguments import MAX_DURATION, duration_ms

if TYPE_CHECKING:
    from ..aio.client import Client as AsyncClient
    from ..aio.locks import AsyncLock as FastAsyncLock
    from ..locks.lock import Lock as FastLock
    from ..locks.types import Holder
    from ..sync.client import Client

__all__ = ["AsyncLock", "Lock"]

logger = logging.getLogger("fastlock.lock")


def _flag(value: object, name: str) -> bool:
    if value.__class__ is not bool:
        raise ArgumentTypeError(f"{name} must be a bool, not {type(value).__qualname__!r}")
    return bool(value)


class _Adapter:
    """What both adapters share: the settings, checked up front, and the holders' tokens."""

    lock: Any
    """The fastlock lock underneath."""

    def __init__(
        self,
        lock: Any,
        name: str,
        timeout: float | None,
        sleep: float,
        blocking: bool,
        blocking_timeout: float | None,
        thread_local: bool,
        raise_on_release_error: bool,
    ) -> None:
        duration_ms(sleep, "sleep", minimum_ms=0)  # checked, then ignored: no polling
        if blocking_timeout is not None:
            duration_ms(blocking_timeout, "blocking_timeout", minimum_ms=0)
        self.name = name
        self.timeout = timeout
        self.sleep = sleep
        self.blocking = _flag(blocking, "blocking")
        self.blocking_timeout = blocking_timeout
        self.thread_local = _flag(thread_local, "thread_local")
        self.raise_on_release_error = _flag(raise_on_release_error, "raise_on_release_error")
        self._fences: dict[str, int] = {}  # holder -> the token its acquire got through this object
        self.lock = lock

    @staticmethod
    def _options(name: str, timeout: float | None, thread_local: bool) -> dict[str, Any]:
        """fastlock's lock options for redis-py's (the lock checks ``timeout`` as its ttl)."""
        if not isinstance(name, str):
            raise ArgumentTypeError(f"a lock name must be a str, not {type(name).__qualname__!r}")
        job_id = None if thread_local is True else f"redis-py-{_ids.next_id()}"  # one holder for all
        return {"ttl": timeout, "job_id": job_id}

    def _wait(self, blocking: bool | None, blocking_timeout: float | None, token: object) -> dict[str, Any]:
        """fastlock's acquire arguments for redis-py's."""
        if token is not None:
            raise ArgumentError("token= is not supported: build the lock with thread_local=False")
        blocking = self.blocking if blocking is None else _flag(blocking, "blocking")
        wait = self.blocking_timeout if blocking_timeout is None else blocking_timeout
        if not blocking:
            return {"blocking": False}
        if wait is None:
            return {"blocking": True, "timeout": MAX_DURATION}  # redis-py: wait for ever
        if duration_ms(wait, "blocking_timeout", minimum_ms=0) == 0:
            return {"blocking": False}  # redis-py tries once when the time is up
        return {"blocking": True, "timeout": wait}

    def _taken(self, holder: str, fence: int | None) -> bool:
        if fence is None or self._fences.get(holder) == fence:
            return False  # not taken, or held already by this holder: redis-py's lock is not re-entrant
        self._fences[holder] = fence
        return True

    def _releasing(self, holder: str) -> None:
        if self._fences.pop(holder, None) is None:
            raise LockError(f"cannot release lock {self.name!r}: not acquired through this object here")

    def _not_owned(self, doing: str) -> LockNotOwnedError:
        return LockNotOwnedError(f"cannot {doing} lock {self.name!r}: no longer owned (expired or deleted)")

    def _extending(self, holder: str, additional_time: float, doing: str) -> None:
        if holder not in self._fences:
            raise LockError(f"cannot {doing} lock {self.name!r}: not acquired through this object here")
        if self.timeout is None:
            raise LockError(f"cannot {doing} lock {self.name!r}: it has no timeout")
        duration_ms(additional_time, "additional_time")

    def _added(self, holder: str, holders: list[Holder], additional_time: float) -> float:
        left = next((h.ttl for h in holders if h.job_id == holder), None)
        if left is None:
            raise self._not_owned("extend")
        return left + additional_time

    def _released_with_error(self, error: LockError) -> None:
        if self.raise_on_release_error:
            raise error
        logger.warning(
            "lock %r was unlocked or no longer owned when exiting its context: %s", self.name, error
        )

    @property
    def fencing_token(self) -> int | None:
        """The fencing token of this thread's (task's) acquisition through this object."""
        return self._fences.get(self.lock.job_id)

    def __repr__(self) -> str:
        return f"<fastlock.compat.redis_py.{type(self).__name__} {self.name!r} timeout={self.timeout}>"


class Lock(_Adapter):
    """redis-py's ``Lock(redis, name, timeout=None, sleep=0.1, blocking=True,
    blocking_timeout=None, thread_local=True, raise_on_release_error=True)`` on a
    :class:`fastlock.Client` (see the module docstring for what differs)."""

    lock: FastLock

    def __init__(
        self,
        client: Client,
        name: str,
        timeout: float | None = None,
        sleep: float = 0.1,
        blocking: bool = True,
        blocking_timeout: float | None = None,
        thread_local: bool = True,
        raise_on_release_error: bool = True,
    ) -> None:
        lock = client.lock(name, **self._options(name, timeout, thread_local))
        super().__init__(
            lock, name, timeout, sleep, blocking, blocking_timeout, thread_local, raise_on_release_error
        )

    def acquire(
        self,
        sleep: float | None = None,
        blocking: bool | None = None,
        blocking_timeout: float | None = None,
        token: str | None = None,
    ) -> bool:
        """Take the lock (waiting as redis-py would, woken by the release): True once taken."""
        options = self._wait(blocking, blocking_timeout, token)
        holder = self.lock.job_id
        return self._taken(holder, self.lock.acquire(holder, **options))

    def release(self) -> None:
        """Release this thread's lock: ``LockError`` if it did not acquire it through this
        object, ``LockNotOwnedError`` if it was lost meanwhile."""
        holder = self.lock.job_id
        self._releasing(holder)
        if self.lock.release(holder) is None:
            raise self._not_owned("release")

    def extend(self, additional_time: float, replace_ttl: bool = False) -> bool:
        """Add ``additional_time`` seconds to the time left (``replace_ttl``: set it to that)."""
        holder = self.lock.job_id
        self._extending(holder, additional_time, "extend")
        ttl = additional_time if replace_ttl else self._added(holder, self.lock.holders(), additional_time)
        if self.lock.extend(holder, ttl=ttl) is None:
            raise self._not_owned("extend")
        return True

    def reacquire(self) -> bool:
        """Reset the time left to ``timeout``."""
        holder = self.lock.job_id
        self._extending(holder, self.timeout or 0, "reacquire")
        if self.lock.extend(holder, ttl=self.timeout) is None:
            raise self._not_owned("reacquire")
        return True

    def locked(self) -> bool:
        """True when anyone holds the lock."""
        return self.lock.locked()

    def owned(self) -> bool:
        """True when this thread holds it through this object."""
        holder = self.lock.job_id
        return holder in self._fences and any(h.job_id == holder for h in self.lock.holders())

    def __enter__(self) -> Lock:
        if self.acquire():
            return self
        raise LockError(f"unable to acquire lock {self.name!r} within the time specified")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self.release()
        except LockError as error:
            self._released_with_error(error)


class AsyncLock(_Adapter):
    """redis-py's ``redis.asyncio.lock.Lock`` on a :class:`fastlock.aio.Client`: :class:`Lock`'s
    methods, awaited. Its holder is the task that calls a method (a per-task token, where
    redis-py's asyncio lock keeps a thread's); ``thread_local=False``: one holder for all."""

    lock: FastAsyncLock

    def __init__(
        self,
        client: AsyncClient,
        name: str,
        timeout: float | None = None,
        sleep: float = 0.1,
        blocking: bool = True,
        blocking_timeout: float | None = None,
        thread_local: bool = True,
        raise_on_release_error: bool = True,
    ) -> None:
        lock = client.lock(name, **self._options(name, timeout, thread_local))
        super().__init__(
            lock, name, timeout, sleep, blocking, blocking_timeout, thread_local, raise_on_release_error
        )

    def acquire(
        self,
        sleep: float | None = None,
        blocking: bool | None = None,
        blocking_timeout: float | None = None,
        token: str | None = None,
    ) -> Coroutine[Any, Any, bool]:
        """:meth:`Lock.acquire`, awaited (for the calling task, whichever task runs it)."""
        options = self._wait(blocking, blocking_timeout, token)
        return self._acquire(self.lock.job_id, options)

    async def _acquire(self, holder: str, options: dict[str, Any]) -> bool:
        return self._taken(holder, await self.lock.acquire(holder, **options))

    def release(self) -> Coroutine[Any, Any, None]:
        """:meth:`Lock.release`, awaited."""
        return self._release(self.lock.job_id)

    async def _release(self, holder: str) -> None:
        self._releasing(holder)
        if await self.lock.release(holder) is None:
            raise self._not_owned("release")

    def extend(self, additional_time: float, replace_ttl: bool = False) -> Coroutine[Any, Any, bool]:
        """:meth:`Lock.extend`, awaited."""
        return self._extend(self.lock.job_id, additional_time, replace_ttl)

    async def _extend(self, holder: str, additional_time: float, replace_ttl: bool) -> bool:
        self._extending(holder, additional_time, "extend")
        ttl = (
            additional_time
            if replace_ttl
            else self._added(holder, await self.lock.holders(), additional_time)
        )
        if await self.lock.extend(holder, ttl=ttl) is None:
            raise self._not_owned("extend")
        return True

    def reacquire(self) -> Coroutine[Any, Any, bool]:
        """:meth:`Lock.reacquire`, awaited."""
        return self._reacquire(self.lock.job_id)

    async def _reacquire(self, holder: str) -> bool:
        self._extending(holder, self.timeout or 0, "reacquire")
        if await self.lock.extend(holder, ttl=self.timeout) is None:
            raise self._not_owned("reacquire")
        return True

    async def locked(self) -> bool:
        """True when anyone holds the lock."""
        return await self.lock.locked()

    def owned(self) -> Coroutine[Any, Any, bool]:
        """True when the calling task holds it through this object."""
        return self._owned(self.lock.job_id)

    async def _owned(self, holder: str) -> bool:
        return holder in self._fences and any(h.job_id == holder for h in await self.lock.holders())

    async def __aenter__(self) -> AsyncLock:
        if await self.acquire():
            return self
        raise LockError(f"unable to acquire lock {self.name!r} within the time specified")

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            await self.release()
        except LockError as error:
            self._released_with_error(error)
