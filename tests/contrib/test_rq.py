"""fastlock.contrib.rq with real RQ workers (``rq worker --burst``, forking a work horse per
job) and producer processes, on the test servers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest

pytest.importorskip("rq")

import rq_jobs
from frameworks import overlaps, python, runs, start
from redis import Redis
from rq import Queue
from rq.job import JobStatus

from fastlock.contrib import clients
from fastlock.contrib.jobs import DIGEST_KEY

pytestmark = pytest.mark.slow  # slow tier: real RQ workers

DAY = date(2026, 12, 1)
PRODUCE = "import sys, rq_jobs; rq_jobs.produce(sys.argv[1], sys.argv[2], int(sys.argv[3]))"


@pytest.fixture(autouse=True)
def fresh_clients() -> Iterator[None]:
    """The integrations' per-process clients are closed with the test's others: forget them."""
    yield
    clients.close_all()


@pytest.fixture
def redis(redis_url: str) -> Any:
    connection = Redis.from_url(redis_url)
    yield connection
    connection.close()


def rq_worker(redis_url: str, queue: str, *options: str) -> list[str]:
    """The command of a real RQ worker (``rq worker --burst``) on ``queue``."""
    return python("-m", "rq.cli", "worker", "--burst", "-u", redis_url, "--path", ".", *options, queue)


def work(redis_url: str, queue: str, workers: int = 1, *options: str) -> None:
    """Run ``workers`` real RQ workers in burst mode on ``queue`` until it is empty."""
    procs = [start(rq_worker(redis_url, queue, *options)) for _ in range(workers)]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, out + err


def test_unique_enqueue_from_many_producers(redis_url: str, redis: Any) -> None:
    """4 producer processes enqueue the same 20 jobs at once: each job is enqueued once, runs
    once on 2 workers, and its lock is freed after success (the same job can be enqueued again)."""
    producers = [start(python("-c", PRODUCE, redis_url, "invoices", "20")) for _ in range(4)]
    enqueued = []
    for proc in producers:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        enqueued.append(int(out))
    assert sum(enqueued) == 20
    queue = Queue("invoices", connection=redis)
    assert rq_jobs.invoice.enqueue(queue, 3, DAY) is None  # still pending: refused
    work(redis_url, "invoices", workers=2)
    for customer in range(20):
        assert len(runs(redis, f"invoice:{customer}:{DAY.isoformat()}")) == 1
        assert not rq_jobs.invoice.lock(queue, customer, DAY).locked()
    job = rq_jobs.invoice.enqueue(queue, 3, DAY)
    assert job is not None and rq_jobs.invoice.lock(queue, 3, DAY).locked()
    assert rq_jobs.invoice.lock(queue, 3, day=DAY).digest != rq_jobs.invoice.lock(queue, 3, DAY).digest


def test_exclusive_execution_on_concurrent_workers(redis_url: str, redis: Any) -> None:
    """Duplicates enqueued with plain ``queue.enqueue`` run one at a time per key on 3
    concurrent workers (while_executing waits): every one runs, none overlap."""
    queue = Queue("exclusive", connection=redis)
    for _ in range(4):
        for key in range(3):
            queue.enqueue(rq_jobs.exclusive, key)
    work(redis_url, "exclusive", workers=3)
    for key in range(3):
        executions = runs(redis, f"exclusive:{key}")
        assert len(executions) == 4
        assert overlaps(executions) == []
    assert len({pid for key in range(3) for _, _, pid in runs(redis, f"exclusive:{key}")}) > 1


def test_a_failed_job_frees_its_lock(redis_url: str, redis: Any) -> None:
    queue = Queue("failing", connection=redis)
    failed = rq_jobs.fails.enqueue(queue, 1)
    kept = rq_jobs.fails_and_keeps.enqueue(queue, 1)
    assert failed is not None and kept is not None
    assert rq_jobs.fails.lock(queue, 1).locked()
    work(redis_url, "failing")
    assert failed.get_status(refresh=True) == JobStatus.FAILED
    assert not rq_jobs.fails.lock(queue, 1).locked()
    assert rq_jobs.fails.enqueue(queue, 1) is not None  # enqueued again at once
    assert kept.get_status(refresh=True) == JobStatus.FAILED
    assert rq_jobs.fails_and_keeps.lock(queue, 1).locked()  # release_on_failure=False: until its ttl
    assert rq_jobs.fails_and_keeps.enqueue(queue, 1) is None


def test_a_job_with_retries_left_keeps_its_lock(redis_url: str, redis: Any) -> None:
    from rq import Retry

    queue = Queue("retrying", connection=redis)
    job = rq_jobs.fails.enqueue(queue, 2, retry=Retry(max=1))
    assert job is not None
    work(redis_url, "retrying", 1, "--max-jobs", "1")
    assert rq_jobs.fails.lock(queue, 2).locked()  # retried next: still locked
    work(redis_url, "retrying")
    assert job.get_status(refresh=True) == JobStatus.FAILED
    assert not rq_jobs.fails.lock(queue, 2).locked()


def test_called_outside_a_worker_the_function_just_runs() -> None:
    assert rq_jobs.add(2, 3) == 5


def test_the_worker_locks_the_digest_the_job_carries(redis_url: str, redis: Any) -> None:
    """The producer stores the digest in the job's meta and the worker locks it without
    computing it again: a meta naming another digest locks that one; a job enqueued without it
    (plain ``queue.enqueue``, an older producer) locks the digest of its arguments."""
    queue, other = Queue("carrying", connection=redis), "ab" * 32
    job = rq_jobs.carried.enqueue(queue, 1, meta={"mine": 1})
    assert job is not None and job.meta == {"mine": 1, DIGEST_KEY: rq_jobs.carried.lock(queue, 1).digest}
    queue.enqueue(rq_jobs.carried, 2, meta={DIGEST_KEY: other})
    queue.enqueue(rq_jobs.carried, 3)
    work(redis_url, "carrying")
    records = [json.loads(redis.lindex(f"carried:{key}", 0)) for key in (1, 2, 3)]
    assert records == [
        [rq_jobs.carried.lock(queue, 1).digest, True, True],  # the same digest, held
        [other, True, False],  # the carried digest is held, the computed one is not
        [None, False, True],
    ]
