"""Connections of an asyncio client: a few multiplexed ones shared by every task, and
dedicated ones lent to one blocking command at a time.

Multiplexed: :meth:`Pool.pick` returns the least loaded open connection whose load is under
``max_in_flight`` (no await: the hot path); when all are at the bound, :meth:`Pool.acquire`
opens another (up to ``max_connections``) or waits until one has room. A connection that
closes leaves the pool at once (asyncio reports the EOF; no health polling).

Dedicated: a blocking command (``BLPOP``, ``BZPOPMIN``, ...) would hold up every reply
behind it, so it borrows a connection of its own (:meth:`Pool.borrow`, at most
``max_connections`` at once) and gives it back (:meth:`Pool.give_back`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from .. import metrics
from ..exceptions import ArgumentError, ConnectionError, PoolTimeoutError
from .connection import Connection

__all__ = ["Pool"]


class Pool:
    """Connections made by ``connect``. ``timeout`` bounds a wait for room (``None``: for ever)."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[Connection]],
        *,
        max_connections: int = 4,
        max_in_flight: int = 1024,
        timeout: float | None = 5.0,
    ) -> None:
        if max_connections < 1 or max_in_flight < 1:
            raise ArgumentError("max_connections and max_in_flight must be at least 1")
        self._connect = connect
        self.max_connections = max_connections
        self.max_in_flight = max_in_flight
        self.timeout = timeout
        self.connections: list[Connection] = []
        """The open multiplexed connections."""
        self._opening = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._idle: list[Connection] = []
        self._lent: set[Connection] = set()
        self._borrowers: deque[asyncio.Future[None]] = deque()
        self._borrowing = 0
        self._closed = False
        self.opened = 0
        """Connections opened so far (multiplexed and dedicated)."""
        self._lost = 0  # multiplexed connections lost and not yet replaced

    @property
    def writes(self) -> int:
        """Writes sent by the open multiplexed connections."""
        return sum(conn.writes for conn in self.connections)

    def pick(self) -> Connection | None:
        """The least loaded multiplexed connection with room, or ``None``."""
        best = None
        load = self.max_in_flight
        for conn in self.connections:
            if conn.load < load:
                best, load = conn, conn.load
        return best

    async def acquire(self) -> Connection:
        """A multiplexed connection with room: an open one, a new one, or the first to get room."""
        loop = asyncio.get_running_loop()
        deadline = None if self.timeout is None else loop.time() + self.timeout
        while True:
            if self._closed:
                raise ConnectionError("the client is closed", sent=False)
            conn = self.pick()
            if conn is not None:
                return conn
            if len(self.connections) + self._opening < self.max_connections:
                return await self._open()
            await self._wait(self._waiters, deadline, "multiplexed connections are full")

    async def _open(self) -> Connection:
        self._opening += 1
        try:
            conn = await self._connect()
        finally:
            self._opening -= 1
            _wake(self._waiters)
        self.opened += 1
        if self._closed:
            conn.close()
            raise ConnectionError("the client is closed", sent=False)
        if self._lost:
            self._lost -= 1
            if (observer := metrics.observer) is not None:
                observer.reconnected()
        conn.on_change = self._changed
        conn.room_waiters = self._waiters  # told after replies only while someone waits for room
        self.connections.append(conn)
        return conn

    def _changed(self, conn: Connection) -> None:
        if conn.closed and conn in self.connections:
            self.connections.remove(conn)
            if not self._closed:
                self._lost += 1
        if self._waiters and conn.load < self.max_in_flight:
            _wake(self._waiters)

    async def _wait(self, waiters: deque[asyncio.Future[None]], deadline: float | None, why: str) -> None:
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        waiters.append(waiter)
        try:
            if deadline is None:
                await waiter
            else:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise PoolTimeoutError(f"no room in the pool after {self.timeout} s ({why})")
                async with asyncio.timeout(remaining):
                    await waiter
        except TimeoutError:
            raise PoolTimeoutError(f"no room in the pool after {self.timeout} s ({why})") from None
        finally:
            if not waiter.done():
                waiter.cancel()
            if waiter in waiters:
                waiters.remove(waiter)

    async def borrow(self) -> Connection:
        """A dedicated connection, idle or new, for one blocking command."""
        loop = asyncio.get_running_loop()
        deadline = None if self.timeout is None else loop.time() + self.timeout
        while True:
            if self._closed:
                raise ConnectionError("the client is closed", sent=False)
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    self._lent.add(conn)
                    return conn
            if len(self._lent) + self._borrowing < self.max_connections:
                self._borrowing += 1
                try:
                    conn = await self._connect()
                finally:
                    self._borrowing -= 1
                    _wake(self._borrowers)
                self.opened += 1
                if self._closed:
                    conn.close()
                    raise ConnectionError("the client is closed", sent=False)
                self._lent.add(conn)
                return conn
            await self._wait(self._borrowers, deadline, "dedicated connections are all lent")

    def give_back(self, conn: Connection) -> None:
        """Return a dedicated connection: kept if no reply is owed on it, else closed (a
        blocking command still waiting on the server would hold up the next one)."""
        self._lent.discard(conn)
        if conn.awaiting_replies or self._closed:
            conn.close()
        elif not conn.closed:
            self._idle.append(conn)
        _wake(self._borrowers)

    async def close(self) -> None:
        """Close every connection, lent ones too (commands not answered fail), and wait for
        the sockets."""
        self._closed = True
        conns = [*self.connections, *self._idle, *self._lent]
        self.connections.clear()
        self._idle.clear()
        self._lent.clear()
        for conn in conns:
            conn.close()
        for waiters in (self._waiters, self._borrowers):
            _wake(waiters)
        await asyncio.gather(*(conn.wait_closed() for conn in conns))


def _wake(waiters: deque[asyncio.Future[None]]) -> None:
    """Wake every waiter: each looks again for room."""
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)
