"""RQ job functions for tests/contrib/test_rq.py, imported by the real RQ workers (``--path``)."""

from __future__ import annotations

import json
import os
import time
from datetime import date

from redis import Redis
from rq import Queue, get_current_job

import fastlock
from fastlock.contrib.jobs import DIGEST_KEY
from fastlock.contrib.rq import unique


def record(key: str, seconds: float = 0.03) -> None:
    """Log this execution's start and end times (and pid) under ``runs:<key>`` in Redis."""
    job = get_current_job()
    assert job is not None
    start = time.time()
    time.sleep(seconds)
    job.connection.rpush(f"runs:{key}", json.dumps([start, time.time(), os.getpid()]))


@unique(ttl=60)
def invoice(customer: int, day: date) -> int:
    record(f"invoice:{customer}:{day.isoformat()}")
    return customer


@unique(type="while_executing", timeout=30, ttl=60)
def exclusive(key: int) -> None:
    record(f"exclusive:{key}")


@unique(ttl=60)
def fails(key: int) -> None:
    raise RuntimeError(f"job {key} fails")


@unique(ttl=60, release_on_failure=False)
def fails_and_keeps(key: int) -> None:
    raise RuntimeError(f"job {key} fails")


@unique(ttl=60)
def add(a: int, b: int) -> int:
    return a + b


@unique(type="while_executing", ttl=60)
def carried(key: int) -> None:
    """Record the digest this job carries and, while it runs, whether the runtime lock of that
    digest and of the one computed from its arguments is held."""
    job = get_current_job()
    assert job is not None
    sent = job.meta.get(DIGEST_KEY)
    computed = carried.lock(Queue(job.origin, connection=job.connection), key).digest
    with fastlock.Client.from_redis(job.connection) as client:
        held = [
            d is not None and client.locks.lock(digest=d, type="while_executing", ttl=None).locked()
            for d in (sent, computed)
        ]
    job.connection.rpush(f"carried:{key}", json.dumps([sent, *held]))


def produce(url: str, queue: str, customers: int) -> None:
    """A producer process: enqueue ``invoice`` for each customer; prints how many were enqueued."""
    target = Queue(queue, connection=Redis.from_url(url))
    day = date(2026, 12, 1)
    print(sum(invoice.enqueue(target, customer, day) is not None for customer in range(customers)))
