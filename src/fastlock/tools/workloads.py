"""What ``python -m fastlock bench`` measures: the EVALSHA round trip, lock lifecycles and
job-claim lifecycles, each next to redis-py doing the same job where that makes sense."""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..locks.types import LockType
from ..queues.jobs import Batch, Job
from ..queues.queue import Queue
from .bench import EVALSHA_ARGS, EVALSHA_KEYS, EVALSHA_SCRIPT, Workload
from .contention import crowd
from .costs import lifecycle

if TYPE_CHECKING:
    from ..sync.client import Client

__all__ = [
    "ALL",
    "CONTENTION",
    "CORE",
    "LOCKS",
    "QUEUES",
    "ContentionError",
    "Crowd",
    "Flow",
    "lock_acquire_release",
]

PAYLOAD = b"x" * 64


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


def lock_acquire_release(client: Client, timeout: float = 0.0) -> Callable[[], object]:
    """Acquire + release of a free lock (until_executed, ttl, tracking and fencing on), released
    by another object; ``timeout``: the acquiring object's (a wait that finds the lock free)."""
    holder = client.lock(f"bench:{uuid.uuid4().hex}", ttl=30, timeout=timeout)
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


class Flow:
    """One producer and one worker in one thread; each :meth:`job` call handles one job.
    Every ``batch`` jobs the producer enqueues ``batch`` more, and the worker completes the
    jobs it ran and claims the next ``batch`` in the same call."""

    def __init__(self, queue: Queue, batch: int) -> None:
        self.queue, self.batch = queue, batch
        self.held = Batch()
        self.todo: deque[Job] = deque()

    def job(self) -> None:
        if not self.todo:
            if self.batch == 1:
                self.queue.enqueue(PAYLOAD)
            else:
                self.queue.enqueue_many([PAYLOAD] * self.batch)
            self.held = self.queue.complete(self.held, claim=self.batch)
            self.todo.extend(self.held)
        self.todo.popleft()  # the handler: nothing to do


def _queue_flow(batch: int) -> Callable[[Client], Callable[[], object]]:
    def setup(client: Client) -> Callable[[], object]:
        return Flow(client.queue(f"bench:{uuid.uuid4().hex}"), batch).job

    return setup


CORE = (
    Workload("EVALSHA round trip", _evalsha, versus="redis-py: EVALSHA round trip"),
    Workload("redis-py: EVALSHA round trip", _redis_py_evalsha, counted=False),
)
"""The reference EVALSHA (3 keys, 5 args), by fastlock and by redis-py."""

LOCKS = (
    Workload(
        "lock acquire + release", lock_acquire_release, ops=3_000, versus="redis-py: Lock acquire + release"
    ),
    Workload("redis-py: Lock acquire + release", _redis_py_lock, ops=3_000, counted=False),
    *(Workload(f"lock lifecycle: {kind.value}", _lifecycle(kind), ops=1_000) for kind in LockType),
)
"""Uncontended acquire + release (until_executed, ttl, tracking and fencing on), and one job's
lifecycle of every lock type (enqueue on one object, execute on another)."""


class ContentionError(RuntimeError):
    """A contention round broke a lock's promise (two holders) or timed out: a broken lock or
    server, not a slow one."""


class Crowd:
    """THREADS threads on NAMES names (:func:`.contention.crowd`); each :meth:`lifecycle` call
    is one lifecycle: every THREADS x EACH calls, a crowd runs that many at once."""

    THREADS, NAMES, EACH = 8, 2, 25
    BATCH = THREADS * EACH

    def __init__(self, lock: Callable[[str], Any], check: Callable[[str, int], int], failure: Any) -> None:
        self.lock, self.check, self.failure = lock, check, failure
        self.names = [f"bench:crowd:{uuid.uuid4().hex}:{n}" for n in range(self.NAMES)]
        self.left = 0

    def lifecycle(self) -> None:
        if not self.left:
            result = crowd(
                self.lock, self.check, self.failure, threads=self.THREADS, names=self.names, each=self.EACH
            )
            if result.violations or result.failed:
                raise ContentionError(
                    f"{result.violations} times two holders, {result.failed} acquires timed out"
                )
            self.left = self.BATCH
        self.left -= 1


def _crowd(client: Client) -> Callable[[], object]:
    from ..exceptions import LockConflictError

    def check(key: str, delta: int) -> int:
        return int(client.execute("INCRBY", key, delta))

    return Crowd(lambda name: client.lock(name, ttl=10, timeout=5), check, (LockConflictError,)).lifecycle


def _redis_py_crowd(client: Client) -> Callable[[], object]:
    from redis.exceptions import LockError

    peer = _redis_py(client)
    return Crowd(
        lambda name: peer.lock(name, timeout=10, blocking_timeout=5), peer.incrby, (LockError,)
    ).lifecycle


CONTENTION = (
    Workload(
        f"lock under contention: {Crowd.THREADS} threads on {Crowd.NAMES} names",
        _crowd,
        ops=2_000,
        versus=f"redis-py: Lock under contention, {Crowd.THREADS} threads on {Crowd.NAMES} names",
        counted=False,
        batch=Crowd.BATCH,
    ),
    Workload(
        f"redis-py: Lock under contention, {Crowd.THREADS} threads on {Crowd.NAMES} names",
        _redis_py_crowd,
        ops=2_000,
        counted=False,
        batch=Crowd.BATCH,
    ),
)
"""Lifecycles (acquire with a wait, a two-holder check inside, release) of threads sharing one
client on a few names (``bench/contention.py`` measures more: processes, asyncio, waits)."""

QUEUES = tuple(
    Workload(f"job enqueue -> claim -> complete, {label}", _queue_flow(batch), ops=ops, batch=batch)
    for batch, label, ops in (
        (1, "unbatched", 3_000),
        (10, "batches of 10", 10_000),
        (100, "batches of 100", 20_000),
    )
)
"""Jobs through one producer and one worker: per job, the producer enqueues and the worker
completes the previous job and claims the next in the same call (batched: n at a time)."""

ALL = (*CORE, *LOCKS, *CONTENTION, *QUEUES)
