"""The traps of a user coming from redis-py's ``Lock`` (issue 23): a lock's ``ttl`` is a
required choice (seconds, or an explicit ``ttl=None``), refused before anything is sent, on
both cores and on every entry point."""

from __future__ import annotations

import re
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
