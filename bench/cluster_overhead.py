"""The cluster router's client CPU overhead: ``python bench/cluster_overhead.py [--rounds N]``.

A script call and a lock acquire + release, each timed through a ``ClusterClient`` of a 3x3
harness cluster (:mod:`fastlock.testing.cluster`) and through a standalone ``Client`` of the
primary that serves the keys (the same server, its replica and its cluster bookkeeping: only
the client differs), in interleaved rounds (the order alternating, as in ``bench/gate.py``):
per round, the client's CPU time (``time.process_time``: user + system of this process, the
servers excluded) and the wall time per operation. Prints the median of the per-round ratios
cluster / standalone (1.00: no overhead). Supporting evidence only: the instruction counts
(``bench/instructions.py``, ``cluster_*_overhead``) are the gated, deterministic figure.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from fastlock import Client
from fastlock.cluster import ClusterClient
from fastlock.protocol.slots import key_slot
from fastlock.testing.cluster import TempCluster

Op = Callable[[], object]


KINDS = ("CPU", "wall")


def _now() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def _round(op: Op, ops: int) -> list[float]:
    """Seconds per operation over ``ops`` calls (GC off), of each of :data:`KINDS`."""
    gc.disable()
    try:
        before = _now()
        for _ in range(ops):
            op()
        return [(after - start) / ops for after, start in zip(_now(), before, strict=True)]
    finally:
        gc.enable()


def compare(label: str, cluster: Op, standalone: Op, ops: int, rounds: int) -> None:
    """Print the median cluster / standalone ratio per operation of each of :data:`KINDS`."""
    _round(cluster, ops)  # warm-up
    _round(standalone, ops)
    ratios: list[list[float]] = [[] for _ in KINDS]
    for i in range(rounds):
        if i % 2 == 0:
            mine, theirs = _round(cluster, ops), _round(standalone, ops)
        else:
            theirs = _round(standalone, ops)
            mine = _round(cluster, ops)
        for kind, a, b in zip(ratios, mine, theirs, strict=True):
            kind.append(a / b)
    medians = "  ".join(f"{k} {statistics.median(r):.3f}" for k, r in zip(KINDS, ratios, strict=True))
    print(f"{label:26s} cluster / standalone, median of {rounds} rounds: {medians}")


def _lock_op(client: Any, name: str) -> Op:
    """Acquire + release of lock ``name`` (until_executed, ttl, tracking, fencing), the release
    by another object: the ``lock acquire + release`` workload on a chosen name."""
    holder, releaser = client.lock(name, ttl=30), client.lock(name, ttl=30)
    job = holder.job_id

    def op() -> None:
        holder.acquire(job)
        releaser.release(job)

    return op


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--ops", type=int, default=2000, help="operations per side per round")
    parser.add_argument("--impl", default=None, help="the core: cython (default) or python")
    options = parser.parse_args()
    key, name = "bench:{k}", "bench-overhead"
    with TempCluster() as cluster:
        routed = ClusterClient(cluster.url, impl=options.impl)
        digest = routed.lock(name, ttl=None).digest
        bucket = routed.locks.scope(digest, "", 1).keys[0]  # the slot of every key of the lock
        call_node = Client(cluster.primary_of(key_slot(key)).url, impl=options.impl)
        lock_node = Client(cluster.primary_of(key_slot(bucket)).url, impl=options.impl)
        print(f"core {routed.impl}, {options.rounds} rounds of {options.ops} operations per side")
        calls = []
        for client in (routed, call_node):
            script = client.register_script("return 1")
            call, script_name = client.call, script.name
            calls.append(lambda call=call, n=script_name: call(n, (key,), (1, "two")))
        compare("script call (client.call)", *calls, options.ops, options.rounds)
        locks = [_lock_op(client, name) for client in (routed, lock_node)]
        compare("lock acquire + release", *locks, options.ops // 2, options.rounds)


if __name__ == "__main__":
    main()
