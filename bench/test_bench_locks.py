"""Uncontended lock acquire + release against redis-py's ``Lock`` (and python-redis-lock, if
installed) in the same run: ``python -m pytest --benchmark-only bench/test_bench_locks.py``.

fastlock's lock is measured as the command budgets count it: until_executed, ttl, tracking
and fencing tokens on; "realistic" acquires with one object and releases with another.
``test_gate_lock_vs_redis_py_lock`` is the perf gate's interleaved pair (``bench/gate.py``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import pytest
from conftest import BUDGETS_TOML
from gate import PairResult, Side, loop_side

import fastlock
from fastlock.locks.types import LockType
from fastlock.tools.bench import Figures
from fastlock.tools.costs import lifecycle

OPS, GATE_OPS = 3_000, 500
BUDGETS = BUDGETS_TOML["lock"]
LOCKERS = [
    "fastlock cython",
    "fastlock python",
    "fastlock cython, realistic",
    "redis-py Lock",
    "python-redis-lock",
]


def _fastlock(server_url: str, locker: str) -> tuple[Callable[[], object], fastlock.Client]:
    impl = locker.split()[1].rstrip(",")
    if impl == "cython" and importlib.util.find_spec("fastlock._core") is None:
        pytest.skip("Cython core not built")
    client = fastlock.Client(server_url, impl=impl)
    return _acquire_release(client, locker), client


def _acquire_release(client: fastlock.Client, locker: str, name: str = "bench") -> Callable[[], object]:
    holder = client.lock(name, ttl=30)
    releaser = client.lock(name, ttl=30) if "realistic" in locker else holder
    job = holder.job_id

    def op() -> None:
        holder.acquire(job)
        releaser.release(job)

    token = holder.acquire(job)
    assert token is not None and releaser.release(job) == token  # the lock works before it is timed
    return op


def _redis_py(server_url: str, locker: str) -> Callable[[], object]:
    redis = pytest.importorskip("redis")
    r = redis.Redis(unix_socket_path=server_url.removeprefix("unix://"))
    if locker == "redis-py Lock":
        lock: Any = r.lock("bench:redis-py", timeout=30)
    else:
        redis_lock = pytest.importorskip("redis_lock")
        lock = redis_lock.Lock(r, "bench:python-redis-lock", expire=30)

    def op() -> None:
        lock.acquire()
        lock.release()

    assert lock.acquire() and lock.locked()  # the lock works before it is timed
    lock.release()
    return op


@pytest.mark.parametrize("locker", LOCKERS)
def test_acquire_release(measure: Callable[..., Figures], server_url: str, locker: str) -> None:
    if locker.startswith("fastlock"):
        op, client = _fastlock(server_url, locker)
        same_bytes = (
            None if "python" in locker else lambda other: _acquire_release(other, locker, "bench-floor")
        )
        figures = measure(f"lock: {locker}", op, ops=OPS, cost=client, same_bytes=same_bytes)
        expected = BUDGETS["until_executed"]
        assert (figures.commands_per_op, figures.round_trips_per_op) == (
            expected["commands"],
            expected["round_trips"],
        )
    else:
        measure(f"lock: {locker}", _redis_py(server_url, locker), ops=OPS)


def test_gate_lock_vs_redis_py_lock(gate: Callable[[str, Side, Side], PairResult], server_url: str) -> None:
    op, _ = _fastlock(server_url, "fastlock cython")
    gate(
        "lock_vs_redis_py_lock",
        loop_side("fastlock cython", op, GATE_OPS),
        loop_side("redis-py Lock", _redis_py(server_url, "redis-py Lock"), GATE_OPS),
    )


@pytest.mark.parametrize("kind", list(LockType), ids=lambda kind: kind.value)
def test_lifecycle(measure: Callable[..., Figures], server_url: str, kind: LockType) -> None:
    """The realistic lifecycle of each lock type (a new digest per job, one Lock object
    enqueues and another executes), against the same bytes from C."""
    if importlib.util.find_spec("fastlock._core") is None:
        pytest.skip("Cython core not built")
    client = fastlock.Client(server_url)
    run = lifecycle(client.locks, kind)
    run()
    figures = measure(
        f"lock lifecycle: fastlock cython, {kind.value}",
        run,
        ops=OPS // 2,
        cost=client,
        same_bytes=lambda other: lifecycle(other.locks, kind),
    )
    expected = BUDGETS[kind.value]
    assert (figures.commands_per_op, figures.round_trips_per_op) == (
        expected["commands"],
        expected["round_trips"],
    )
