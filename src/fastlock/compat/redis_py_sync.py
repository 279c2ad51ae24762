# generated from src/fastlock/compat/redis_py_aio.py by tools/async_to_sync.py, do not edit
"""redis-py's ``Lock`` adapter on fastlock's lock, the class of this file (``redis_py_aio.py``, on
asyncio, is the source of ``redis_py_sync.py``); both exported by :mod:`fastlock.compat.redis_py`,
whose docstring says what differs from redis-py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..exceptions import LockError
from .lock_adapter import LockAdapter

if TYPE_CHECKING:
    from ..locks.lock import Lock as FastLock
    from ..sync.client import Client

__all__ = ["Lock"]


class Lock(LockAdapter):
    """redis-py's ``Lock(redis, name, timeout=None, sleep=0.1, blocking=True,
    blocking_timeout=None, thread_local=True, raise_on_release_error=True)`` on a
    :class:`fastlock.Client` (``redis.asyncio.lock.Lock``'s on asyncio: the methods
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
    ) -> bool:
        """Take the lock (waiting as redis-py would, woken by the release): True once taken."""
        return self._acquire(self.lock.job_id, self._wait(blocking, blocking_timeout, token))

    def _acquire(self, holder: str, options: dict[str, Any]) -> bool:
        return self._taken(holder, self.lock.acquire(holder, **options))

    def release(self) -> None:
        """Release the holder's lock: ``LockError`` if it did not acquire it through this
        object, ``LockNotOwnedError`` if it was lost meanwhile."""
        return self._release(self.lock.job_id)

    def _release(self, holder: str) -> None:
        self._releasing(holder)
        if self.lock.release(holder) is None:
            raise self._not_owned("release")

    def extend(self, additional_time: float, replace_ttl: bool = False) -> bool:
        """Add ``additional_time`` seconds to the time left (``replace_ttl``: set it to that)."""
        return self._extend(self.lock.job_id, additional_time, replace_ttl)

    def _extend(self, holder: str, additional_time: float, replace_ttl: bool) -> bool:
        self._extending(holder, additional_time, "extend")
        if not replace_ttl:
            additional_time = self._added(holder, self.lock.holders(), additional_time)
        if self.lock.extend(holder, ttl=additional_time) is None:
            raise self._not_owned("extend")
        return True

    def reacquire(self) -> bool:
        """Reset the time left to ``timeout``."""
        return self._reacquire(self.lock.job_id)

    def _reacquire(self, holder: str) -> bool:
        self._extending(holder, self.timeout or 0, "reacquire")
        if self.lock.extend(holder, ttl=self.timeout) is None:
            raise self._not_owned("reacquire")
        return True

    def locked(self) -> bool:
        """True when anyone holds the lock."""
        return self.lock.locked()

    def owned(self) -> bool:
        """True when the holder holds it through this object."""
        return self._owned(self.lock.job_id)

    def _owned(self, holder: str) -> bool:
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
