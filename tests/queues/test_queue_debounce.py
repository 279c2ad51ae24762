"""Debounce and replace of a waiting unique job (``enqueue(..., on_duplicate=...)``) on real
servers, both cores: the payload and delay replaced or the due time pushed back, a claimed job
never touched, and 8 producer threads replacing one job while workers claim it."""

from __future__ import annotations

import threading
import time

import pytest
from harness.size import sized

import fastlock
from fastlock.queues.jobs import QueueStats, Unique
from fastlock.queues.queue import Queue

REPLACEMENTS = sized(10_000, 400, "FASTLOCK_DEBOUNCE_REPLACEMENTS")
PRODUCERS = 8


@pytest.fixture
def queue(client: fastlock.Client) -> Queue:
    return client.queue("debounce", lease=30.0)


def due_in(queue: Queue, job_id: str) -> float:
    info = queue.job(job_id)
    assert info.state == "delayed" and info.at is not None, info
    now = queue.peek("delayed").now
    return info.at - now


def test_replace_swaps_payload_and_delay_of_a_waiting_job(queue: Queue) -> None:
    first = queue.enqueue(b"v1", unique="report", delay=60)
    assert queue.enqueue(b"v2", unique="report", delay=120, on_duplicate="replace") == first
    assert 119 < due_in(queue, first) <= 120
    assert queue.enqueue(b"v3", unique="report", delay=30, on_duplicate="replace") == first
    assert 29 < due_in(queue, first) <= 30  # replace may bring it forward
    assert queue.stats() == QueueStats(ready=0, delayed=1, active=0, dead=0)
    assert queue.enqueue(b"v4", unique="report", on_duplicate="replace") == first  # no delay: ready now
    [job] = queue.claim()
    assert (job.id, job.payload, job.attempt) == (first, b"v4", 1)
    with pytest.raises(fastlock.DuplicateJob) as info:  # claimed: never touched
        queue.enqueue(b"v5", unique="report", on_duplicate="replace")
    assert info.value.job_id == first
    assert queue.holds(job)
    queue.complete(job)
    assert queue.enqueue(b"v6", unique="report", on_duplicate="replace") != first  # free: a new job


def test_replace_moves_a_ready_job_to_the_delayed_set(queue: Queue) -> None:
    queue.enqueue_many([b"before"] * 3)
    first = queue.enqueue(b"v1", unique="report")
    assert queue.enqueue(b"v2", unique="report", delay=60, on_duplicate="replace") == first
    assert queue.stats() == QueueStats(ready=3, delayed=1, active=0, dead=0)
    assert [job.payload for job in queue.claim(10)] == [b"before"] * 3
    assert queue.enqueue(b"v3", unique="report", on_duplicate="replace") == first
    [job] = queue.claim()
    assert (job.id, job.payload) == (first, b"v3")


def test_replace_in_the_prioritised_lane(queue: Queue) -> None:
    first = queue.enqueue(b"v1", unique="p", priority=3)
    assert queue.enqueue(b"v2", unique="p", priority=3, on_duplicate="replace") == first
    assert queue.stats().ready == 1
    with pytest.raises(fastlock.DuplicateJob):  # another priority: another word, not found waiting
        queue.enqueue(b"v3", unique="p", priority=4, on_duplicate="replace")
    [job] = queue.claim()
    assert job.payload == b"v2"


def test_extend_pushes_the_due_time_back_and_keeps_the_payload(queue: Queue) -> None:
    first = queue.enqueue(b"first", unique="d", delay=60, on_duplicate="extend")  # a fresh job
    assert queue.enqueue(b"second", unique="d", delay=120, on_duplicate="extend") == first
    assert 119 < due_in(queue, first) <= 120
    assert queue.enqueue(b"third", unique="d", delay=30, on_duplicate="extend") == first
    assert 119 < due_in(queue, first) <= 120  # never brought forward
    assert queue.job(first).preview == b"first"
    assert queue.enqueue(b"x", unique="d", on_duplicate="replace") == first  # ready now
    assert queue.enqueue(b"y", unique="d", delay=1.0, on_duplicate="extend") == first
    assert queue.claim() == []  # a ready job parked again (1 s: a loaded CI leg took over 0.2 s to claim)
    time.sleep(1.05)
    [job] = queue.claim()
    assert job.payload == b"x"


def test_until_executing_and_until_expired(queue: Queue) -> None:
    running = Unique("sync", type="until_executing")
    first = queue.enqueue(b"a", unique=running, delay=60)
    assert queue.enqueue(b"b", unique=running, on_duplicate="replace") == first
    [job] = queue.claim()
    assert job.payload == b"b"  # claimed: its lock released, so a replace enqueues a new job
    second = queue.enqueue(b"c", unique=running, on_duplicate="replace")
    assert second != first
    assert queue.enqueue(b"d", unique=running, on_duplicate="replace") == second
    ttl = Unique("ping", type="until_expired", ttl=60.0)
    third = queue.enqueue(b"e", unique=ttl, delay=60)
    assert queue.enqueue(b"f", unique=ttl, delay=60, on_duplicate="replace") == third
    assert queue.job(third).preview == b"f"


def test_a_custom_job_id_still_refuses_a_duplicate_id(queue: Queue) -> None:
    queue.enqueue(b"a", job_id="j", unique="x", delay=60)
    with pytest.raises(fastlock.DuplicateJob):
        queue.enqueue(b"b", job_id="j", unique="y", on_duplicate="replace")
    assert queue.enqueue(b"c", job_id="k", unique="x", on_duplicate="replace") == "j"
    assert queue.job("j").preview == b"c" and queue.job("k").state == "missing"


def test_producers_replacing_one_job_while_workers_claim(queue: Queue) -> None:
    """8 producer threads replace one until_executed job REPLACEMENTS times in all, 2 workers
    claim and complete: every claimed payload is one its enqueue returned that job's id for,
    no other job of the lock waits or runs while one is claimed, and no id is claimed twice."""
    accepted: dict[str, set[bytes]] = {}
    claims: list[tuple[str, bytes]] = []
    errors: list[BaseException] = []
    guard = threading.Lock()
    done = threading.Event()

    def produce(n: int) -> None:
        try:
            for i in range(REPLACEMENTS // PRODUCERS):
                payload = b"%d-%d" % (n, i)
                try:
                    delay = 0.001 * (i % 3)
                    job_id = queue.enqueue(payload, unique="one", delay=delay, on_duplicate="replace")
                except fastlock.DuplicateJob:
                    continue  # claimed meanwhile: refused
                with guard:
                    accepted.setdefault(job_id, set()).add(payload)
        except BaseException as exc:  # noqa: BLE001 - reaches the test below
            errors.append(exc)

    def work() -> None:
        try:
            while not done.is_set() or queue.stats() != QueueStats(0, 0, 0, 0):
                batch = queue.claim()
                if not batch:
                    time.sleep(0.001)
                    continue
                [job] = batch
                with guard:
                    claims.append((job.id, job.payload))
                # held until complete: no other job of the lock waits or runs, none is replaced
                assert queue.stats() == QueueStats(ready=0, delayed=0, active=1, dead=0)
                queue.complete(job)
        except BaseException as exc:  # noqa: BLE001 - reaches the test below
            errors.append(exc)

    producers = [threading.Thread(target=produce, args=(n,)) for n in range(PRODUCERS)]
    workers = [threading.Thread(target=work) for _ in range(2)]
    for thread in [*producers, *workers]:
        thread.start()
    for thread in producers:
        thread.join()
    done.set()
    for thread in workers:
        thread.join(60)
    assert not errors, errors
    assert claims, "no job was claimed"
    ids = [job_id for job_id, _ in claims]
    assert len(ids) == len(set(ids)), "a job id claimed twice"
    for job_id, payload in claims:
        assert payload in accepted[job_id], (job_id, payload)
    replaced = sum(len(p) for p in accepted.values())
    assert replaced > len(claims)  # replacements did fold into fewer jobs
