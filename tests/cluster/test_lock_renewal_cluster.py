"""The lock watchdog on a 3-primary cluster, both cores and both transports: one round per
period renews locks of many slots, one write per node (a call per slot, pipelined)."""

from __future__ import annotations

import asyncio
import time

from fastlock.cluster import AsyncClusterClient, ClusterClient

TTL, LOCKS = 1.2, 300  # periods of 0.4 s: a loaded machine's late rounds tolerated


def _round_trips(client: ClusterClient) -> int:
    return sum(node.pool.round_trips for node in client.nodes().values())


def test_renewed_locks_of_every_node_in_one_write_per_node(client: ClusterClient) -> None:
    locks = [client.lock(f"many:{n}", ttl=TTL, renew=True) for n in range(LOCKS)]
    assert all(lock.acquire() is not None for lock in locks)
    watched = TTL * 2
    before = _round_trips(client)
    time.sleep(watched)
    primaries = len(client.nodes())
    assert _round_trips(client) - before <= primaries * (watched / (TTL / 3) + 1)
    assert not any(lock.lost for lock in locks) and all(lock.locked() for lock in locks)
    assert all(lock.release() is not None for lock in locks)


def test_renewed_locks_on_the_async_cluster_client(cluster_url: str, impl: str) -> None:
    async def main() -> None:
        async with AsyncClusterClient(cluster_url, impl=impl) as client:
            locks = [client.lock(f"many:{n}", ttl=TTL, renew=True) for n in range(LOCKS)]
            assert None not in await asyncio.gather(*(lock.acquire() for lock in locks))
            await asyncio.sleep(TTL * 2)
            assert not any(lock.lost for lock in locks)
            assert all(await asyncio.gather(*(lock.locked() for lock in locks)))
            assert None not in await asyncio.gather(*(lock.release() for lock in locks))

    asyncio.run(main())
