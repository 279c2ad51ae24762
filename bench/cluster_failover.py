"""Resume time of the cluster clients after a failover (issue 13's targets).

A 3x3 harness cluster (``fastlock.testing.cluster``); a ``ClusterClient`` (three threads) and an
``AsyncClusterClient`` (three tasks on a loop of their own) under load: per client, two workers
acquiring and releasing locks and one enqueueing, claiming and completing jobs, 1 ms apart,
each with a lock or queue on every primary. Each round fails one primary over (the primaries in
turn), first ``--failovers`` times by ``CLUSTER FAILOVER`` on its replica, then as many times by
``kill -9`` (the killed node brought back as the new replica, ``TempCluster.revive``). A poller
asks the replica its role every millisecond: the promotion is the first reply saying ``master``.
Measured per round and client:

- resume: from the promotion to the first call that returned (no error) on the failed-over
  slots (target: 100 ms after ``CLUSTER FAILOVER``, 200 ms after ``kill -9``);
- ``CLUSTER SLOTS`` reads per second (``refreshes``) from the failover command to one second
  after the promotion or the later resume (target: 3);
- NOSCRIPT seen by callers (``script_stats`` reloads) (target after ``CLUSTER FAILOVER``: 0);
- errors raised to callers (after ``kill -9``: the calls in flight on the killed node), listed
  by type at the end, with those raised outside the rounds (while the load starts, while a
  killed node is revived).

``python bench/cluster_failover.py [--flavour redis|valkey] [--failovers 5] [--impl python]``
prints every round and the median and maximum per flavour, client and kind of failover.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import flavours

import fastlock
from fastlock.cluster import AsyncClusterClient, ClusterClient
from fastlock.protocol.slots import key_slot
from fastlock.testing.cluster import TempCluster, wait_until
from fastlock.testing.servers import TempServer

KINDS = ("sync", "async")
TAIL = 1.0
"""Seconds after the promotion that the ``CLUSTER SLOTS`` window lasts at least."""
VICTIMS = (100, 8000, 13000)
"""A slot of each primary's range: the one failed over in round n is ``VICTIMS[n % 3]``'s."""
TARGETS = {"CLUSTER FAILOVER": 100.0, "kill -9": 200.0}


Row = tuple[float, float, int, int]
"""One round's figures for one client: resume ms, ``CLUSTER SLOTS`` reads/s, NOSCRIPT, errors."""


class Record:
    """What one client's workers saw: the successes (time, slot) and the errors."""

    def __init__(self) -> None:
        self.successes: list[tuple[float, int]] = []
        self.failures: list[tuple[float, str]] = []  # (time, the error's type and ``sent``)
        self.crashed: list[BaseException] = []

    def failed(self, exc: BaseException) -> None:
        self.failures.append((time.monotonic(), f"{type(exc).__name__} (sent {getattr(exc, 'sent', '?')})"))

    def failed_in(self, start: float, end: float) -> Counter[str]:
        """The errors raised from ``start`` to ``end``, by type."""
        return Counter(what for t, what in list(self.failures) if start <= t <= end)

    def first_after(self, since: float, slots: set[int]) -> float | None:
        """The time of the first success on ``slots`` at ``since`` or later."""
        return min((t for t, slot in list(self.successes) if t >= since and slot in slots), default=None)


def steps(client: Any, worker: str, names: dict[str, list[int]]) -> Iterator[tuple[int, Callable[[], Any]]]:
    """The worker's calls, round robin: ``(slot, call)``; ``call()`` runs one step (a lock
    acquire + release, or an enqueue + claim + complete), or returns its coroutine on an
    ``AsyncClusterClient``."""
    aio = isinstance(client, AsyncClusterClient)
    if worker.startswith("claim"):
        queues = [client.queue(f"bench-{worker}-{n}", lease=30.0) for n in names[worker]]
        step = _async_claim_step if aio else _claim_step
        plan = [(key_slot(q.keys[0]), lambda q=q: step(q)) for q in queues]
    else:
        locks = [client.lock(f"bench-{worker}-{n}", ttl=10) for n in names[worker]]
        step = _async_lock_step if aio else _lock_step
        plan = [(lock_slot(lock), lambda lock=lock: step(lock)) for lock in locks]
    while True:
        yield from plan


def lock_slot(lock: Any) -> int:
    """The slot of every key of ``lock``."""
    return key_slot(lock.manager.scope(lock.digest, "", lock.limit).slots[0])


def _lock_step(lock: Any) -> None:
    if lock.acquire() is not None:
        lock.release()


async def _async_lock_step(lock: Any) -> None:
    if await lock.acquire() is not None:
        await lock.release()


def _claim_step(queue: Any) -> None:
    queue.enqueue(b"job")
    queue.complete(queue.claim(1))


async def _async_claim_step(queue: Any) -> None:
    await queue.enqueue(b"job")
    await queue.complete(await queue.claim(1))


def sync_worker(work: Iterator[tuple[int, Callable[[], Any]]], record: Record, stop: threading.Event) -> None:
    try:
        for slot, step in work:
            if stop.is_set():
                return
            try:
                step()
                record.successes.append((time.monotonic(), slot))
            except fastlock.FastlockError as exc:
                record.failed(exc)
            time.sleep(0.001)
    except BaseException as exc:  # noqa: BLE001 - reported by the main thread
        record.crashed.append(exc)


async def async_worker(
    work: Iterator[tuple[int, Callable[[], Any]]], record: Record, stop: threading.Event
) -> None:
    try:
        for slot, step in work:
            if stop.is_set():
                return
            try:
                await step()
                record.successes.append((time.monotonic(), slot))
            except fastlock.FastlockError as exc:
                record.failed(exc)
            await asyncio.sleep(0.001)
    except BaseException as exc:  # noqa: BLE001 - reported by the main thread
        record.crashed.append(exc)


WORKERS = ("lock0", "lock1", "claim0")


def names_per_worker(client: ClusterClient, cluster: TempCluster) -> dict[str, list[int]]:
    """For each worker, name numbers of one lock (or queue) on each primary."""
    ports = {cluster.primary_of(slot).port: slot for slot in VICTIMS}
    names: dict[str, list[int]] = {}
    for worker in WORKERS:
        found: dict[int, int] = {}
        n = 0
        while len(found) < len(ports):
            if worker.startswith("claim"):
                slot = key_slot(client.queue(f"bench-{worker}-{n}").keys[0])
            else:
                slot = lock_slot(client.lock(f"bench-{worker}-{n}", ttl=None))
            found.setdefault(cluster.primary_of(slot).port, n)
            n += 1
        names[worker] = list(found.values())
    return names


def is_primary(node: TempServer) -> bool:
    return b"role:master" in node.raw_command("INFO", "replication")


def reloads(client: Any) -> int:
    return sum(stats.reloads for stats in client.script_stats().values())


class Bench:
    """The cluster, the two clients under load, the rounds."""

    def __init__(self, cluster: TempCluster, impl: str | None) -> None:
        self.cluster = cluster
        self.stop = threading.Event()
        self.records = {kind: Record() for kind in KINDS}
        self.types: dict[tuple[str, str], Counter[str]] = {
            (k, how): Counter() for k in KINDS for how in TARGETS
        }
        self.sync = ClusterClient(cluster.url, impl=impl)
        self.names = names_per_worker(self.sync, cluster)
        started: list[AsyncClusterClient] = []
        self.threads = [
            threading.Thread(
                target=sync_worker, args=(steps(self.sync, w, self.names), self.records["sync"], self.stop)
            )
            for w in WORKERS
        ]
        self.threads.append(threading.Thread(target=lambda: asyncio.run(self._async_load(impl, started))))
        for thread in self.threads:
            thread.start()
        wait_until(lambda: bool(started), 30, "async client started")
        self.aio = started[0]
        wait_until(lambda: all(len(r.successes) > 100 for r in self.records.values()), 60, "load running")

    async def _async_load(self, impl: str | None, started: list[AsyncClusterClient]) -> None:
        async with AsyncClusterClient(self.cluster.url, impl=impl) as client:
            started.append(client)
            work = [
                async_worker(steps(client, w, self.names), self.records["async"], self.stop) for w in WORKERS
            ]
            await asyncio.gather(*work)

    def check(self) -> None:
        for kind, record in self.records.items():
            if record.crashed:
                raise RuntimeError(f"a {kind} worker crashed") from record.crashed[0]

    def round(self, how: str, n: int) -> dict[str, Row]:
        """One failover; per client: (resume ms, CLUSTER SLOTS reads/s, reloads, errors)."""
        cluster = self.cluster
        primary = cluster.primary_of(VICTIMS[n % len(VICTIMS)])
        replica = cluster.replica_of(primary)
        used = {slot for r in self.records.values() for _, slot in list(r.successes)}
        slots = {slot for slot in used if cluster.primary_of(slot) is primary}
        clients = {"sync": self.sync, "async": self.aio}
        before = {k: (c.refreshes, reloads(c)) for k, c in clients.items()}
        started = time.monotonic()
        if how == "kill -9":
            primary.kill()
        else:
            replica.raw_command("CLUSTER", "FAILOVER")
        wait_until(lambda: is_primary(replica), 30, "promoted", step=0.001)
        promoted = time.monotonic()
        wait_until(
            lambda: all(r.first_after(promoted, slots) for r in self.records.values()) or self.crashed(),
            60,
            "resumed",
        )
        self.check()
        time.sleep(max(0.0, promoted + TAIL - time.monotonic()))
        ended = time.monotonic()
        results = {}
        for kind, client in clients.items():
            record = self.records[kind]
            first = record.first_after(promoted, slots)
            assert first is not None
            reads, loaded = before[kind]
            failed = record.failed_in(started, ended)
            self.types[kind, how] += failed
            results[kind] = (
                (first - promoted) * 1e3,
                (client.refreshes - reads) / (ended - started),
                reloads(client) - loaded,
                failed.total(),
            )
        if how == "kill -9":
            cluster.revive(primary, timeout=60)  # type: ignore[arg-type]  # a ClusterNode
        cluster.wait_stable(60)
        return results

    def crashed(self) -> bool:
        return any(r.crashed for r in self.records.values())

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)
        self.sync.close()
        self.check()


def describe(kind: str, row: Row) -> str:
    resume, reads, noscript, errors = row
    return f"{kind} resume {resume:6.1f} ms, {reads:.2f} SLOTS/s, {noscript} NOSCRIPT, {errors} errors;"


def summarise(label: str, how: str, rows: list[Row]) -> str:
    resume, reads, noscript, errors = (list(column) for column in zip(*rows, strict=True))
    return (
        f"{label} {how} x{len(rows)}: resume median {statistics.median(resume):.1f} ms,"
        f" max {max(resume):.1f} (target <= {TARGETS[how]:.0f});"
        f" CLUSTER SLOTS/s median {statistics.median(reads):.2f}, max {max(reads):.2f}"
        f" (target <= 3); NOSCRIPT {sum(noscript)}; errors raised {sum(errors)}"
    )


def run(flavour: str, binary: str, failovers: int, impl: str | None) -> list[str]:
    """Every round of one flavour; the summary lines."""
    summary = []
    with TempCluster(binary, flavour) as cluster:
        bench = Bench(cluster, impl)
        try:
            for how in TARGETS:
                rows: dict[str, list[Row]] = {kind: [] for kind in KINDS}
                for n in range(failovers):
                    line = [f"{flavour} {how} {n + 1}:"]
                    for kind, row in bench.round(how, n).items():
                        rows[kind].append(row)
                        line.append(describe(kind, row))
                    print(" ".join(line), flush=True)
                summary += [summarise(f"{flavour} {kind}", how, r) for kind, r in rows.items()]
        finally:
            bench.close()
        for (kind, how), types in bench.types.items():
            summary.append(f"{flavour} {kind} {how}: errors by type {dict(types)}")
        for kind, record in bench.records.items():
            outside = Counter(what for _, what in record.failures)
            outside.subtract(sum((bench.types[kind, how] for how in TARGETS), Counter()))
            summary.append(f"{flavour} {kind}: errors outside the rounds (start, revive) {dict(+outside)}")
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    flavours.add_option(parser)
    parser.add_argument("--failovers", type=int, default=5, help="rounds of each kind of failover")
    parser.add_argument("--impl", default=None, help="the core: cython (default) or python")
    options = parser.parse_args(argv)
    summary: list[str] = []
    for flavour, binary in flavours.binaries(options.flavour):
        summary += run(flavour, binary, options.failovers, options.impl)
    print("\n".join(summary))


if __name__ == "__main__":
    main()
