"""Admin paging and conflict eviction driven by hand, sans-IO: replies sent in, steps checked."""

from __future__ import annotations

from typing import Any

import pytest

import fastlock
from fastlock.exceptions import ResponseError
from fastlock.locks import admin
from fastlock.locks.conflict import Conflict, replacing
from fastlock.locks.keys import LockEntry
from fastlock.locks.namespace import eviction_policy
from fastlock.operations import Call, Command, Operation


def finish(operation: Operation[Any], reply: object) -> object:
    with pytest.raises(StopIteration) as stop:
        operation.send(reply)
    return stop.value.value


def test_scan_pages_bucket_after_bucket_and_resumes_after_the_last_member(client: fastlock.Client) -> None:
    locks = fastlock.LockManager(client, prefix="p", buckets=3)
    operation = admin.scan(locks, "0", None, 2)
    assert next(operation) == Command(("ZRANGE", "p:{0}:idx", "-", "+", "BYLEX", "LIMIT", 0, 2))
    assert operation.send([b"a#1"]) == Command(("ZRANGE", "p:{1}:idx", "-", "+", "BYLEX", "LIMIT", 0, 1))
    cursor, entries = finish(operation, [b"b:run#2"])
    assert (cursor, entries) == ("1:b:run#2", [LockEntry("a", False, 1), LockEntry("b", True, 2)])
    operation = admin.scan(locks, cursor, "a*", 5)
    assert next(operation) == Command(("ZRANGE", "p:{1}:idx", "(b:run#2", "+", "BYLEX", "LIMIT", 0, 5))
    step = operation.send([b"ab#1", b"c#1"])
    assert step == Command(("ZRANGE", "p:{2}:idx", "-", "+", "BYLEX", "LIMIT", 0, 3))
    assert finish(operation, []) == ("0", [LockEntry("ab", False, 1)])  # the last bucket ends the walk


class _Lock:
    digest = "d"
    name = None
    type = fastlock.LockType.UNTIL_EXECUTED
    limit = 1


def test_replace_evicts_each_holder_then_retries_once() -> None:
    acquire = Call("lock_acquire", ("k",), ("me",))
    conflict = Conflict(
        _Lock(),
        "me",
        "enqueue",
        ("a", "b"),
        _release=lambda holder: Call("lock_release", ("k",), (holder,)),
        _acquire=acquire,
    )
    operation = replacing(conflict)
    assert next(operation) == Call("lock_release", ("k",), ("a",))
    assert operation.send(3) == Call("lock_release", ("k",), ("b",))
    assert operation.send(0) is acquire  # b had gone already
    assert finish(operation, [1200, b"c"]) is None  # a third job took it first
    assert conflict.evict("a") is None and conflict.retry() is None  # no transport: nothing runs


def test_the_eviction_policy_falls_back_to_config_get_when_info_is_refused() -> None:
    operation = eviction_policy()
    assert next(operation) == Command(("INFO", "memory"))
    assert operation.throw(ResponseError("NOPERM info")) == Command(("CONFIG", "GET", "maxmemory-policy"))
    assert finish(operation, [b"maxmemory-policy", b"allkeys-lru"]) == "allkeys-lru"
    operation = eviction_policy()
    next(operation)
    assert finish(operation, b"# Memory\r\nmaxmemory_policy:noeviction\r\n") == "noeviction"


def test_the_executions_table_matches_the_types() -> None:
    """Each type's job-helper steps (one spec for every transport) agree with its scopes."""
    from fastlock.locks.types import SPECS

    assert set(SPECS) == set(fastlock.LockType)
    for kind, spec in SPECS.items():
        steps = spec.execution
        assert steps.runtime == kind.runtime == spec.runtime
        assert spec.queued or spec.runtime
        assert not (steps.release_first or steps.release_after or steps.relock) or kind.queued
        assert steps.handoff == spec.both == (kind is fastlock.LockType.UNTIL_AND_WHILE_EXECUTING)


def test_an_async_lock_acquire_is_one_operation(client: fastlock.Client) -> None:
    """AsyncLock runs the same acquire operation (built without I/O); its steps checked here."""
    from fastlock.aio import AsyncLockManager
    from fastlock.locks.types import FENCING, TRACK

    locks = AsyncLockManager(client)  # type: ignore[arg-type] - nothing is sent
    lock = locks.lock("op", ttl=5)
    operation = lock._acquiring("me", 0.0)
    step = next(operation)
    assert step == Call("lock_acquire", lock._main_scope.keys, ("me", lock.digest, 5000, TRACK | FENCING))
    assert finish(operation, 7) == 7
