"""Queue rate limits (both cores, both servers): claims and complete-and-claim never take more
than the rate (+ burst) allows, the empty claim says when the next job will be allowed, an
unrated queue on the same keys is not limited, bad rates are refused; 4 worker processes for
FASTLOCK_QUEUE_RATE_SECONDS (10 s full size, 2 s short) stay within the rate, counted on the
server clock (each claim's lease deadline, written by the script: the same ``now`` its rate
decision used)."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest
from harness.monitor import monitor, stamped
from harness.size import sized

import fastlock
from fastlock.queues.worker import Worker
from fastlock.testing.servers import TempServer
from fastlock.tools.costs import command_calls

SECONDS = sized(10, 2, "FASTLOCK_QUEUE_RATE_SECONDS")
RATE, PER, BURST = 50, 1.0, 5
LEASE = 30.0


def test_claims_take_what_the_rate_allows(client: fastlock.Client) -> None:
    queue = client.queue("r", rate=(10, 1.0, 3), lease=LEASE)
    queue.enqueue_many([b"%d" % i for i in range(20)])
    first = queue.claim(5)
    assert len(first) == 3  # the burst
    empty = queue.claim(5)
    assert empty == [] and not empty.paused and 0.05 < (empty.next_due_in or 0) <= 0.1
    time.sleep(0.21)
    second = queue.complete(first, claim=5)  # complete-and-claim is rated too
    assert 2 <= len(second) <= 3
    assert queue.complete(second, claim=5).next_due_in is not None
    unrated = client.queue("r", lease=LEASE)  # the same queue, no rate: not limited
    assert len(unrated.claim(10)) == 10
    assert queue.stats().active == 10


def test_a_rated_queue_sends_its_rate_key_in_its_slot(client: fastlock.Client) -> None:
    queue = client.queue("{t}mail", rate=(100, 1.0))
    assert queue.worker_keys[-1] == "fl:{t}mail:rate" and len(queue.worker_keys) == 11
    assert len(client.queue("{t}mail").worker_keys) == 10


@pytest.mark.parametrize(
    ("rate", "error"),
    [
        ((0, 1.0), fastlock.ArgumentError),
        ((10, 0), fastlock.ArgumentError),
        ((10, 1.0, 0), fastlock.ArgumentError),
        ((10**6, 1.0), fastlock.ArgumentError),  # over 100,000 per second
        ((1.5, 1.0), fastlock.ArgumentTypeError),
        (10, fastlock.ArgumentTypeError),
        ((10,), fastlock.ArgumentTypeError),
        ([10, 1.0], fastlock.ArgumentTypeError),
    ],
)
def test_bad_rates_are_refused(client: fastlock.Client, rate: object, error: type) -> None:
    with pytest.raises(error):
        client.queue("bad", rate=rate)  # type: ignore[arg-type]


def work(url: str, until: float) -> None:
    """One worker process on the rated queue until ``until`` (time.time())."""
    with fastlock.Client(url) as client:
        queue = client.queue("rated", rate=(RATE, PER, BURST), lease=LEASE)
        worker = Worker(queue, lambda job: None, batch=10)
        threading.Timer(max(0.0, until - time.time()), worker.stop).start()
        worker.run()


@pytest.mark.slow
def test_four_worker_processes_stay_within_the_rate(server: TempServer, redis_url: str) -> None:
    with fastlock.Client(redis_url) as client:
        queue = client.queue("rated", lease=LEASE)
        queue.enqueue_many([b"job"] * (RATE * (SECONDS + 2) * 3))
        client.execute("CONFIG", "RESETSTAT")
        context = multiprocessing.get_context("fork")
        with monitor(server.unix_path) as recorded:
            until = time.time() + 1 + SECONDS
            procs = [context.Process(target=work, args=(redis_url, until)) for _ in range(4)]
            for proc in procs:
                proc.start()
            for proc in procs:
                proc.join(SECONDS + 60)
                assert proc.exitcode == 0
        calls = command_calls(client)
    claimed = []  # the server's ms clock of each claimed job: its lease deadline - the lease
    for _, lua, args in stamped(recorded[0]):
        if lua and args[0] == b"ZADD" and args[1] == queue.key["active"].encode():
            claimed += [int(args[i]) - LEASE * 1000 for i in range(2, len(args), 2)]
    claimed.sort()
    interval = PER * 1000 / RATE
    # GCRA: jobs i..j (sorted) number at most BURST + (t_j - t_i) / interval, exactly on its clock
    lowest = float("inf")
    for j, at in enumerate(claimed):
        score = j - at / interval
        assert score <= lowest + BURST - 1 + 1e-9, (j, at)
        lowest = min(lowest, score)
    span = (claimed[-1] - claimed[0]) / 1000
    assert len(claimed) >= 0.8 * RATE / PER * span  # the rate used, the workers not oversleeping
    assert calls.get("evalsha", 0) <= 4 * len(claimed) + 100  # throttled workers sleep, not spin
