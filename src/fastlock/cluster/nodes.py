# generated from src/fastlock/cluster/nodes_aio.py by tools/async_to_sync.py, do not edit
"""The nodes of a cluster client and its slot map: :class:`ClusterNodes`, the base of
:class:`~fastlock.cluster.ClusterClient` (one :class:`fastlock.Client` per node, made on
first use and sharing the first one's scripts and settings; the slot map read from a random known
node, one read at a time, every script loaded on each node met).

``cluster/nodes_aio.py`` is the source of the sync ``cluster/nodes.py`` (``tools/async_to_sync.py``
writes it)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ..exceptions import ConnectionError, ResponseError
from ..scripts.calling import check_loaded, load_commands
from ..sync.client import Client
from .asking import share_scripts
from .topology import Address, RefreshGate, SlotMap, parse_slots, seed_address, shuffled

__all__ = ["ClusterNodes"]

_log = logging.getLogger("fastlock.cluster")


class ClusterNodes:
    """The node clients and the slot map of a cluster client (``url`` and ``seeds``: nodes to
    read the map from; ``options``: each node client's)."""

    def __init__(self, url: str, seeds: Iterable[str], options: dict[str, Any]) -> None:
        self._options = options
        self._first = Client(url, **options)
        self.impl = self._first.impl
        self.params = self._first.params
        self.scripts = self._first.scripts
        self.script_settings = self._first.script_settings
        self._seeds = [seed_address(url)] + [seed_address(s) for s in seeds]
        self._nodes: dict[Address, Client] = {self._seeds[0]: self._first}
        self._slots = SlotMap()
        self._gate = RefreshGate()
        self._map_lock = threading.Lock()
        self._loaded_on: set[Address] = set()
        self._reads = 0
        self._gate_lock = threading.Lock()  # held while a slot-map read runs

    @property
    def refreshes(self) -> int:
        """``CLUSTER SLOTS`` reads so far (the slot map refreshes)."""
        return self._reads

    def node(self, address: Address) -> Client:
        """The client of the node at ``address`` (made on first use)."""
        try:
            return self._nodes[address]
        except KeyError:
            pass
        with self._map_lock:
            node = self._nodes.get(address)
            if node is None:
                node = Client(**self._options)
                node.params = replace(self.params, host=address[0], port=address[1])
                share_scripts(node, self._first)
                self._nodes[address] = node
        return node

    def nodes(self) -> dict[Address, Client]:
        """The clients of every node known (primaries, then replicas), by address."""
        self._ensure_map()
        return {address: self.node(address) for address in self._slots.nodes()}

    def primaries(self) -> list[Client]:
        """The clients of the primaries (for per-node commands such as ``SCAN``)."""
        self._ensure_map()
        return [self.node(address) for address in self._slots.primary_nodes()]

    def _ensure_map(self) -> None:
        if self._slots.primaries[0] is None:
            self._refresh_now()

    def _refresh_now(self) -> None:
        """Read the slot map now, or wait for the read another thread is making (a thread
        that finds the gate taken must not fail for want of the map being read)."""
        if not self.refresh(force=True):
            with self._gate_lock:  # held by the reading thread until its read is done
                pass

    def refresh(self, force: bool = False) -> bool:
        """Read the slot map from a random known node (one refresh at a time, a cooldown
        between two unless ``force``); True if this call read it."""
        if not self._gate_lock.acquire(blocking=False):
            return False
        try:
            if not force and not self._gate.begin(time.monotonic()):
                return False
            try:
                self._read_map()
            finally:
                self._gate.end(time.monotonic())
        finally:
            self._gate_lock.release()
        return True

    def _read_map(self) -> None:
        failure: BaseException | None = None
        for address in shuffled([*self._slots.nodes(), *self._seeds]):
            self._reads += 1
            try:
                reply = self.node(address).execute("CLUSTER", "SLOTS")
            except (ConnectionError, ResponseError) as exc:
                failure = exc
                continue
            fresh = parse_slots(reply, address)
            self._slots.update(fresh)
            self._loaded_on.intersection_update(fresh.nodes())  # a node back later may have lost them
            self._load_scripts(fresh.nodes())
            return
        if failure is not None and self._slots.primaries[0] is None:
            raise failure

    def _load_scripts(self, addresses: Iterable[Address]) -> None:
        """Load every script on the nodes not yet loaded (one write each)."""
        scripts = self.scripts.load_all()
        for address in addresses:
            if address in self._loaded_on:
                continue
            try:
                check_loaded(scripts, self.node(address).execute_many(load_commands(scripts)))
                self._loaded_on.add(address)
            except (ConnectionError, ResponseError) as exc:  # down or loading: loaded on NOSCRIPT
                _log.info("scripts not loaded on %s:%s: %s", *address, exc)

    def _address(self, slot: int) -> Address:
        address = self._slots.primaries[slot]
        if address is None:
            self._refresh_now()
            address = self._slots.primary(slot)
        return address

    def _primary(self, slot: int) -> Client:
        address = self._address(slot)
        return self._nodes.get(address) or self.node(address)
