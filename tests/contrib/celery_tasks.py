"""Celery tasks for tests/contrib/test_celery.py, imported by the real Celery workers (``-A``);
the broker (and lock server) URL is given to each process (``-b``, or ``conf.broker_url``)."""

from __future__ import annotations

import json
import os
import time
from datetime import date
from typing import Any

from celery import Celery
from redis import Redis

import fastlock
from fastlock.contrib.celery import UniqueTask
from fastlock.contrib.jobs import DIGEST_KEY

app = Celery("celery_tasks")
app.conf.task_ignore_result = True


def record(key: str, seconds: float = 0.03) -> None:
    """Log this execution's start and end times (and thread) under ``runs:<key>`` in Redis."""
    start = time.time()
    time.sleep(seconds)
    with Redis.from_url(app.conf.broker_url) as redis:
        redis.rpush(f"runs:{key}", json.dumps([start, time.time(), os.getpid()]))


@app.task(base=UniqueTask, unique_lock={"ttl": 60})
def invoice(customer: int, day: date) -> int:
    record(f"invoice:{customer}:{day.isoformat()}")
    return customer


@app.task(base=UniqueTask, unique_lock={"type": "while_executing", "timeout": 30, "ttl": 60})
def exclusive(key: int) -> None:
    record(f"exclusive:{key}")


@app.task(base=UniqueTask, unique_lock={"ttl": 60})
def fails(key: int) -> None:
    record(f"fails:{key}", 0)
    raise RuntimeError(f"task {key} fails")


@app.task(base=UniqueTask, unique_lock={"ttl": 60}, bind=True, max_retries=1)
def retries(self: Any, key: int) -> None:
    record(f"retries:{key}", 0)
    raise self.retry(countdown=0.2)


@app.task(base=UniqueTask, unique_lock={"type": "while_executing", "ttl": 60}, bind=True)
def carried(self: Any, key: int) -> None:
    """Record the digest this task was sent with and, while it runs, whether the runtime lock of
    that digest and of the one computed from its arguments is held."""
    sent, computed = self.request.get(DIGEST_KEY), self.lock((key,)).digest
    with fastlock.Client(app.conf.broker_url) as client, Redis.from_url(app.conf.broker_url) as redis:
        held = [
            d is not None and client.locks.lock(digest=d, type="while_executing", ttl=None).locked()
            for d in (sent, computed)
        ]
        redis.rpush(f"carried:{key}", json.dumps([sent, *held]))


def produce(url: str, customers: int) -> None:
    """A producer process: send ``invoice`` for each customer; prints how many were sent."""
    app.conf.broker_url = url
    day = date(2026, 12, 1)
    print(sum(invoice.delay(customer, day) is not None for customer in range(customers)))
