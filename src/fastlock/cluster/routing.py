"""Which node runs a command, and what to do when the cluster says "not here" (sans-IO).

A step goes to the primary of the slot of its first key (found by
:mod:`~fastlock.cluster.commands`; every built-in script keeps all its keys in one slot), the
slot computed once per key and cached (:class:`SlotCache`). When the first attempt gets an error,
the client runs :func:`redirected`, a generator yielding :class:`Attempt`, :class:`Pause` and
:class:`Refresh` requests and receiving each attempt's reply (or having its exception thrown
in), as the operations of :mod:`fastlock.operations` do. The rule every retry keeps: only
what provably did not run is sent again. A redirect or ``TRYAGAIN``/``CLUSTERDOWN``/``LOADING``
reply means the command did not run; a connection error raised before the write
(``sent`` false) too. A timeout or a connection lost after the write is raised, never re-sent.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeAlias

from .. import metrics
from ..exceptions import (
    AskError,
    ClusterDownError,
    ConnectionError,
    LoadingError,
    MovedError,
    ResponseError,
    TryAgainError,
)
from ..protocol.slots import key_slot
from .topology import Address, SlotMap

__all__ = [
    "MAX_REDIRECTS",
    "MAX_WAITS",
    "Attempt",
    "Pause",
    "Plan",
    "Refresh",
    "SlotCache",
    "redirected",
]

MAX_REDIRECTS = 16
"""Most ``MOVED``/``ASK`` redirects one command follows."""
MAX_WAITS = 45
"""Most pauses one command waits (``TRYAGAIN``, ``CLUSTERDOWN``, ``LOADING``, unreachable)."""
_FIRST_PAUSE = 0.01
_MAX_PAUSE = 0.1


@dataclass(frozen=True, slots=True)
class Attempt:
    """Send the command to ``address`` (after ``ASKING`` in the same write when ``asking``)."""

    address: Address
    asking: bool = False


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait ``seconds`` before the next attempt."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Refresh:
    """Read the slot map again now, if the refresh gate allows."""


Plan: TypeAlias = Generator[Attempt | Pause | Refresh, Any, Any]


class SlotCache:
    """``key -> slot``, computed once per key (a lock's or queue's keys recur on every call);
    at most ``size`` keys, forgotten all at once when full. ``known`` is the dict itself
    (the core's ``SlotRouter`` reads it without a call; only ever cleared in place)."""

    __slots__ = ("_slots", "size")

    def __init__(self, size: int = 4096) -> None:
        self._slots: dict[Any, int] = {}
        self.size = size

    @property
    def known(self) -> dict[Any, int]:
        """The slots computed so far, by key."""
        return self._slots

    def __call__(self, key: Any) -> int:
        try:
            return self._slots[key]
        except KeyError:
            pass
        if len(self._slots) >= self.size:
            self._slots.clear()
        slot = self._slots[key] = key_slot(key if isinstance(key, (str, bytes)) else str(key))
        return slot


def _pause(attempt: int) -> float:
    return min(_FIRST_PAUSE * 2.0**attempt, _MAX_PAUSE)


def redirected(slots: SlotMap, slot: int, error: BaseException) -> Plan:
    """The rest of a command for ``slot`` whose attempt failed with ``error``: at most
    :data:`MAX_REDIRECTS` redirects followed; ``TRYAGAIN``/``CLUSTERDOWN``/``LOADING``, a
    ``MOVED`` back to a node already tried (the nodes disagree while a slot's move ends) and
    unsent connection errors retried after growing pauses (at most :data:`MAX_WAITS`, about
    4 s in all: a primary's failure is detected and its replica promoted meanwhile), the map
    refreshed where it may have changed. While the slot's primary is unreachable, its replicas
    are tried in turn: one answering for the slot has been promoted (a replica that has not
    answers ``MOVED``, which did not run). Returns the reply; raises what may have run."""
    redirects = waits = 0
    down: Address | None = None  # the slot's primary, unreachable
    moved_to: set[Address] = set()
    while True:
        asking = False
        to = (error.host, error.port) if isinstance(error, (MovedError, AskError)) else None
        if to is not None and to != down:  # (to down: a replica of it, not promoted yet: wait)
            redirects += 1
            if redirects > MAX_REDIRECTS:
                raise error
            target, asking = to, isinstance(error, AskError)
            if (observer := metrics.observer) is not None:
                observer.redirected("ASK" if asking else "MOVED")
            if not asking:
                if to in moved_to:  # MOVED back: the nodes disagree (a move half done): wait
                    if waits >= MAX_WAITS:
                        raise error
                    waits += 1
                    redirects -= 1
                    yield Pause(_pause(waits - 1))
                moved_to.add(to)
                slots.move(slot, target)
                yield Refresh()
        elif isinstance(error, (TryAgainError, LoadingError, ClusterDownError, ConnectionError, MovedError)):
            if (isinstance(error, ConnectionError) and error.sent) or waits >= MAX_WAITS:
                raise error
            waits += 1
            if isinstance(error, ConnectionError):
                down = slots.primaries[slot]
            if not isinstance(error, (TryAgainError, LoadingError)):
                yield Refresh()
            yield Pause(_pause(waits - 1))
            target = slots.primary(slot)
            replicas = slots.replicas.get(target, []) if target == down else []
            if replicas:
                target = replicas[waits % len(replicas)]
        else:
            raise error
        try:
            reply = yield Attempt(target, asking)
        except (ResponseError, ConnectionError) as exc:
            error = exc
            continue
        if not asking and target != slots.primaries[slot]:
            slots.move(slot, target)  # a replica answered: promoted
        return reply
