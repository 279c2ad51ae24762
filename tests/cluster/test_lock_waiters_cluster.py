"""Waiters on a Cluster client (issue 27): they sleep on the client's one wake-up listener, a
connection per node with waiters (sharded channels on the primary of the lock's slot), never on
a pooled connection; a release hands the lock over in one step (``SPUBLISH``); a slot that moves
while they sleep is followed."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from harness.blocking import PATIENCE_RECHECK
from harness.size import sized

import fastlock
from fastlock.aio import AsyncLockManager
from fastlock.cluster import AsyncClusterClient, ClusterClient
from fastlock.locks.notify import MAX_NAP
from fastlock.protocol.slots import key_slot
from fastlock.testing.cluster import TempCluster, wait_until
from fastlock.testing.servers import TempServer
from fastlock.tools.costs import command_calls

TASKS = sized(200, 60, "FASTLOCK_CLUSTER_AIO_WAITERS")
THREADS = sized(100, 30, "FASTLOCK_CLUSTER_SYNC_WAITERS")
PROMPT = MAX_NAP / 2  # a hand-over within this came from a wake-up, not from a re-check


def _slot(lock: Any) -> int:
    return key_slot(lock.manager.scope(lock.digest, "", lock.limit).slots[0])


def _channel(lock: Any) -> bytes:
    return f"{lock.manager.scope(lock.digest, '', lock.limit).wake}@0".encode()


def _probe(node: TempServer) -> fastlock.Client:
    return fastlock.Client(f"redis://127.0.0.1:{node.port}", max_connections=1)


def _clients(probe: fastlock.Client) -> int:
    info = probe.execute("INFO", "clients").decode()
    return int(next(x for x in info.splitlines() if x.startswith("connected_clients:")).split(":")[1])


def _listening(probe: fastlock.Client, channel: bytes, count: int = 1) -> None:
    wait_until(
        lambda: probe.execute("PUBSUB", "SHARDNUMSUB", channel)[1] >= count, 30, "subscribed", step=0.005
    )


def test_async_waiters_cost_one_listener_connection_on_the_slots_node(
    cluster_url: str, cluster: TempCluster, impl: str
) -> None:
    """TASKS tasks wait on one held lock: the node of its slot sees the pool's connections
    and the listener, no more; after the release each task takes the lock in turn (one holder
    at a time, never a PoolTimeoutError), each with its own fencing token."""

    async def main() -> None:
        async with AsyncClusterClient(cluster_url, impl=impl) as client:
            holder = client.lock("hot", ttl=30)
            node = cluster.primary_of(_slot(holder))
            with _probe(node) as probe:
                baseline = _clients(probe)
                assert await holder.acquire("holder") is not None
                inside, tokens = [0], []

                async def waiter(n: int) -> None:
                    lock = client.lock("hot", ttl=30, timeout=30)
                    token = await lock.acquire(f"w{n}")
                    assert token is not None
                    inside[0] += 1
                    assert inside[0] == 1, "two holders"
                    await asyncio.sleep(0)
                    inside[0] -= 1
                    tokens.append(token)
                    assert await lock.release(f"w{n}") == token

                tasks = [asyncio.create_task(waiter(n)) for n in range(TASKS)]
                await asyncio.to_thread(_listening, probe, _channel(holder))
                await asyncio.sleep(0.3)  # every task has made its attempts and sleeps
                assert not any(task.done() for task in tasks)
                peak = _clients(probe) - baseline
                pool = client.node(("127.0.0.1", node.port)).pool
                assert 1 <= peak <= pool.max_connections + 1, peak
                released = time.monotonic()
                assert await holder.release("holder") is not None
                assert time.monotonic() - released < PROMPT
                await asyncio.gather(*tasks)
                assert len(set(tokens)) == TASKS

    asyncio.run(main())


def test_sync_waiters_cost_one_listener_connection_on_the_slots_node(
    cluster_url: str, cluster: TempCluster, impl: str
) -> None:
    with ClusterClient(cluster_url, impl=impl) as client:
        holder = client.lock("hot", ttl=30)
        node = cluster.primary_of(_slot(holder))
        with _probe(node) as probe:
            baseline = _clients(probe)
            assert holder.acquire("holder") is not None
            guard, inside, tokens, failures = threading.Lock(), [0], [], []

            def waiter(n: int) -> None:
                try:
                    lock = client.lock("hot", ttl=30, timeout=30)
                    token = lock.acquire(f"w{n}")
                    assert token is not None
                    with guard:
                        inside[0] += 1
                        two = inside[0] > 1
                    time.sleep(0)
                    with guard:
                        inside[0] -= 1
                        tokens.append(token)
                    assert not two, "two holders"
                    assert lock.release(f"w{n}") == token
                except BaseException as exc:  # noqa: BLE001 - reaches the test below
                    failures.append(exc)

            threads = [threading.Thread(target=waiter, args=(n,)) for n in range(THREADS)]
            for thread in threads:
                thread.start()
            _listening(probe, _channel(holder))
            time.sleep(0.3)  # every thread has made its attempts and sleeps
            assert not failures, failures[:3]
            peak = _clients(probe) - baseline
            pool = client.node(("127.0.0.1", node.port)).pool
            assert 1 <= peak <= pool.max_size + 1, peak
            released = time.monotonic()
            assert holder.release("holder") is not None
            assert time.monotonic() - released < PROMPT
            for thread in threads:
                thread.join(40)
            assert not any(thread.is_alive() for thread in threads)
            assert not failures, failures[:3]
            assert len(set(tokens)) == THREADS


def test_a_release_hands_the_lock_over_in_one_step_on_the_shard(
    cluster_url: str, cluster: TempCluster, impl: str
) -> None:
    """The release script gives the lock to the queued waiter and ``SPUBLISH``es it on the
    lock's shard: the waiter returns that token with no attempt of its own after it."""

    async def main() -> None:
        async with AsyncClusterClient(cluster_url, impl=impl) as client:
            holder = client.lock("handed", ttl=30)
            with _probe(cluster.primary_of(_slot(holder))) as probe:
                assert await holder.acquire("holder") is not None
                taking = asyncio.create_task(client.lock("handed", ttl=30, timeout=10).acquire("waiter"))
                queue = (holder._main_scope.wake + "q").encode()
                await asyncio.to_thread(wait_until, lambda: probe.execute("ZCARD", queue) == 1, 10, "queued")
                await asyncio.sleep(
                    holder.manager.patience + PATIENCE_RECHECK
                )  # then a release hands it over
                probe.execute("CONFIG", "RESETSTAT")
                freed = await holder.release("holder")
                token = await taking
                assert freed is not None and token is not None and token > freed
                calls = command_calls(probe)
                assert calls["evalsha"] - calls.get("script|load", 0) == 1, calls
                assert calls.get("spublish") == 1 and "publish" not in calls, calls
                assert [h.job_id for h in await holder.holders()] == ["waiter"]

    asyncio.run(main())


def _move(cluster: TempCluster, slot: int, source: TempServer, target: TempServer) -> None:
    """Move ``slot`` and its keys from ``source`` to ``target`` (IMPORTING, MIGRATING, MIGRATE,
    then every primary told the new owner)."""
    source_id, target_id = cluster.node_id(source), cluster.node_id(target)
    assert target.raw_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id) == b"+OK\r\n"
    assert source.raw_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id) == b"+OK\r\n"
    with _probe(source) as probe:
        keys = probe.execute("CLUSTER", "GETKEYSINSLOT", slot, 1000)
        if keys:
            reply = probe.execute("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
            assert reply == b"OK", reply
    for node in (target, source, *cluster.primaries()):
        node.raw_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
    cluster.wait_slot_owned(slot, target_id)  # every node agrees before the test goes on


def test_waiters_follow_their_slot_to_another_node(cluster_url: str, cluster: TempCluster, impl: str) -> None:
    """The lock's slot moves while its waiters sleep: the old node drops their channel
    (``sunsubscribe``), they enter again on the new one within a re-check, and the holder's
    release (following ``MOVED``) hands the lock to each in turn."""

    async def main() -> None:
        async with AsyncClusterClient(cluster_url, impl=impl) as client:
            holder = client.lock("moving", ttl=30)
            slot, channel = _slot(holder), _channel(holder)
            source = cluster.primary_of(slot)
            target = next(n for n in cluster.primaries() if n is not source)
            assert await holder.acquire("holder") is not None
            locks = AsyncLockManager(client, local_queue=False)  # every waiter sleeps on the server
            waiters = [
                asyncio.create_task(locks.lock("moving", ttl=30, timeout=20).acquire(f"w{n}"))
                for n in range(5)
            ]
            try:
                with _probe(source) as old, _probe(target) as new:
                    await asyncio.to_thread(_listening, old, channel)
                    await asyncio.to_thread(_move, cluster, slot, source, target)
                    moved = time.monotonic()
                    await asyncio.to_thread(_listening, new, channel)
                    assert time.monotonic() - moved < MAX_NAP + 1
                    assert old.execute("PUBSUB", "SHARDNUMSUB", channel)[1] == 0
                    # every waiter entered there (one lost in a re-check enters at its end):
                    # a hand-over's message then finds its waiter
                    deadline = time.monotonic() + 10
                    while _entered(client, target.port) < len(waiters):
                        assert time.monotonic() < deadline, "the waiters never entered on the new node"
                        await asyncio.sleep(0.005)
                for task in waiters:
                    assert not task.done()
                token = await holder.release("holder")
                for _ in waiters:
                    handed = time.monotonic()
                    job = await _next_holder(client, waiters)
                    assert time.monotonic() - handed < PROMPT
                    token = await client.lock("moving", ttl=30).release(job)
                    assert token is not None
            finally:
                await asyncio.to_thread(_move, cluster, slot, target, source)

    asyncio.run(main())


def _entered(client: AsyncClusterClient, port: int) -> int:
    """The waiters entered (not lost) on the client's listener of the node at ``port``."""
    routed = client.listener
    return sum(not signal.lost for signal, node in routed._homes.items() if node._params.port == port)


async def _next_holder(client: AsyncClusterClient, waiters: list[asyncio.Task[Any]]) -> str:
    """The job of the waiter that takes the lock next (its task done, with a token)."""
    while True:
        holders = await client.lock("moving", ttl=30).holders()
        if holders and holders[0].job_id != "holder":
            job = holders[0].job_id
            task = waiters[int(job[1:])]
            token = await task
            assert token == holders[0].token
            return job
        await asyncio.sleep(0.005)


def test_a_cancelled_waiter_leaves_the_queue_through_the_cluster_client(cluster_url: str, impl: str) -> None:
    """A queued waiter is cancelled: its leaving release (``abandon``) runs through the cluster
    client, so the holder's release hands the lock to the next waiter at once, not to the
    cancelled one (which would hold it until its ttl)."""

    async def main() -> None:
        async with AsyncClusterClient(cluster_url, impl=impl) as client:
            holder = client.lock("leave", ttl=30)
            assert await holder.acquire("holder") is not None
            locks = AsyncLockManager(client, local_queue=False)  # both waiters queue on the server
            first = asyncio.create_task(locks.lock("leave", ttl=30, timeout=20).acquire("a"))
            queue = holder._main_scope.wake + "q"
            await _queued(client, queue, 1)
            second = asyncio.create_task(locks.lock("leave", ttl=30, timeout=20).acquire("b"))
            await _queued(client, queue, 2)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            await _queued(client, queue, 1)  # the cancelled one left (abandon's release)
            released = time.monotonic()
            assert await holder.release("holder") is not None
            assert await second is not None
            assert time.monotonic() - released < PROMPT

    asyncio.run(main())


async def _queued(client: AsyncClusterClient, queue: str, count: int) -> None:
    """Until ``count`` waiters are queued for a hand-over on ``queue``, and their patience has
    run out (a release hands them the lock then)."""
    deadline = time.monotonic() + 10
    while await client.execute("ZCARD", queue) != count:
        assert time.monotonic() < deadline, f"never {count} queued"
        await asyncio.sleep(0.005)
    await asyncio.sleep(client.locks.patience + PATIENCE_RECHECK)
