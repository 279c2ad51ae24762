"""One multiplexed asyncio connection: many tasks' commands coalesced into one write per loop
iteration, their replies matched in order.

:meth:`Connection.send` appends an encoded request (one command, or several sent together)
to the pending buffer and returns a future; the first request of an iteration schedules one
flush (``loop.call_soon``), which writes every pending request in one ``transport.write``.
Replies are read with the core's ``ReplyReader`` and handed, in FIFO order, to the written
requests' futures.

Cancellation and timeouts (the caller's future is then done before its reply came):

- a request whose future is done before the flush is never written;
- a written request keeps its place in the reply order: its reply is read and dropped, and
  the connection stays open and in step;
- a deadline expiring sets :class:`~fastlock.TimeoutError` on the future, ``sent`` saying
  whether the request was written. One timer per connection watches the earliest deadline;
- a written request still unanswered :data:`STALLED_AFTER` seconds past its deadline means
  the server stopped answering: the connection is closed, its other written requests fail
  with ``TimeoutError(sent=True)`` and the pool opens a fresh one.

Losing the connection fails written requests with ``ConnectionError(sent=True)`` and
unwritten ones with ``sent=False`` (safe to send again on another connection).
"""

from __future__ import annotations

import asyncio
import builtins
import socket
from collections import deque
from collections.abc import Callable
from typing import Any, cast

from .._impl import Core
from ..exceptions import OUT_OF_STEP, ConnectionError, ProtocolError, ResponseError, TimeoutError
from ..params import ConnectionParams, handshake_commands

__all__ = ["STALLED_AFTER", "Connection", "open_connection"]

STALLED_AFTER = 5.0
"""Seconds a written request may stay unanswered past its deadline before its connection is
closed as stalled (a slow reply inside this grace is read and dropped, the connection kept)."""


class _Request:
    """Encoded commands awaiting their replies: one (``count`` 0), or a list of ``count``
    (collected in ``replies``); ``written`` once flushed; ``deadline`` on the loop's clock
    or ``None``."""

    __slots__ = ("count", "deadline", "future", "payload", "replies", "written")

    def __init__(
        self, future: asyncio.Future[Any], payload: bytes, count: int, deadline: float | None
    ) -> None:
        self.future = future
        self.payload = payload
        self.count = count
        self.deadline = deadline
        self.written = False
        self.replies: list[Any] | None = None


class Connection(asyncio.Protocol):
    """An asyncio protocol speaking RESP2 through a core's encoders and reader.

    ``load`` counts the requests not answered yet (pending, written, and those whose callers
    gave up: they still take a reply); ``writes`` counts the transport writes;
    ``on_change`` (set by the pool) is called when the load dropped or the connection closed.
    """

    def __init__(self, core: Core, address: str = "") -> None:
        self.address = address
        self.load = 0
        self.writes = 0
        self.closed = False
        self.on_change: Callable[[Connection], None] | None = None
        self._reader = core.ReplyReader()
        self._not_enough = core.NOT_ENOUGH
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._pending: list[_Request] = []
        self._written: deque[_Request] = deque()
        self._flush_scheduled = False
        self._paused = False
        self._watch: asyncio.TimerHandle | None = None
        self._watch_at = 0.0
        self._lost = asyncio.Event()

    # ---- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast("asyncio.Transport", transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        not_enough = self._not_enough
        written = self._written
        try:
            reader.feed(data)
            reply = reader.gets()
            while reply is not not_enough:
                if not written:
                    raise ProtocolError(OUT_OF_STEP)
                request = written[0]
                if not request.count:
                    written.popleft()
                    self.load -= 1
                    future = request.future
                    if not future.done():
                        future.set_result(reply)
                else:
                    replies = request.replies
                    if replies is None:
                        replies = request.replies = []
                    replies.append(reply)
                    if len(replies) == request.count:
                        written.popleft()
                        self.load -= 1
                        if not request.future.done():
                            request.future.set_result(replies)
                reply = reader.gets()
        except ProtocolError as exc:
            text = str(exc)
            self._fail(lambda: ProtocolError(text))
            return
        if self.on_change is not None:
            self.on_change(self)

    def connection_lost(self, exc: Exception | None) -> None:
        message = f"connection to {self.address} lost" + (f": {exc}" if exc else " (closed by the server)")
        self._fail(lambda: ConnectionError(message, sent=True))
        self._lost.set()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._pending and not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    # ---- requests

    def send(self, payload: bytes, count: int = 0, timeout: float | None = None) -> asyncio.Future[Any]:
        """Queue ``payload`` for the next flush; the future gets its reply, or the list of its
        ``count`` replies when ``count`` is not 0 (``payload`` then holds that many commands).
        Error replies are values (``ResponseError`` instances), not raised. After ``timeout``
        seconds (``None``: never) the future gets a :class:`~fastlock.TimeoutError`."""
        if self.closed:
            raise ConnectionError(f"connection to {self.address} is closed", sent=False)
        loop = self._loop
        future = loop.create_future()
        deadline = None if timeout is None else loop.time() + timeout
        self._pending.append(_Request(future, payload, count, deadline))
        self.load += 1
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        if deadline is not None and (self._watch is None or deadline < self._watch_at):
            self._arm(deadline)
        return future

    @property
    def awaiting_replies(self) -> int:
        """Written requests whose replies have not come yet."""
        return len(self._written)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._paused or self.closed:
            return
        pending, self._pending = self._pending, []
        parts = []
        written = self._written
        for request in pending:
            if request.future.done():  # cancelled or timed out before it was written: dropped
                self.load -= 1
                continue
            request.written = True
            parts.append(request.payload)
            written.append(request)
        if parts:
            self.writes += 1
            self._transport.write(b"".join(parts))  # type: ignore[union-attr]
        elif self.on_change is not None:
            self.on_change(self)

    # ---- deadlines

    def _arm(self, deadline: float) -> None:
        if self._watch is not None:
            self._watch.cancel()
        self._watch_at = deadline
        self._watch = self._loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        """Time out every request past its deadline; watch the next deadline."""
        self._watch = None
        now = self._loop.time()
        earliest: float | None = None
        for request in (*self._pending, *self._written):
            deadline = request.deadline
            if deadline is None or request.future.done():
                continue
            if deadline <= now:
                sent = request.written
                where = "after it was sent" if sent else "before it was sent"
                request.future.set_exception(
                    TimeoutError(f"no reply from {self.address} in time ({where})", sent=sent)
                )
                if sent:
                    self._loop.call_later(STALLED_AFTER, self._check_stalled, request)
            elif earliest is None or deadline < earliest:
                earliest = deadline
        if earliest is not None:
            self._arm(earliest)

    def _check_stalled(self, request: _Request) -> None:
        """Close the connection if ``request``, past its deadline, is still unanswered."""
        if self.closed or request not in self._written:
            return
        message = f"{self.address} stopped answering: the connection was closed"
        self._fail(lambda: TimeoutError(message, sent=True))

    # ---- closing

    def _fail(self, written_error: Callable[[], Exception]) -> None:
        """Close and fail every request: written ones with a ``written_error()`` each (they
        may have run), unwritten ones with an unsent ``ConnectionError``."""
        if self.closed:
            return
        self.closed = True
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        for request in self._written:
            if not request.future.done():
                request.future.set_exception(written_error())
        unsent = f"connection to {self.address} closed before the command was sent"
        for request in self._pending:
            if not request.future.done():
                request.future.set_exception(ConnectionError(unsent, sent=False))
        self._written.clear()
        self._pending.clear()
        self.load = 0
        if self._transport is None:
            self._lost.set()
        else:
            self._transport.abort()
        if self.on_change is not None:
            self.on_change(self)

    def close(self) -> None:
        """Close now: requests not answered fail with :class:`~fastlock.ConnectionError`."""
        message = f"connection to {self.address} closed by the client"
        self._fail(lambda: ConnectionError(message, sent=True))

    async def wait_closed(self) -> None:
        """Wait until the transport has let go of the socket."""
        await self._lost.wait()


async def open_connection(params: ConnectionParams, core: Core) -> Connection:
    """Connect (TCP, unix socket or TLS) within ``params.connect_timeout`` and send the
    handshake (AUTH, SELECT, CLIENT SETNAME) in one write."""
    loop = asyncio.get_running_loop()
    address = params.address

    def make() -> Connection:
        return Connection(core, address)

    try:
        async with asyncio.timeout(params.connect_timeout):
            if params.path:
                _, conn = await loop.create_unix_connection(make, params.path)
            else:
                _, conn = await loop.create_connection(
                    make,
                    params.host,
                    params.port,
                    ssl=params.ssl_context,
                    server_hostname=params.host if params.ssl_context else None,
                )
    except builtins.TimeoutError as exc:
        raise TimeoutError(f"connecting to {address} timed out", sent=False) from exc
    except OSError as exc:
        raise ConnectionError(f"cannot connect to {address}: {exc}", sent=False) from exc
    handshake = handshake_commands(params)
    if handshake:
        try:
            async with asyncio.timeout(params.connect_timeout):
                replies = await conn.send(core.encode_pipeline(handshake), len(handshake))
        except BaseException:
            conn.close()
            raise
        for reply in replies:
            if isinstance(reply, ResponseError):
                conn.close()
                raise reply
    return conn
