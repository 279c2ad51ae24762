"""fastlock.contrib.celery with a real Celery worker (Redis broker, thread pool) and producer
processes, on the test servers."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import date
from typing import Any

import pytest

pytest.importorskip("celery")

import celery_tasks
from celery import Task
from frameworks import overlaps, python, runs, start
from kombu import pools
from redis import Redis

from fastlock.contrib import clients
from fastlock.contrib.jobs import DIGEST_KEY

pytestmark = pytest.mark.slow  # slow tier: real Celery workers

DAY = date(2026, 12, 1)
PRODUCE = "import sys, celery_tasks; celery_tasks.produce(sys.argv[1], int(sys.argv[2]))"


@pytest.fixture(autouse=True)
def fresh_clients() -> Iterator[None]:
    """The integrations' per-process clients are closed with the test's others: forget them."""
    yield
    clients.close_all()


@pytest.fixture
def redis(redis_url: str) -> Iterator[Any]:
    celery_tasks.app.conf.broker_url = redis_url
    connection = Redis.from_url(redis_url)
    yield connection
    connection.close()
    pools.reset()  # the producer connections, on this test's server
    celery_tasks.app._pool = celery_tasks.app.amqp._producer_pool = None


def work(redis_url: str, done: Callable[[], bool], concurrency: int = 3) -> None:
    """Run a real Celery worker (threads) until ``done()``, then stop it warmly (SIGTERM)."""
    options = ["-P", "threads", "-c", str(concurrency), "-l", "warning"]
    options += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    worker = start(python("-m", "celery", "-A", "celery_tasks", "-b", redis_url, "worker", *options))
    try:
        deadline = time.monotonic() + 60
        while not done() and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert done(), "the worker did not finish the tasks in time"
        time.sleep(0.2)  # the last task's lock release follows its record
    finally:
        worker.terminate()
        out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, out + err


def test_unique_send_from_many_producers(redis_url: str, redis: Any) -> None:
    """4 producer processes send the same 20 tasks at once: each is sent once, runs once, and
    its lock is freed after success (the same task can be sent again)."""
    producers = [start(python("-c", PRODUCE, redis_url, "20")) for _ in range(4)]
    sent = []
    for proc in producers:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        sent.append(int(out))
    assert sum(sent) == 20
    assert celery_tasks.invoice.delay(3, DAY) is None  # still pending: refused
    keys = [f"invoice:{customer}:{DAY.isoformat()}" for customer in range(20)]
    work(redis_url, lambda: all(runs(redis, key) for key in keys))
    assert [len(runs(redis, key)) for key in keys] == [1] * 20
    assert not any(celery_tasks.invoice.lock((customer, DAY)).locked() for customer in range(20))
    assert celery_tasks.invoice.delay(3, DAY) is not None
    assert celery_tasks.invoice.lock((3,), {"day": DAY}).digest != celery_tasks.invoice.lock((3, DAY)).digest


def test_exclusive_execution_on_concurrent_threads(redis_url: str, redis: Any) -> None:
    """Duplicates run one at a time per key on a 4-thread worker (while_executing waits)."""
    for _ in range(4):
        for key in range(3):
            assert celery_tasks.exclusive.delay(key) is not None  # runtime-only lock: always sent
    work(redis_url, lambda: all(len(runs(redis, f"exclusive:{key}")) == 4 for key in range(3)), 4)
    for key in range(3):
        assert overlaps(runs(redis, f"exclusive:{key}")) == []


def test_a_failed_task_frees_its_lock_a_retried_one_keeps_it(redis_url: str, redis: Any) -> None:
    assert celery_tasks.fails.delay(1) is not None
    assert celery_tasks.retries.delay(1) is not None
    assert celery_tasks.fails.lock((1,)).locked()
    work(redis_url, lambda: bool(runs(redis, "fails:1")) and len(runs(redis, "retries:1")) == 2)
    assert not celery_tasks.fails.lock((1,)).locked()
    assert not celery_tasks.retries.lock((1,)).locked()  # kept over the retry, freed at the end
    assert celery_tasks.fails.delay(1) is not None


def test_called_directly_the_task_just_runs(redis_url: str, redis: Any) -> None:
    assert celery_tasks.invoice(5, DAY) == 5
    assert not celery_tasks.invoice.lock((5, DAY)).locked()


def test_the_worker_locks_the_digest_the_task_carries(redis_url: str, redis: Any) -> None:
    """The producer sends the digest in the task's header and the worker locks it without
    computing it again: a header naming another digest locks that one; a task sent without
    the header (an older producer) locks the digest of its arguments."""
    other = "ab" * 32
    assert celery_tasks.carried.delay(1) is not None
    sent = json.loads(redis.lindex("celery", 0))
    assert sent["headers"][DIGEST_KEY] == celery_tasks.carried.lock((1,)).digest
    Task.apply_async(celery_tasks.carried, (2,), headers={DIGEST_KEY: other})  # past the integration
    Task.apply_async(celery_tasks.carried, (3,))
    work(redis_url, lambda: all(redis.llen(f"carried:{key}") for key in (1, 2, 3)))
    records = [json.loads(redis.lindex(f"carried:{key}", 0)) for key in (1, 2, 3)]
    assert records == [
        [celery_tasks.carried.lock((1,)).digest, True, True],  # the same digest, held
        [other, True, False],  # the carried digest is held, the computed one is not
        [None, False, True],
    ]
