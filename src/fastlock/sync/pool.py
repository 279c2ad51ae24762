"""A bounded, thread-safe, fork-safe pool of core connections.

Checkout is a lock-free ``deque.pop`` on the hot path; the lock is taken only to open a
connection, to wait for one, or to hand one to a waiter. A connection idle for longer
than ``health_check_interval`` is polled (no round trip) before reuse, so one the server
closed meanwhile is replaced instead of failing the next command; once a connection is lost,
every idle one is polled at its next checkout (a server restarted or failed over closed them
all, and a retry must not meet another of its dead sockets). After ``fork()`` the
child starts with an empty pool and never touches the parent's sockets.

Slots are exception-safe: the pool counts the connections that are still alive (through
weak references), so one abandoned by an exception that struck between checkout and
return (a signal handler, ``KeyboardInterrupt``) frees its slot once it is garbage, and
its socket is closed then; it is never reused, since its state is unknown.
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import select
import threading
import weakref
from collections import deque
from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING

from .. import metrics
from .._impl import CoreConnection, CorePool
from ..exceptions import ArgumentError, ConnectionError, PoolTimeoutError

__all__ = ["ConnectionPool"]

_POOLS: weakref.WeakSet[ConnectionPool] = weakref.WeakSet()
_WAIT_SLICE = 0.05
"""Longest wait for a free connection between looks at the pool: a slot freed by garbage
collection wakes no one."""


class _Opening:
    """Holds a slot while its connection is being opened (dies with the opening call)."""

    __slots__ = ("__weakref__",)
    round_trips = 0


class ConnectionPool:
    """Hands out connections made by ``connect``; at most ``max_size`` exist at once.

    ``timeout`` bounds the wait for a free connection (``None`` waits forever);
    ``health_check_interval`` is the idle time in seconds after which a connection is
    checked before reuse (``0`` checks every time, ``None`` never).

    The cores' ``ScriptCaller`` (``Client.call``) takes and returns connections itself, through
    this API only: ``idle_connections`` (the idle deque: popped from, appended to),
    ``health_check_interval``, :meth:`revive` (an idle connection past it), :meth:`get` (none
    idle), :meth:`put` (a broken or stale one), ``generation`` (the current generation of
    connections: a connection of another one is stale), ``waiters`` (threads waiting for a
    connection) and ``wakeups`` (``put(None)`` wakes one). Only the pool writes them.
    """

    # Slots: the hot path (the core's ScriptCaller) reads three of them per call.
    __slots__ = (
        "__weakref__",
        "_closed",
        "_connect",
        "_idle",
        "_lock",
        "_lost",
        "_retired_round_trips",
        "_taken",
        "generation",
        "health_check_interval",
        "max_size",
        "timeout",
        "waiters",
        "wakeups",
    )

    def __init__(
        self,
        connect: Callable[[], CoreConnection],
        *,
        max_size: int = 50,
        timeout: float | None = 5.0,
        health_check_interval: float | None = 1.0,
    ) -> None:
        if max_size < 1:
            raise ArgumentError("max_size must be at least 1")
        self._connect = connect
        self.max_size = max_size
        self.timeout = timeout
        self.health_check_interval = health_check_interval
        self._closed = False
        self._retired_round_trips = 0
        self._reset()
        _POOLS.add(self)

    def _reset(self) -> None:
        # One deque for the pool's life (the core's ScriptCaller holds it): emptied, not
        # replaced, after a fork (the parent's connections are dropped, never used).
        self._idle: deque[CoreConnection] = getattr(self, "_idle", deque())
        self._idle.clear()
        # The slots taken: weak references (without callbacks, which an interrupt could
        # stop) to the open connections and to the _Opening tokens of those being opened.
        self._taken: set[weakref.ref[CoreConnection | _Opening]] = set()
        self.waiters = 0
        self._lost = 0  # connections lost (broken) and not yet replaced
        self.generation = getattr(self, "generation", 0) + 1
        # C-level primitives only, entered so that an interrupt (a signal handler raising)
        # cannot strike between an acquire and the block that releases it.
        self._lock = threading.Lock()
        self.wakeups: queue.SimpleQueue[None] = queue.SimpleQueue()

    @property
    def size(self) -> int:
        """Connections currently open or being opened (idle and in use)."""
        with self._lock:
            return self._count_taken()

    def _count_taken(self) -> int:
        """Drop the references to garbage (abandoned) connections and count the rest."""
        taken = self._taken
        taken.difference_update([ref for ref in taken if ref() is None])
        return len(taken)

    @property
    def round_trips(self) -> int:
        """Writes sent by this pool's connections: open ones (idle or in use) and closed ones."""
        with self._lock:
            return self._retired_round_trips + sum(
                int(conn.round_trips) for ref in self._taken if (conn := ref()) is not None
            )

    @property
    def idle_connections(self) -> deque[CoreConnection]:
        """The idle connections (the same deque for the pool's life); the hot path pops one
        and appends it back, as :meth:`get` and :meth:`put` do."""
        return self._idle

    @property
    def idle(self) -> int:
        """Connections waiting in the pool."""
        return len(self._idle)

    def get(self, now: float | None = None) -> CoreConnection:
        """Check out a connection, opening one if the pool is below ``max_size``.

        ``now`` is the caller's ``time.monotonic()`` reading, when it has one at hand.
        """
        try:
            conn = self._idle.pop()
        except IndexError:
            return self._get_slow()
        interval = self.health_check_interval
        if interval is not None and (now or monotonic()) - conn.last_used >= interval:
            return self.revive(conn)
        return conn

    def revive(self, conn: CoreConnection) -> CoreConnection:
        """``conn`` if it is still alive (idle past the health-check interval), else a
        replacement (``conn`` is closed)."""
        if _alive(conn):
            return conn
        conn.close()
        self.put(conn)
        return self.get()

    def _get_slow(self) -> CoreConnection:
        if self._closed:
            raise ConnectionError("the connection pool is closed", sent=False)
        deadline = None if self.timeout is None else monotonic() + self.timeout
        slot = _Opening()
        while True:
            waiting = False
            try:
                with self._lock:
                    if self._idle:
                        return self._idle.pop()
                    if self._count_taken() < self.max_size:
                        self._taken.add(weakref.ref(slot))
                        break
                    self.waiters += 1
                    waiting = True
                self._wait(deadline)
            finally:
                if waiting:
                    with self._lock:
                        self.waiters -= 1
        generation = self.generation
        try:
            conn = self._connect()
        except BaseException:
            self._release(slot)
            raise
        conn.generation = generation
        with self._lock:
            if generation == self.generation:
                self._taken.add(weakref.ref(conn))
                self._taken.discard(weakref.ref(slot))
            replaced = self._lost > 0
            self._lost -= replaced
        if replaced and (observer := metrics.observer) is not None:
            observer.reconnected()
        return conn

    def _wait(self, deadline: float | None) -> None:
        """Sleep until a connection is returned or one wait slice passed; raise at ``deadline``."""
        remaining = _WAIT_SLICE if deadline is None else deadline - monotonic()
        if remaining <= 0:
            raise PoolTimeoutError(
                f"no connection free in the pool after {self.timeout} s "
                f"(all {self.max_size} in use; raise max_connections or release faster)"
            )
        with contextlib.suppress(queue.Empty):
            self.wakeups.get(timeout=min(remaining, _WAIT_SLICE))

    def put(self, conn: CoreConnection) -> None:
        """Return a connection; a broken one, or one from before a fork, is closed."""
        if conn.broken or self._closed or conn.generation != self.generation:
            if not conn.broken:
                conn.close()
            elif not self._closed:
                with self._lock:
                    self._lost += 1
                for idle in tuple(self._idle):  # polled at their next checkout
                    idle.last_used = -math.inf
            self._release(conn)
            return
        self._idle.append(conn)
        if self.waiters:
            self.wakeups.put(None)

    def _release(self, owner: CoreConnection | _Opening) -> None:
        """Free the slot of a closed connection (or of a failed opening)."""
        with self._lock:
            self._retired_round_trips += owner.round_trips
            self._taken.discard(weakref.ref(owner))
        if self.waiters:
            self.wakeups.put(None)

    def close(self) -> None:
        """Close idle connections now and in-use ones when they come back."""
        self._closed = True
        self.generation += 1  # those in use are stale: the hot path's generation check says so
        while True:
            try:
                conn = self._idle.pop()
            except IndexError:
                break
            conn.close()
            self._release(conn)


def _alive(conn: CoreConnection) -> bool:
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


if TYPE_CHECKING:
    _CORE_POOL: type[CorePool] = ConnectionPool  # mypy checks it gives the cores' ScriptCaller its API
