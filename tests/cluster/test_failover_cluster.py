"""Failover under load, on a cluster of the module's own (Redis and Valkey): locks and claims
run from threads while a primary is failed over, first by ``CLUSTER FAILOVER``, then by
``kill -9``. Measured: time from the replica's promotion to the first success on its slots,
``CLUSTER SLOTS`` reads per second, NOSCRIPT reloads. Checked: never two holders of a lock,
every job completed exactly once (clean failover), no error raised to callers by a clean one.
The numbers are printed (``-s``) and reported in docs/cluster.md."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

import fastlock
from fastlock.cluster import AsyncClusterClient, ClusterClient
from fastlock.protocol.slots import key_slot
from fastlock.testing.cluster import TempCluster, wait_until

LOCKS = 8


@dataclass
class Load:
    """What the worker threads saw."""

    stop: threading.Event = field(default_factory=threading.Event)
    guard: threading.Lock = field(default_factory=threading.Lock)
    holders: dict[str, str] = field(default_factory=dict)
    overlaps: int = 0
    successes: list[tuple[float, int]] = field(default_factory=list)  # (time, slot)
    errors: list[BaseException] = field(default_factory=list)
    completed: Counter[bytes] = field(default_factory=Counter)


def _lock_loop(client: ClusterClient, load: Load, me: str) -> None:
    n = 0
    while not load.stop.is_set():
        name = f"job-{n % LOCKS}"
        n += 1
        lock = client.lock(name, ttl=10)
        try:
            token = lock.acquire(me)
            if token is None:
                continue
            with load.guard:
                load.overlaps += name in load.holders
                load.holders[name] = me
            slot = key_slot(lock.manager.scope(lock.digest, "", lock.limit).slots[0])
            load.successes.append((time.monotonic(), slot))
            with load.guard:
                del load.holders[name]
            lock.release(me)
        except fastlock.FastlockError as exc:
            load.errors.append(exc)
            time.sleep(0.01)


def _claim_loop(client: ClusterClient, load: Load) -> None:
    queue = client.queue("jobs", lease=30.0)
    while not load.stop.is_set():
        try:
            jobs = queue.claim(2)
            for job in jobs:
                load.completed[job.payload] += 1
            if jobs:
                queue.complete(jobs)
            else:
                time.sleep(0.005)
        except fastlock.FastlockError as exc:
            load.errors.append(exc)
            time.sleep(0.01)


def _run_load(client: ClusterClient, failover: Any) -> tuple[Load, float]:
    load = Load()
    threads = [threading.Thread(target=_lock_loop, args=(client, load, f"w{i}")) for i in range(2)]
    threads.append(threading.Thread(target=_claim_loop, args=(client, load)))
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.3)
        promoted_at = failover()
        time.sleep(1.2)
    finally:
        load.stop.set()
        for thread in threads:
            thread.join(10)
    return load, promoted_at


def _first_success_after(load: Load, promoted_at: float, slots: set[int]) -> float:
    after = [t for t, slot in load.successes if t >= promoted_at and slot in slots]
    assert after, "no success on the failed-over slots after the promotion"
    return min(after) - promoted_at


def _slots_of(cluster: TempCluster, node: Any) -> set[int]:
    from fastlock.testing.cluster import _slot_ranges

    return {s for low, high in _slot_ranges(node) for s in range(low, high + 1)}


def test_clean_failover_loses_nothing_and_resumes_at_once(fresh_cluster: TempCluster, impl: str) -> None:
    cluster = fresh_cluster
    cluster.wait_stable()
    with ClusterClient(cluster.url, impl=impl) as client:
        queue = client.queue("jobs", lease=30.0)
        payloads = [f"job-{i}".encode() for i in range(300)]
        for payload in payloads:
            queue.enqueue(payload)
        reads_before, started = client.refreshes, time.monotonic()
        victim = key_slot(queue.keys[0])
        load, promoted_at = _run_load(client, lambda: (cluster.failover(victim), time.monotonic())[1])
        reads = (client.refreshes - reads_before) / (time.monotonic() - started)
        new_primary = cluster.primary_of(victim)
        resumed = _first_success_after(load, promoted_at, _slots_of(cluster, new_primary) - {victim})
        reloads = sum(stats.reloads for stats in client.script_stats().values())
        print(
            f"\n{cluster.flavour}/{impl} CLUSTER FAILOVER: first lock success {resumed * 1e3:.1f} ms after"
            f" promotion; CLUSTER SLOTS {reads:.2f}/s; NOSCRIPT reloads {reloads}; errors {len(load.errors)}"
        )
        assert load.errors == [] and load.overlaps == 0 and reloads == 0
        assert reads <= 3
        assert resumed < 0.2
        while len(load.completed) < len(payloads):  # the rest, after the failover
            jobs = queue.claim(50)
            load.completed.update(job.payload for job in jobs)
            queue.complete(jobs)
        assert set(load.completed) == set(payloads) and set(load.completed.values()) == {1}
    cluster.wait_stable()


async def _async_through_failover(cluster: TempCluster, impl: str) -> tuple[float, int, int]:
    async with AsyncClusterClient(cluster.url, impl=impl) as client:
        lock = client.lock("async-job", ttl=10)
        victim = key_slot(lock.manager.scope(lock.digest, "", lock.limit).slots[0])
        assert await lock.acquire("a") is not None
        loop = asyncio.get_running_loop()
        promoted = loop.run_in_executor(None, cluster.failover, victim)
        tokens = []
        while not promoted.done() or len(tokens) < 5:
            tokens.append(await lock.release("a"))
            assert await lock.acquire("a") is not None
        await promoted
        first = time.monotonic()
        await lock.release("a")
        assert await lock.acquire("a") is not None
        return (
            time.monotonic() - first,
            client.refreshes,
            sum(s.reloads for s in client.script_stats().values()),
        )


def test_async_client_follows_a_clean_failover(fresh_cluster: TempCluster, impl: str) -> None:
    fresh_cluster.wait_stable()
    took, refreshes, reloads = asyncio.run(_async_through_failover(fresh_cluster, impl))
    assert reloads == 0 and refreshes <= 5 and took < 0.5
    fresh_cluster.wait_stable()


@pytest.mark.fault
def test_kill_9_of_a_primary(fresh_cluster: TempCluster) -> None:
    cluster = fresh_cluster
    cluster.wait_stable()
    with ClusterClient(cluster.url) as client:
        lock = client.lock("job-0", ttl=10)
        victim = key_slot(lock.manager.scope(lock.digest, "", lock.limit).slots[0])

        def kill() -> float:
            _, replica = cluster.kill_primary(victim)
            wait_until(lambda: cluster.primary_of(victim) is replica, 10, "promoted", step=0.002)
            return time.monotonic()

        reads_before, started = client.refreshes, time.monotonic()
        load, promoted_at = _run_load(client, kill)
        reads = (client.refreshes - reads_before) / (time.monotonic() - started)
        new_primary = cluster.primary_of(victim)
        resumed = _first_success_after(load, promoted_at, _slots_of(cluster, new_primary))
        unsent = [e for e in load.errors if not getattr(e, "sent", True)]
        print(
            f"\n{cluster.flavour} kill -9: first lock success {resumed * 1e3:.1f} ms after promotion;"
            f" CLUSTER SLOTS {reads:.2f}/s; errors raised {len(load.errors)} ({len(unsent)} unsent)"
        )
        assert load.overlaps == 0
        assert reads <= 3
        assert resumed < 0.3
