"""The asyncio client's wake-up listener: one subscribed connection for every waiter of every
lock name (the rules: :mod:`fastlock.locks.notify`). It opens on the first wait, is not in
the pool (a waiter never takes a pooled connection), and after a loss wakes every waiter
(they re-check) and subscribes again on the next wait."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from ..locks.notify import WaiterTable
from ..params import ConnectionParams, handshake_commands

__all__ = ["AsyncSignal", "Listener"]


class AsyncSignal:
    """A waiter's wake-up flag on the running loop."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self, timeout: float) -> None:
        """Until woken or ``timeout`` seconds; the flag is cleared for the next wait."""
        if not self._event.is_set():
            try:
                async with asyncio.timeout(timeout):
                    await self._event.wait()
            except TimeoutError:
                pass
        self._event.clear()


class Listener(asyncio.Protocol):
    """The subscribed connection of one client (``params``, the core's RESP reader/encoders)."""

    def __init__(self, params: ConnectionParams, core: Any) -> None:
        self._params = params
        self._core = core
        self._table: WaiterTable[AsyncSignal] = WaiterTable()
        self._confirming: dict[bytes, deque[asyncio.Future[None]]] = {}
        self._transport: asyncio.Transport | None = None
        self._opening: asyncio.Future[None] | None = None
        self._reader: Any = None
        self._closed = False

    async def listen(self, channel: bytes) -> AsyncSignal:
        """A new waiter on ``channel``, once the server has confirmed the subscription (or
        after ``connect_timeout`` without it: the waiter then re-checks every
        :data:`~fastlock.locks.notify.MAX_NAP`)."""
        signal = AsyncSignal()
        command = self._table.add(channel, signal)
        if command is None:
            return signal
        future = asyncio.get_running_loop().create_future()
        self._confirming.setdefault(channel, deque()).append(future)
        try:
            async with asyncio.timeout(self._params.connect_timeout):
                if await self._ready():
                    self._send([command])
                await asyncio.shield(future)
        except (TimeoutError, OSError):
            pass
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
        again = [("SUBSCRIBE", channel) for channel in self._table.channels()]
        self._send([*handshake_commands(params), *again])

    def _send(self, commands: list[tuple[Any, ...]]) -> None:
        if self._transport is not None and commands:
            self._transport.write(self._core.encode_pipeline(commands))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._reader = self._core.ReplyReader()

    def data_received(self, data: bytes) -> None:
        reader, not_enough = self._reader, self._core.NOT_ENOUGH
        reader.feed(data)
        reply = reader.gets()
        while reply is not not_enough:
            channel = self._table.on_reply(reply)
            if channel is not None:
                pending = self._confirming.get(channel)
                if pending:
                    future = pending.popleft()
                    if not pending:
                        del self._confirming[channel]
                    if not future.done():
                        future.set_result(None)
            reply = reader.gets()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._table.wake_all()

    def close(self) -> None:
        """Close the connection (waiters fall back to their re-checks)."""
        self._closed = True
        if self._transport is not None:
            self._transport.close()
