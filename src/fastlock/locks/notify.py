"""Wake-ups of blocked acquirers over one pub/sub connection per client (sans-IO).

A release of a flagged slot ``PUBLISH``es on the scope's wake channel (its wake key's name).
A client keeps one subscribed connection for all its waiters of all names: the
:class:`WaiterTable` says which channels to (un)subscribe and which waiter a message wakes;
the asyncio transport's listener (``aio/notify.py``) does the I/O (the sync and cluster
clients' waiters still block on the wake list, which the release pushes as before), and a
waiter is an in-process signal with ``set()``, ``is_set()`` and a ``wait(timeout)``.

Rules: a waiter is entered (and its channel subscribed, confirmed by the server) *before*
its acquire attempt, so no release between the attempt and the sleep is missed; a message
wakes the longest-waiting waiter of its channel not already woken; a waiter that leaves
woken but unserved (cancelled, timed out) passes the wake-up on; each sleep lasts at most
:data:`MAX_NAP`, a re-check that covers lost messages and reconnects.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["MAX_NAP", "Signal", "WaiterTable"]

MAX_NAP = 1.0  # longest sleep between two acquire attempts of a waiter, in seconds


class Signal(Protocol):
    """A waiter's wake-up flag (``threading.Event``-like)."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...


S = TypeVar("S", bound=Signal)


class WaiterTable(Generic[S]):
    """The waiters of one client by channel; the methods return the command to send, if any."""

    __slots__ = ("_by_channel",)

    def __init__(self) -> None:
        self._by_channel: dict[bytes, deque[S]] = {}

    def channels(self) -> list[bytes]:
        """Every channel with a waiter (to subscribe again after a reconnect)."""
        return list(self._by_channel)

    def add(self, channel: bytes, waiter: S) -> tuple[Any, ...] | None:
        """Enter ``waiter``: ``SUBSCRIBE`` when it is its channel's first."""
        waiters = self._by_channel.get(channel)
        if waiters is None:
            self._by_channel[channel] = deque((waiter,))
            return ("SUBSCRIBE", channel)
        waiters.append(waiter)
        return None

    def remove(self, channel: bytes, waiter: S) -> tuple[Any, ...] | None:
        """Drop ``waiter`` (woken and unserved: the wake-up goes to the next): ``UNSUBSCRIBE``
        when it was its channel's last."""
        waiters = self._by_channel.get(channel)
        if waiters is None:
            return None
        try:
            waiters.remove(waiter)
        except ValueError:
            return None
        if not waiters:
            del self._by_channel[channel]
            return ("UNSUBSCRIBE", channel)
        if waiter.is_set():
            self.wake(channel)
        return None

    def wake(self, channel: bytes) -> None:
        """Wake the longest-waiting waiter of ``channel`` not woken yet."""
        for waiter in self._by_channel.get(channel, ()):
            if not waiter.is_set():
                waiter.set()
                return

    def wake_all(self) -> None:
        """Wake every waiter (the connection was lost: messages may have been)."""
        for waiters in self._by_channel.values():
            for waiter in waiters:
                waiter.set()

    def on_reply(self, reply: Any) -> bytes | None:
        """Handle one reply of the subscribed connection: a message wakes a waiter; returns the
        channel a ``subscribe`` confirmation names (else ``None``)."""
        if type(reply) is list and len(reply) == 3:
            kind = reply[0]
            if kind == b"message":
                self.wake(reply[1])
            elif kind == b"subscribe":
                return reply[1]  # type: ignore[no-any-return]
        return None
