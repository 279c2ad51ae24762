"""The queue admin on real servers (both cores, both servers): peek pages, job lookup,
cancel, unique locks; each call bounded (its commands do not grow with the queue), and every
queue script in one cluster slot for any prefix."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from harness.monitor import monitor, scripts_in_one_slot

import fastlock
from fastlock.exceptions import ArgumentTypeError
from fastlock.queues.admin import PREVIEW, Cancelled, UniqueLock, cancelled, job_info, page
from fastlock.queues.jobs import QueueStats, Unique
from fastlock.queues.queue import Queue
from fastlock.tools.costs import measure_cost

LUA = Path(__file__).resolve().parents[2] / "lua"


@pytest.fixture
def queue(client: fastlock.Client) -> Queue:
    return client.queue("admin", lease=30.0, max_attempts=1)


def ids_of(page: Any) -> list[str]:
    return [job.id for job in page.jobs]


def test_peek_ready_lists_both_lanes_in_claim_order_with_paging(queue: Queue) -> None:
    plain = queue.enqueue_many([b"p"] * 5)
    queue.enqueue(b"low", job_id="low", priority=9)
    queue.enqueue(b"high", job_id="high", priority=1)
    page = queue.peek("ready")
    assert (page.state, page.offset, page.total) == ("ready", 0, 7)
    assert ids_of(page) == [*plain, "high", "low"]
    assert [job.priority for job in page.jobs] == [None] * 5 + [1, 9]
    assert all(job.state == "ready" and job.attempts == 0 and job.at is None for job in page.jobs)
    assert [job.payload_size for job in page.jobs] == [1] * 5 + [4, 3]
    assert ids_of(queue.peek("ready", offset=3, count=3)) == [*plain[3:], "high"]
    assert ids_of(queue.peek("ready", offset=6, count=3)) == ["low"]
    assert ids_of(queue.peek("ready", offset=7)) == []
    claimed = [job.id for job in queue.claim(7)]
    assert claimed == ids_of(page)  # the order peek promised


def test_peek_delayed_active_and_dead(queue: Queue) -> None:
    queue.enqueue(b"later", job_id="later", delay=60)
    queue.enqueue(b"sooner", job_id="sooner", delay=30, unique=Unique("s"))
    queue.enqueue_many([b"a", b"b"])
    delayed = queue.peek("delayed")
    now = delayed.now
    assert ids_of(delayed) == ["sooner", "later"]
    assert [round(job.at - now) for job in delayed.jobs if job.at] == [30, 60]
    assert delayed.jobs[0].unique == queue.unique_digest(Unique("s"))
    first, second = queue.claim(2)
    active = queue.peek("active")
    assert ids_of(active) == [first.id, second.id]
    assert [(job.token, job.attempts) for job in active.jobs] == [(first.token, 1), (second.token, 1)]
    assert all(job.at is not None and 29 < job.at - active.now <= 30 for job in active.jobs)
    assert queue.fail(first, "Boom: no") is False  # max_attempts=1: dead
    dead = queue.peek("dead")
    assert dead.total == 1
    (job,) = dead.jobs
    assert (job.id, job.state, job.attempts, job.error) == (first.id, "dead", 1, "Boom: no")
    assert job.payload_size == 1
    queue.purge_dead([first.id])
    assert queue.peek("dead").total == 0


def test_peek_checks_its_arguments(queue: Queue) -> None:
    with pytest.raises(ValueError, match="state"):
        queue.peek("done")
    with pytest.raises(ValueError, match="count"):
        queue.peek(count=1001)
    with pytest.raises(ValueError, match="offset"):
        queue.peek(offset=-1)
    with pytest.raises(ArgumentTypeError):
        queue.peek(count="5")  # type: ignore[arg-type]


def test_job_lookup_in_every_state(queue: Queue) -> None:
    assert queue.job("nope").state == "missing"
    queue.enqueue(b"x" * 1000, job_id="ready")
    queue.enqueue(b"d", job_id="delayed", delay=60, priority=4)
    queue.enqueue(b"p", job_id="prio", priority=2)
    ready = queue.job("ready")
    assert (ready.state, ready.attempts, ready.payload_size) == ("ready", 0, 1000)
    assert ready.preview == b"x" * PREVIEW
    delayed = queue.job("delayed")
    assert (delayed.state, delayed.priority) == ("delayed", 4)
    assert delayed.at is not None and 59 < delayed.at - time.time() < 61
    assert (queue.job("prio").state, queue.job("prio").at) == ("ready", None)
    (job, _) = queue.claim(2)
    active = queue.job(job.id)
    assert (active.state, active.token, active.attempts) == ("active", job.token, 1)
    queue.fail(job, ValueError("bad input"))
    dead = queue.job(job.id)
    assert (dead.state, dead.error, dead.preview) == ("dead", "ValueError: bad input", b"x" * PREVIEW)
    assert dead.at is not None and abs(dead.at - time.time()) < 5


def test_job_ids_with_bars_and_lookalikes(queue: Queue) -> None:
    queue.enqueue(b"1", job_id="a|b|c")
    queue.enqueue(b"2", job_id="b|c")
    assert queue.job("a|b|c").payload_size == 1
    assert queue.job("b|c").state == "ready"
    assert queue.cancel("b|c") == Cancelled(True, "ready")
    assert queue.job("a|b|c").state == "ready"


def test_a_job_beyond_the_windows_is_queued_and_not_cancelled(queue: Queue) -> None:
    ids = queue.enqueue_many([b"j"] * 50)
    assert queue.job(ids[25], window=10).state == "queued"
    assert queue.cancel(ids[25], window=10) == Cancelled(False, "queued")
    assert queue.job(ids[25], window=30).state == "ready"
    for near_an_end in (ids[0], ids[9], ids[40], ids[49]):  # the next claims and the newest
        assert queue.job(near_an_end, window=10).state == "ready"
    assert queue.cancel(ids[0], window=10) == Cancelled(True, "ready")
    assert queue.cancel(ids[49], window=10) == Cancelled(True, "ready")
    assert queue.stats().ready == 48 and queue.job(ids[0]).state == "missing"


def test_cancel_removes_waiting_jobs_and_their_unique_locks(queue: Queue) -> None:
    queue.enqueue(b"1", job_id="d", delay=60, unique=Unique("one"))
    queue.enqueue(b"2", job_id="s", unique=Unique("two", type="until_executing"))
    queue.enqueue(b"3", job_id="p", priority=5, unique=Unique("three", type="until_expired", ttl=60))
    assert queue.unique_lock(queue.unique_digest(Unique("one"))) == UniqueLock(
        queue.unique_digest(Unique("one")), "d", "held"
    )
    assert queue.cancel("d") == Cancelled(True, "delayed")
    assert queue.cancel("s") == Cancelled(True, "ready")
    assert queue.cancel("p") == Cancelled(True, "ready")
    assert queue.stats() == QueueStats(0, 0, 0, 0)
    assert queue.client.execute("HLEN", queue.key["data"]) == 0
    assert queue.unique_locks() == (0, [])
    queue.enqueue(b"again", unique=Unique("one"))  # the lock was released
    ttl_lock = queue.unique_lock(queue.unique_digest(Unique("three", type="until_expired", ttl=60)))
    assert ttl_lock is not None and ttl_lock.kind == "ttl" and ttl_lock.job_id == "p"  # until_expired stays
    assert queue.cancel("d") == Cancelled(False, "missing")


def test_cancel_refuses_dead_jobs_and_ends_active_ones(queue: Queue) -> None:
    queue.enqueue_many([b"a", b"b"])
    first, second = queue.claim(2)
    queue.fail(second, "x")
    assert queue.cancel(second.id) == Cancelled(False, "dead")
    assert queue.cancel(first.id) == Cancelled(True, "active")  # tests/queues/test_queue_cancel_running.py
    with pytest.raises(fastlock.LeaseLost):
        queue.complete(first)
    assert queue.stats() == QueueStats(0, 0, 0, 1)


def test_unique_locks_page_through_the_held_ones(queue: Queue) -> None:
    digests = {queue.unique_digest(Unique(f"job{i}")) for i in range(300)}
    for i in range(300):
        queue.enqueue(b"u", unique=Unique(f"job{i}"))
    seen: set[str] = set()
    cursor, pages = 0, 0
    while True:
        cursor, locks = queue.unique_locks(cursor, count=50)
        seen |= {lock.digest for lock in locks}
        pages += 1
        if cursor == 0:
            break
    assert seen == digests and pages >= 1
    assert queue.unique_lock("0" * 64) is None


def _bounded_costs(queue: Queue) -> dict[str, dict[str, int]]:
    calls = {
        "peek": lambda: queue.peek("ready", offset=40, count=5),
        "peek delayed": lambda: queue.peek("delayed", offset=40, count=5),
        "job": lambda: queue.job("absent-but-payload", window=10),
        "cancel": lambda: queue.cancel("absent-but-payload", window=10),
        "stats": queue.stats,
    }
    for call in calls.values():
        call()  # scripts loaded
    return {name: measure_cost(queue.client, call, 3).by_command for name, call in calls.items()}


def test_admin_calls_do_not_grow_with_the_queue(client: fastlock.Client) -> None:
    """The same commands per call on a queue of 100 and of 20,000 jobs (windows of 10 entries):
    the work of each call is set by its arguments."""

    def fill(queue: Queue, count: int, **options: Any) -> None:
        for start in range(0, count, 1000):
            queue.enqueue_many([b"j"] * min(1000, count - start), **options)

    costs = []
    for size in (100, 20_000):
        queue = client.queue(f"bounded{size}")
        fill(queue, size // 2)
        queue.enqueue(b"deep", job_id="absent-but-payload")  # in the middle: beyond the windows
        fill(queue, size // 2)
        fill(queue, size, delay=60)
        costs.append(_bounded_costs(queue))
    assert costs[0] == costs[1]
    assert sum(costs[1]["job"].values()) / 3 <= 16


@pytest.mark.parametrize("prefix", ["fl", "app:{q}", "{", "a{b", "x}{y"])
def test_every_queue_script_stays_in_one_slot(server: Any, redis_url: str, prefix: str) -> None:
    with fastlock.Client(redis_url) as client:
        client.execute("PING")
        queue = client.queue("slots", prefix=prefix, lease=30, max_attempts=1)
        with monitor(server.unix_path) as recorded:
            queue.enqueue(b"1", job_id="one", unique=Unique("u"))
            queue.enqueue(b"2", delay=60, unique=Unique("t", type="until_expired", ttl=60))
            queue.enqueue_many([b"3", b"4"], priority=1)
            batch = queue.claim(2)
            queue.extend(batch)
            queue.progress(batch[0], {"done": 1})
            queue.complete(batch[0])
            queue.fail(batch[1], "x")
            queue.recover()
            queue.dead()
            queue.requeue_dead()
            queue.release(queue.claim(1))  # the hand-back script too
            queue.peek("ready")
            queue.peek("active")
            queue.job("one")
            queue.cancel("one")
            queue.unique_locks()
            queue.unique_lock("0" * 64)
            queue.purge_dead()
            queue.stats()
            queue.pause()
            queue.claim(2)  # paused: the marker put back
            queue.resume()
            rated = client.queue("slots", prefix=prefix, rate=(1000, 1.0))  # the rate key: an 11th
            rated.enqueue_many([b"5", b"6"])
            rated.complete(rated.claim(1), claim=1)
            queue.every(0.01, b"tick", name="often", catch_up="all")  # the schedule keys: 4 more
            queue.schedules()
            queue.run_schedules(stop=iter([False, False, True]).__next__)  # a sleep, a tick
            queue.unschedule("often")
        scripts = scripts_in_one_slot(client, recorded[0])
        assert {"queue_peek", "queue_job", "queue_cancel"} <= scripts
        assert scripts == {path.stem for path in LUA.glob("queue_*.lua")}


@pytest.mark.parametrize(
    ("parse", "reply"),
    [
        (lambda r: page(r, "ready", 0), [1, 2, b"0|||a"]),
        (lambda r: page(r, "active", 0), [1, 1, b"not a member", b"1", 1, False]),
        (lambda r: page(r, "ready", 0), b"junk"),
        (lambda r: job_info(r, "a"), [b"ready", b"0|||b", b"", 1, False, False]),  # another job
        (lambda r: job_info(r, "a"), [b"gone", b"", b"", -1, False, False]),
        (lambda r: job_info(r, "a"), None),
        (cancelled, [2, b"ready"]),
        (cancelled, [1]),
    ],
)
def test_admin_parsers_refuse_unexpected_replies(parse: Any, reply: Any) -> None:
    with pytest.raises(fastlock.ProtocolError):
        parse(reply)
