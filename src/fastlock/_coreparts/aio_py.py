"""The asyncio connection in pure Python: the twin of the Cython ``_coreparts/aio_conn.pxi``
(``MuxConnection``; ``asyncio.Future`` in place of ``aio_reply.pxi``'s ``Reply``), in the same
steps, writing with the encoders of :mod:`fastlock._coreparts.resp_py`. asyncio is imported by
the first connection made, never with the core (a sync client does not load it)."""

from __future__ import annotations

import math
import socket
from collections import deque
from collections.abc import Callable, Coroutine
from time import monotonic
from typing import Any, final

from ..exceptions import OUT_OF_STEP, ConnectionError, ProtocolError, TimeoutError
from .resp_py import NOT_ENOUGH, ReplyReader, put_command, put_evalsha

__all__ = ["MuxConnection"]


class _Request:
    """A request awaiting its reply (``count`` 0), or its ``count`` replies (in ``replies``);
    ``seq`` its number in write order once written; ``deadline`` on ``monotonic()``, or NaN."""

    __slots__ = ("count", "deadline", "future", "payload", "replies", "seq")

    def __init__(self, future: Any, payload: list[bytes], count: int, deadline: float) -> None:
        self.future = future
        self.payload = payload
        self.count = count
        self.deadline = deadline
        self.seq = -1
        self.replies: list[Any] | None = None


@final
class MuxConnection:
    """The twin of the Cython core's ``MuxConnection`` (``_coreparts/aio_conn.pxi``): an
    asyncio protocol for many tasks' requests on one connection, in the same steps."""

    def __init__(self, loop: Any, address: str = "", stalled_after: float = 5.0) -> None:
        import asyncio

        self._asyncio = asyncio
        self._address = address
        self._load = 0
        self._writes = 0
        self._closed = False
        self.on_change: Callable[[Any], None] | None = None
        self.room_waiters: Any = None
        self._loop = loop
        self._reader = ReplyReader()
        self._stalled_after = stalled_after
        self._transport: Any = None
        self._pending: list[_Request] = []
        self._written: deque[_Request] = deque()
        self._flush_scheduled = False
        self._paused = False
        self._watch: Any = None
        self._watch_at = 0.0
        self._sent = 0
        self._answered = 0
        self._lost: Any = None

    @property
    def address(self) -> str:
        return self._address

    @property
    def load(self) -> int:
        return self._load

    @property
    def writes(self) -> int:
        return self._writes

    @property
    def closed(self) -> bool:
        return self._closed

    # ---- asyncio.Protocol

    def connection_made(self, transport: Any) -> None:
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)

    def data_received(self, data: Any) -> None:
        reader = self._reader
        written = self._written
        try:
            reader.feed(bytes(data))
            reply = reader.gets()
            while reply is not NOT_ENOUGH:
                if not written:
                    raise ProtocolError(OUT_OF_STEP)
                request = written[0]
                if not request.count:
                    self._answer(reply)
                else:
                    replies = request.replies
                    if replies is None:
                        replies = request.replies = []
                    replies.append(reply)
                    if len(replies) == request.count:
                        self._answer(replies)
                reply = reader.gets()
        except ProtocolError as exc:
            text = str(exc)
            self._fail(lambda: ProtocolError(text))
            return
        if self.room_waiters and self.on_change is not None:
            self.on_change(self)

    def _answer(self, reply: Any) -> None:
        request = self._written.popleft()
        self._answered += 1
        self._load -= 1
        if not request.future.done():  # else its caller gave up (cancelled, timed out): dropped
            request.future.set_result(reply)

    def eof_received(self) -> None:
        return None  # the transport closes; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        message = f"connection to {self._address} lost" + (f": {exc}" if exc else " (closed by the server)")
        self._fail(lambda: ConnectionError(message, sent=True))
        self._closed_event().set()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._pending and not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    # ---- requests

    def send(self, payload: bytes, count: int = 0, timeout: float | None = None) -> Any:
        """Queue ``payload`` (``count`` commands, 0: one) for the next flush; the future gets
        its reply, or the list of its ``count`` replies. Error replies are values. After
        ``timeout`` seconds (``None``: never) the future gets a ``TimeoutError``."""
        if not isinstance(payload, bytes):
            raise TypeError(
                f"Argument 'payload' has incorrect type (expected bytes, got {type(payload).__name__})"
            )
        deadline = math.nan if timeout is None else monotonic() + timeout
        future = self._new_future()
        self._queued(future, [payload], count, deadline)
        return future

    def _send_evalsha(self, entry: Any, keys: Any, args: Any, deadline: float) -> Any:
        """EVALSHA of ``entry``'s script encoded; its future."""
        future = self._new_future()
        out: list[bytes] = []
        put_evalsha(out, entry.sha, keys, args, entry.head, -1)
        self._queued(future, out, 0, deadline)
        return future

    def _send_command(self, args: tuple[Any, ...], deadline: float) -> Any:
        """Command ``args`` encoded; its future."""
        future = self._new_future()
        out: list[bytes] = []
        put_command(out, args, -1)
        self._queued(future, out, 0, deadline)
        return future

    def _new_future(self) -> Any:
        if self._closed:
            raise ConnectionError(f"connection to {self._address} is closed", sent=False)
        return self._asyncio.Future(loop=self._loop)

    def _queued(self, future: Any, payload: list[bytes], count: int, deadline: float) -> None:
        self._pending.append(_Request(future, payload, count, deadline))
        self._load += 1
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        if deadline == deadline and (self._watch is None or deadline < self._watch_at):  # not NaN
            self._arm(deadline)

    @property
    def awaiting_replies(self) -> int:
        """Written requests whose replies have not come yet."""
        return len(self._written)

    def _flush(self) -> None:
        """Write every pending request whose future is not done yet, in one write."""
        self._flush_scheduled = False
        if self._paused or self._closed or not self._pending:
            return
        pending, self._pending = self._pending, []
        parts: list[bytes] = []
        for request in pending:
            if request.future.done():  # cancelled or timed out before it was written: dropped
                self._load -= 1
                continue
            request.seq = self._sent
            self._sent += 1
            parts += request.payload
            self._written.append(request)
        if parts:
            self._writes += 1
            self._transport.write(b"".join(parts))
        elif self.on_change is not None:
            self.on_change(self)

    # ---- deadlines

    def _arm(self, deadline: float) -> None:
        if self._watch is not None:
            self._watch.cancel()
        self._watch_at = deadline
        self._watch = self._loop.call_later(max(0.0, deadline - monotonic()), self._expire)

    def _expire(self) -> None:
        """Time out every request past its deadline; watch the next deadline."""
        now = monotonic()
        earliest = math.nan
        self._watch = None
        written = len(self._written)
        for i, request in enumerate((*self._written, *self._pending)):
            deadline = request.deadline
            if deadline != deadline or request.future.done():
                continue
            if deadline <= now:
                sent = i < written
                where = "after it was sent" if sent else "before it was sent"
                request.future.set_exception(
                    TimeoutError(f"no reply from {self._address} in time ({where})", sent=sent)
                )
                if sent:
                    self._loop.call_later(self._stalled_after, self._check_stalled, request.seq)
            elif earliest != earliest or deadline < earliest:
                earliest = deadline
        if earliest == earliest:
            self._arm(earliest)

    def _check_stalled(self, seq: int) -> None:
        """Close the connection if written request ``seq``, past its deadline, is unanswered."""
        if self._closed or self._answered > seq:
            return
        message = f"{self._address} stopped answering: the connection was closed"
        self._fail(lambda: TimeoutError(message, sent=True))

    # ---- closing

    def _fail(self, written_error: Callable[[], Exception]) -> None:
        """Close and fail every request: written ones with a ``written_error()`` each (they
        may have run), unwritten ones with an unsent ``ConnectionError``."""
        if self._closed:
            return
        self._closed = True
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        requests = [(True, r) for r in self._written] + [(False, r) for r in self._pending]
        self._answered += len(self._written)
        self._written.clear()
        self._pending.clear()
        unsent = f"connection to {self._address} closed before the command was sent"
        for written, request in requests:
            if not request.future.done():
                request.future.set_exception(
                    written_error() if written else ConnectionError(unsent, sent=False)
                )
        self._load = 0
        if self._transport is None:
            self._closed_event().set()
        else:
            self._transport.abort()
        if self.on_change is not None:
            self.on_change(self)

    def _closed_event(self) -> Any:
        if self._lost is None:
            self._lost = self._asyncio.Event()
        return self._lost

    def close(self) -> None:
        """Close now: requests not answered fail with ``ConnectionError``."""
        message = f"connection to {self._address} closed by the client"
        self._fail(lambda: ConnectionError(message, sent=True))

    def wait_closed(self) -> Coroutine[Any, Any, Any]:
        """Wait until the transport has let go of the socket (a coroutine)."""
        coroutine: Coroutine[Any, Any, Any] = self._closed_event().wait()
        return coroutine
