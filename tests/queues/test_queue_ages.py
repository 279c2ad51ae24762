"""When jobs were due, read back: fresh ids carry it (their producer's clock, plus the delay),
the oldest ready job's age (``queue.oldest_ready()``, against the server's clock) and the
wait of each first claim (the observer's ``jobs_waited``), on real servers, both cores."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import pytest

import fastlock
from fastlock import metrics
from fastlock.queues.ids import due_ms


def test_fresh_ids_carry_when_they_are_due(client: fastlock.Client) -> None:
    before = time.time() * 1000
    queue = client.queue("ages-ids")
    now_id = queue.enqueue(b"now")
    later_id = queue.enqueue(b"later", delay=60)
    many = queue.enqueue_many([b"a", b"b"], delay=2)
    after = time.time() * 1000
    assert before - 1 <= due_ms(now_id) <= after  # type: ignore[operator]
    assert before + 60_000 - 1 <= due_ms(later_id) <= after + 60_000  # type: ignore[operator]
    assert {due_ms(job_id) for job_id in many} == {due_ms(many[0])} and due_ms(many[0]) >= before + 2000 - 1  # type: ignore[operator]
    for given in ("job-1", "~0123456789abcdef-1a", "~zz.x", ""):  # a given id, an older fresh one, junk
        assert due_ms(given) is None


def test_the_oldest_ready_job_age(client: fastlock.Client) -> None:
    queue = client.queue("ages-oldest", max_attempts=3, backoff=0.0)
    assert queue.oldest_ready() is None  # nothing ready
    queue.enqueue(b"given", job_id="given-1")
    assert queue.oldest_ready() is None  # a given id carries no due time
    queue.claim()
    first = queue.enqueue(b"first")
    queue.enqueue(b"second")
    time.sleep(0.2)
    age = queue.oldest_ready()
    assert age is not None and 0.15 <= age < 30
    (job,) = queue.claim()
    assert job.id == first
    queue.fail(job, "again")  # a retry at the claiming end: skipped, the next first attempt read
    age = queue.oldest_ready()
    assert age is not None and 0.15 <= age < 30
    queue.pause()  # the pause marker at the claiming end is skipped too
    assert queue.oldest_ready() is not None
    queue.resume()
    queue.enqueue(b"urgent", priority=5)
    assert (queue.oldest_ready() or 0) >= 0.15  # the older of the two lanes


class Waits(metrics.Observer):
    def __init__(self) -> None:
        self.waits: list[float] = []

    def jobs_waited(self, queue: str, waits: Sequence[float]) -> None:
        self.waits.extend(waits)


@pytest.fixture
def waits() -> Iterator[Waits]:
    observer = Waits()
    metrics.install(observer)
    try:
        yield observer
    finally:
        metrics.uninstall()


def test_each_first_claim_reports_how_long_it_waited(client: fastlock.Client, waits: Waits) -> None:
    queue = client.queue("ages-waits", max_attempts=3, backoff=0.0)
    queue.enqueue_many([b"a", b"b"])
    queue.enqueue(b"given", job_id="given-2")  # no due time: not reported
    time.sleep(0.2)
    batch = queue.claim(3)
    assert len(batch) == 3 and len(waits.waits) == 2 and all(0.15 <= w < 30 for w in waits.waits)
    queue.fail(batch[0], "again")
    queue.complete(batch[1:], claim=1)  # the retry's claim, through complete: no wait reported
    assert len(waits.waits) == 2
