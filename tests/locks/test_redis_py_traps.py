"""The traps of a user coming from redis-py's ``Lock`` (issue 23): a lock's ``ttl`` is a
required choice (seconds, or an explicit ``ttl=None``), refused before anything is sent, on
both cores and on every entry point."""

from __future__ import annotations

import math
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import fastlock
from fastlock.contrib.jobs import UniqueJob
from fastlock.locks.lock import Lock


@pytest.fixture
def offline(impl: str) -> Any:
    """A client of the core under test on a port nothing listens on: building locks sends nothing."""
    with fastlock.Client("redis://127.0.0.1:1", impl=impl) as client:
        yield client


def test_a_lock_without_ttl_is_refused_on_every_entry_point(offline: Any) -> None:
    builders = (
        lambda: offline.lock("report"),
        lambda: offline.locks.lock("report"),
        lambda: offline.locks.lock("report", type="while_executing", limit=2, job_id="j"),
        lambda: Lock(offline.locks, offline.locks.digest("report"), "report"),
    )
    for build in builders:
        with pytest.raises(fastlock.ArgumentError, match=re.escape("ttl=None")) as caught:
            build()
        assert isinstance(caught.value, fastlock.FastlockError)


def test_redis_py_s_timeout_is_named_in_the_refusal(offline: Any) -> None:
    """``client.lock("k", timeout=10)`` (redis-py: a 10 s lifetime) says what timeout means here."""
    with pytest.raises(fastlock.ArgumentError, match=r"timeout=10 is how long acquire waits.*ttl=10"):
        offline.lock("report", timeout=10)


def test_an_explicit_ttl_none_is_a_lock_that_never_expires(client: Any) -> None:
    lock = client.lock("forever", ttl=None)
    token = lock.acquire("a")
    assert token is not None and lock.ttl is None
    [holder] = lock.holders()
    assert holder.ttl is None  # no expiry on the server
    assert lock.release("a") == token
    assert client.lock("leased", ttl=30).ttl == 30


def test_a_unique_job_without_ttl_is_refused_when_declared() -> None:
    with pytest.raises(fastlock.ArgumentError, match=re.escape("ttl=None")):
        UniqueJob("report", {"type": "until_executed"})
    assert UniqueJob("report", {"ttl": None}).options == {"ttl": None}


def test_the_coming_from_redis_py_equivalents(client: Any) -> None:
    """Each kept difference of docs/locks.md "Coming from redis-py", and its one-line equivalent."""
    lock = client.lock("k", ttl=10)
    with pytest.raises(fastlock.LockError, match="timeout"):
        lock.acquire(blocking=True)  # no wait for ever by default: a wait is named
    token = lock.acquire(blocking=False)
    assert type(token) is int and token > 0
    assert lock.acquire() == token  # a second acquire: the same token (idempotent)
    assert lock.job_id in {h.job_id for h in lock.holders()}  # redis-py's owned()
    assert lock.extend(ttl=3) == token and math.ceil(lock.holders()[0].ttl or 0) == 3  # extend resets
    assert lock.extend(ttl=lock.holders()[0].ttl + 5) == token  # redis-py's extend(5): adds
    assert math.ceil(lock.holders()[0].ttl or 0) == 8
    assert lock.extend() == token and math.ceil(lock.holders()[0].ttl or 0) == 10  # reacquire()
    assert lock.release() == token
    assert lock.release() is None  # not held: None, not an error
    with lock as entered:
        assert type(entered) is int and entered > token  # the fencing token, not the lock
    handed = client.lock("k", ttl=10, job_id="worker-1")  # redis-py's thread_local=False
    with ThreadPoolExecutor(1) as pool:
        taken = pool.submit(handed.acquire).result()
    assert taken is not None and handed.release() == taken
