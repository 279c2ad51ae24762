"""Queue semantics on real servers (Redis and Valkey, both cores): claim, tokens, leases,
retries, recovery, dead letters, delays, priorities, uniqueness."""

from __future__ import annotations

import os
import threading
import time

import pytest

import fastlock
from fastlock.digest import Digester
from fastlock.protocol.slots import same_slot
from fastlock.queues.base import MAX_BATCH
from fastlock.queues.jobs import QueueStats, Unique
from fastlock.queues.queue import Queue


@pytest.fixture
def queue(client: fastlock.Client) -> Queue:
    return client.queue("jobs", lease=5.0, max_attempts=3, backoff=0.0)


def expire(queue: Queue, jobs: list[fastlock.Job]) -> None:
    """Make the leases of ``jobs`` already expired (as if the worker stalled)."""
    assert queue.extend(jobs, lease=0.001) == []
    time.sleep(0.01)


def test_keys_share_the_queue_slot(client: fastlock.Client) -> None:
    plain, tagged = client.queue("orders"), client.queue("{shop}orders")
    assert plain.key["ready"] == "fl:{orders}:ready"
    assert tagged.key["ready"] == "fl:{shop}orders:ready"
    for queue in (plain, tagged):
        assert same_slot([*queue.keys, f"{queue.prefix}u:{'0' * 64}"])


def test_payload_round_trip_is_opaque(queue: Queue) -> None:
    payloads = [b"", b"\x00|{}\xff" * 50, "text é".encode(), b"x" * 100_000]
    ids = [queue.enqueue(p) for p in payloads]
    assert queue.stats() == QueueStats(ready=4, delayed=0, active=0, dead=0)
    jobs = queue.claim(10)
    assert [(j.id, j.payload, j.attempt) for j in jobs] == [
        (i, p, 1) for i, p in zip(ids, payloads, strict=True)
    ]
    assert queue.stats() == QueueStats(ready=0, delayed=0, active=4, dead=0)
    assert queue.complete(jobs) == []
    assert queue.stats() == QueueStats(0, 0, 0, 0)
    assert queue.client.execute("HLEN", queue.key["data"]) == 0


def test_tokens_strictly_increase(queue: Queue) -> None:
    queue.enqueue_many([b"j"] * 30)
    tokens = [job.token for job in queue.claim(7)]
    batch = queue.claim(1)
    while batch:
        tokens += [job.token for job in batch]
        batch = queue.complete(batch, claim=4)
    assert tokens == sorted(tokens) and len(set(tokens)) == 30


def test_stale_worker_is_refused_everywhere(queue: Queue) -> None:
    queue.enqueue(b"p")
    [old] = queue.claim()
    expire(queue, [old])
    assert queue.recover() == (1, 0, False)
    [new] = queue.claim()
    assert (new.id, new.attempt) == (old.id, 2) and new.token > old.token
    for stale in (
        lambda: queue.complete(old),
        lambda: queue.fail(old, "x"),
        lambda: queue.complete([old], claim=1),
    ):
        with pytest.raises(fastlock.LeaseLost) as info:
            stale()
        assert info.value.jobs == [old]
    assert queue.extend([old, new]) == [old] and old.lost and not new.lost
    queue.complete(new)
    assert queue.stats() == QueueStats(0, 0, 0, 0)


def test_late_complete_accepted_while_nobody_took_over(queue: Queue) -> None:
    queue.enqueue(b"p")
    [job] = queue.claim()
    expire(queue, [job])
    assert queue.extend([job]) == []  # lenient: past its deadline but not recovered
    queue.complete(job)
    assert queue.recover() == (0, 0, False)


def test_retried_complete_is_idempotent_and_still_claims(client: fastlock.Client) -> None:
    queue = client.queue("q", keep_completed=2)
    queue.enqueue_many([b"a", b"b", b"c", b"d"])
    first, second, third = queue.claim(3)
    assert queue.complete(first, claim=1)[0].payload == b"d"
    assert queue.complete(first) == []  # the reply of the first call was "lost": no error
    queue.complete([second, third])
    assert client.execute("ZCARD", queue.key["done"]) == 2  # history trimmed to keep_completed
    with pytest.raises(fastlock.LeaseLost):
        queue.complete(first)  # forgotten by now


def test_complete_without_history_is_not_idempotent(client: fastlock.Client) -> None:
    queue = client.queue("q", keep_completed=0)
    queue.enqueue(b"a")
    [job] = queue.claim()
    queue.complete(job)
    assert client.execute("EXISTS", queue.key["done"]) == 0
    with pytest.raises(fastlock.LeaseLost):
        queue.complete(job)


def test_batch_complete_with_a_lost_lease(queue: Queue) -> None:
    queue.enqueue_many([b"a", b"b", b"c", b"d"])
    jobs = queue.claim(3)
    expire(queue, [jobs[1]])
    queue.recover()
    with pytest.raises(fastlock.LeaseLost) as info:
        queue.complete(jobs, claim=5)
    assert info.value.jobs == [jobs[1]]
    assert queue.stats() == QueueStats(ready=2, delayed=0, active=0, dead=0)  # nothing claimed


def test_extend_keeps_leases_alive(queue: Queue) -> None:
    queue.enqueue_many([b"a", b"b"])
    jobs = queue.claim(2, lease=0.2)
    for _ in range(3):
        time.sleep(0.1)
        assert queue.extend(jobs, lease=0.2) == []
        assert queue.recover() == (0, 0, False)
    time.sleep(0.25)
    assert queue.recover() == (2, 0, False)


def test_fail_retries_at_the_right_time(queue: Queue) -> None:
    queue.enqueue(b"p")
    [job] = queue.claim()
    started = time.monotonic()  # before the fail: its retry is due 0.4 s after the server ran it
    assert queue.fail(job, "boom", retry_in=0.4) is True
    early = queue.claim()  # (the bound below leaves a loaded machine 0.3 s between the two calls)
    assert early == [] and early.next_due_in is not None and 0.1 < early.next_due_in <= 0.4
    time.sleep(early.next_due_in + 0.01)
    [again] = queue.claim()
    assert time.monotonic() - started >= 0.4
    assert (again.id, again.attempt) == (job.id, 2) and again.token > job.token


def test_delayed_enqueue_comes_back_on_time(queue: Queue) -> None:
    started = time.monotonic()  # before the enqueue: its due time is the server's clock then + 0.25
    job_id = queue.enqueue(b"later", delay=0.25)
    assert queue.stats() == QueueStats(ready=0, delayed=1, active=0, dead=0)
    while not (jobs := queue.claim()):
        assert jobs.next_due_in is not None
        time.sleep(jobs.next_due_in / 2 + 0.002)
    assert time.monotonic() - started >= 0.24
    assert jobs[0].id == job_id


def test_fail_dead_letters_and_dead_letter_operations(client: fastlock.Client) -> None:
    queue = client.queue("q", max_attempts=2, backoff=lambda attempt: 0.0)
    ids = queue.enqueue_many([b"a", b"b", b"c"])
    for job in queue.claim(3):
        assert queue.fail(job, RuntimeError("boom")) is True
    jobs = queue.claim(3)
    assert [job.attempt for job in jobs] == [2, 2, 2]
    assert queue.fail(jobs[0], "unused") is False  # attempts used up
    assert queue.fail(jobs[1], "bad input", dead=True) is False
    queue.fail(jobs[2], ValueError("no"))
    dead = {d.id: d for d in queue.dead()}  # oldest first; same millisecond: by id
    assert {(d.id, d.payload, d.attempts) for d in dead.values()} == {
        (ids[0], b"a", 2),
        (ids[1], b"b", 2),
        (ids[2], b"c", 2),
    }
    assert dead[ids[0]].error == "unused" and dead[ids[2]].error == "ValueError: no"
    assert abs(dead[ids[0]].died_at - time.time()) < 5
    assert queue.stats() == QueueStats(ready=0, delayed=0, active=0, dead=3)
    assert queue.dead(older_than=60) == []
    assert queue.requeue_dead([ids[1], "missing"]) == 1
    [again] = queue.claim()
    assert (again.id, again.attempt, again.payload) == (ids[1], 1, b"b")
    assert queue.purge_dead(limit=1) == 1 and len(queue.dead()) == 1
    assert queue.purge_dead() == 1 and queue.dead() == []
    # only the claimed job's payload is left, and the data hash's pin (docs/queues.md, "Key layout")
    assert sorted(client.execute("HKEYS", queue.key["data"])) == [b"~", again.id.encode()]


def test_recover_is_bounded_and_stops_poison_jobs(client: fastlock.Client) -> None:
    queue = client.queue("q", max_attempts=2)
    queue.enqueue_many([b"x"] * 25)
    expire(queue, queue.claim(25))
    assert [queue.recover(10) for _ in range(4)] == [
        (10, 0, True),
        (10, 0, True),
        (5, 0, False),
        (0, 0, False),
    ]
    expire(queue, queue.claim(25))  # second attempt abandoned too: poison, dead-lettered
    assert queue.recover(100) == (0, 25, False)
    assert {d.error for d in queue.dead(100)} == {"lease expired"}


def test_priorities_after_plain_jobs_lowest_first_fifo_within(queue: Queue) -> None:
    queue.enqueue(b"p5", priority=5)
    queue.enqueue(b"p1-a", priority=1)
    queue.enqueue(b"plain")
    queue.enqueue_many([b"p1-b", b"p1-c"], priority=1)
    assert queue.stats().ready == 5
    order = [job.payload for job in queue.claim(2)] + [job.payload for job in queue.claim(10)]
    assert order == [b"plain", b"p1-a", b"p1-b", b"p1-c", b"p5"]
    with pytest.raises(ValueError):
        queue.enqueue(b"x", priority=-1)


def test_retried_priority_job_keeps_its_priority(queue: Queue) -> None:
    queue.enqueue(b"low", priority=9)
    [job] = queue.claim()
    queue.fail(job, "again", retry_in=0)
    queue.enqueue(b"high", priority=2)
    assert [j.payload for j in queue.claim(2)] == [b"high", b"low"]


def test_custom_job_id_is_unique_while_the_job_exists(queue: Queue) -> None:
    assert queue.enqueue(b"a", job_id="order|42") == "order|42"
    with pytest.raises(fastlock.DuplicateJob) as info:
        queue.enqueue(b"b", job_id="order|42", delay=10)
    assert info.value.job_id == "order|42"
    [job] = queue.claim()
    assert job.id == "order|42" and job.payload == b"a"
    with pytest.raises(fastlock.DuplicateJob):
        queue.enqueue(b"b", job_id="order|42")
    queue.complete(job)
    assert queue.enqueue(b"c", job_id="order|42") == "order|42"


def test_unique_until_executed(queue: Queue) -> None:
    first = queue.enqueue(b"a", unique=Unique("report", args=[1]))
    queue.enqueue(b"other args", unique=Unique("report", args=[2]))
    with pytest.raises(fastlock.DuplicateJob) as info:
        queue.enqueue(b"dup", unique=Unique("report", args=[1]))
    assert info.value.job_id == first
    jobs = queue.claim(2)
    with pytest.raises(fastlock.DuplicateJob):
        queue.enqueue(b"dup", unique=Unique("report", args=[1]))  # still held while it runs
    queue.complete(jobs)
    second = queue.enqueue(b"b", unique=Unique("report", args=[1]))
    [job] = queue.claim()
    queue.fail(job, "fatal", dead=True)  # dead-lettered: finished, lock released
    assert queue.enqueue(b"c", unique=Unique("report", args=[1])) not in (first, second)


def test_unique_until_executing(queue: Queue) -> None:
    queue.enqueue(b"a", unique=Unique("sync", type="until_executing"))
    with pytest.raises(fastlock.DuplicateJob):
        queue.enqueue(b"b", unique=Unique("sync", type="until_executing"))
    [job] = queue.claim()
    queue.enqueue(b"c", unique=Unique("sync", type="until_executing"))  # running: a new one may queue
    with pytest.raises(fastlock.DuplicateJob):
        queue.enqueue(b"d", unique=Unique("sync", type="until_executing"))
    queue.complete(job)


@pytest.mark.slow  # slow tier: waits for a ttl
def test_unique_until_expired(queue: Queue) -> None:
    unique = Unique("ping", type="until_expired", ttl=2.0)  # longer than the calls below, loaded or not
    started = time.monotonic()
    queue.enqueue(b"a", unique=unique, job_id="j1")
    with pytest.raises(fastlock.DuplicateJob) as info:
        queue.enqueue(b"b", unique=unique)
    assert info.value.job_id == "j1"
    queue.complete(queue.claim())
    with pytest.raises(fastlock.DuplicateJob):
        queue.enqueue(b"b", unique=unique)  # only the TTL releases it
    time.sleep(max(0.0, 2.05 - (time.monotonic() - started)))  # the TTL ran from the first enqueue
    queue.enqueue(b"c", unique=unique)


def test_refused_custom_id_gives_the_unique_lock_back(queue: Queue) -> None:
    queue.enqueue(b"a", job_id="j")
    for unique in (Unique("u"), Unique("t", type="until_expired", ttl=10)):
        with pytest.raises(fastlock.DuplicateJob) as info:
            queue.enqueue(b"b", unique=unique, job_id="j")
        assert info.value.job_id == "j"
        queue.enqueue(b"c", unique=unique)  # the lock taken before the id check was released


def test_unique_digest_is_the_lock_digest(client: fastlock.Client) -> None:
    queue = client.queue("mail")
    assert queue.unique_digest(Unique("send", args={"to": 1})) == Digester().digest("send", "mail", {"to": 1})
    digest = "ab" * 32
    queue.enqueue(b"a", unique=Unique(digest=digest))
    assert client.execute("HGET", queue.key["unique"], digest) is not None
    with pytest.raises(ValueError):
        Unique("x", type="while_executing")
    with pytest.raises(ValueError):
        Unique("x", type="until_expired")
    with pytest.raises(ValueError):
        queue.unique_digest(Unique(digest="not hex"))


def test_fresh_ids_are_unique_across_threads_and_fork(queue: Queue) -> None:
    ids: list[str] = []
    threads = [
        threading.Thread(target=lambda: ids.extend(queue.enqueue_many([b"t"] * 300))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: enqueue and report the ids, nothing on failure
        try:
            os.write(write, " ".join([queue.enqueue(b"child"), *queue.enqueue_many([b"child"] * 2)]).encode())
        finally:
            os._exit(0)
    os.close(write)
    ids += [queue.enqueue(b"parent"), *queue.enqueue_many([b"parent"] * 2)]
    child = os.read(read, 1024).decode().split()
    os.close(read)
    os.waitpid(pid, 0)
    ids += child
    assert len(child) == 3 and len(set(ids)) == len(ids) == 1206
    assert queue.client.execute("HLEN", queue.key["data"]) == 1206 + 1  # and the pin (enqueue_many)


def test_batch_limits(queue: Queue) -> None:
    ids = queue.enqueue_many(b"%d" % i for i in range(MAX_BATCH + 500))
    assert len(set(ids)) == MAX_BATCH + 500 and queue.stats().ready == MAX_BATCH + 500
    assert len(queue.claim(MAX_BATCH)) == MAX_BATCH
    for bad in (0, MAX_BATCH + 1):
        with pytest.raises(ValueError):
            queue.claim(bad)
        with pytest.raises(ValueError):
            queue.recover(bad)


def test_wait_blocks_until_work_is_signalled(queue: Queue) -> None:
    started = time.monotonic()
    assert queue.wait(0.1) is False
    assert 0.09 < time.monotonic() - started < 30  # not a wait without end (BZPOPMIN 0)
    timer = threading.Timer(0.1, queue.enqueue, (b"x",))
    timer.start()
    started = time.monotonic()
    assert queue.wait(60) is True
    assert time.monotonic() - started < 30  # woken by the enqueue, not by the end of the wait
    timer.join()


def test_dead_letters_by_id_take_every_given_id(client: fastlock.Client) -> None:
    queue = client.queue("q", max_attempts=1)
    ids = queue.enqueue_many([b"x"] * 150)
    for job in queue.claim(150):
        queue.fail(job, "e")
    assert queue.requeue_dead([]) == 0
    assert queue.requeue_dead(ids) == 150  # more than the default limit: ids decide
    with pytest.raises(ValueError):
        queue.purge_dead(["x"] * (MAX_BATCH + 1))
