"""fastlock.compat.redis_py.Lock against redis-py's own Lock: one scenario, run on redis-py's
``Lock`` and on the adapter over both cores, must give the same outcomes (real servers)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.exceptions

import fastlock
from fastlock.compat.redis_py import Lock


class Subject:
    """One implementation under the scenario: how to build a lock, read its time left, delete it."""

    def __init__(
        self, make: Callable[..., Any], ttl: Callable[[Any], float | None], delete: Callable[[Any], Any]
    ):
        self.make, self.ttl, self.delete = make, ttl, delete


@pytest.fixture(params=["redis-py", "cython", "python"])
def subject(request: pytest.FixtureRequest, redis_url: str) -> Iterator[Subject]:
    if request.param == "redis-py":
        r = redis.Redis.from_url(redis_url)

        def pttl(lock: Any) -> float | None:
            left = r.pttl(lock.name)
            return None if left == -1 else left / 1000

        yield Subject(lambda name, **kw: r.lock(name, **kw), pttl, lambda lock: r.delete(lock.name))
        r.close()
        return
    if request.param == "cython":
        pytest.importorskip("fastlock._core")
    with fastlock.Client(redis_url, impl=request.param) as client:
        yield Subject(
            lambda name, **kw: Lock(client, name, **kw),
            lambda lock: lock.lock.holders()[0].ttl,
            lambda lock: client.locks.delete(lock.lock.digest),
        )


def outcome(call: Callable[[], Any]) -> Any:
    """The call's result, or the name of the lock error it raised (redis-py's or fastlock's)."""
    try:
        return call()
    except (redis.exceptions.LockNotOwnedError, fastlock.LockNotOwnedError):
        return "LockNotOwnedError"
    except (redis.exceptions.LockError, fastlock.LockError):
        return "LockError"


def test_the_adapter_behaves_as_redis_py_s_lock(subject: Subject) -> None:
    a, b = subject.make("k", timeout=10), subject.make("k", timeout=10)
    seen = [
        outcome(lambda: a.acquire(blocking=False)),
        outcome(lambda: b.acquire(blocking=False)),
        outcome(lambda: b.acquire(blocking_timeout=0.05)),
        outcome(lambda: a.acquire(blocking=False)),  # not re-entrant
        (a.owned(), b.owned(), a.locked(), b.locked()),
        outcome(b.release),  # b never acquired
        outcome(lambda: a.extend(5)),  # adds
        math.ceil(subject.ttl(a) or 0),
        outcome(lambda: a.extend(3, replace_ttl=True)),
        math.ceil(subject.ttl(a) or 0),
        outcome(a.reacquire),
        math.ceil(subject.ttl(a) or 0),
        outcome(a.release),
        a.locked(),
        outcome(a.release),  # released already
        outcome(lambda: a.extend(1)),
        outcome(a.reacquire),
    ]
    assert seen == [
        True, False, False, False, (True, False, True, True), "LockError", True, 15, True, 3,
        True, 10, None, False, "LockError", "LockError", "LockError",
    ]  # fmt: skip


def test_context_manager_lost_lock_and_no_timeout(subject: Subject) -> None:
    a, b = subject.make("k", timeout=10), subject.make("k", timeout=10, blocking_timeout=0.05)
    with a as entered:
        assert entered is a and a.owned()
        assert outcome(b.__enter__) == "LockError"  # not acquired within the time
    assert not a.locked()
    assert a.acquire()
    subject.delete(a)
    assert outcome(a.release) == "LockNotOwnedError"
    assert a.acquire() and subject.delete(a) and outcome(lambda: a.extend(1)) == "LockNotOwnedError"
    forever = subject.make("n")
    assert forever.acquire(blocking=False)
    assert subject.ttl(forever) is None and outcome(lambda: forever.extend(1)) == "LockError"
    forever.release()
    quiet = subject.make("q", timeout=10, raise_on_release_error=False)
    with quiet:
        subject.delete(quiet)  # lost inside: logged, not raised


def test_thread_local_decides_who_may_release(subject: Subject) -> None:
    for thread_local, released in ((True, "LockError"), (False, None)):
        lock = subject.make(f"t{thread_local}", timeout=10, thread_local=thread_local)
        taker = threading.Thread(target=lock.acquire)
        taker.start()
        taker.join()
        assert outcome(lock.release) == released
        assert lock.locked() is thread_local


def test_bad_arguments_are_refused_before_anything_is_sent() -> None:
    client = fastlock.Client("redis://127.0.0.1:1")  # nothing connects
    for kwargs, error in (
        ({"timeout": "10"}, fastlock.ArgumentTypeError),
        ({"timeout": -1}, fastlock.ArgumentError),
        ({"sleep": -0.1}, fastlock.ArgumentError),
        ({"blocking": 1}, fastlock.ArgumentTypeError),
        ({"blocking_timeout": float("nan")}, fastlock.ArgumentError),
        ({"thread_local": None}, fastlock.ArgumentTypeError),
    ):
        with pytest.raises(error):
            Lock(client, "k", **kwargs)
    lock = Lock(client, "k", timeout=10)
    with pytest.raises(fastlock.ArgumentError, match="token"):
        lock.acquire(token="mine")
    with pytest.raises(fastlock.ArgumentTypeError):
        Lock(client, b"k")  # type: ignore[arg-type]
    client.close()
