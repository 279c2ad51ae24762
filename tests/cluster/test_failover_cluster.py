"""Failover under load, on a cluster of the module's own (Redis and Valkey): locks and claims
run from threads while a primary is failed over, first by ``CLUSTER FAILOVER``, then by
``kill -9``. Measured: time from the replica's promotion to the first success on its slots,
``CLUSTER SLOTS`` reads per second, NOSCRIPT reloads: printed (``-s``), never asserted (the
targets are measured by ``bench/cluster_failover.py``, reported in docs/cluster.md). Checked:
never two holders of a lock, every job completed exactly once (clean failover), no error raised
to callers by a clean one, no NOSCRIPT reload, successes on the failed-over slots after the
promotion, and no more ``CLUSTER SLOTS`` reads than the refresh gate allows."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import fastlock
from fastlock.cluster import AsyncClusterClient, ClusterClient
from fastlock.cluster.topology import REFRESH_COOLDOWN
from fastlock.locks.notify import MAX_NAP
from fastlock.protocol.slots import key_slot
from fastlock.testing.cluster import TempCluster, wait_until
from fastlock.testing.raw import ServerError

pytestmark = pytest.mark.slow  # slow tier: cluster failovers

LOCKS = 8
RESUMED = 100
"""Successes on the failed-over slots after the promotion that end a load run."""


@dataclass
class Load:
    """What the worker threads saw."""

    stop: threading.Event = field(default_factory=threading.Event)
    guard: threading.Lock = field(default_factory=threading.Lock)
    holders: dict[str, str] = field(default_factory=dict)
    overlaps: int = 0
    successes: list[tuple[float, int]] = field(default_factory=list)  # (time, slot)
    errors: list[BaseException] = field(default_factory=list)
    crashed: list[BaseException] = field(default_factory=list)  # anything else: fails the test
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


def _crash_recorded(loop: Callable[[ClusterClient, Load], None], client: ClusterClient, load: Load) -> None:
    """Run a worker loop; what it raises besides the FastlockErrors it counts reaches the test."""
    try:
        loop(client, load)
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        load.crashed.append(exc)
        load.stop.set()


Failover = Callable[[], tuple[float, set[int]]]
"""Fails a primary over; returns the time of the replica's promotion and the slots it took."""


def _run_load(client: ClusterClient, failover: Failover) -> tuple[Load, float, set[int]]:
    """Locks and claims from threads, the failover in the middle; the load stops once
    :data:`RESUMED` successes on the failed-over slots came after the promotion (a generous
    deadline, not a fixed window: a loaded machine only takes longer)."""
    load = Load()
    loops: list[Callable[[ClusterClient, Load], None]] = [
        lambda c, lo: _lock_loop(c, lo, "w0"),
        lambda c, lo: _lock_loop(c, lo, "w1"),
        _claim_loop,
    ]
    threads = [threading.Thread(target=_crash_recorded, args=(loop, client, load)) for loop in loops]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: len(load.successes) >= RESUMED or load.stop.is_set(), 60, "load running")
        promoted_at, slots = failover()
        errors = len(load.errors)
        try:
            wait_until(
                lambda: len(_after(load, promoted_at, slots)) >= RESUMED or load.stop.is_set(),
                60,
                "successes on the failed-over slots after the promotion",
            )
        except ServerError as late:  # say what the workers saw meanwhile
            since = load.errors[errors:]
            raise AssertionError(
                f"{late}: {len(_after(load, promoted_at, slots))} of {RESUMED}, "
                f"{len(load.successes)} successes in all, {len(since)} errors since, the last: {since[-3:]!r}"
            ) from None
    finally:
        load.stop.set()
        for thread in threads:
            thread.join(30)
    assert not any(thread.is_alive() for thread in threads), "a worker thread hung"
    assert load.crashed == []
    return load, promoted_at, slots


def _after(load: Load, promoted_at: float, slots: set[int]) -> list[float]:
    """The times of the successes on ``slots`` after ``promoted_at``."""
    return [t for t, slot in list(load.successes) if t >= promoted_at and slot in slots]


def _first_success_after(load: Load, promoted_at: float, slots: set[int]) -> float:
    after = _after(load, promoted_at, slots)
    assert after, "no success on the failed-over slots after the promotion"
    return min(after) - promoted_at


def _reads_allowed(elapsed: float, per_refresh: int = 1) -> float:
    """The most ``CLUSTER SLOTS`` reads one client may make in ``elapsed`` seconds (with its
    map already read): the refresh gate runs one refresh at a time and starts the next no
    sooner than ``REFRESH_COOLDOWN`` (jitter only adds) after the last one ended, so at most
    ``1 + elapsed / REFRESH_COOLDOWN`` refreshes; each reads one node, plus one per node down
    that it tries first (``per_refresh``). (A forced refresh skips the cooldown, but only runs
    while the map has a hole, and ``CLUSTER SLOTS`` lists a failed primary's slots until its
    replica takes them.) A count bound, not a rate: ``<= 3/s`` is only the limit for long
    windows (``1/elapsed + 1/REFRESH_COOLDOWN`` is over 3 in a window under about 17 s), and a
    slow machine only makes the bound looser."""
    return per_refresh * (1 + elapsed / REFRESH_COOLDOWN)


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
        victim = key_slot(queue.keys[0])

        def failover() -> tuple[float, set[int]]:
            replica = cluster.failover(victim)
            return time.monotonic(), _slots_of(cluster, replica) - {victim}

        reads_before, started = client.refreshes, time.monotonic()
        load, promoted_at, slots = _run_load(client, failover)
        elapsed = time.monotonic() - started
        reads = client.refreshes - reads_before
        resumed = _first_success_after(load, promoted_at, slots)
        reloads = sum(stats.reloads for stats in client.script_stats().values())
        print(
            f"\n{cluster.flavour}/{impl} CLUSTER FAILOVER: first lock success {resumed * 1e3:.1f} ms after"
            f" promotion; CLUSTER SLOTS {reads} in {elapsed:.2f} s; NOSCRIPT reloads {reloads};"
            f" errors {len(load.errors)}"
        )
        assert load.errors == [] and load.overlaps == 0 and reloads == 0
        assert reads <= _reads_allowed(elapsed)
        while len(load.completed) < len(payloads):  # the rest, after the failover
            jobs = queue.claim(50)
            load.completed.update(job.payload for job in jobs)
            queue.complete(jobs)
        assert set(load.completed) == set(payloads) and set(load.completed.values()) == {1}
    cluster.wait_stable()


async def _async_through_failover(cluster: TempCluster, impl: str) -> tuple[float, int, int, float]:
    """A lock acquired and released in a loop through a ``CLUSTER FAILOVER`` of its slot's
    primary, then once more on the promoted one: (the seconds that last one took, the
    ``CLUSTER SLOTS`` reads, NOSCRIPT reloads, the seconds the whole run took)."""
    started = time.monotonic()
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
        assert await lock.acquire("a") is not None  # progress on the promoted primary
        return (
            time.monotonic() - first,
            client.refreshes,
            sum(s.reloads for s in client.script_stats().values()),
            time.monotonic() - started,
        )


def test_async_client_follows_a_clean_failover(fresh_cluster: TempCluster, impl: str) -> None:
    fresh_cluster.wait_stable()
    took, refreshes, reloads, elapsed = asyncio.run(_async_through_failover(fresh_cluster, impl))
    print(
        f"\n{fresh_cluster.flavour}/{impl} async CLUSTER FAILOVER: release + acquire after it"
        f" {took * 1e3:.1f} ms; CLUSTER SLOTS {refreshes} in {elapsed:.2f} s; NOSCRIPT reloads {reloads}"
    )
    assert reloads == 0
    assert refreshes <= _reads_allowed(elapsed)  # the first, forced, read included: it ends a cooldown too
    fresh_cluster.wait_stable()


def _shard_subscribers(node: Any, channel: bytes) -> int:
    with fastlock.Client(f"redis://127.0.0.1:{node.port}", max_connections=1) as probe:
        return int(probe.execute("PUBSUB", "SHARDNUMSUB", channel)[1])


def _sleepers(lock: Any) -> tuple[int, bytes]:
    """The slot of ``lock`` and the channel its waiters listen on."""
    scope = lock.manager.scope(lock.digest, "", lock.limit)
    return key_slot(scope.slots[0]), f"{scope.wake}@0".encode()


async def _async_waiters_through_failover(cluster: TempCluster, impl: str) -> None:
    async with AsyncClusterClient(cluster.url, impl=impl) as client:
        holder = client.lock("sleepers", ttl=30)
        slot, channel = _sleepers(holder)
        assert await holder.acquire("holder") is not None

        async def waiter(n: int) -> int | None:
            lock = client.lock("sleepers", ttl=30, timeout=20)
            token = await lock.acquire(f"w{n}")
            if token is not None:
                assert await lock.release(f"w{n}") == token
            return token

        waiters = [asyncio.create_task(waiter(n)) for n in range(10)]
        old = cluster.primary_of(slot)
        await asyncio.to_thread(wait_until, lambda: _shard_subscribers(old, channel) == 1, 10, "listening")
        new = await asyncio.to_thread(cluster.failover, slot)
        promoted = time.monotonic()
        # the demoted node drops the channel; the waiters' attempts follow MOVED, then they enter
        # again on the promoted primary
        await asyncio.to_thread(wait_until, lambda: _shard_subscribers(new, channel) == 1, 10, "back")
        print(
            f"\n{cluster.flavour}/{impl} waiters on the promoted primary"
            f" {(time.monotonic() - promoted) * 1e3:.0f} ms after the promotion"
        )
        assert _shard_subscribers(old, channel) == 0
        assert not any(task.done() for task in waiters)
        assert await holder.release("holder") is not None
        released = time.monotonic()
        done, _ = await asyncio.wait(waiters, timeout=20)
        assert time.monotonic() - released < 10 * MAX_NAP / 2  # handed over, not found by re-checks
        tokens = [task.result() for task in done]
        assert len(done) == 10 and None not in tokens and len(set(tokens)) == 10


def test_async_waiters_sleep_through_a_clean_failover(fresh_cluster: TempCluster, impl: str) -> None:
    """Waiters on the listener when the lock's primary is failed over: the demoted node drops
    their channel, they enter again on the promoted one, and the holder's release reaches each
    in turn (none hangs past its timeout)."""
    fresh_cluster.wait_stable()
    asyncio.run(_async_waiters_through_failover(fresh_cluster, impl))
    fresh_cluster.wait_stable()


@pytest.mark.fault
def test_sync_waiters_sleep_through_a_kill_9_of_the_locks_primary(fresh_cluster: TempCluster) -> None:
    """The lock's primary is killed while threads wait: their listener connection is lost, they
    enter again on the promoted replica, and each gets the lock in turn within its timeout; the
    killed node comes back as a replica."""
    cluster = fresh_cluster
    cluster.wait_stable()
    with ClusterClient(cluster.url) as client:
        holder = client.lock("sleepers-9", ttl=10)
        slot, channel = _sleepers(holder)
        assert holder.acquire("holder") is not None
        results: dict[int, Any] = {}

        def waiter(n: int) -> None:
            try:
                lock = client.lock("sleepers-9", ttl=10, timeout=25)
                results[n] = lock.acquire(f"w{n}")
                lock.release(f"w{n}")
            except BaseException as exc:  # noqa: BLE001 - the test reads it
                results[n] = exc

        threads = [threading.Thread(target=waiter, args=(n,)) for n in range(5)]
        for thread in threads:
            thread.start()
        wait_until(lambda: _shard_subscribers(cluster.primary_of(slot), channel) == 1, 10, "listening")
        dead, replica = cluster.kill_primary(slot)
        wait_until(lambda: cluster.primary_of(slot) is replica, 30, "promoted")
        wait_until(lambda: _shard_subscribers(replica, channel) == 1, 10, "listening on the promoted one")
        holder.release("holder")  # (its lock may have been lost with the primary: free then)
        for thread in threads:
            thread.join(30)
        assert not any(thread.is_alive() for thread in threads)
        tokens = [results[n] for n in range(5)]
        assert all(type(token) is int for token in tokens), tokens
    cluster.revive(dead)


@pytest.mark.fault
def test_kill_9_of_a_primary(fresh_cluster: TempCluster) -> None:
    cluster = fresh_cluster
    cluster.wait_stable()
    with ClusterClient(cluster.url) as client:
        lock = client.lock("job-0", ttl=10)
        victim = key_slot(lock.manager.scope(lock.digest, "", lock.limit).slots[0])
        client.refresh(force=True)  # the map read: every read counted below is a gated one

        def kill() -> tuple[float, set[int]]:
            _, replica = cluster.kill_primary(victim)
            wait_until(lambda: cluster.primary_of(victim) is replica, 30, "promoted", step=0.002)
            return time.monotonic(), _slots_of(cluster, replica)

        reads_before, started = client.refreshes, time.monotonic()
        load, promoted_at, slots = _run_load(client, kill)
        elapsed = time.monotonic() - started
        reads = client.refreshes - reads_before
        resumed = _first_success_after(load, promoted_at, slots)
        unsent = [e for e in load.errors if not getattr(e, "sent", True)]
        print(
            f"\n{cluster.flavour} kill -9: first lock success {resumed * 1e3:.1f} ms after promotion;"
            f" CLUSTER SLOTS {reads} in {elapsed:.2f} s;"
            f" errors raised {len(load.errors)} ({len(unsent)} unsent)"
        )
        assert load.overlaps == 0
        assert reads <= _reads_allowed(elapsed, per_refresh=2)  # the killed node may be asked first
