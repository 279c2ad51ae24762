"""The asyncio client's wake-up listener: one subscribed connection for every waiter of every
lock name (the rules: :mod:`fastlock.locks.notify`). It opens on the first wait, is not in
the pool (a waiter never takes a pooled connection), and after a loss wakes every waiter
(they re-check) and subscribes again on the next wait; a routed one (a cluster node's, a
sentinel's master's) forgets them instead: they enter again where their channel is now."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from ..exceptions import ResponseError
from ..locks.notify import Channels, HandedSignal, WaiterTable, logger
from ..operations import AsyncRunner
from ..params import ConnectionParams

__all__ = ["AsyncListenerSlot", "AsyncSignal", "Listener"]


class _Closing(Protocol):
    def close(self) -> None: ...


L = TypeVar("L", bound=_Closing)


class AsyncListenerSlot(Generic[L]):
    """An asyncio client's listener, made at the first wait (one per client, so per event
    loop; the sync clients' per process: :class:`~fastlock.sync.listener_slot.ListenerSlot`)."""

    __slots__ = ("_listener",)

    def __init__(self) -> None:
        self._listener: L | None = None

    def get(self, make: Callable[[], L]) -> L:
        """The listener (``make()`` it if there is none yet)."""
        listener = self._listener
        if listener is None:
            listener = self._listener = make()
        return listener

    def current(self) -> L | None:
        """The listener, if made."""
        return self._listener

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()


class AsyncSignal(HandedSignal):
    """A waiter's wake-up flag on the running loop; ``token``: a lock handed over to ``job``."""

    __slots__ = ("_flag", "_waiter")

    def __init__(self, job: str = "") -> None:
        super().__init__(job)
        self._flag = False
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        self._flag = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def is_set(self) -> bool:
        return self._flag

    async def wait(self, timeout: float) -> int | None:
        """Until woken or ``timeout`` seconds, the flag then cleared; a signal already ``lost``
        sleeps it all (nothing will wake it). The token of a lock handed over, else ``None``."""
        if self.lost and self.token is None:
            await asyncio.sleep(timeout)
        elif not self._flag:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(timeout, _expire, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
        self._flag = False
        return self.token


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Listener(Channels, asyncio.Protocol):
    """The subscribed connection of one client (``params``, the core's RESP reader/encoders;
    ``shard`` and ``routed``: see :class:`~fastlock.locks.notify.Channels`)."""

    _table: WaiterTable[AsyncSignal]

    def __init__(
        self, params: ConnectionParams, core: Any, runner: AsyncRunner | None = None, **kind: bool
    ) -> None:
        super().__init__(params, core, runner, **kind)
        self._leaving: set[asyncio.Task[Any]] = set()
        self._confirming: dict[bytes, deque[asyncio.Future[None]]] = {}
        self._transport: asyncio.Transport | None = None
        self._opening: asyncio.Future[None] | None = None

    def abandon(self, call: Any) -> None:
        """Run ``call`` (a :class:`~fastlock.operations.Call`) for a waiter leaving the queue
        without its result (cancelled): in a task of its own, its failure logged."""
        if self._runner is None or self._closed:
            return
        task = asyncio.ensure_future(self._runner.call(call.name, call.keys, call.args))
        self._leaving.add(task)
        task.add_done_callback(self._left)

    def _left(self, task: asyncio.Task[Any]) -> None:
        self._leaving.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("a leaving lock waiter's release failed: %r", task.exception())

    def joins(self, channel: bytes) -> bool:
        """Whether ``channel`` has waiters of this client, its subscription confirmed: a new waiter
        joins them before its first attempt (which queues it)."""
        return self._transport is not None and channel not in self._confirming and self._table.has(channel)

    def join(self, channel: bytes, job: str = "") -> AsyncSignal | None:
        """A new waiter on ``channel`` if its subscription is confirmed already (no I/O), else
        ``None`` (enter with :meth:`listen`)."""
        return self._table.entered(channel, AsyncSignal(job)) if self.joins(channel) else None

    async def listen(self, channel: bytes, job: str = "") -> AsyncSignal:
        """A new waiter on ``channel``, once the server has confirmed the subscription (a
        later waiter of a channel still unconfirmed awaits the same confirmation), or after
        ``connect_timeout`` without it, or when the connection cannot be made: the waiter then
        re-checks every :data:`~fastlock.locks.notify.MAX_NAP` (a routed listener's leaves,
        ``lost``: it enters again after its nap). An error reply to the handshake (AUTH,
        SELECT) or to a ``SUBSCRIBE`` is raised here (``ResponseError``)."""
        signal = AsyncSignal(job)
        command = self._table.add(channel, signal)
        pending = self._confirming.get(channel)
        if command is None and not pending:
            return signal
        try:
            async with asyncio.timeout(self._params.connect_timeout):
                if command is None:
                    future = pending[-1]  # type: ignore[index]  # (pending is not empty here)
                else:
                    future = asyncio.get_running_loop().create_future()
                    self._confirming.setdefault(channel, deque()).append(future)
                    if await self._ready():
                        self._send([command])
                await asyncio.shield(future)
        except (TimeoutError, OSError):
            if self._routed:
                self.leave(channel, signal)
                signal.lost = True
        except BaseException:
            self.leave(channel, signal)
            raise
        return signal

    def leave(self, channel: bytes, signal: AsyncSignal) -> None:
        """The waiter is done (served, timed out or cancelled)."""
        command = self._table.remove(channel, signal)
        if command is not None and self._transport is not None:
            self._send([command])

    async def _ready(self) -> bool:
        """Connected (opening the connection if needed): True; closed: False."""
        if self._transport is not None:
            return True
        if self._closed:
            return False
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open())
        try:
            await asyncio.shield(self._opening)
        finally:
            if self._opening is not None and self._opening.done():
                self._opening = None
        return self._transport is not None

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        params = self._params
        if params.path:
            await loop.create_unix_connection(lambda: self, params.path)
        else:
            await loop.create_connection(
                lambda: self,
                params.host,
                params.port,
                ssl=params.ssl_context,
                server_hostname=params.host if params.ssl_context else None,
            )
        again = [self._table.subscribe(channel) for channel in self._table.channels()]
        for _, channel in again:  # unconfirmed again: a waiter joining them awaits it
            self._confirming.setdefault(channel, deque()).append(loop.create_future())
        self._send(self._greeting(again))

    def _send(self, commands: list[tuple[Any, ...]]) -> None:
        if self._transport is not None and commands:
            self._transport.write(self._core.encode_pipeline(commands))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._reader = self._core.ReplyReader()

    def data_received(self, data: bytes) -> None:
        replies, error = self._replies(data)
        for reply in replies:
            news = self._table.on_reply(reply)
            if news is not None and news[0]:
                self._confirm(news[1])
        if error is not None:
            self._fail(error)

    def _confirm(self, channel: bytes, error: BaseException | None = None) -> None:
        pending = self._confirming.get(channel)
        if pending:
            future = pending.popleft()
            if not pending:
                del self._confirming[channel]
            if future.done():
                return
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)

    def _fail(self, error: ResponseError) -> None:
        """An error reply (handshake or subscription): every waiter still being entered gets
        it (a routed listener's subscription: none does, they are lost); the connection is
        closed (the next wait opens a new one)."""
        moved = self._moved()
        for channel in list(self._confirming):
            while channel in self._confirming:
                self._confirm(channel, None if moved else error)
        if self._transport is not None:
            self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        for channel in list(self._confirming):  # unconfirmed: they fall back to re-checks
            while channel in self._confirming:
                self._confirm(channel)
        self._wake_all()

    def drop(self) -> None:
        """Close the connection, the listener kept (a routed one's waiters enter again elsewhere)."""
        if self._transport is not None:
            self._transport.close()

    def close(self) -> None:
        """Close the connection (waiters fall back to their re-checks)."""
        self._closed = True
        if self._transport is not None:
            self._transport.close()
