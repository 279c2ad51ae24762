"""A leased job's progress on real servers (both cores): stored as JSON with the job, shown by
``Queue.job``, fenced by the lease, size-capped and checked before anything is sent."""

from __future__ import annotations

import time

import pytest

import fastlock
from fastlock.queues.queue import Queue
from fastlock.queues.updates import PROGRESS_KEEP, PROGRESS_LIMIT


@pytest.fixture
def queue(client: fastlock.Client) -> Queue:
    return client.queue("progress", lease=30.0, max_attempts=3, backoff=0.0)


def test_progress_is_stored_shown_and_kept(queue: Queue) -> None:
    job_id = queue.enqueue(b"work")
    assert queue.job(job_id).progress is None
    [job] = queue.claim()
    queue.progress(job, {"done": 3, "of": 10, "step": "résumé"})
    assert queue.job(job_id).progress == {"done": 3, "of": 10, "step": "résumé"}
    queue.progress(job, 0.5)
    info = queue.job(job_id)
    assert (info.state, info.progress) == ("active", 0.5)
    ttl = queue.client.execute("PTTL", queue.progress_key(job_id))
    assert PROGRESS_KEEP * 1000 - 60_000 < ttl <= PROGRESS_KEEP * 1000
    queue.complete(job)
    assert queue.job(job_id).progress == 0.5  # the last one stays after the job ended


def test_only_the_lease_holder_sets_progress(queue: Queue) -> None:
    queue.enqueue(b"work")
    [old] = queue.claim()
    queue.progress(old, "first run")
    assert queue.extend([old], lease=0.001) == []
    time.sleep(0.01)
    assert queue.recover() == (1, 0, False)
    [new] = queue.claim()
    with pytest.raises(fastlock.LeaseLost):
        queue.progress(old, "stale")
    assert old.lost
    queue.progress(new, "second run")
    assert queue.job(new.id).progress == "second run"
    queue.complete(new)
    with pytest.raises(fastlock.LeaseLost):
        queue.progress(new, "after the end")
    assert queue.job(new.id).progress == "second run"


def test_progress_is_json_within_the_limit(queue: Queue) -> None:
    queue.enqueue(b"work")
    [job] = queue.claim()
    queue.progress(job, "x" * (PROGRESS_LIMIT - 2))  # its JSON text is the limit exactly
    bad = [
        (fastlock.ArgumentError, "x" * (PROGRESS_LIMIT - 1)),
        (fastlock.ArgumentError, "é" * (PROGRESS_LIMIT // 2)),  # counted in UTF-8 bytes
        (fastlock.ArgumentError, float("nan")),
        (fastlock.ArgumentTypeError, {1, 2}),
        (fastlock.ArgumentTypeError, b"bytes"),
    ]
    for error, value in bad:
        with pytest.raises(error):
            queue.progress(job, value)
    assert queue.job(job.id).progress == "x" * (PROGRESS_LIMIT - 2)
