"""Job queue throughput and recovery latency: ``python -m pytest --benchmark-only bench/test_bench_queue.py``.

Jobs per second through enqueue -> claim -> complete with one producer and one worker,
unbatched and in batches of 10 and 100, with client CPU, server commands and round trips
per job; the summary's ratio column compares jobs/s with the C floor's EVALSHA round trips/s
(a job needing r round trips can reach at most 1/r of it). Then the latency of one
``recover`` call while 10,000+ leases are expired (it touches ``limit`` jobs, no more).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from conftest import FloorRun

import fastlock
from fastlock.tools.bench import Figures
from fastlock.tools.workloads import Flow

PAYLOAD = b"x" * 64  # the recover backlog's payload
JOBS = {1: 2_000, 10: 5_000, 100: 10_000}
RECOVER_LIMIT = 1000
EXPIRED = 10_000


def client_for(server_url: str, impl: str) -> fastlock.Client:
    if impl == "cython":
        pytest.importorskip("fastlock._core", reason="Cython core not built")
    client = fastlock.Client(server_url, impl=impl)
    client.execute("FLUSHALL")
    return client


def test_round_trip_floor(benchmark: Any, floor: FloorRun) -> None:
    """The C floor (redis-benchmark EVALSHA round trips), the queue figures' baseline: one
    round trip per request, so its ops/s are round trips/s (and consistent, see ``FloorRun``)."""
    benchmark.extra_info.update(floor.figures.as_dict())
    benchmark.pedantic(floor.assert_consistent, rounds=1, iterations=1)


@pytest.mark.parametrize("batch", list(JOBS))
@pytest.mark.parametrize("impl", ["cython", "python"])
def test_job_throughput(measure: Callable[..., Figures], server_url: str, impl: str, batch: int) -> None:
    client = client_for(server_url, impl)
    flow = Flow(client.queue("bench"), batch)
    name = "unbatched" if batch == 1 else f"batches of {batch}"
    same_bytes = None if impl == "python" else lambda other: Flow(other.queue("bench-floor"), batch).job
    figures = measure(f"queue: {impl}, {name}", flow.job, ops=JOBS[batch], cost=client, same_bytes=same_bytes)
    assert figures.round_trips_per_op is not None and figures.round_trips_per_op <= 2 / batch + 1e-9


@pytest.mark.parametrize("expired", [0, EXPIRED])
def test_recover_latency(measure: Callable[..., Figures], server_url: str, expired: int) -> None:
    client = client_for(server_url, "cython")
    queue = client.queue("bench-recover", max_attempts=1_000_000)
    rounds = 7
    backlog = expired + (rounds + 2) * RECOVER_LIMIT if expired else 0  # warm-up, rounds, cost count
    for _ in range(0, backlog, 1000):
        queue.enqueue_many([PAYLOAD] * 1000)
        queue.claim(1000, lease=0.001)
    time.sleep(0.01)
    touched = RECOVER_LIMIT if expired else 0

    def recover() -> None:
        result = queue.recover(RECOVER_LIMIT)
        assert result.requeued + result.dead == touched and result.more == bool(expired)

    label = f"{expired:,} expired leases, limit {RECOVER_LIMIT}" if expired else "nothing expired"
    measure(f"queue: recover, {label}", recover, ops=1, rounds=rounds, cost=client)
