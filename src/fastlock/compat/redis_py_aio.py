"""redis-py's ``Lock`` adapter on fastlock's lock, the class of this file (``redis_py_aio.py``, on
asyncio, is the source of ``redis_py_sync.py``); both exported by :mod:`fastlock.compat.redis_py`,
whose docstring says what differs from redis-py."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ..exceptions import LockError
from .lock_adapter import LockAdapter

if TYPE_CHECKING:
    if True:  # ASYNC
        from ..aio.client import Client
        from ..aio.lock import AsyncLock as FastLock
    else:
        from ..locks.lock import Lock as FastLock
        from ..sync.client import Client

__all__ = ["AsyncLock"]


class AsyncLock(LockAdapter):
    """redis-py's ``Lock(redis, name, timeout=None, sleep=0.1, blocking=True,
    blocking_timeout=None, thread_local=True, raise_on_release_error=True)`` on a
    :class:`fastlock.aio.Client` (``redis.asyncio.lock.Lock``'s on asyncio: the methods
    awaited); see :mod:`fastlock.compat.redis_py` for what differs. The holder is the calling
    thread, on asyncio the task that calls a method (a per-task token, where redis-py's
    asyncio lock keeps a thread's, resolved at the call whichever task runs the coroutine);
    ``thread_local=False``: one holder for all."""

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
    ) -> Awaitable[bool]:
        """Take the lock (waiting as redis-py would, woken by the release): True once taken."""
        return self._acquire(self.lock.job_id, self._wait(blocking, blocking_timeout, token))

    async def _acquire(self, holder: str, options: dict[str, Any]) -> bool:
        return self._taken(holder, await self.lock.acquire(holder, **options))

    def release(self) -> Awaitable[None]:
        """Release the holder's lock: ``LockError`` if it did not acquire it through this
        object, ``LockNotOwnedError`` if it was lost meanwhile."""
        return self._release(self.lock.job_id)

    async def _release(self, holder: str) -> None:
        self._releasing(holder)
        if await self.lock.release(holder) is None:
            raise self._not_owned("release")

    def extend(self, additional_time: float, replace_ttl: bool = False) -> Awaitable[bool]:
        """Add ``additional_time`` seconds to the time left (``replace_ttl``: set it to that)."""
        return self._extend(self.lock.job_id, additional_time, replace_ttl)

    async def _extend(self, holder: str, additional_time: float, replace_ttl: bool) -> bool:
        self._extending(holder, additional_time, "extend")
        if not replace_ttl:
            additional_time = self._added(holder, await self.lock.holders(), additional_time)
        if await self.lock.extend(holder, ttl=additional_time) is None:
            raise self._not_owned("extend")
        return True

    def reacquire(self) -> Awaitable[bool]:
        """Reset the time left to ``timeout``."""
        return self._reacquire(self.lock.job_id)

    async def _reacquire(self, holder: str) -> bool:
        self._extending(holder, self.timeout or 0, "reacquire")
        if await self.lock.extend(holder, ttl=self.timeout) is None:
            raise self._not_owned("reacquire")
        return True

    async def locked(self) -> bool:
        """True when anyone holds the lock."""
        return await self.lock.locked()

    def owned(self) -> Awaitable[bool]:
        """True when the holder holds it through this object."""
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
