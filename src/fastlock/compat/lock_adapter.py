"""What redis-py's lock adapters share (:mod:`fastlock.compat.redis_py`, both transports): the
settings, checked up front, and the tokens of the holders that acquired through an adapter."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .. import _ids
from ..exceptions import ArgumentError, ArgumentTypeError, LockError, LockNotOwnedError
from ..protocol.arguments import MAX_DURATION, duration_ms

if TYPE_CHECKING:
    from ..locks.types import Holder

__all__ = ["LockAdapter", "flag"]

logger = logging.getLogger("fastlock.lock")


def flag(value: object, name: str) -> bool:
    """``value``, checked to be a bool (the adapters' flags)."""
    if value.__class__ is not bool:
        raise ArgumentTypeError(f"{name} must be a bool, not {type(value).__qualname__!r}")
    return bool(value)


class LockAdapter:
    """The base of both adapters: the settings and the holders' tokens; the calls are theirs."""

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
        self.blocking = flag(blocking, "blocking")
        self.blocking_timeout = blocking_timeout
        self.thread_local = flag(thread_local, "thread_local")
        self.raise_on_release_error = flag(raise_on_release_error, "raise_on_release_error")
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
        blocking = self.blocking if blocking is None else flag(blocking, "blocking")
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
