"""Read-write locks on the shared 3x3 cluster (both flavours, both cores): the standalone
scenarios run unchanged (the ``client`` fixture is a ClusterClient, whose waiters sleep on its
listener: SSUBSCRIBE on the slot's primary, woken by the release's SPUBLISH), locks on every
primary each keep their keys in one slot, and asyncio tasks on the async cluster client."""

from __future__ import annotations

import asyncio
import time

from locks.test_rwlock import (  # noqa: F401 - collected here, on the cluster
    test_a_readers_ttl_expires_alone,
    test_a_timeout_returns_none,
    test_a_writer_behind_a_stream_of_readers_gets_in_within_a_reader_ttl,
    test_a_writers_release_wakes_every_waiting_reader,
    test_an_expired_writer_frees_the_lock,
    test_fencing_tokens_increase_across_both_sides,
    test_keys_share_the_names_slot,
    test_never_a_writer_alongside_anyone,
    test_readers_hold_together_a_writer_alone,
    test_the_context_managers_give_the_token,
    test_the_readers_keys_live_as_long_as_their_last_reader,
    test_the_writer_may_read_a_reader_may_not_write,
)

from fastlock.cluster import AsyncClusterClient, ClusterClient
from fastlock.locks.notify import MAX_NAP
from fastlock.protocol.slots import key_slot


def test_locks_on_every_primary_keep_their_keys_in_one_slot(client: ClusterClient) -> None:
    names = [f"doc-{i}" for i in range(12)]
    locks = [client.rwlock(name, ttl=30, prefix="kept") for name in names]
    for rw in locks:
        assert len({key_slot(key) for key in rw.keys}) == 1
        assert rw.read.acquire("r") is not None and rw.write.acquire("w") is None
    per_node = [len(node.execute("KEYS", "kept:*")) for node in client.primaries()]
    assert sum(per_node) == 3 * len(names) and min(per_node) > 0  # readers, tokens, counter each


def test_async_tasks_on_the_cluster_are_woken_by_the_release(cluster_url: str, impl: str) -> None:
    async def main() -> None:
        async with AsyncClusterClient(cluster_url, impl=impl) as client:
            rw = client.rwlock("tasks", ttl=30, timeout=5)
            assert await rw.write.acquire("w") is not None
            readers = [asyncio.create_task(rw.read.acquire(f"r{n}")) for n in range(3)]
            await asyncio.sleep(0.2)  # all three asleep on the client's listener
            released = time.monotonic()
            assert await rw.write.release("w") is not None
            assert None not in await asyncio.gather(*readers)
            assert time.monotonic() - released < MAX_NAP / 2
            assert len(await rw.read.holders()) == 3 and await rw.write.acquire("w", timeout=0) is None

    asyncio.run(main())
