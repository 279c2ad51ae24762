"""The wake-up listener of a Cluster or Sentinel client: :class:`AsyncRoutedListener`, one
listener (the standalone client's ``notify.Listener``) per node with waiters, each channel on
the node that serves it, for every waiter of the client (the rules: :mod:`fastlock.locks.notify`).

- Cluster: a channel is sharded (``SSUBSCRIBE`` on the primary of its slot, the lock's: its
  hash tag), and the release script ``SPUBLISH``es to it (the waits' ids start with ``s``), so a
  hand-over message stays on its shard.
- Sentinel: a channel is subscribed on the master in use; after a switch, the old master's
  connection is dropped.

A node's listener is routed: when its connection is lost or the server drops a channel (the
slot moved: ``sunsubscribe``), its waiters are marked lost and woken, try again through the
client (which follows ``MOVED`` or the new master), and enter again where their channel is
served now (after that attempt: the topology it followed routes them). A leaving waiter's
release (``abandon``) runs through the client too.

``cluster/listeners_aio.py`` is the source of the sync ``cluster/listeners.py`` (a listener per
process there: see :class:`~fastlock.sync.listener_slot.ListenerSlot`)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from ..aio.notify import AsyncSignal, Listener
from ..exceptions import ConnectionError, ResponseError
from ..locks.notify import logger
from ..operations import AsyncRunner, Call
from ..params import ConnectionParams
from .topology import Address

if True:  # ASYNC
    import asyncio

__all__ = ["AsyncRoutedListener"]


class AsyncRoutedListener:
    """The listener of ``client`` (it runs ``abandon``): ``home(channel)`` is the address of the
    node serving a channel as far as known without I/O (``None``: not known), ``route(channel)``
    that address (the slot map read if need be), ``params(address)`` a node's connection
    parameters; ``shard``: sharded channels (a cluster); ``db``: the database in channels."""

    def __init__(
        self,
        client: AsyncRunner,
        core: Any,
        home: Callable[[bytes], Address | None],
        route: Callable[[bytes], Awaitable[Address]],
        params: Callable[[Address], ConnectionParams],
        *,
        shard: bool,
        db: int = 0,
    ) -> None:
        self.db = db
        self.wait_mark = "s" if shard else ""
        self.pid = os.getpid()
        self._client, self._core, self._shard = client, core, shard
        self._home, self._route, self._params = home, route, params
        self._nodes: dict[Address, Listener] = {}
        self._homes: dict[AsyncSignal, Listener] = {}  # each waiter's node listener
        if True:  # ASYNC
            self._leaving: set[asyncio.Task[Any]] = set()

    def channel(self, wake: str) -> bytes:
        """The channel of a scope's wake key on the client's db (in the wake key's slot)."""
        return f"{wake}@{self.db}".encode()

    def _node(self, address: Address) -> Listener:
        listener = self._nodes.get(address)
        if listener is None:
            made = Listener(self._params(address), self._core, self._client, shard=self._shard, routed=True)
            listener = self._nodes.setdefault(address, made)  # a racing thread's twin is dropped unused
        return listener

    def joins(self, channel: bytes) -> bool:
        """Whether ``channel`` has waiters of this client on its node's listener (:meth:`Listener.joins`)."""
        listener = self._known(channel)
        return listener is not None and listener.joins(channel)

    def _known(self, channel: bytes) -> Listener | None:
        """The listener of the node serving ``channel``, if one is made."""
        address = self._home(channel)
        return None if address is None else self._nodes.get(address)

    def join(self, channel: bytes, job: str = "") -> AsyncSignal | None:
        """A new waiter on ``channel`` if its node's listener has it confirmed (no I/O), else ``None``."""
        listener = self._known(channel)
        if listener is None:
            return None
        signal = listener.join(channel, job)
        if signal is not None:
            self._homes[signal] = listener
        return signal

    async def listen(self, channel: bytes, job: str = "") -> AsyncSignal:
        """A new waiter on ``channel``, entered on the listener of the node serving it (as a
        standalone client's listener enters it); when that node is not known (the map
        cannot be read), a ``lost`` signal: the waiter re-checks after its nap, then enters again."""
        try:
            listener = self._node(await self._route(channel))
        except (ConnectionError, ResponseError, OSError):
            signal = AsyncSignal(job)
            signal.lost = True
            return signal
        signal = await listener.listen(channel, job)
        if not signal.lost:
            self._homes[signal] = listener
        return signal

    def leave(self, channel: bytes, signal: AsyncSignal) -> None:
        """The waiter is done (served, timed out, cancelled or lost)."""
        listener = self._homes.pop(signal, None)
        if listener is not None:
            listener.leave(channel, signal)

    def abandon(self, call: Call) -> None:
        """Run ``call`` (a leaving waiter's release) through the client, which follows ``MOVED``
        and the master; its failure logged (asyncio: in a task of its own)."""
        if True:  # ASYNC
            task = asyncio.ensure_future(self._client.call(call.name, call.keys, call.args))
            self._leaving.add(task)
            task.add_done_callback(self._left)
        else:
            try:
                self._client.call(call.name, call.keys, call.args)
            except Exception as error:  # noqa: BLE001 - the waiter's own exception goes on
                logger.warning("a leaving lock waiter's release failed: %r", error)

    if True:  # ASYNC

        def _left(self, task: asyncio.Task[Any]) -> None:
            self._leaving.discard(task)
            if not task.cancelled() and task.exception() is not None:
                logger.warning("a leaving lock waiter's release failed: %r", task.exception())

    def retire(self, address: Address) -> None:
        """``address`` serves no channel now (a demoted master): its listener's connection is
        dropped, its waiters enter again elsewhere."""
        listener = self._nodes.get(address)
        if listener is not None:
            listener.drop()

    if True:  # ASYNC
        pass
    else:

        def forsake(self) -> None:
            """In a fork's child: close the inherited descriptors without any I/O on them."""
            for listener in list(self._nodes.values()):
                listener.forsake()

    def close(self) -> None:
        """Close every node's listener (waiters fall back to their re-checks)."""
        for listener in list(self._nodes.values()):
            listener.close()
