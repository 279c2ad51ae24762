"""kill -9 of a primary while threads take and give back locks with ``wait=(1, 200)``: every
acquire that returned was on the replica, so fencing tokens never go backwards across the
failover and no two threads hold a lock at once (Redis and Valkey, a cluster of its own). The
promoted replica has no replica of its own: acquires there come back short
(``ReplicationError``, counted and released), as they should, until one rejoins."""

from __future__ import annotations

import threading
import time

import pytest

import fastlock
from fastlock.cluster import ClusterClient
from fastlock.cluster.durability import ReplicationError
from fastlock.protocol.slots import key_slot
from fastlock.testing.cluster import TempCluster, wait_until

pytestmark = pytest.mark.slow  # slow tier: cluster failovers

NAMES = [f"job-{i}" for i in range(6)]


@pytest.mark.fault
def test_tokens_never_go_backwards_across_a_kill_9_with_wait(fresh_cluster: TempCluster) -> None:
    cluster = fresh_cluster
    cluster.wait_stable()
    with ClusterClient(cluster.url, wait=(1, 200)) as client:
        tokens: dict[str, list[int]] = {name: [] for name in NAMES}
        holding: set[str] = set()
        guard = threading.Lock()
        stop = threading.Event()
        overlaps = short = failed = 0

        def work(me: str) -> None:
            nonlocal overlaps, short, failed
            n = 0
            while not stop.is_set():
                name = NAMES[n % len(NAMES)]
                n += 1
                lock = client.lock(name, ttl=10)
                try:
                    token = lock.acquire(me)
                except ReplicationError:
                    short += 1  # ran, not acknowledged by the replica: given back, not counted
                    lock.release(me)
                    continue
                except fastlock.FastlockError:
                    failed += 1
                    time.sleep(0.01)
                    continue
                if token is None:
                    continue
                with guard:
                    overlaps += name in holding
                    holding.add(name)
                    tokens[name].append(token)
                    holding.discard(name)
                try:
                    lock.release(me)
                except fastlock.FastlockError:
                    failed += 1

        threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(3)]
        for thread in threads:
            thread.start()

        def taken() -> int:
            with guard:
                return sum(map(len, tokens.values()))

        try:
            # every name taken before the kill (those of the victim's shard come back short
            # after it: the promoted replica has none), however loaded the machine is
            wait_until(lambda: all(tokens.values()), 30, "every name taken once")
            first = client.lock(NAMES[0], ttl=None)
            victim = key_slot(first.manager.scope(first.digest, "", first.limit).slots[0])
            _, replica = cluster.kill_primary(victim)
            wait_until(lambda: cluster.primary_of(victim) is replica, 10, "promoted", step=0.005)
            promoted = taken()
            wait_until(lambda: taken() > promoted, 30, "a lock taken after the failover")
            time.sleep(0.3)
        finally:
            stop.set()
            for thread in threads:
                thread.join(10)
        print(
            f"\n{cluster.flavour} kill -9 with WAIT: {sum(map(len, tokens.values()))} acquires, "
            f"{short} short of replicas, {failed} failed"
        )
        assert overlaps == 0
        for name, seen in tokens.items():
            assert seen == sorted(set(seen)), f"{name}: tokens went backwards: {seen}"
