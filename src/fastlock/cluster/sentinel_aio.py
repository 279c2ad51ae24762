"""``AsyncSentinelClient``: the asyncio twin of :class:`~fastlock.cluster.sentinel.SentinelClient`
(the same discovery, verification, watching and re-sending rules), over
:class:`fastlock.aio.Client`. Build it with ``await AsyncSentinelClient.connect(...)``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from ..aio.client import AsyncLockQueueAccess, Client
from ..aio.drive import drive
from ..exceptions import ConnectionError, ReadOnlyError, ResponseError
from ..operations import AsyncRunner, Operation
from ..scripts.calling import ScriptSettingsAccess
from .asking import share_scripts
from .sentinel import master_reply, sentinel_reply
from .topology import Address, seed_address

__all__ = ["AsyncSentinelClient"]

T = TypeVar("T")
_log = logging.getLogger("fastlock.cluster")
_Send = Callable[[Client], Awaitable[Any]]


class AsyncSentinelClient(ScriptSettingsAccess, AsyncLockQueueAccess):
    """The master of ``service`` as ``sentinels`` name it, on asyncio (arguments of
    :class:`~fastlock.cluster.sentinel.SentinelClient`, options of :class:`fastlock.aio.Client`)."""

    def __init__(
        self,
        sentinels: Iterable[str],
        service: str,
        *,
        poll_interval: float | None = 0.1,
        failover_timeout: float = 10.0,
        sentinel_options: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        self.service = service
        self.failover_timeout = failover_timeout
        self.poll_interval = poll_interval
        self._options = options
        urls = [f"redis://{host}:{port}" for host, port in map(seed_address, sentinels)]
        self._sentinels = [Client(url, **(sentinel_options or {})) for url in urls]
        self._template = Client(**options)  # never connected: the settings of every master's client
        self.impl, self.scripts = self._template.impl, self._template.scripts
        self.script_settings = self._template.script_settings
        self._nodes: dict[Address, Client] = {}
        self._client: Client | None = None
        self._watcher: asyncio.Task[None] | None = None
        self.switches = 0

    @classmethod
    async def connect(cls, sentinels: Iterable[str], service: str, **kwargs: Any) -> AsyncSentinelClient:
        """A client on the discovered master, watching the sentinels (on the running loop)."""
        client = cls(sentinels, service, **kwargs)
        client._client = client._node(await client._discover())
        if client.poll_interval is not None:
            client._watcher = asyncio.get_running_loop().create_task(client._watch(client.poll_interval))
        return client

    @property
    def master(self) -> Address:
        """The master's address in use."""
        assert self._client is not None, "use `await AsyncSentinelClient.connect(...)`"
        return self._client.params.host, self._client.params.port

    def _node(self, address: Address) -> Client:
        node = self._nodes.get(address)
        if node is None:
            node = self._nodes[address] = Client(**self._options)
            node.params = replace(self._template.params, host=address[0], port=address[1])
            share_scripts(node, self._template)
            self.switches += 1
        return node

    async def _announced(self) -> Address:
        for sentinel in self._sentinels:
            try:
                reply = await sentinel.execute("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
            except (ConnectionError, ResponseError):
                continue
            if (address := sentinel_reply(reply)) is not None:
                return address
        raise ConnectionError(f"no sentinel knows a master of {self.service!r}", sent=False)

    async def _discover(self) -> Address:
        address = await self._announced()
        if not master_reply(await self._node(address).execute("ROLE")):
            raise ConnectionError(f"{address[0]}:{address[1]} is not (yet) a master", sent=False)
        return address

    async def _switch(self) -> None:
        address = await self._discover()
        if self._client is None or address != self.master:
            self._client = self._node(address)
            _log.warning("sentinel %r: master now at %s:%s", self.service, *address)

    async def _watch(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                if await self._announced() != self.master:
                    await self._switch()
            except (ConnectionError, ResponseError) as exc:
                _log.debug("sentinel watch: %s", exc)

    async def _send(self, send: _Send) -> Any:
        assert self._client is not None, "use `await AsyncSentinelClient.connect(...)`"
        try:
            return await send(self._client)
        except ReadOnlyError as exc:
            error: BaseException = exc
        except ConnectionError as exc:
            if exc.sent:
                raise
            error = exc
        deadline = time.monotonic() + self.failover_timeout
        pause = 0.01
        while True:
            try:
                await self._switch()
                return await send(self._client)
            except ReadOnlyError as exc:
                error = exc
            except ConnectionError as exc:
                if exc.sent:
                    raise
                error = exc
            if time.monotonic() + pause > deadline:
                raise error
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.2)

    async def call(
        self,
        name: str,
        keys: Sequence[Any] = (),
        args: Sequence[Any] = (),
        *,
        busy_timeout: float | None = None,
    ) -> Any:
        """Run script ``name`` on the master."""
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
