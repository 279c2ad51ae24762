"""A bounded, thread-safe, fork-safe pool of core connections.

Checkout is a lock-free ``deque.pop`` on the hot path; the lock is taken only to open a
connection, to wait for one, or to hand one to a waiter. A connection idle for longer
than ``health_check_interval`` is polled (no round trip) before reuse, so one the server
closed meanwhile is replaced instead of failing the next command. After ``fork()`` the
child starts with an empty pool and never touches the parent's sockets.
"""

from __future__ import annotations

import os
import select
import threading
import weakref
from collections import deque
from collections.abc import Callable
from time import monotonic
from typing import Any

from .exceptions import PoolTimeoutError

__all__ = ["ConnectionPool"]

_POOLS: weakref.WeakSet[ConnectionPool] = weakref.WeakSet()


class ConnectionPool:
    """Hands out connections made by ``connect``; at most ``max_size`` exist at once.

    ``timeout`` bounds the wait for a free connection (``None`` waits forever);
    ``health_check_interval`` is the idle time in seconds after which a connection is
    checked before reuse (``0`` checks every time, ``None`` never).
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        max_size: int = 50,
        timeout: float | None = 5.0,
        health_check_interval: float | None = 1.0,
    ) -> None:
        if max_size < 1:
            raise ValueError("max_size must be at least 1")
        self._connect = connect
        self.max_size = max_size
        self.timeout = timeout
        self.health_check_interval = health_check_interval
        self._closed = False
        self._retired_round_trips = 0
        self._reset()
        _POOLS.add(self)

    def _reset(self) -> None:
        self._idle: deque[Any] = deque()
        self._size = 0
        self._waiters = 0
        self._generation = getattr(self, "_generation", 0) + 1
        self._cond = threading.Condition(threading.Lock())

    @property
    def size(self) -> int:
        """Connections currently open (idle and in use)."""
        return self._size

    @property
    def round_trips(self) -> int:
        """Writes sent by this pool's connections: idle ones and closed ones (in-use ones
        are counted when they come back)."""
        return self._retired_round_trips + sum(int(conn.round_trips) for conn in list(self._idle))

    @property
    def idle(self) -> int:
        """Connections waiting in the pool."""
        return len(self._idle)

    def get(self, now: float | None = None) -> Any:
        """Check out a connection, opening one if the pool is below ``max_size``.

        ``now`` is the caller's ``time.monotonic()`` reading, when it has one at hand.
        """
        try:
            conn = self._idle.pop()
        except IndexError:
            return self._get_slow()
        interval = self.health_check_interval
        if interval is not None and (now or monotonic()) - conn.last_used >= interval and not _alive(conn):
            conn.close()
            self.put(conn)
            return self.get()
        return conn

    def _get_slow(self) -> Any:
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        deadline = None if self.timeout is None else monotonic() + self.timeout
        with self._cond:
            self._waiters += 1
            try:
                while True:
                    if self._idle:
                        return self._idle.pop()
                    if self._size < self.max_size:
                        self._size += 1
                        break
                    remaining = None if deadline is None else deadline - monotonic()
                    if remaining is not None and remaining <= 0:
                        raise PoolTimeoutError(
                            f"no connection free in the pool after {self.timeout} s "
                            f"(all {self.max_size} in use; raise max_connections or release faster)"
                        )
                    self._cond.wait(remaining)
            finally:
                self._waiters -= 1
        generation = self._generation
        try:
            conn = self._connect()
        except BaseException:
            self._forget(generation)
            raise
        conn.generation = generation
        return conn

    def put(self, conn: Any) -> None:
        """Return a connection; a broken one, or one from before a fork, is closed."""
        if conn.broken or self._closed or conn.generation != self._generation:
            if not conn.broken:
                conn.close()
            self._retired_round_trips += conn.round_trips
            self._forget(conn.generation)
            return
        self._idle.append(conn)
        if self._waiters:
            with self._cond:
                self._cond.notify()

    def _forget(self, generation: int) -> None:
        if generation != self._generation:
            return
        with self._cond:
            self._size -= 1
            self._cond.notify()

    def close(self) -> None:
        """Close idle connections now and in-use ones when they come back."""
        self._closed = True
        while True:
            try:
                conn = self._idle.pop()
            except IndexError:
                break
            conn.close()
            self._retired_round_trips += conn.round_trips
            self._forget(conn.generation)


def _alive(conn: Any) -> bool:
    """True when nothing is waiting on the socket: no EOF, no stray bytes."""
    try:
        poller = select.poll()
        poller.register(conn.sock, select.POLLIN)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


def _after_fork_in_child() -> None:
    for pool in list(_POOLS):
        pool._reset()


os.register_at_fork(after_in_child=_after_fork_in_child)
