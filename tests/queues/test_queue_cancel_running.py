"""Cancelling a running job on real servers (both cores): the lease, payload and lock gone at
once, the holder told at its next renewal or ``holds``, and a real Worker stopping the handler
at its next check (``job_timeout`` still applying); the job ends as cancelled, never retried
nor dead-lettered."""

from __future__ import annotations

import threading
import time

import pytest

import fastlock
from fastlock.queues.admin import Cancelled
from fastlock.queues.jobs import Job, QueueStats, Unique
from fastlock.queues.queue import Queue
from fastlock.queues.worker import Worker

EMPTY = QueueStats(ready=0, delayed=0, active=0, dead=0)


@pytest.fixture
def queue(client: fastlock.Client) -> Queue:
    return client.queue("cancel", lease=30.0, max_attempts=3, backoff=0.0)


def test_cancel_ends_a_running_job_and_its_holder_is_told(queue: Queue) -> None:
    job_id = queue.enqueue(b"work", unique=Unique("report"))
    [job] = queue.claim()
    queue.progress(job, {"done": 1})
    assert queue.cancel(job_id) == Cancelled(True, "active")
    assert queue.stats() == EMPTY and queue.recover() == (0, 0, False)
    info = queue.job(job_id)
    assert (info.state, info.progress, info.payload_size) == ("cancelled", {"done": 1}, None)
    assert info.at is not None and abs(info.at - time.time()) < 60
    assert not job.cancelled  # the holder learns it from the server
    assert not queue.holds(job)
    assert job.cancelled and job.lost
    with pytest.raises(fastlock.JobCancelled) as raised:
        job.raise_if_cancelled()
    assert raised.value.job_id == job_id
    for call in (lambda: queue.complete(job), lambda: queue.fail(job, "x"), lambda: queue.progress(job, 2)):
        with pytest.raises(fastlock.LeaseLost):
            call()
    assert queue.dead() == [] and queue.stats() == EMPTY  # not retried, not dead-lettered
    assert queue.enqueue(b"again", unique=Unique("report")) != job_id  # its lock was released
    assert queue.cancel(job_id) == Cancelled(False, "missing")


def test_extend_tells_cancelled_from_lost(queue: Queue) -> None:
    queue.enqueue_many([b"a", b"b", b"c"])
    kept, cancelled, expired = queue.claim(3)
    assert queue.extend([expired], lease=0.001) == []
    time.sleep(0.01)
    assert queue.recover() == (1, 0, False)
    assert queue.cancel(cancelled.id).done
    assert queue.extend([kept, cancelled, expired]) == [cancelled, expired]
    assert (kept.lost, kept.cancelled) == (False, False)
    assert (cancelled.lost, cancelled.cancelled) == (True, True)
    assert (expired.lost, expired.cancelled) == (True, False)


def _cancel_when_started(
    queue: Queue, started: threading.Event, job_ids: list[str], outcomes: list[object]
) -> threading.Thread:
    """A thread cancelling the job once its handler started; its outcome (or error) appended
    to ``outcomes`` for the test to check."""

    def cancel() -> None:
        try:
            outcomes.append(started.wait(10) and queue.cancel(job_ids[0]))
        except BaseException as exc:  # noqa: BLE001 - reaches the test
            outcomes.append(exc)

    thread = threading.Thread(target=cancel)
    thread.start()
    return thread


@pytest.mark.parametrize("check", ["raise_if_cancelled", "holds"])
def test_a_worker_stops_a_cancelled_handler_at_its_next_check(
    client: fastlock.Client, redis_url: str, impl: str, check: str
) -> None:
    queue = client.queue("cancel", lease=0.9, max_attempts=3, backoff=0.0)  # renewed every 0.3 s
    job_ids = [queue.enqueue(b"long")]
    started, stopped, hooks = threading.Event(), [], []

    def handler(job: Job) -> None:
        started.set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if check == "holds":
                if not queue.holds(job):
                    stopped.append(job.cancelled)
                    return
            else:
                try:
                    job.raise_if_cancelled()
                except fastlock.JobCancelled:
                    stopped.append(job.cancelled)
                    raise
            time.sleep(0.01)

    worker = Worker(queue, handler, on_failure=hooks.append, on_retry=hooks.append, after=hooks.append)
    with fastlock.Client(redis_url, impl=impl) as other:
        outcomes: list[object] = []
        canceller = _cancel_when_started(other.queue("cancel"), started, job_ids, outcomes)
        began = time.monotonic()
        assert worker.run(max_jobs=1) == 1
        canceller.join()
    assert outcomes == [Cancelled(True, "active")]
    assert stopped == [True] and time.monotonic() - began < 10
    assert hooks == [] and queue.stats() == EMPTY and queue.dead() == []
    assert queue.job(job_ids[0]).state == "cancelled"


def test_job_timeout_still_applies_to_a_handler_that_never_checks(client: fastlock.Client) -> None:
    queue = client.queue("cancel", lease=0.9, max_attempts=3, backoff=0.0)
    job_ids = [queue.enqueue(b"stuck")]
    started, release, seen = threading.Event(), threading.Event(), []

    def handler(job: Job) -> None:
        seen.append(job)
        started.set()
        release.wait(20)  # never checks

    failures: list[object] = []
    worker = Worker(queue, handler, job_timeout=1.2, on_failure=failures.append, on_retry=failures.append)
    outcomes: list[object] = []
    canceller = _cancel_when_started(queue, started, job_ids, outcomes)
    try:
        assert worker.run(max_jobs=1) == 1  # returns at the timeout, the handler abandoned
    finally:
        release.set()
        canceller.join()
    assert outcomes == [Cancelled(True, "active")] and seen[0].cancelled  # the heartbeat saw it
    assert failures == [] and queue.stats() == EMPTY and queue.dead() == []
