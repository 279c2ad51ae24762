"""``AsyncSentinelClient``: the asyncio twin of :class:`~fastlock.cluster.sentinel.SentinelClient`
(the same discovery, verification, following and re-sending rules, from
:mod:`~fastlock.cluster.sentinel_follow`), over :class:`fastlock.aio.Client`; its watcher is
a task on the client's loop. Build it with ``await AsyncSentinelClient.connect(...)``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..aio.client import AsyncLockQueueAccess, Client
from ..aio.drive import drive
from ..exceptions import ConnectionError, ProtocolError, ReadOnlyError, ResponseError
from ..operations import AsyncRunner, Operation
from ..params import ConnectionParams, handshake_commands
from .durability import DURABLE_SCRIPTS, check_wait, durable_call_async
from .sentinel_follow import Resend, SentinelBase, sentinel_reply
from .topology import Address

__all__ = ["AsyncSentinelClient"]

T = TypeVar("T")
_log = logging.getLogger("fastlock.cluster")
_Send = Callable[[Client], Awaitable[Any]]


class AsyncSentinelClient(SentinelBase[Client], AsyncLockQueueAccess):
    """The master of ``service`` as ``sentinels`` name it, on asyncio (arguments of
    :class:`~fastlock.cluster.sentinel.SentinelClient`, options of :class:`fastlock.aio.Client`)."""

    def __init__(
        self,
        sentinels: Iterable[str],
        service: str,
        *,
        poll_interval: float | None = 5.0,
        failover_timeout: float = 10.0,
        sentinel_options: dict[str, Any] | None = None,
        wait: tuple[int, int] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(
            Client, sentinels, service, poll_interval, failover_timeout, sentinel_options, options
        )
        self.wait = check_wait(wait)
        self._watcher: asyncio.Task[None] | None = None

    @classmethod
    async def connect(cls, sentinels: Iterable[str], service: str, **kwargs: Any) -> AsyncSentinelClient:
        """A client on the discovered master, following the sentinels (on the running loop)."""
        client = cls(sentinels, service, **kwargs)
        try:
            await client._switch()
        except BaseException:
            await client.close()
            raise
        client._watcher = asyncio.get_running_loop().create_task(client._follow())
        return client

    async def _announced(self) -> Address:
        for sentinel in self._sentinels:
            try:
                address = sentinel_reply(await sentinel.execute(*self._announce_command()))
            except (ConnectionError, ResponseError):
                continue
            if address is not None:
                return address
        raise self._unknown()

    async def _switch(self, address: Address | None = None) -> None:
        """Use the master the sentinels announce (or ``address``), once verified by ``ROLE``."""
        address = address or await self._announced()
        self._use(self._verified(address, await self._node(address).execute("ROLE")))

    # ---- the watcher task

    async def _follow(self) -> None:
        """Subscribe to one sentinel after another until cancelled."""
        watch = self._watch
        while True:
            try:
                await self._subscribed(self._sentinels[watch.index].params)
            except (ConnectionError, ProtocolError, ResponseError, OSError) as exc:
                _log.debug("sentinel subscription: %s", exc)
            await asyncio.sleep(watch.lost())

    async def _subscribed(self, params: ConnectionParams) -> None:
        """Follow ``+switch-master`` on the sentinel at ``params`` (polling when due) until
        the connection is lost."""
        watch, core = self._watch, self._template._core
        async with asyncio.timeout(params.connect_timeout):
            stream, writer = await asyncio.open_connection(
                params.host,
                params.port,
                ssl=params.ssl_context,
                server_hostname=params.host if params.ssl_context else None,
            )
        try:
            writer.write(watch.subscribe(core, handshake_commands(params), time.monotonic()))
            while True:
                if watch.poll_due(time.monotonic()):
                    await self._check()
                try:
                    async with asyncio.timeout(watch.wait(time.monotonic())):
                        data = await stream.read(65536)
                except TimeoutError:
                    continue
                if (address := watch.received(data, self.master)) is not None:
                    await self._check(address)
        finally:
            writer.close()

    async def _check(self, address: Address | None = None) -> None:
        """Switch to ``address`` (announced) or to the master the sentinels name, if it moved."""
        try:
            if address is not None or await self._announced() != self.master:
                await self._switch(address)
        except (ConnectionError, ResponseError) as exc:
            _log.debug("sentinel check: %s", exc)
            if address is not None:  # not (yet) a master: the sentinels are asked again soon
                self._watch.poll_soon(time.monotonic())

    # ---- calls

    async def _send(self, send: _Send) -> Any:
        """``send`` to the master; after an error before the write, find the master and send
        again until ``failover_timeout``."""
        try:
            return await send(self._current)
        except (ReadOnlyError, ConnectionError) as exc:
            resend = Resend(exc, self.failover_timeout, time.monotonic())
        while True:
            await asyncio.sleep(resend.pause(time.monotonic()))
            try:
                await self._switch()
                return await send(self._current)
            except (ReadOnlyError, ConnectionError) as exc:
                resend.error = exc

    async def call(
        self,
        name: str,
        keys: Sequence[Any] = (),
        args: Sequence[Any] = (),
        *,
        busy_timeout: float | None = None,
    ) -> Any:
        """Run script ``name`` on the master (with ``wait``, lock acquires and claims are
        followed by ``WAIT`` in the same write)."""
        if self.wait is not None and name in DURABLE_SCRIPTS:
            script, settings, wait = self.scripts.get(name), self.script_settings, self.wait
            return await self._send(lambda c: durable_call_async(c, script, settings, keys, args, wait))
        return await self._send(lambda c: c.call(name, keys, args, busy_timeout=busy_timeout))

    async def execute(self, *args: Any) -> Any:
        """Run one command on the master."""
        return await self._send(lambda c: c.execute(*args))

    async def execute_blocking(self, *args: Any, timeout: float) -> Any:
        """Run a blocking command on the master."""
        return await self._send(lambda c: c.execute_blocking(*args, timeout=timeout))

    async def execute_many(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Send ``commands`` to the master in one write."""
        replies: list[Any] = await self._send(lambda c: c.execute_many(commands))
        return replies

    async def run(self, operation: Operation[T]) -> T:
        """Run a multi-step :data:`~fastlock.operations.Operation` with awaited calls."""
        return await drive(self, operation)

    async def close(self) -> None:
        """Stop watching and close every connection."""
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        for client in (*self._nodes.values(), *self._sentinels):
            await client.close()

    async def __aenter__(self) -> AsyncSentinelClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


if TYPE_CHECKING:
    _RUNNER: type[AsyncRunner] = AsyncSentinelClient  # mypy checks that it is an AsyncRunner
