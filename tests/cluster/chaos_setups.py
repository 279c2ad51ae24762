"""The deployments tests/cluster/test_chaos_processes.py fails over: a cluster (``CLUSTER
FAILOVER`` of one primary, then ``kill -9`` of the new one) and a Sentinel deployment
(``SENTINEL FAILOVER``, then ``kill -9`` of the new master). Both give the workers a
:class:`Target`, the parent a client, and the same steps; they differ in what the first
failover may lose:

- ``CLUSTER FAILOVER`` is clean (the replica catches up before it takes over, the old primary
  redirects at once): the history loses nothing until the kill (``lossless_until = "kill"``);
- ``SENTINEL FAILOVER`` promotes the replica as it is, and the deposed master takes writes
  until it is made a replica (here at once, by :meth:`TempSentinels.rejoin`): what it took
  meanwhile is lost (``lossless_until = "failover"``), and between the two ticks
  ``failover`` and ``failed over`` two masters may each grant a lock (``split``).
"""

from __future__ import annotations

from typing import Any

from chaos_workers import Target

from fastlock.cluster import ClusterClient, SentinelClient
from fastlock.protocol.slots import key_slot
from fastlock.testing.cluster import TempCluster, _slot_ranges, wait_until
from fastlock.testing.sentinel import TempSentinels
from fastlock.testing.servers import TempServer


def _slot(client: Any, name: str) -> int:
    lock = client.lock(name, ttl=None)
    return key_slot(lock.manager.scope(lock.digest, "", lock.limit).slots[0])


class ClusterSetup:
    """A cluster; the victim is the primary of the slot :meth:`aim` names."""

    allowed = ("ConnectionError", "TimeoutError", "ReplicationError", "ClusterDownError", "TryAgainError")
    """Errors a failover may raise to callers: lost connections (may have run), WAIT short of
    replicas (the promoted primary has none until the killed node rejoins), the cluster down
    while it notices the kill."""
    lossless_until = "kill"
    split = False

    def __init__(self, cluster: TempCluster) -> None:
        self.deployment, self.flavour, self.target = cluster, cluster.flavour, Target(url=cluster.url)
        self._victim = 0
        self._dead: Any = None

    def client(self, wait: tuple[int, int] | None = None) -> ClusterClient:
        return ClusterClient(self.deployment.url, wait=wait)

    def aim(self, key: Any) -> None:
        """Fail over the primary of ``key``."""
        self._victim = key_slot(key)

    def names(self, client: Any, count: int, tag: str) -> list[str]:
        """``count`` lock names whose keys live on the primary of the first one (aimed at)."""
        self._victim = _slot(client, f"{tag}-0")
        ranges = _slot_ranges(self.deployment.primary_of(self._victim))
        names = (f"{tag}-{i}" for i in range(10_000))
        return [n for n in names if any(low <= _slot(client, n) <= high for low, high in ranges)][:count]

    def wait_stable(self) -> None:
        self.deployment.wait_stable()

    def failover(self) -> None:
        self.deployment.failover(self._victim)

    def kill(self) -> None:
        self._dead, self._promoted = self.deployment.kill_primary(self._victim)

    def revive(self) -> None:
        cluster = self.deployment
        wait_until(lambda: cluster.primary_of(self._victim) is self._promoted, 15, "promoted")
        cluster.revive(self._dead)


class SentinelSetup:
    """A master, its replica and three sentinels (:class:`TempSentinels`)."""

    allowed = ("ConnectionError", "TimeoutError", "ReplicationError")
    """Lost connections (may have run; or the master not found again within the client's
    ``failover_timeout``), WAIT short of replicas (the deposed master has none, nor the
    promoted one until the other rejoins)."""
    lossless_until = "failover"
    split = True

    def __init__(self, sentinels: TempSentinels) -> None:
        self.deployment, self.flavour = sentinels, sentinels.flavour
        self.target = Target(sentinels=tuple(sentinels.sentinels), service=sentinels.service)
        self._dead: Any = None

    def client(self, wait: tuple[int, int] | None = None) -> SentinelClient:
        return SentinelClient(self.deployment.sentinels, self.deployment.service, wait=wait)

    def aim(self, key: Any) -> None:
        """Nothing to aim at: one master holds every key."""

    def names(self, client: Any, count: int, tag: str) -> list[str]:
        return [f"{tag}-{i}" for i in range(count)]

    def wait_stable(self) -> None:
        self.deployment.wait_synced()

    def failover(self) -> None:
        """``SENTINEL FAILOVER``, then the deposed master made a replica at once."""
        new: TempServer = self.deployment.failover()[0]
        self.deployment.rejoin(self.deployment.current()[1], None)  # read-only now; synced later
        assert self.deployment.current()[0] is new

    def kill(self) -> None:
        self._dead, self._promoted = self.deployment.current()
        self._dead.kill()

    def revive(self) -> None:
        self.deployment.wait_announced(self._promoted)
        self.deployment.revive(self._dead)


Setup = ClusterSetup | SentinelSetup
