"""Queue contracts under misuse (real servers, both cores): no enqueue overwrites a job, every
name maps to one slot, every duration is bounded, every argument is checked before anything
is sent, and unexpected script replies raise ProtocolError."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import fastlock
from fastlock.protocol.slots import same_slot
from fastlock.queues.base import MAX_BATCH
from fastlock.queues.jobs import Job, Member, Unique
from fastlock.queues.queue import Queue
from fastlock.queues.worker import Worker

BAD_DURATIONS = [1e16, float("inf"), float("nan"), -1, "1", True, None]


@pytest.fixture
def queue(client: fastlock.Client) -> Queue:
    return client.queue("jobs", lease=5.0, max_attempts=3, backoff=0.0)


def snapshot(client: fastlock.Client) -> dict[bytes, bytes]:
    """Every key of the server with its DUMP (values, scores and TTL-free encodings)."""
    return {key: client.execute("DUMP", key) for key in client.execute("KEYS", "*")}


def test_no_enqueue_overwrites_a_job_with_a_predicted_fresh_id(queue: Queue) -> None:
    """Fresh ids are predictable (a per-process prefix and a counter): planting custom ids
    equal to the next fresh ones must not let any enqueue overwrite a job."""
    first = queue.enqueue(b"victim-0")
    head, counter = first.rsplit("-", 1)
    planted = []
    for step in range(1, 6):
        guess = f"{head}-{int(counter, 16) + step:x}"
        try:
            queue.enqueue(b"planted", job_id=guess)
        except ValueError:
            continue  # refused up front: fresh ids have their own namespace
        planted.append(guess)
    victims = {first: b"victim-0", queue.enqueue(b"victim-1"): b"victim-1"}
    more = [b"victim-2", b"victim-3"]
    victims.update(zip(queue.enqueue_many(more), more, strict=True))
    jobs = {job.id: job.payload for job in queue.claim(MAX_BATCH)}
    assert jobs == {**victims, **dict.fromkeys(planted, b"planted")}


def test_custom_ids_in_the_fresh_namespace_are_refused(queue: Queue) -> None:
    fresh = queue.enqueue(b"x")
    for job_id in (fresh, f"{fresh[0]}custom", "", 42):
        with pytest.raises((ValueError, TypeError)):
            queue.enqueue(b"y", job_id=job_id)  # type: ignore[arg-type]
    assert queue.enqueue(b"z", job_id="invoice-42") == "invoice-42"
    assert queue.stats().ready == 2


NAMES = ["orders", "{orders}", "{shop}orders", "", "}x", "a}b", "{}", "{}x", "}", "{", "a{b", "x:y", "{a}}"]
PREFIXES = ["fl", "", "a{}b", "{}", "{app}", "a{b", "x}"]


def test_every_queue_is_one_slot_and_distinct_names_never_share_keys(client: fastlock.Client) -> None:
    owner: dict[str, tuple[str, str]] = {}
    accepted = set()
    for prefix in PREFIXES:
        for name in NAMES:
            try:
                queue = client.queue(name, prefix=prefix)
            except ValueError:
                continue
            accepted.add((prefix, name))
            keys = [*queue.keys, f"{queue.prefix}u:{'0' * 64}", f"{queue.prefix}stop:{'0' * 16}"]
            assert same_slot(keys), (prefix, name, keys)
            for key in keys:
                assert owner.setdefault(key, (prefix, name)) == (prefix, name), key
    assert {("fl", "orders"), ("fl", "{shop}orders"), ("{app}", "orders"), ("fl", "x:y")} <= accepted


def test_queues_named_alike_do_not_claim_each_others_jobs(client: fastlock.Client) -> None:
    plain = client.queue("orders")
    plain.enqueue(b"plain")
    try:
        tagged = client.queue("{orders}")
    except ValueError:
        return  # refused: it would have been the same queue under another name
    assert tagged.claim(10) == []


def _duration_calls(queue: Queue, job: Job) -> dict[str, Callable[[Any], object]]:
    client = queue.client
    return {
        "Queue(lease)": lambda d: client.queue("other", lease=d),
        "Queue(backoff)": lambda d: client.queue("other", backoff=d),
        "backoff result": lambda d: client.queue("jobs", backoff=lambda attempt: d).fail(job, "e"),
        "enqueue(delay)": lambda d: queue.enqueue(b"x", delay=d),
        "enqueue_many(delay)": lambda d: queue.enqueue_many([b"x"], delay=d),
        "Unique(ttl)": lambda d: queue.enqueue(b"x", unique=Unique("u", type="until_expired", ttl=d)),
        "claim(lease)": lambda d: queue.claim(1, lease=d),
        "complete(lease)": lambda d: queue.complete(job, claim=1, lease=d),
        "fail(retry_in)": lambda d: queue.fail(job, "e", retry_in=d),
        "extend(lease)": lambda d: queue.extend([job], lease=d),
        "dead(older_than)": lambda d: queue.dead(older_than=d),
        "requeue_dead(older_than)": lambda d: queue.requeue_dead(older_than=d),
        "purge_dead(older_than)": lambda d: queue.purge_dead(older_than=d),
        "wait(timeout)": lambda d: queue.wait(d),
        "Worker(idle_wait)": lambda d: Worker(queue, print, idle_wait=d),
    }


def test_every_queue_duration_is_bounded(queue: Queue) -> None:
    """Over-large, infinite, NaN, negative and non-numeric durations raise ValueError or
    TypeError (never OverflowError, never a wrapped deadline) before anything is sent."""
    queue.enqueue_many([b"a", b"b"])
    [job] = queue.claim(1)
    before = snapshot(queue.client)
    for what, call in _duration_calls(queue, job).items():
        for bad in BAD_DURATIONS:
            if bad is None and what not in ("Queue(lease)", "Queue(backoff)", "Unique(ttl)", "wait(timeout)"):
                continue  # None means "the default" there
            with pytest.raises((ValueError, TypeError)) as info:
                call(bad)
            assert not isinstance(info.value, OverflowError), (what, bad)
    assert snapshot(queue.client) == before


def test_every_method_checks_its_arguments_before_sending(queue: Queue) -> None:
    queue.enqueue_many([b"a", b"b", b"c"])
    queue.enqueue(b"d", delay=3600)
    job, other = queue.claim(2)
    queue.fail(other, "boom", dead=True)
    client = queue.client
    bad: list[Callable[[], object]] = [
        lambda: client.queue("q", max_attempts=0),
        lambda: client.queue("q", max_attempts=1.5),  # type: ignore[arg-type]
        lambda: client.queue("q", keep_completed=-1),
        lambda: client.queue("q", keep_completed=2.5),  # type: ignore[arg-type]
        lambda: client.queue("q", keep_completed=2**40),
        lambda: client.queue("q", prefix=3),  # type: ignore[arg-type]
        lambda: client.queue(b"q"),  # type: ignore[arg-type]
        lambda: queue.enqueue(42),  # type: ignore[arg-type]
        lambda: queue.enqueue(b"x", job_id=7),  # type: ignore[arg-type]
        lambda: queue.enqueue(b"x", priority=1.5),  # type: ignore[arg-type]
        lambda: queue.enqueue(b"x", priority=True),
        lambda: queue.enqueue(b"x", priority=-1),
        lambda: queue.enqueue(b"x", unique=3),  # type: ignore[arg-type]
        lambda: queue.enqueue(b"x", unique="u", on_duplicate="overwrite"),
        lambda: queue.enqueue(b"x", unique="u", on_duplicate=3),  # type: ignore[arg-type]
        lambda: queue.enqueue(b"x", on_duplicate="replace"),  # no unique lock to match
        lambda: queue.enqueue(b"x", unique="u", on_duplicate="extend"),  # no delay to push back
        lambda: queue.progress(job, "x" * 5000),
        lambda: queue.progress(job, float("inf")),
        lambda: queue.progress(job, object()),
        lambda: queue.progress("x", 1),  # type: ignore[arg-type]
        lambda: queue.enqueue_many([b"ok"] * (MAX_BATCH + 5) + [None]),  # type: ignore[list-item]
        lambda: queue.enqueue_many(b"not a list of payloads"),
        lambda: queue.enqueue_many([b"x"], priority="1"),  # type: ignore[arg-type]
        lambda: queue.claim(1.5),  # type: ignore[arg-type]
        lambda: queue.claim(True),
        lambda: queue.claim("2"),  # type: ignore[arg-type]
        lambda: queue.complete(job, claim=1.5),  # type: ignore[arg-type]
        lambda: queue.complete(job, claim=-1),
        lambda: queue.complete(job, claim=True),
        lambda: queue.complete([job, "x"]),  # type: ignore[list-item]
        lambda: queue.complete("x"),  # type: ignore[arg-type]
        lambda: queue.fail("x"),  # type: ignore[arg-type]
        lambda: queue.fail(job, 42),  # type: ignore[arg-type]
        lambda: queue.fail(job, "e", dead=1),  # type: ignore[arg-type]
        lambda: queue.fail(job, "e", retry_in=float("inf"), dead=True),
        lambda: queue.extend([job, 1]),  # type: ignore[list-item]
        lambda: queue.extend(job),  # type: ignore[arg-type]
        lambda: queue.holds("x"),  # type: ignore[arg-type]
        lambda: queue.recover(1.5),  # type: ignore[arg-type]
        lambda: queue.recover(0),
        lambda: queue.wait(0.1, interrupt="elsewhere"),
        lambda: queue.wait(0.1, interrupt=5),  # type: ignore[arg-type]
        lambda: queue.dead(1.5),  # type: ignore[arg-type]
        lambda: queue.dead(0),
        lambda: queue.requeue_dead([other.id, 5]),  # type: ignore[list-item]
        lambda: queue.requeue_dead(other.id),
        lambda: queue.requeue_dead(limit=2.5),  # type: ignore[arg-type]
        lambda: queue.purge_dead([other.id, None]),  # type: ignore[list-item]
        lambda: queue.purge_dead(limit=-1),
        lambda: queue.retry_delay(0),
        lambda: queue.retry_delay(1.5),  # type: ignore[arg-type]
        lambda: queue.unique_digest("x"),  # type: ignore[arg-type]
        lambda: Unique("x", type="until_expired", ttl=float("inf")),
        lambda: Worker(queue, "not callable"),  # type: ignore[arg-type]
        lambda: Worker(queue, print, batch=0),
        lambda: Worker(queue, print, batch=2.5),  # type: ignore[arg-type]
        lambda: Worker(queue, print, batch=MAX_BATCH + 1),
        lambda: Worker(queue, print, recover_limit=0),
        lambda: Worker("queue", print),  # type: ignore[arg-type]
        lambda: Worker(queue, print).run(max_jobs=-1),
        lambda: Worker(queue, print).run(max_jobs=1.5),  # type: ignore[arg-type]
    ]
    before = snapshot(client)
    for index, call in enumerate(bad):
        with pytest.raises((ValueError, TypeError)):
            call()
        assert snapshot(client) == before, index
    assert queue.complete(job) == []  # the job is still held and its lease intact


HOSTILE = {
    "queue_enqueue": ["return 'OK'", "return {1}", "return {1, 'someone-else'}", "return {2, false}"],
    "queue_enqueue_many": ["return {}", "return 0"],
    "queue_claim": [
        "return 7",
        "return {1, -1, '1|1|||x'}",
        "return {1, -1, 5, 'p'}",
        "return {'x', 0, 'a|b', 'p'}",
    ],
    "queue_complete": ["return {}", "return {{0}, {}}", "return {{9}, {}}", "return 'OK'"],
    "queue_fail": ["return 5", "return 'OK'"],
    "queue_extend": ["return {}", "return {1, 0}", "return {1, 9}"],
    "queue_recover": ["return {1}", "return 'OK'", "return {'a', 0, 0}"],
    "queue_dead": ["return {1, 2, 3}", "return 'OK'", "return {'id', 'x', 'p', 'e'}"],
    "queue_progress": ["return 2", "return 'OK'", "return {1}"],
}


def _run(queue: Queue, script: str) -> object:
    job = Job("x", b"", 1, 1, Member(1, 1, "", "", "x").encode())
    calls: dict[str, Callable[[], object]] = {
        "queue_enqueue": lambda: queue.enqueue(b"x"),
        "queue_enqueue_many": lambda: queue.enqueue_many([b"x"]),
        "queue_claim": lambda: queue.claim(3),
        "queue_complete": lambda: queue.complete(job),
        "queue_fail": lambda: queue.fail(job),
        "queue_extend": lambda: queue.extend([job]),
        "queue_recover": lambda: queue.recover(),
        "queue_dead": lambda: (queue.dead(), queue.requeue_dead()),
        "queue_progress": lambda: queue.progress(job, 1),
    }
    return calls[script]()


@pytest.mark.parametrize(("script", "body"), [(s, b) for s, bodies in HOSTILE.items() for b in bodies])
def test_unexpected_script_replies_raise_protocol_error(
    client: fastlock.Client, script: str, body: str
) -> None:
    """A script that answers in an unexpected shape (a hostile or mismatched server-side
    script) raises ProtocolError: no TypeError, IndexError or silent result."""
    client.scripts.add(script, body)
    with pytest.raises(fastlock.ProtocolError):
        _run(client.queue("jobs"), script)
