"""What ``python -m fastlock bench --asyncio`` measures (and the asyncio paths of the
instruction gate): rounds of :data:`TASKS` tasks on one event loop, each task doing
``each`` operations in turn, on fastlock.aio and on redis.asyncio doing the same job.

- the reference EVALSHA (``await client.call``; redis.asyncio: its ``Script``);
- a lock acquire + release (until_executed, ttl, tracking, fencing: one lock per task, taken
  by one object and released by another, as ``lock acquire + release`` of the sync table;
  redis.asyncio: its ``Lock``);
- an unbatched job (one queue per task: enqueue, then complete the previous job and claim
  the next in one call; redis.asyncio: the same Lua scripts sent through its
  ``register_script``, driven by the same :class:`~fastlock.aio.AsyncQueue`).

A workload's ``setup(url, tasks, impl)`` runs on the loop and returns one operation per task and a
closer. :func:`run_round` runs a round; :func:`time_workloads` times them interleaved.
"""

from __future__ import annotations

import asyncio
import gc
import resource
import statistics
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..queues.jobs import Batch, Job
from .bench import EVALSHA_ARGS, EVALSHA_KEYS, EVALSHA_SCRIPT, Figures

__all__ = [
    "ALL",
    "ONE_CONNECTION",
    "PIPELINED_FLOOR",
    "TASKS",
    "AioWorkload",
    "new_loop",
    "path_setup",
    "run_round",
    "time_workloads",
]

TASKS = 100
PAYLOAD = b"x" * 64
WIRE_ARGS = tuple(int(a) if isinstance(a, bool) else a for a in EVALSHA_ARGS)  # redis-py refuses bool

AsyncOp = Callable[[], Awaitable[object]]
Made = tuple[list[AsyncOp], Callable[[], Awaitable[object]]]
Setup = Callable[[str, int, str | None], Awaitable[Made]]


@dataclass(frozen=True)
class AioWorkload:
    """``setup(url, tasks, impl)``: one operation per task and the closer (``impl``: the
    fastlock client's core, ``None`` the default); ``versus`` the workload it is compared
    with; ``ops`` the operations of a timed round (all tasks together)."""

    name: str
    setup: Setup
    ops: int = 20_000
    versus: str | None = None
    tasks: int = TASKS


def new_loop(kind: str = "asyncio") -> asyncio.AbstractEventLoop:
    """A new event loop: the default one, or ``"uvloop"``'s."""
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


async def run_round(ops: Sequence[AsyncOp], each: int) -> None:
    """Every task's operation ``each`` times, the tasks side by side."""

    async def task(op: AsyncOp) -> None:
        for _ in range(each):
            await op()

    await asyncio.gather(*(task(op) for op in ops))


async def _evalsha(url: str, tasks: int, impl: str | None = None) -> Made:
    from ..aio.client import Client

    client = (
        Client(url, impl=impl)
        if tasks <= TASKS
        else Client(url, impl=impl, max_connections=1, max_in_flight=tasks)
    )
    name = client.register_script(EVALSHA_SCRIPT).name
    call = client.call

    def op() -> Awaitable[object]:
        return call(name, EVALSHA_KEYS, EVALSHA_ARGS)

    await op()
    return [op] * tasks, client.close


async def _redis_evalsha(url: str, tasks: int, impl: str | None = None) -> Made:
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(url, max_connections=tasks + 10)
    script = client.register_script(EVALSHA_SCRIPT)

    def op() -> Awaitable[object]:
        return script(keys=EVALSHA_KEYS, args=WIRE_ARGS)

    await op()
    return [op] * tasks, client.aclose


async def _locks(url: str, tasks: int, impl: str | None = None) -> Made:
    from ..aio.client import Client

    client = Client(url, impl=impl)
    ops: list[AsyncOp] = []
    for _ in range(tasks):
        holder = client.lock(f"bench:{uuid.uuid4().hex}", ttl=30)
        releaser = client.lock(holder.name, ttl=30)  # another object releases, as in the sync table
        job = holder.job_id
        assert job is not None

        async def op(holder: Any = holder, releaser: Any = releaser, job: str = job) -> None:
            await holder.acquire(job)
            await releaser.release(job)

        ops.append(op)
    await ops[0]()
    return ops, client.close


async def _redis_locks(url: str, tasks: int, impl: str | None = None) -> Made:
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(url, max_connections=tasks + 10)
    ops: list[AsyncOp] = []
    for _ in range(tasks):
        lock = client.lock(f"bench:redis-py:{uuid.uuid4().hex}", timeout=30)

        async def op(lock: Any = lock) -> None:
            await lock.acquire()
            await lock.release()

        ops.append(op)
    await ops[0]()
    return ops, client.aclose


class Flow:
    """One producer and one worker of one queue (the asyncio ``Flow`` of the sync table):
    each :meth:`job` handles one job: the producer enqueues one, the worker completes the
    one it ran and claims the next in the same call."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.held = Batch()
        self.todo: deque[Job] = deque()

    async def job(self) -> None:
        if not self.todo:
            await self.queue.enqueue(PAYLOAD)
            self.held = await self.queue.complete(self.held, claim=1)
            self.todo.extend(self.held)
        self.todo.popleft()  # the handler: nothing to do


async def _jobs(url: str, tasks: int, impl: str | None = None) -> Made:
    from ..aio.client import Client

    client = Client(url, impl=impl)
    flows = [Flow(client.queue(f"bench:{uuid.uuid4().hex}")) for _ in range(tasks)]
    await flows[0].job()
    return [flow.job for flow in flows], client.close


class ScriptsOver:
    """An asyncio runner of fastlock's scripts over redis.asyncio: each script registered
    with its ``register_script``, called with the same keys and arguments (bool and None
    sent as fastlock sends them: 1, 0)."""

    def __init__(self, redis_client: Any) -> None:
        from ..scripts.registry import ScriptRegistry

        self._client = redis_client
        self._registry = ScriptRegistry()
        self._scripts: dict[str, Any] = {}

    async def call(
        self,
        name: str,
        keys: Sequence[Any] = (),
        args: Sequence[Any] = (),
        *,
        busy_timeout: float | None = None,
    ) -> Any:
        script = self._scripts.get(name)
        if script is None:
            found = self._registry.get(name)
            assert not found.meta, "a script with #meta values"
            script = self._scripts[name] = self._client.register_script(found.body)
        wire = [int(a) if isinstance(a, bool) else 0 if a is None else a for a in args]
        return await script(keys=keys, args=wire)


async def _redis_jobs(url: str, tasks: int, impl: str | None = None) -> Made:
    import redis.asyncio

    from ..aio.queue import AsyncQueue

    client = redis.asyncio.Redis.from_url(url, max_connections=tasks + 10)
    runner = ScriptsOver(client)
    flows = [Flow(AsyncQueue(runner, f"bench:redis-py:{uuid.uuid4().hex}")) for _ in range(tasks)]  # type: ignore[arg-type]
    await flows[0].job()
    return [flow.job for flow in flows], client.aclose


ONE_CONNECTION = 1_000
"""The tasks of the one-connection workload (compared with ``redis-benchmark -c 1 -P 64``)."""
PIPELINED_FLOOR = "redis-benchmark -c 1 -P 64"

ALL = (
    AioWorkload(
        f"EVALSHA round trip, {ONE_CONNECTION} tasks on 1 connection",
        _evalsha,
        100_000,
        PIPELINED_FLOOR,
        tasks=ONE_CONNECTION,
    ),
    AioWorkload(
        f"EVALSHA round trip, {TASKS} tasks", _evalsha, 20_000, f"redis.asyncio: EVALSHA, {TASKS} tasks"
    ),
    AioWorkload(f"redis.asyncio: EVALSHA, {TASKS} tasks", _redis_evalsha, 2_000),
    AioWorkload(
        f"lock acquire + release, {TASKS} tasks",
        _locks,
        5_000,
        f"redis.asyncio: Lock acquire + release, {TASKS} tasks",
    ),
    AioWorkload(f"redis.asyncio: Lock acquire + release, {TASKS} tasks", _redis_locks, 1_000),
    AioWorkload(
        f"job enqueue -> claim -> complete, unbatched, {TASKS} tasks",
        _jobs,
        5_000,
        f"redis.asyncio: the same job scripts, {TASKS} tasks",
    ),
    AioWorkload(f"redis.asyncio: the same job scripts, {TASKS} tasks", _redis_jobs, 1_000),
)


def time_workloads(
    url: str,
    workloads: Sequence[AioWorkload],
    *,
    loop: str = "asyncio",
    rounds: int = 5,
    scale: float = 1.0,
    floor: Callable[[], float] | None = None,
) -> tuple[list[Figures], list[str]]:
    """Time each workload (``rounds`` rounds, GC off, the workloads' rounds interleaved, in
    turn forwards and backwards) on a fresh loop of kind ``loop``; ``floor`` (a round of
    :data:`PIPELINED_FLOOR`: its seconds per request) is timed in the same rounds. The
    figures (medians; the floor's last, if any) and the workloads skipped (with why)."""
    figures: list[Figures] = []
    skipped: list[str] = []
    loop_ = new_loop(loop)
    try:
        prepared: dict[str, tuple[AioWorkload, list[AsyncOp], Any]] = {}
        for workload in workloads:
            try:
                ops, close = loop_.run_until_complete(workload.setup(url, workload.tasks, None))
            except ImportError as exc:
                skipped.append(f"{workload.name}: {exc}")
                continue
            prepared[workload.name] = (workload, ops, close)
        walls: dict[str, list[float]] = {name: [] for name in prepared}
        cpus: dict[str, list[float]] = {name: [] for name in prepared}
        order = list(prepared) + ([PIPELINED_FLOOR] if floor is not None else [])
        floor_walls: list[float] = []
        gc.disable()
        try:
            for i in range(rounds):
                for name in order if i % 2 == 0 else order[::-1]:
                    if name == PIPELINED_FLOOR:
                        floor_walls.append(floor())  # type: ignore[misc]  # (in order only with one)
                        continue
                    workload, ops, _ = prepared[name]
                    each = max(1, int(workload.ops * scale) // len(ops))
                    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
                    loop_.run_until_complete(run_round(ops, each))
                    wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
                    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                    walls[name].append(wall / (each * len(ops)))
                    cpus[name].append(cpu / (each * len(ops)))
        finally:
            gc.enable()
        for name in prepared:
            wall = statistics.median(walls[name])
            figures.append(
                Figures(
                    f"aio ({loop}): {name}",
                    ops_per_s=1 / wall,
                    cpu_us_per_op=statistics.median(cpus[name]) * 1e6,
                    user_us_per_op=float("nan"),
                )
            )
        if floor_walls:
            median = statistics.median(floor_walls)
            figures.append(Figures(PIPELINED_FLOOR, 1 / median, float("nan"), float("nan")))
        for _, _, close in prepared.values():
            loop_.run_until_complete(close())
    finally:
        loop_.close()
    return figures, skipped


def path_setup(
    name: str, each: int, loop: str = "asyncio", impl: str | None = None
) -> Callable[[str], Callable[[], object]]:
    """The setup of an instruction path (:mod:`.instructions`) of workload ``name``: given the
    server's unix socket, one operation is a round of the workload's tasks doing ``each``
    operations each (its count divided by tasks x ``each``), on a loop of kind ``loop``."""

    def setup(path: str) -> Callable[[], object]:
        (chosen,) = (w for w in ALL if w.name == name)
        loop_ = new_loop(loop)
        ops, _ = loop_.run_until_complete(chosen.setup(f"unix://{path}", chosen.tasks, impl))
        return lambda: loop_.run_until_complete(run_round(ops, each))

    return setup
