"""The core is chosen per client: a ``Client(impl=...)`` builds its locks, reads its claims and
computes its digests on that core, whatever the process default (``FASTLOCK_IMPL``), with the
same results on either core; a helper without a client uses the default, chosen once."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from harness.cores import AVAILABLE, needs_cython

import fastlock
from fastlock._impl import IMPLEMENTATIONS, core_of, default_core
from fastlock.locks.base import LockBase


def _run(redis_url: str, impl: str) -> tuple[Any, ...]:
    """What a client on core ``impl`` gets from its namespace and a queue, checked to be that core's."""
    core = importlib.import_module(IMPLEMENTATIONS[impl])
    with fastlock.Client(redis_url, impl=impl) as client:
        manager = fastlock.LockManager(client, prefix=f"choice-{impl}")
        queue = client.queue(f"choice-{impl}")
        assert manager.core is core and manager.keys.core is core and queue.core is core
        assert manager.digester._core is core and queue.digester._core is core
        digest = manager.digest("report", "default", {"b": [1, 2.5, "é"], "a": None})
        lock = manager.lock(digest=digest, ttl=30, limit=2)
        assert manager._new_lock == core._lock_new
        slots = {s: repr(getattr(lock, s, None)) for s in LockBase.__slots__ if s not in ("manager", "_call")}
        scope = manager.scope(digest, "", 2)
        token = lock.acquire("job")
        lock.release("job")
        ids = [queue.enqueue(p, job_id=f"j{i}") for i, p in enumerate([b"a", "é".encode()])]
        jobs = queue.claim(5)
        claimed = [(type(j), j.id, j.payload, j.attempt, j.token) for j in jobs]
        done = queue.complete(jobs, claim=1)
    keys = tuple(key.replace(f"choice-{impl}", "P") for key in scope.keys)
    return digest, type(lock), slots, keys, token, ids, claimed, list(done), type(done)


@needs_cython
def test_each_client_runs_on_its_own_core_with_the_same_results(redis_url: str) -> None:
    """One of the two clients is not on the process default: each still gets its own core."""
    assert {"cython", "python"} <= set(AVAILABLE)
    assert _run(redis_url, "python") == _run(redis_url, "cython")


def test_a_runner_without_an_impl_gets_the_default_core() -> None:
    class Runner:
        def call(self, *args: Any, **kwargs: Any) -> Any:
            return None

    assert core_of(Runner()) is default_core() is default_core()
    manager = fastlock.LockManager(Runner())  # type: ignore[arg-type]
    assert manager.core is default_core()


@pytest.mark.parametrize("impl", AVAILABLE)
def test_a_client_names_its_core(impl: str) -> None:
    client = fastlock.Client("redis://127.0.0.1:1", impl=impl)  # never connected
    assert core_of(client) is importlib.import_module(IMPLEMENTATIONS[impl])
