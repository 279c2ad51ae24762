"""A throw-away Redis/Valkey Cluster (3 primaries, 3 replicas) from the server binaries.

``with TempCluster() as cluster: ClusterClient(cluster.url)``: six :class:`TempServer`
nodes with ``cluster-node-timeout 500``, joined by ``CLUSTER MEET``, slots given by
``CLUSTER ADDSLOTSRANGE`` (three even ranges), one replica per primary by ``CLUSTER
REPLICATE``; ready (every node sees ``cluster_state:ok`` and the full ``CLUSTER SLOTS``) in
about two seconds. :meth:`TempCluster.failover` and :meth:`TempCluster.kill_primary` move a
primary's slots to its replica, cleanly or by ``kill -9``; :meth:`TempCluster.revive` brings a
killed node back as a new replica.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from .raw import ServerError, bulk_text
from .servers import HOST, TempServer, find_server_binary, free_port

__all__ = ["CLUSTER_ARGS", "ClusterNode", "TempCluster", "wait_until"]

CLUSTER_ARGS = (
    *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "500"),
    *(
        "--repl-diskless-sync-delay",
        "0",
        "--repl-ping-replica-period",
        "1",
        "--cluster-require-full-coverage",
        "yes",
    ),
)
_RANGES = ((0, 5460), (5461, 10922), (10923, 16383))


def wait_until(check: Callable[[], bool], timeout: float, what: str, step: float = 0.01) -> float:
    """Poll ``check`` until it is true; the seconds it took. Raise ServerError after ``timeout``."""
    start = time.monotonic()
    while True:
        try:
            if check():
                return time.monotonic() - start
        except (OSError, ServerError):
            pass
        if time.monotonic() - start > timeout:
            raise ServerError(f"not {what} after {timeout} s")
        time.sleep(step)


class ClusterNode(TempServer):
    """A cluster node: its bus on a port of its own (the default, port + 10000, is out of
    range for the ephemeral ports TempServer picks)."""

    bus_port = 0
    _same_bus = False

    def _command_line(self) -> list[str]:
        if not self._same_bus:
            self.bus_port = free_port()
        return [*super()._command_line(), *CLUSTER_ARGS, "--cluster-port", str(self.bus_port)]

    def restart(self) -> None:
        """Start again on the same ports (the others know its bus port) with its
        ``nodes.conf``, its data lost: it rejoins the cluster as it left it."""
        self._same_bus = True
        try:
            super().restart()
        finally:
            self._same_bus = False


def _info(server: TempServer, section: str) -> dict[str, str]:
    command = ("CLUSTER", "INFO") if section == "cluster" else ("INFO", section)
    text = bulk_text(server.raw_command(*command))
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


class TempCluster:
    """Three primaries and three replicas on 127.0.0.1 (``binary``: as for TempServer)."""

    def __init__(self, binary: str | None = None, flavour: str | None = None, *, primaries: int = 3) -> None:
        self.binary = binary or find_server_binary()
        self.nodes: list[ClusterNode] = [ClusterNode(self.binary, flavour) for _ in range(2 * primaries)]
        self.flavour = self.nodes[0].flavour
        self.started_in = 0.0

    @property
    def url(self) -> str:
        """A seed URL (the first node that is running)."""
        return next(n.url for n in self.nodes if n.pid is not None)

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes if n.pid is not None]

    def node_id(self, server: TempServer) -> str:
        return bulk_text(server.raw_command("CLUSTER", "MYID"))

    def start(self) -> TempCluster:
        """Start the nodes, join them, assign slots and replicas; wait until all agree."""
        start = time.monotonic()
        try:
            for node in self.nodes:
                node.start()
            first, count = self.nodes[0], len(self.nodes) // 2
            for node in self.nodes[1:]:
                _ok(first.raw_command("CLUSTER", "MEET", HOST, node.port, node.bus_port))
            for node, (low, high) in zip(self.nodes[:count], _RANGES, strict=True):
                _ok(node.raw_command("CLUSTER", "ADDSLOTSRANGE", low, high))
            total = len(self.nodes)
            for node in self.nodes:
                wait_until(functools.partial(_knows, node, total), 10, "met")
            for primary, replica in zip(self.nodes[:count], self.nodes[count:], strict=True):
                _replicate(replica, self.node_id(primary))
            self.wait_stable()
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - start
        return self

    def wait_stable(self, timeout: float = 15) -> float:
        """Wait until every running node says ``cluster_state:ok`` and lists every running
        primary with a synced replica; the seconds it took."""

        def stable() -> bool:
            running = [n for n in self.nodes if n.pid is not None]
            replicas = [n for n in running if _info(n, "replication")["role"] == "slave"]
            if any(_info(r, "replication").get("master_link_status") != "up" for r in replicas):
                return False
            for node in running:
                if _info(node, "cluster")["cluster_state"] != "ok":
                    return False
                if node.raw_command("CLUSTER", "SLOTS").count(b"$9\r\n127.0.0.1") < len(running):
                    return False
            return True

        return wait_until(stable, timeout, "stable")

    def wait_slot_owned(self, slot: int, owner_id: str, timeout: float = 15) -> float:
        """Wait until every running node's view gives ``slot`` to ``owner_id`` alone, with no
        migration of it left open (``[slot->-...]``/``[slot-<-...]``); the seconds it took."""

        differing: list[str] = []

        def owned() -> bool:
            for node in (n for n in self.nodes if n.pid is not None):
                for line in bulk_text(node.raw_command("CLUSTER", "NODES")).splitlines():
                    fields = line.split()
                    claims = any(_covers(r, slot) for r in fields[8:])
                    if claims != (fields[0] == owner_id) or f"[{slot}-" in line:
                        differing[:] = [f"node {node.port}: {line}"]
                        return False
            return True

        try:
            return wait_until(owned, timeout, f"slot {slot} owned by {owner_id[:8]} everywhere")
        except ServerError as exc:
            raise ServerError(f"{exc}: {differing}") from None

    def primaries(self) -> list[TempServer]:
        """The running nodes that are primaries now."""
        running = [n for n in self.nodes if n.pid is not None]
        return [n for n in running if _info(n, "replication")["role"] == "master"]

    def primary_of(self, slot: int) -> TempServer:
        for node in self.primaries():
            for low, high in _slot_ranges(node):
                if low <= slot <= high:
                    return node
        raise ServerError(f"no primary serves slot {slot}")

    def replica_of(self, primary: TempServer) -> TempServer:
        port = str(primary.port)
        for node in self.nodes:
            if node.pid is not None and _info(node, "replication").get("master_port") == port:
                return node
        raise ServerError(f"no replica of {primary.port}")

    def failover(self, slot: int) -> TempServer:
        """``CLUSTER FAILOVER`` on the replica of ``slot``'s primary; returns the replica once
        it is a primary (it has taken the slots)."""
        replica = self.replica_of(self.primary_of(slot))
        _ok(replica.raw_command("CLUSTER", "FAILOVER"))
        wait_until(lambda: _info(replica, "replication")["role"] == "master", 10, "promoted")
        return replica

    def kill_primary(self, slot: int) -> tuple[TempServer, TempServer]:
        """``kill -9`` the primary of ``slot``; returns (the dead one, its replica)."""
        primary = self.primary_of(slot)
        replica = self.replica_of(primary)
        primary.kill()
        return primary, replica

    def revive(self, node: ClusterNode, timeout: float = 15) -> float:
        """Bring a killed ``node`` back as a new, empty node (same ports, fresh ``nodes.conf``)
        and make it the replica of the primary left without one; wait until stable. The old
        node id is forgotten first. (Restarting with its old ``nodes.conf`` would let it serve
        its former slots, empty, until it hears of the promotion.) The seconds it took."""
        start = time.monotonic()
        conf = node.dir / "nodes.conf"
        old_id = next(line.split()[0] for line in conf.read_text().splitlines() if "myself" in line)
        for other in self.nodes:
            if other.pid is not None:
                other.raw_command("CLUSTER", "FORGET", old_id)  # an error: it had forgotten it
        for stale in (conf, *node.dir.glob("*.rdb")):  # a replica's sync left its data on disk
            stale.unlink()
        node.restart()
        orphan = next(p for p in self.primaries() if p is not node and not self._has_replica(p))
        _ok(orphan.raw_command("CLUSTER", "MEET", HOST, node.port, node.bus_port))
        total = sum(n.pid is not None for n in self.nodes)
        for other in self.nodes:
            if other.pid is not None:
                wait_until(functools.partial(_knows, other, total), timeout, "met")
        _replicate(node, self.node_id(orphan))
        self.wait_stable(timeout)
        return time.monotonic() - start

    def _has_replica(self, primary: TempServer) -> bool:
        try:
            self.replica_of(primary)
        except ServerError:
            return False
        return True

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> TempCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _replicate(replica: TempServer, primary_id: str) -> None:
    """``CLUSTER REPLICATE primary_id``, again while the replica has not learnt that id yet (a
    node still in handshake is known under a temporary id: ``ERR Unknown node``)."""

    def replicated() -> bool:
        reply = replica.raw_command("CLUSTER", "REPLICATE", primary_id)
        if reply.startswith(b"-ERR Unknown node"):
            return False
        _ok(reply)
        return True

    wait_until(replicated, 10, f"a replica of {primary_id}")


def _knows(node: TempServer, total: int) -> bool:
    return _info(node, "cluster")["cluster_known_nodes"] == str(total)


def _slot_ranges(node: TempServer) -> list[tuple[int, int]]:
    text = bulk_text(node.raw_command("CLUSTER", "NODES"))
    for line in text.splitlines():
        fields = line.split()
        if "myself" in fields[2]:
            ranges = [r.split("-") for r in fields[8:] if not r.startswith("[")]
            return [(int(r[0]), int(r[-1])) for r in ranges]
    return []


def _covers(field: str, slot: int) -> bool:
    """Whether a slot field of ``CLUSTER NODES`` (``5``, ``0-5460``) holds ``slot``."""
    if field.startswith("["):
        return False
    low, _, high = field.partition("-")
    return int(low) <= slot <= int(high or low)


def _ok(reply: bytes) -> None:
    if reply != b"+OK\r\n":
        raise ServerError(f"cluster setup command failed: {reply!r}")
