"""What ``python -m fastlock bench`` measures: the EVALSHA round trip, lock lifecycles and
job-claim lifecycles, each next to redis-py doing the same job where that makes sense."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .benchmark import EVALSHA_ARGS, EVALSHA_KEYS, EVALSHA_SCRIPT, Workload
from .lock import LockType
from .lock_costs import lifecycle

if TYPE_CHECKING:
    from .client import Client

__all__ = ["ALL", "CORE", "LOCKS"]


def _redis_py(client: Client) -> Any:
    """A redis-py client on the same server (ImportError skips the workload)."""
    import redis

    params = client.params
    if params.path:
        return redis.Redis(unix_socket_path=params.path, db=params.db, password=params.password)
    return redis.Redis(host=params.host, port=params.port, db=params.db, password=params.password)


def _evalsha(client: Client) -> Callable[[], object]:
    script = client.register_script(EVALSHA_SCRIPT)
    return lambda: script(EVALSHA_KEYS, EVALSHA_ARGS)


def _redis_py_evalsha(client: Client) -> Callable[[], object]:
    script = _redis_py(client).register_script(EVALSHA_SCRIPT)
    args = tuple(int(a) if isinstance(a, bool) else a for a in EVALSHA_ARGS)  # redis-py refuses bool
    return lambda: script(keys=EVALSHA_KEYS, args=args)


def _lock_acquire_release(client: Client) -> Callable[[], object]:
    holder = client.lock(f"bench:{uuid.uuid4().hex}", ttl=30)
    releaser = client.lock(holder.name, ttl=30)  # the realistic path: another object releases
    job = holder.job_id

    def op() -> None:
        holder.acquire(job)
        releaser.release(job)

    return op


def _redis_py_lock(client: Client) -> Callable[[], object]:
    lock = _redis_py(client).lock(f"bench:redis-py:{uuid.uuid4().hex}", timeout=30)

    def op() -> None:
        lock.acquire()
        lock.release()

    return op


def _lifecycle(kind: LockType) -> Callable[[Client], Callable[[], object]]:
    return lambda client: lifecycle(client.locks, kind)


CORE = (
    Workload("EVALSHA round trip", _evalsha, versus="redis-py: EVALSHA round trip"),
    Workload("redis-py: EVALSHA round trip", _redis_py_evalsha, counted=False),
)
"""The reference EVALSHA (3 keys, 5 args), by fastlock and by redis-py."""

LOCKS = (
    Workload(
        "lock acquire + release", _lock_acquire_release, ops=3_000, versus="redis-py: Lock acquire + release"
    ),
    Workload("redis-py: Lock acquire + release", _redis_py_lock, ops=3_000, counted=False),
    *(Workload(f"lock lifecycle: {kind.value}", _lifecycle(kind), ops=1_000) for kind in LockType),
)
"""Uncontended acquire + release (until_executed, ttl, tracking and fencing on), and one job's
lifecycle of every lock type (enqueue on one object, execute on another)."""

ALL = (*CORE, *LOCKS)
