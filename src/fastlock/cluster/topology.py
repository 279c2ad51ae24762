"""The cluster's slot map and how to keep it fresh (sans-IO: no socket, clock or sleep here).

:class:`SlotMap` is read from ``CLUSTER SLOTS`` (:func:`parse_slots`; it works on Redis 6.2 to
8 and Valkey, where ``CLUSTER SHARDS`` can be empty after a failover) and patched by each
``MOVED`` reply (:meth:`SlotMap.move`). :class:`RefreshGate` lets one refresh run at a time,
and none sooner than a jittered cooldown after the last one: at most three ``CLUSTER SLOTS``
per client per second, whatever the storm of redirects (redis-py #4049, go-redis #1390).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import ClusterDownError, ProtocolError
from ..params import parse_url
from ..protocol.slots import SLOTS

__all__ = ["REFRESH_COOLDOWN", "Address", "RefreshGate", "SlotMap", "parse_slots", "seed_address", "shuffled"]

Address = tuple[str, int]
"""A node's ``(host, port)``."""

REFRESH_COOLDOWN = 0.34
"""Shortest time (seconds) between two refreshes by one client, before jitter (up to +30%)."""


@dataclass(slots=True)
class SlotMap:
    """The primary serving each slot (``None``: no one) and the replicas of each primary;
    ``routes``: what a transport keeps per slot to reach its primary fast (the sync client:
    the node's script caller), ``None`` until it fills it, and again whenever the slot's
    primary changes (:meth:`move`, :meth:`update`). Each list is only changed in place."""

    primaries: list[Address | None] = field(default_factory=lambda: [None] * SLOTS)
    replicas: dict[Address, list[Address]] = field(default_factory=dict)
    routes: list[Any] = field(default_factory=lambda: [None] * SLOTS, repr=False, compare=False)

    def primary(self, slot: int) -> Address:
        """The primary serving ``slot``; :class:`~fastlock.ClusterDownError` if none does."""
        address = self.primaries[slot]
        if address is None:
            raise ClusterDownError(f"CLUSTERDOWN slot {slot} is served by no node the client knows")
        return address

    def move(self, slot: int, address: Address) -> None:
        """Record that ``slot`` is now served by ``address`` (a ``MOVED`` reply)."""
        if 0 <= slot < SLOTS:
            self.primaries[slot] = address
            self.routes[slot] = None

    def update(self, fresh: SlotMap) -> None:
        """Take the primaries and replicas of ``fresh`` (a map just read); every route is forgotten."""
        self.primaries[:] = fresh.primaries
        self.replicas = fresh.replicas
        self.routes[:] = [None] * SLOTS

    def nodes(self) -> list[Address]:
        """Every node known: primaries (in slot order, each once), then their replicas."""
        primaries = list(dict.fromkeys(a for a in self.primaries if a is not None))
        return primaries + [r for p in primaries for r in self.replicas.get(p, ())]

    def primary_nodes(self) -> list[Address]:
        """The primaries serving at least one slot, each once."""
        return list(dict.fromkeys(a for a in self.primaries if a is not None))


def _address(entry: Sequence[Any], asked: Address) -> Address:
    host = entry[0].decode() if isinstance(entry[0], bytes) else str(entry[0])
    if not host or host == "?":  # the node does not know its own address: the one we asked
        host = asked[0]
    return host, int(entry[1])


def parse_slots(reply: Any, asked: Address) -> SlotMap:
    """The :class:`SlotMap` in a ``CLUSTER SLOTS`` reply from the node at ``asked``."""
    if not isinstance(reply, list):
        raise ProtocolError(f"CLUSTER SLOTS replied {reply!r}")
    slots = SlotMap()
    for start, end, primary, *replicas in reply:
        owner = _address(primary, asked)
        slots.primaries[int(start) : int(end) + 1] = [owner] * (int(end) - int(start) + 1)
        known = slots.replicas.setdefault(owner, [])
        known += [a for a in (_address(r, asked) for r in replicas) if a not in known]
    return slots


class RefreshGate:
    """Single flight with a cooldown: :meth:`begin` says whether a refresh may start now,
    :meth:`end` records its end; ``cooldown`` (seconds) is stretched by up to 30% of jitter so
    that many clients do not refresh in step. Not thread-safe: the sync client holds a lock."""

    def __init__(self, cooldown: float = REFRESH_COOLDOWN) -> None:
        self.cooldown = cooldown
        self.running = False
        self._next = float("-inf")

    def begin(self, now: float) -> bool:
        """True (and the gate is taken) when no refresh runs and the cooldown has passed."""
        if self.running or now < self._next:
            return False
        self.running = True
        return True

    def end(self, now: float) -> None:
        """Release the gate; the next refresh may start a jittered cooldown after ``now``."""
        self.running = False
        self._next = now + self.cooldown * random.uniform(1.0, 1.3)


def seed_address(url: str) -> Address:
    """The ``(host, port)`` of a seed given as a URL or ``host:port``."""
    params = parse_url(url if "://" in url else f"redis://{url}")
    return params.host, params.port


def shuffled(addresses: Iterable[Address]) -> list[Address]:
    """``addresses`` in random order, each once: a refresh asks a random node first."""
    found = list(dict.fromkeys(addresses))
    random.shuffle(found)
    return found
