"""``AsyncSentinelClient``: the client (a :class:`~fastlock.operations.AsyncRunner`, over
:class:`fastlock.aio.Client`) of the master a set of Redis Sentinels name, following failovers.
Build it with ``await AsyncSentinelClient.connect(...)``.

``cluster/sentinel_aio.py`` is the source of both sentinel clients: ``tools/async_to_sync.py``
writes the sync ``cluster/sentinel.py`` from it (an ``if True:  # ASYNC`` block holds what one
side does alone, its ``else`` part the sync side's).

The master is found by ``SENTINEL GET-MASTER-ADDR-BY-NAME`` (each sentinel in turn) and
verified by ``ROLE`` before use. It is followed in three ways:

- a watcher (a task on the client's loop; a thread of the sync client) holds a ``SUBSCRIBE
  +switch-master`` connection to one sentinel and switches to the master each message about
  the service announces (verified by ``ROLE``); when that connection is lost it subscribes to
  the next sentinel and asks for the master at once (a message may have been missed meanwhile);
- the same watcher asks a sentinel every ``poll_interval`` seconds, a safety net for a lost
  message (a demoted master may accept writes for a while after the sentinels announced its
  successor, so waiting for an error is not enough);
- a ``READONLY`` reply or a connection error before the write (the topology moved) makes the
  call find the master again and run again, until ``failover_timeout``.

Like everywhere else, what may have run (a timeout, a connection lost after the write) is
raised, never re-sent. The rules both clients follow are in :mod:`~fastlock.cluster.sentinel_follow`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..aio.client import AsyncLockQueueAccess, Client
from ..aio.drive import drive
from ..exceptions import ConnectionError, ProtocolError, ReadOnlyError, ResponseError
from ..operations import AsyncRunner, Operation
from ..params import handshake_commands
from .durability import DURABLE_SCRIPTS, check_wait, durable_call_async
from .listeners_aio import AsyncRoutedListener
from .sentinel_follow import Resend, SentinelBase, master_reply, sentinel_reply
from .topology import Address

if True:  # ASYNC
    import asyncio

    from ..aio.notify import AsyncListenerSlot
else:
    import builtins

    from ..sync.connect import open_connection, set_io_timeout
    from ..sync.listener_slot import ListenerSlot  # noqa: F401 (AsyncListenerSlot there)

    _READ_TIMEOUTS = (builtins.TimeoutError, BlockingIOError)

__all__ = ["AsyncSentinelClient", "master_reply", "sentinel_reply"]

T = TypeVar("T")
_log = logging.getLogger("fastlock.cluster")
_Send = Callable[[Client], Awaitable[Any]]


class AsyncSentinelClient(SentinelBase[Client], AsyncLockQueueAccess):
    """A client of the master of ``service`` as ``sentinels`` (``host:port`` or URLs) name it.
    ``options`` are those of :class:`fastlock.aio.Client` for the master (``sentinel_options`` for
    the sentinels, e.g. their password); ``poll_interval`` is the safety poll's period
    (``None``: follow ``+switch-master`` only); ``wait=(replicas, ms)`` as for
    :class:`~fastlock.cluster.AsyncClusterClient`. Locks and queues work unchanged on it."""

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
        self.wait = wait
        self._switch_lock = threading.Lock()
        self._listeners: AsyncListenerSlot[AsyncRoutedListener] = AsyncListenerSlot()
        if True:  # ASYNC: connected by connect()
            self._watcher: asyncio.Task[None] | None = None
        else:
            self._closed = threading.Event()
            self._watcher = threading.Thread(target=self._follow, name="fastlock-sentinel", daemon=True)
            try:
                self._switch()
            except BaseException:
                self.close()
                raise
            self._watcher.start()

    if True:  # ASYNC

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

    else:

        @classmethod
        def from_redis(cls, redis_client: Any, **kwargs: Any) -> AsyncSentinelClient:
            """A client of the master a redis-py ``Sentinel.master_for(...)`` client follows (the
            same sentinels, service, credentials and timeouts); ``kwargs`` go to the constructor."""
            from ..interop.redis_py import sentinel_from_redis

            sentinels, service, master, sentinel_options = sentinel_from_redis(redis_client)
            return cls(sentinels, service, sentinel_options=sentinel_options, **{**master, **kwargs})

    @property
    def wait(self) -> tuple[int, int] | None:
        """``(replicas, ms)``: ``WAIT`` after each lock acquire and claim, or ``None``."""
        return self._wait

    @wait.setter
    def wait(self, wait: tuple[int, int] | None) -> None:
        self._wait = check_wait(wait)

    @property
    def client(self) -> Client:
        """The client of the master in use."""
        return self._current

    @property
    def listener(self) -> AsyncRoutedListener:
        """The wake-up listener of this client's blocked lock acquirers (made at the first wait;
        :mod:`fastlock.cluster.listeners_aio`): one connection to the master in use, dropped
        when the master changes (its waiters then enter again on the new master's)."""
        return self._listeners.get(self._new_listener)

    def _new_listener(self) -> AsyncRoutedListener:
        async def route(channel: bytes) -> Address:
            return self.master

        template = self._template
        return AsyncRoutedListener(
            self,
            template._core,
            lambda channel: self.master,
            route,
            lambda address: self._node(address).params,
            shard=False,
            db=template.params.db,
        )

    def _use(self, address: Address) -> None:
        """Send from now on to the (verified) master at ``address``; the old master's
        listener connection is dropped."""
        old = None if self._client is None else self.master
        super()._use(address)
        if old is None or old == address:
            return
        listener = self._listeners.current()  # if made (the sync client's: in this process)
        if listener is not None:
            listener.retire(old)

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
        address = self._verified(address, await self._node(address).execute("ROLE"))
        with self._switch_lock:
            self._use(address)

    # ---- the watcher

    async def _follow(self) -> None:
        """Subscribe to one sentinel after another until cancelled (the sync client: closed)."""
        watch = self._watch
        while True:
            try:
                await self._subscribed(self._sentinels[watch.index])
            except (ConnectionError, ProtocolError, ResponseError, OSError) as exc:
                _log.debug("sentinel subscription: %s", exc)
            if True:  # ASYNC
                await asyncio.sleep(watch.lost())
            else:
                if self._closed.wait(watch.lost()):
                    return

    if True:  # ASYNC

        async def _subscribed(self, sentinel: Client) -> None:
            """Follow ``+switch-master`` on ``sentinel`` (polling when due) until the connection
            is lost."""
            watch, core, params = self._watch, self._template._core, sentinel.params
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

    else:

        def _subscribed(self, sentinel: Client) -> None:
            """Follow ``+switch-master`` on ``sentinel`` (polling when due) until the connection
            is lost or the client closed."""
            watch, core = self._watch, sentinel._core
            conn = open_connection(sentinel.params, core)  # the handshake done
            try:
                sock = conn.sock
                sock.sendall(watch.subscribe(core, (), time.monotonic()))
                while not self._closed.is_set():
                    if watch.poll_due(time.monotonic()):
                        self._check()
                    set_io_timeout(sock, watch.wait(time.monotonic()) or 0.001)
                    try:
                        data = sock.recv(65536)
                    except _READ_TIMEOUTS:
                        continue
                    if (address := watch.received(data, self.master)) is not None:
                        self._check(address)
            finally:
                conn.close()

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

    async def _send(self, send: _Send, error: BaseException | None = None) -> Any:
        """``send`` to the master; after an error before the write (``error``: the first
        call's), find the master and send again until ``failover_timeout``."""
        if error is None:
            try:
                return await send(self._current)
            except (ReadOnlyError, ConnectionError) as exc:
                error = exc
        resend = Resend(error, self.failover_timeout, time.monotonic())
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
        if self._wait is not None and name in DURABLE_SCRIPTS:
            script, settings, wait = self.scripts.get(name), self.script_settings, self._wait
            return await self._send(lambda c: durable_call_async(c, script, settings, keys, args, wait))
        try:
            return await self._current.call(name, keys, args, busy_timeout=busy_timeout)
        except (ReadOnlyError, ConnectionError) as exc:
            error = exc
        return await self._send(lambda c: c.call(name, keys, args, busy_timeout=busy_timeout), error)

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
        """Run a multi-step :data:`~fastlock.operations.Operation` on this client."""
        return await drive(self, operation)

    async def close(self) -> None:
        """Stop watching and close every connection."""
        if True:  # ASYNC
            if self._watcher is not None:
                self._watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._watcher
        else:  # the watcher stops within its tick
            self._closed.set()
            if self._watcher.ident is not None and self._watcher is not threading.current_thread():
                self._watcher.join(5.0)
        if (listener := self._listeners.current()) is not None:
            listener.close()
        for client in (*self._nodes.values(), *self._sentinels):
            await client.close()

    async def __aenter__(self) -> AsyncSentinelClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<fastlock.cluster.AsyncSentinelClient {self.service!r} at {self.master[0]}:{self.master[1]}>"


if TYPE_CHECKING:
    _RUNNER: type[AsyncRunner] = AsyncSentinelClient  # mypy checks the runner protocol
