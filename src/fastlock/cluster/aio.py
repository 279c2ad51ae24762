"""``AsyncClusterClient``: a :class:`~fastlock.operations.AsyncRunner` over a Redis/Valkey
Cluster, one :class:`fastlock.aio.Client` per node (its pool, retry policy and script-call
policy, NOSCRIPT repaired per node), all sharing one script registry and settings.

``cluster/aio.py`` is the source of both cluster clients: ``tools/async_to_sync.py`` writes the
sync ``cluster/client.py`` from it (an ``if True:  # ASYNC`` block holds what one side does
alone, its ``else`` part the sync side's).

A call goes to the primary of the slot of its first key (:mod:`fastlock.cluster.routing`: no
extra round trip); a redirect or a wait reply runs :func:`~fastlock.cluster.routing.redirected`.
The sync client's script call takes the standalone client's path with one step more, in the
core: its ``SlotRouter`` finds the slot (cached per key) and the node's ``ScriptCaller``
(cached per slot in the slot map's ``routes``), without a Python frame; redirects leave that
path for ``_call_failed``. Every script is loaded on every node, replicas included, when the
client first meets the node (``SCRIPT LOAD`` is not replicated since Redis 7.0): after a
failover the new primary already has them. A refresh runs while the calls that asked for it go
on with the patched map.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..aio.client import AsyncLockQueueAccess, Client
from ..aio.drive import drive
from ..aio.pipeline import BoundScript, Pipeline
from ..aio.script_calls import AsyncScriptCalls
from ..exceptions import ConnectionError, ResponseError
from ..operations import AsyncRunner, Operation, run_plan_async
from ..params import DEFAULT_URL
from ..protocol.commands import refuse_connection_state, refuse_each
from ..protocol.slots import SLOTS, key_slot
from ..scripts.calling import ScriptSettingsAccess, register
from .asking import command_commands, is_redirect, script_commands
from .asking import reply as asking_reply
from .commands import CommandTable, Query
from .durability import DURABLE_SCRIPTS, check_wait, durable_call_async
from .listeners_aio import AsyncRoutedListener
from .nodes_aio import AsyncClusterNodes
from .routing import Attempt, Pause, Plan, Refresh, SlotCache, redirected
from .topology import Address

if True:  # ASYNC
    import asyncio

    from ..aio.notify import AsyncListenerSlot
else:
    import time  # noqa: F401 (asyncio.sleep is time.sleep there)

    from ..scripts.calling import ScriptSettings
    from ..scripts.registry import Script
    from ..sync.listener_slot import ListenerSlot  # noqa: F401 (AsyncListenerSlot there)

__all__ = ["AsyncClusterClient"]

T = TypeVar("T")
_log = logging.getLogger("fastlock.cluster")
_Send = Callable[[Client, bool], Awaitable[Any]]


class AsyncClusterClient(AsyncClusterNodes, ScriptSettingsAccess, AsyncLockQueueAccess, AsyncScriptCalls):
    """A client of a Redis/Valkey Cluster; ``url`` (and ``seeds``, more ``host:port`` or
    URLs) names nodes to read the slot map from; ``wait=(replicas, ms)`` sends ``WAIT`` after
    each lock acquire and claim, in the same write, and raises
    :class:`~fastlock.cluster.durability.ReplicationError` when fewer replicas acknowledged.
    The other arguments are those of :class:`fastlock.aio.Client`, applied to each node's client
    (``max_connections`` per node). Locks and queues work unchanged: ``client.lock(...)``,
    ``client.queue(...)``. Close it with ``await client.close()`` or ``async with``."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        seeds: Iterable[str] = (),
        wait: tuple[int, int] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(url, seeds, options)
        self._slot = SlotCache()
        self._commands = CommandTable()
        self._redirects = 0
        self._listeners: AsyncListenerSlot[AsyncRoutedListener] = AsyncListenerSlot()
        if True:  # ASYNC
            pass  # the script calls: _plain_call, a method below
        else:  # the script calls: the core's SlotRouter
            self._router = self._first._core.SlotRouter(
                self.scripts,
                self.script_settings,
                self._with_meta,
                self._slot.known,
                self._slots.routes,
                self._slot_of,
                self._route,
                self._call_failed,
            )
            self._plain_call = self._router.call
        self.wait = wait

    @property
    def wait(self) -> tuple[int, int] | None:
        """``(replicas, ms)``: ``WAIT`` after each lock acquire and claim, or ``None``."""
        return self._wait

    @wait.setter
    def wait(self, wait: tuple[int, int] | None) -> None:
        self._wait = check_wait(wait)
        self._call = self._plain_call if self._wait is None else self._waiting_call
        self._bind_call()

    @classmethod
    def from_redis(cls, redis_client: Any, **kwargs: Any) -> AsyncClusterClient:
        """A client of the cluster a redis-py ``RedisCluster`` talks to (its startup nodes as
        seeds, its credentials, timeouts and TLS per node); ``kwargs`` go to the constructor."""
        from ..interop.redis_py import cluster_from_redis

        seeds, params = cluster_from_redis(redis_client)
        return cls(seeds=seeds, **{**params, **kwargs})

    @property
    def listener(self) -> AsyncRoutedListener:
        """The wake-up listener of this client's blocked lock acquirers (made at the first wait;
        :mod:`fastlock.cluster.listeners_aio`): one connection per node with waiters, each
        channel sharded on the primary of its slot."""
        return self._listeners.get(self._new_listener)

    def _new_listener(self) -> AsyncRoutedListener:
        slots = self._slots

        async def route(channel: bytes) -> Address:
            return await self._address(key_slot(channel))

        return AsyncRoutedListener(
            self,
            self._first._core,
            lambda channel: slots.primaries[key_slot(channel)],
            route,
            lambda address: self.node(address).params,
            shard=True,
        )

    @property
    def redirects(self) -> int:
        """Attempts sent again so far (after ``MOVED``, ``ASK``, a wait reply or a node down)."""
        return self._redirects

    async def _follow(self, plan: Plan, send: _Send) -> Any:
        """Run a redirect plan (:func:`~fastlock.operations.run_plan_async`): attempts sent by
        ``send(node, asking)``, their errors thrown into the plan."""

        async def perform(step: Attempt | Pause | Refresh) -> Any:
            if type(step) is Pause:
                return await asyncio.sleep(step.seconds)
            if type(step) is Refresh:
                return await self.refresh()
            assert type(step) is Attempt
            self._redirects += 1
            return await send(self.node(step.address), step.asking)

        return await run_plan_async(plan, perform)

    def _slot_of(self, keys: Sequence[Any]) -> int:
        """The slot a call with ``keys`` goes to: its first key's, any one without keys."""
        return self._slot(keys[0]) if keys else random.randrange(SLOTS)

    if True:  # ASYNC

        async def _plain_call(
            self,
            name: str,
            keys: Sequence[Any] = (),
            args: Sequence[Any] = (),
            *,
            busy_timeout: float | None = None,
        ) -> Any:
            """The script call on the primary of its first key's slot, redirects followed."""
            slot = self._slot_of(keys)
            address = self._slots.primaries[slot] or await self._address(slot)
            try:
                return await self.node(address).call(name, keys, args, busy_timeout=busy_timeout)
            except (ResponseError, ConnectionError) as exc:
                error = exc

            async def send(node: Client, asking: bool) -> Any:
                if asking:
                    script = self.scripts.get(name)
                    commands = script_commands(script, self.script_settings, keys, args)
                    return asking_reply(await node.execute_many(commands), script)
                return await node.call(name, keys, args, busy_timeout=busy_timeout)

            return await self._follow(redirected(self._slots, slot, error), send)

    else:

        def _route(self, slot: int) -> Any:
            """The script caller of ``slot``'s primary, kept in the slot map's routes (a route
            filled from a map changed meanwhile is wrong at most until its first ``MOVED``)."""
            caller = self._slots.routes[slot] = self._primary(slot)._caller
            return caller

        def _call_failed(
            self,
            error: BaseException,
            slot: int,
            script: Script,
            keys: Sequence[Any],
            args: Sequence[Any],
            settings: ScriptSettings,
            busy_timeout: float | None,
        ) -> Any:
            """A script call that failed with a redirect or a node down (``args`` with the meta
            values already): the redirect plan of :func:`~fastlock.cluster.routing.redirected`."""

            def send(node: Client, asking: bool) -> Any:
                if asking:
                    commands = script_commands(script, settings, keys, args, meta=False)
                    return asking_reply(node.execute_many(commands), script)
                return node._caller.call_script(script, keys, args, settings, busy_timeout)

            return self._follow(redirected(self._slots, slot, error), send)

    async def _waiting_call(
        self,
        name: str,
        keys: Sequence[Any] = (),
        args: Sequence[Any] = (),
        *,
        busy_timeout: float | None = None,
    ) -> Any:
        """The script call with ``wait`` set: lock acquires and claims followed by ``WAIT``."""
        wait = self._wait
        if wait is None or name not in DURABLE_SCRIPTS:
            return await self._plain_call(name, keys, args, busy_timeout=busy_timeout)
        script, settings = self.scripts.get(name), self.script_settings
        if script.meta:
            args = await self._with_meta(script, args)

        async def send(node: Client, asking: bool) -> Any:
            return await durable_call_async(node, script, settings, keys, args, wait, asking, meta=False)

        return await self._command_at(self._slot_of(keys), send)

    async def _command_slot(self, args: Sequence[Any]) -> int:
        """The slot of the first key of ``args`` (keyless: any), the server asked first about
        a command the table does not know (see :mod:`fastlock.cluster.commands`)."""
        key = self._commands.key(args)
        while type(key) is Query:
            try:
                reply = await self._command_at(
                    random.randrange(SLOTS), functools.partial(_sent, args=key.command)
                )
            except (ResponseError, ConnectionError) as exc:
                reply = exc
            key = self._commands.answer(key, args, reply)
        return self._slot(key) if key is not None else random.randrange(SLOTS)

    async def _command(self, args: tuple[Any, ...], send: _Send) -> Any:
        return await self._command_at(await self._command_slot(args), send)

    async def _command_at(self, slot: int, send: _Send) -> Any:
        try:
            return await send(await self._primary(slot), False)
        except (ResponseError, ConnectionError) as exc:
            return await self._follow(redirected(self._slots, slot, exc), send)

    async def execute(self, *args: Any) -> Any:
        """Run one command on the primary of its first key's slot (keyless: any primary)."""
        refuse_connection_state(args)
        return await self._command(args, functools.partial(_sent, args=args))

    async def execute_blocking(self, *args: Any, timeout: float) -> Any:
        """Run a blocking command (see :meth:`fastlock.aio.Client.execute_blocking`) on its key's primary."""
        refuse_connection_state(args)

        async def send(node: Client, asking: bool) -> Any:
            if asking:  # in the same write, on the same connection
                return asking_reply(await node._execute_blocking_many(command_commands(args), timeout))
            return await node.execute_blocking(*args, timeout=timeout)

        return await self._command(args, send)

    async def execute_many(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Send ``commands`` in one write per node; replies in order, error replies in place.
        A command redirected (it did not run) is sent again alone, following the redirect."""
        refuse_each(commands)
        groups: dict[Address, list[int]] = {}
        slots: list[int] = []
        for index, args in enumerate(commands):
            slot = await self._command_slot(args)
            slots.append(slot)
            groups.setdefault(await self._address(slot), []).append(index)
        if True:  # ASYNC: the nodes at once
            batches = await asyncio.gather(
                *(self.node(a).execute_many([commands[i] for i in indexes]) for a, indexes in groups.items())
            )
        else:
            batches = [
                self.node(a).execute_many([commands[i] for i in indexes]) for a, indexes in groups.items()
            ]
        replies: list[Any] = [None] * len(commands)
        for indexes, batch in zip(groups.values(), batches, strict=True):
            for index, reply in zip(indexes, batch, strict=True):
                replies[index] = reply
        for index, reply in enumerate(replies):
            if is_redirect(reply):  # to the node the reply names (the slot map may still be stale)
                plan = redirected(self._slots, slots[index], reply)
                try:
                    replies[index] = await self._follow(plan, functools.partial(_sent, args=commands[index]))
                except ResponseError as exc:
                    replies[index] = exc
        return replies

    async def run(self, operation: Operation[T]) -> T:
        """Run a multi-step :data:`~fastlock.operations.Operation` on this client."""
        return await drive(self, operation)

    def pipeline(self) -> Pipeline:
        """Collect commands; ``await pipe.execute()`` sends them in one write per node."""
        return Pipeline(self)

    async def _script_home(self, keys: Sequence[Any]) -> Address | None:
        """The node a pipelined call with ``keys`` goes to (``None`` without keys: any), for
        the pipelines' record of the scripts each node holds."""
        return await self._address(self._slot(keys[0])) if keys else None

    def script(self, name: str) -> BoundScript:
        """Script ``name`` as a callable: ``await client.script(name)(keys, args)``."""
        return BoundScript(self, self.scripts.get(name))

    def register_script(self, source: str | bytes, name: str | None = None) -> BoundScript:
        """Register ``source`` as script ``name`` (loaded on a node by its first NOSCRIPT there)."""
        return BoundScript(self, register(self.scripts, source, name))

    async def close(self) -> None:
        """Close every node's connections (the listener's too)."""
        self._listeners.close()
        for node in list(self._nodes.values()):
            await node.close()

    async def __aenter__(self) -> AsyncClusterClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<fastlock.cluster.AsyncClusterClient {len(self._nodes)} nodes impl={self.impl}>"


async def _sent(node: Client, asking: bool, args: tuple[Any, ...]) -> Any:
    if not asking:
        return await node.execute(*args)
    return asking_reply(await node.execute_many(command_commands(args)))


if TYPE_CHECKING:
    _RUNNER: type[AsyncRunner] = AsyncClusterClient  # mypy checks the runner protocol
