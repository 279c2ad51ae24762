"""Wake-ups of blocked acquirers over one pub/sub connection per client (sans-IO).

A client keeps one subscribed connection for all its waiters of all names (per process for the
sync client, per loop for the asyncio one): the :class:`WaiterTable` says which channels to
(un)subscribe and which waiter a message wakes; each transport's listener (``aio/notify.py``,
``sync/notify.py``) does the I/O, and a waiter is an in-process signal with ``set()``,
``is_set()``, a ``wait(timeout)``, its ``job`` (the wait's id and the job id, ``<wait>:<job>``),
a ``token`` and ``lost``. The Cluster and Sentinel clients route each channel to the listener of
one node (``cluster/listeners_aio.py``): the primary of the channel's slot (sharded channels,
``SSUBSCRIBE``), or the master in use.

A waiter queues on the server for a hand-over (its acquire attempts say so): a release of a
flagged slot gives the lock to the first live queued waiter (by the end of its patience) and ``PUBLISH``es
``<token>:<wait>:<job>`` on the channel of that waiter's db (``<wake key>@<db>``; ``SPUBLISH``
when the wait's id starts with ``s``, :attr:`Channels.wait_mark`: a shard channel's): the
listener of the client that waiter is on gives it the token (:meth:`WaiterTable.give`), and
it needs no further attempt; every other listener of that channel wakes nobody, and so does a
message read after its wait is over (each wait has an id of its own). A read-write lock's
release publishes :data:`WAKE_ALL` instead: every waiter of the channel tries again.

What the wait operation (:func:`fastlock.locks.waiting.wait_for`) needs of a transport's
listener: ``db``; ``channel(wake_key) -> bytes``; ``joins(channel)`` (whether the channel has
waiters of this client, confirmed: a new one joins them before its first attempt, which then
queues it; the lock's shells ask it first); ``join(channel, job)`` (no I/O, ``None``
unless the channel is confirmed already) and ``listen(channel, job)`` (subscribed and
confirmed), both returning a signal whose ``wait(timeout)`` returns the handed token or
``None``; ``leave(channel, signal)``; ``abandon(call)`` (run a leaving waiter's release);
``wait_mark`` (the first characters of its waits' ids).

Rules: a waiter is entered (and its channel subscribed, confirmed by the server) after a
first failed acquire attempt and tries once more before it sleeps, so no release after the
first attempt is missed (on a confirmed channel with waiters of this client it joins without
I/O, before its first attempt); each sleep lasts at most :data:`MAX_NAP`, a re-check that
covers lost messages and reconnects (after a loss every waiter is woken). A routed listener (a node's, for a
Cluster or Sentinel client) forgets its waiters when its connection is lost or the server drops a
channel (``sunsubscribe``: the slot moved): they are marked ``lost``, woken, and enter again
where their channel is served now; a signal lost before its wait sleeps the whole nap.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any, Generic, Protocol, TypeVar

from ..exceptions import ResponseError
from ..params import handshake_commands

__all__ = ["MAX_NAP", "WAKE_ALL", "Channels", "HandedSignal", "Signal", "ThreadSignal", "WaiterTable"]

logger = logging.getLogger("fastlock.lock")

MAX_NAP = 1.0  # longest sleep between two acquire attempts of a waiter, in seconds
WAKE_ALL = b"*"  # the message that wakes every waiter of its channel (shared/_rwlock.lua)


class HandedSignal:
    """What both transports' signals hold beside their flag: the waiter's ``job`` id, the
    ``token`` of a lock handed over to it (:meth:`WaiterTable.give`), and ``lost``: its
    subscription is gone, no message will come (:meth:`WaiterTable.forget`)."""

    __slots__ = ("job", "lost", "token")

    def __init__(self, job: str = "") -> None:
        self.job = job
        self.token: int | None = None
        self.lost = False


class ThreadSignal(HandedSignal):
    """A waiting thread's wake-up flag (the sync listener's, and the sync locks' turns:
    :mod:`fastlock.locks.gate`); ``token``: a lock handed over to ``job``."""

    __slots__ = ("_event", "is_set", "set")

    def __init__(self, job: str = "") -> None:
        super().__init__(job)
        event = self._event = threading.Event()
        self.set, self.is_set = event.set, event.is_set

    def wait(self, timeout: float) -> int | None:
        """The token of a lock handed over to the waiter, else ``None``, once woken or after
        ``timeout`` seconds (all of them for a signal lost before: no wake-up can come); the
        flag is cleared for the next wait (an attempt follows)."""
        if not self.lost or self.token is not None:
            self._event.wait(timeout)
        else:
            time.sleep(timeout)
        self._event.clear()
        return self.token


class Channels:
    """What both transports' listeners share: the client's connection parameters (``params``),
    its core (``core``: the RESP reader and encoders), the client (``runner``, which runs
    ``abandon``), the db and channel names, and the replies read (:meth:`_replies`). ``shard``:
    sharded channels (``SSUBSCRIBE``, a cluster node's); ``routed``: a node's listener of a
    Cluster or Sentinel client, which forgets its waiters at a loss (:meth:`WaiterTable.forget`)."""

    def __init__(
        self, params: Any, core: Any, runner: Any, shard: bool = False, routed: bool = False
    ) -> None:
        self.wait_mark = "s" if shard else ""
        """The first characters of this listener's waits' ids (``s``: the release ``SPUBLISH``es)."""
        self._routed = routed
        self._table: WaiterTable[Any] = WaiterTable(shard)
        self._params = params
        self._hello = handshake_commands(params)  # the handshake's commands (AUTH, SELECT, CLIENT SETNAME)
        self._core = core
        self._runner = runner
        self._reader: Any = None  # the connection's reply reader (a new one per connection)
        self._handshake = 0  # replies of the handshake still to read
        self._closed = False

    def _greeting(self, subscribe: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """A new connection's first write: the handshake (its replies then checked), then
        ``subscribe``."""
        self._handshake = len(self._hello)
        return [*self._hello, *subscribe]

    def _replies(self, data: bytes) -> tuple[list[Any], ResponseError | None]:
        """The subscription's replies in ``data`` (the handshake's counted off and checked)
        up to the first error reply, and that error (``None``: none)."""
        reader, not_enough = self._reader, self._core.NOT_ENOUGH
        found: list[Any] = []
        reader.feed(data)
        reply = reader.gets()
        while reply is not not_enough:
            if isinstance(reply, ResponseError):
                return found, reply
            if self._handshake:
                self._handshake -= 1
            else:
                found.append(reply)
            reply = reader.gets()
        return found, None

    def _wake_all(self) -> None:
        """After a loss: every waiter woken (a routed listener's forgotten: they enter again
        where their channel is served now)."""
        if self._routed:
            self._table.forget_all()
        else:
            self._table.wake_all()

    def _moved(self) -> bool:
        """An error reply (not the handshake's) read by a routed listener: the channel is served
        elsewhere (``MOVED``) or not now (``CLUSTERDOWN``): a loss, not an error of its waiters."""
        return self._routed and not self._handshake

    @property
    def db(self) -> int:
        """The client's database number (part of every channel)."""
        return self._params.db  # type: ignore[no-any-return]

    def channel(self, wake: str) -> bytes:
        """The channel of a scope's wake key on this client's db (a release publishes on it)."""
        return f"{wake}@{self._params.db}".encode()


class Signal(Protocol):
    """A waiter's wake-up flag (``threading.Event``-like). One that can be handed a lock also
    has the waiter's ``job`` id and a ``token`` attribute (:meth:`WaiterTable.give`)."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...


S = TypeVar("S", bound=Signal)


class WaiterTable(Generic[S]):
    """The waiters of one listener by channel (``shard``: sharded channels); the methods return
    the command to send, if any."""

    __slots__ = ("_by_channel", "_dropping", "_verbs")

    def __init__(self, shard: bool = False) -> None:
        self._by_channel: dict[bytes, deque[S]] = {}
        self._verbs = ("SSUBSCRIBE", "SUNSUBSCRIBE") if shard else ("SUBSCRIBE", "UNSUBSCRIBE")
        self._dropping: dict[bytes, int] = {}  # our unsubscribes whose reply is awaited, by channel

    def channels(self) -> list[bytes]:
        """Every channel with a waiter (to subscribe again after a reconnect)."""
        return list(self._by_channel)

    def subscribe(self, channel: bytes) -> tuple[Any, ...]:
        """The command subscribing ``channel``."""
        return (self._verbs[0], channel)

    def unsubscribe(self, channel: bytes) -> tuple[Any, ...]:
        """The command unsubscribing ``channel`` (its reply is told from the server's own)."""
        self._dropping[channel] = self._dropping.get(channel, 0) + 1
        return (self._verbs[1], channel)

    def has(self, channel: bytes) -> bool:
        """Whether ``channel`` has a waiter (so it is subscribed, or being subscribed)."""
        return channel in self._by_channel

    def entered(self, channel: bytes, waiter: S) -> S:
        """``waiter`` entered on ``channel``, whose subscription is confirmed already."""
        self.add(channel, waiter)
        return waiter

    def add(self, channel: bytes, waiter: S) -> tuple[Any, ...] | None:
        """Enter ``waiter``: ``SUBSCRIBE`` when it is its channel's first."""
        waiters = self._by_channel.get(channel)
        if waiters is None:
            self._by_channel[channel] = deque((waiter,))
            return self.subscribe(channel)
        waiters.append(waiter)
        return None

    def remove(self, channel: bytes, waiter: S) -> tuple[Any, ...] | None:
        """Drop ``waiter``: ``UNSUBSCRIBE`` when it was its channel's last."""
        waiters = self._by_channel.get(channel)
        if waiters is None:
            return None
        try:
            waiters.remove(waiter)
        except ValueError:
            return None
        if not waiters:
            del self._by_channel[channel]
            return self.unsubscribe(channel)
        return None

    def give(self, channel: bytes, message: bytes) -> None:
        """A release handed the lock over (``message``: ``b"<token>:<wait>:<job>"``): the
        waiter of ``channel`` that is that wait of that job (its ``job``: ``"<wait>:<job>"``)
        gets the token (:attr:`Signal.token`) and is woken (token 0: woken without one, to try
        again: the lock was freed before its patience ran out). A wait on another client, or one
        that is over (a message read late, the same job waiting again), is not here: nothing
        happens. ``WAKE_ALL`` (a read-write lock's release) wakes every waiter of ``channel``
        without a token: each tries again."""
        if message == WAKE_ALL:
            for waiter in self._by_channel.get(channel, ()):
                waiter.set()
            return
        token, _, job = message.partition(b":")
        name = job.decode()
        for waiter in self._by_channel.get(channel, ()):
            if getattr(waiter, "job", None) == name:
                waiter.token = int(token) or None  # type: ignore[attr-defined] # 0: try again
                waiter.set()

    def wake_all(self) -> None:
        """Wake every waiter (the connection was lost: messages may have been)."""
        self._dropping.clear()
        for waiters in self._by_channel.values():
            for waiter in waiters:
                waiter.set()

    def forget(self, channel: bytes) -> None:
        """``channel``'s subscription is gone: its waiters are marked ``lost``, woken and dropped
        (they enter again where the channel is served now)."""
        for waiter in self._by_channel.pop(channel, ()):
            waiter.lost = True  # type: ignore[attr-defined]
            waiter.set()

    def forget_all(self) -> None:
        """The connection of a routed listener was lost: :meth:`forget` every channel."""
        self._dropping.clear()
        for channel in list(self._by_channel):
            self.forget(channel)

    def on_reply(self, reply: Any) -> tuple[bool, bytes] | None:
        """Handle one reply of the subscribed connection: a message hands a waiter its lock;
        ``(True, channel)`` for a subscription confirmed, ``(False, channel)`` for one the
        server dropped (an unsubscribe not ours: the slot moved; its waiters forgotten)."""
        if type(reply) is list and len(reply) == 3:
            kind, channel = reply[0], reply[1]
            if kind == b"message" or kind == b"smessage":
                self.give(channel, reply[2])
            elif kind == b"subscribe" or kind == b"ssubscribe":
                return True, channel
            elif kind == b"sunsubscribe" or kind == b"unsubscribe":
                left = self._dropping.pop(channel, 0) - 1
                if left > 0:
                    self._dropping[channel] = left
                elif left < 0:
                    self.forget(channel)
                    return False, channel
        return None
