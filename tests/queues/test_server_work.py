"""The scripts' economies of server work (docs/queues.md, "Key layout" and "Scripts and what
each operation costs"), on real servers: the data hash's pin and when due delayed jobs are
promoted. Each rule is checked where it shows: the hash's encoding, the claim order."""

from __future__ import annotations

import time

import fastlock
from fastlock.queues.admin import Cancelled
from fastlock.queues.jobs import QueueStats

PROMOTE_EVERY = 16  # lua/shared/_queue_claim.lua
PIN_BACKLOG = 64  # lua/shared/_queue_keys.lua


def encoding(queue: fastlock.Queue, suffix: str) -> bytes:
    return queue.client.execute("OBJECT", "ENCODING", queue.key[suffix])


def test_enqueue_many_pins_the_data_hash_to_a_hashtable(client: fastlock.Client) -> None:
    queue = client.queue("pinned")
    queue.enqueue_many([b"x"] * 3)
    assert encoding(queue, "data") == b"hashtable"
    assert client.execute("HLEN", queue.key["data"]) == 3 + 1
    assert queue.stats() == QueueStats(ready=3, delayed=0, active=0, dead=0)
    jobs = queue.claim(10)
    assert len(jobs) == 3 and queue.complete(jobs) == []
    assert client.execute("HKEYS", queue.key["data"]) == [b"~"]  # the pin stays: so does the encoding


def test_the_pin_is_no_job(client: fastlock.Client) -> None:
    queue = client.queue("pinned")
    queue.enqueue_many([b"x"])
    assert queue.job("~").state == "missing"
    assert queue.cancel("~") == Cancelled(False, "missing")
    assert queue.purge_dead(["~"]) == 0 and client.execute("HEXISTS", queue.key["data"], "~") == 1


def test_a_backlog_of_single_enqueues_pins_the_data_hash(client: fastlock.Client) -> None:
    queue = client.queue("backlog")
    for _ in range(PIN_BACKLOG - 1):
        queue.enqueue(b"x")
    assert encoding(queue, "data") == b"listpack"
    queue.enqueue(b"x")
    assert encoding(queue, "data") == b"hashtable"
    assert len(queue.claim(1000)) == PIN_BACKLOG


def test_due_jobs_are_claimed_before_the_prioritised_lane(client: fastlock.Client) -> None:
    queue = client.queue("due")
    urgent = queue.enqueue(b"p", priority=0)
    later = queue.enqueue(b"d", delay=0.05)
    plain = queue.enqueue(b"r")
    time.sleep(0.06)
    assert [job.id for job in queue.claim(3)] == [plain, later, urgent]


def test_a_busy_queue_promotes_due_jobs_every_few_claims(client: fastlock.Client) -> None:
    """Ready never runs short here: the due job is promoted by the claim that mints token 16
    (tokens start at 1), then waits behind the jobs already ready."""
    queue = client.queue("busy")
    plain = queue.enqueue_many([b"r"] * 40)
    later = queue.enqueue(b"d", delay=0.05)
    time.sleep(0.06)
    claimed = []
    for _ in range(PROMOTE_EVERY - 1):
        claimed += queue.claim(1)
    assert queue.stats().delayed == 1
    claimed += queue.claim(1)
    assert claimed[-1].token == PROMOTE_EVERY and queue.stats() == QueueStats(25, 0, 16, 0)
    while jobs := queue.claim(10):
        claimed += jobs
    assert [job.id for job in claimed] == [*plain, later]
