"""The observability hooks (fastlock.metrics): every event, from the sync and the asyncio
transports alike, on real servers and both cores; nothing reaches an uninstalled observer."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from harness.blocking import PATIENCE_RECHECK

import fastlock
from fastlock import metrics
from fastlock.aio import AsyncWorker
from fastlock.aio import Client as AsyncClient
from fastlock.queues.outcomes import DeadLetter
from fastlock.queues.worker import Worker
from fastlock.scripts.registry import flush_stats


class Recorder(metrics.Observer):
    """Every event as ``(method, args...)``, thread-safe."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self._lock = threading.Lock()

    def _add(self, *event: Any) -> None:
        with self._lock:
            self.events.append(event)

    def named(self, method: str) -> list[tuple[Any, ...]]:
        return [event[1:] for event in self.events if event[0] == method]

    def script_calls(self, name: str, durations: Sequence[float]) -> None:
        self._add("script_calls", name, len(durations), all(d >= 0 for d in durations))

    def script_failed(self, name: str, seconds: float, error: str) -> None:
        self._add("script_failed", name, error)

    def script_reloaded(self, name: str) -> None:
        self._add("script_reloaded", name)

    def lock_acquired(self, lock_type: str, waited: float) -> None:
        self._add("lock_acquired", lock_type, waited > 0)

    def lock_conflict(self, lock_type: str) -> None:
        self._add("lock_conflict", lock_type)

    def lock_timed_out(self, lock_type: str, waited: float) -> None:
        self._add("lock_timed_out", lock_type, waited >= 0.05)

    def jobs_enqueued(self, queue: str, count: int) -> None:
        self._add("jobs_enqueued", queue, count)

    def jobs_claimed(self, queue: str, count: int) -> None:
        self._add("jobs_claimed", queue, count)

    def jobs_completed(self, queue: str, count: int) -> None:
        self._add("jobs_completed", queue, count)

    def job_failed(self, queue: str, retried: bool) -> None:
        self._add("job_failed", queue, retried)

    def jobs_recovered(self, queue: str, requeued: int, dead: int) -> None:
        self._add("jobs_recovered", queue, requeued, dead)

    def job_ran(self, queue: str, seconds: float, error: str | None) -> None:
        self._add("job_ran", queue, error)

    def redirected(self, kind: str) -> None:
        self._add("redirected", kind)

    def busy_waited(self, name: str, seconds: float) -> None:
        self._add("busy_waited", name, seconds)

    def lock_handed_over(self, lock_type: str) -> None:
        self._add("lock_handed_over", lock_type)

    def reconnected(self) -> None:
        self._add("reconnected")


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    observer = Recorder()
    metrics.install(observer)
    try:
        yield observer
    finally:
        metrics.uninstall()


def _handler(job: fastlock.Job) -> None:
    if job.payload == b"dead":
        raise DeadLetter("no")
    if job.payload == b"bad":
        raise ValueError(job.payload)


async def _async_handler(job: fastlock.Job) -> None:
    _handler(job)


def _check_queue_events(recorder: Recorder) -> None:
    assert sum(n for q, n in recorder.named("jobs_enqueued") if q == "obs") == 4
    assert sum(n for q, n in recorder.named("jobs_claimed") if q == "obs") == 4
    assert sum(n for q, n in recorder.named("jobs_completed") if q == "obs") == 2
    assert sorted(recorder.named("job_failed")) == [("obs", False), ("obs", True)]
    ran = sorted(recorder.named("job_ran"), key=str)
    assert ran == [("obs", "DeadLetter"), ("obs", "ValueError"), ("obs", None), ("obs", None)]


def test_sync_events(recorder: Recorder, client: fastlock.Client) -> None:
    lock = client.lock("obs-lock", ttl=5.0)
    other = client.lock("obs-lock", ttl=5.0, job_id="other")
    assert lock.acquire() is not None
    assert other.acquire(blocking=False) is None
    assert other.acquire(timeout=0.05) is None
    assert lock.release() is not None
    assert recorder.named("lock_acquired") == [("until_executed", False)]
    assert recorder.named("lock_conflict") == [("until_executed",)]
    assert recorder.named("lock_timed_out") == [("until_executed", True)]

    queue = client.queue("obs", max_attempts=2, backoff=0.0)
    queue.enqueue(b"ok")
    queue.enqueue_many([b"ok", b"dead", b"bad"])
    assert Worker(queue, _handler, burst=True, idle_wait=0.0).run(max_jobs=4) == 4
    _check_queue_events(recorder)
    recoveries = len(recorder.named("jobs_recovered"))  # the worker's, at its start
    assert queue.recover() == (0, 0, False)
    assert recorder.named("jobs_recovered")[recoveries:] == [("obs", 0, 0)]

    client.execute("SCRIPT", "FLUSH")  # (other tests on the shared server may flush too)
    client.lock("obs-2", ttl=5.0).acquire()
    assert ("lock_acquire",) in recorder.named("script_reloaded")
    with pytest.raises(fastlock.LuaError):
        client.call(client.register_script("return redis.call('INCR', KEYS[1], 1, 2)").name, ["k"])
    assert [error for _, error in recorder.named("script_failed")] == ["LuaCommandError"]
    flush_stats()
    batches: dict[str, int] = {}
    for name, n, ok in recorder.named("script_calls"):
        assert ok
        batches[name] = batches.get(name, 0) + n
    assert batches.get("lock_acquire", 0) >= 4 and batches.get("queue_claim", 0) >= 1


def test_asyncio_events(recorder: Recorder, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with AsyncClient(redis_url, impl=impl) as client:
            lock = client.lock("obs-lock", ttl=5.0, job_id="a")
            other = client.lock("obs-lock", ttl=5.0, job_id="b")
            assert await lock.acquire() is not None
            assert await other.acquire(blocking=False) is None
            assert await other.acquire(timeout=0.05) is None
            await lock.release()
            queue = client.queue("obs", max_attempts=2, backoff=0.0)
            await queue.enqueue(b"ok")
            await queue.enqueue_many([b"ok", b"dead", b"bad"])
            assert await AsyncWorker(queue, _async_handler, burst=True, idle_wait=0.0).run(max_jobs=4) == 4

    asyncio.run(main())
    assert recorder.named("lock_acquired") == [("until_executed", False)]
    assert recorder.named("lock_conflict") == [("until_executed",)]
    assert recorder.named("lock_timed_out") == [("until_executed", True)]
    _check_queue_events(recorder)


def test_nothing_reaches_an_uninstalled_observer(client: fastlock.Client) -> None:
    observer = Recorder()
    metrics.install(observer)
    assert metrics.installed() is observer
    metrics.uninstall()
    client.lock("quiet", ttl=5.0).acquire()
    client.queue("quiet").enqueue(b"x")
    flush_stats()
    assert observer.events == [] and metrics.installed() is None
    with pytest.raises(fastlock.ArgumentTypeError):
        metrics.install(object())  # type: ignore[arg-type]


def test_redirects_and_busy_waits_are_events(recorder: Recorder) -> None:
    """The sans-IO plans emit too, fed by hand: a MOVED and an ASK followed by the cluster's
    redirect plan, a BUSY reply slept on by the script-call recovery."""
    from fastlock.cluster.routing import redirected
    from fastlock.cluster.topology import parse_slots
    from fastlock.exceptions import AskError, BusyError, MovedError
    from fastlock.operations import Sleep
    from fastlock.scripts.calling import ScriptSettings, recover
    from fastlock.scripts.registry import ScriptRegistry

    slots = parse_slots([[0, 16383, [b"127.0.0.1", 7000, b"a"]]], ("127.0.0.1", 7000))
    for error in (MovedError("100 127.0.0.1:7001"), AskError("100 127.0.0.1:7001")):
        next(redirected(slots, 100, error))
    waits: list[tuple[str, float]] = []
    recorder.busy_waited = lambda name, seconds: waits.append((name, seconds))  # type: ignore[method-assign]
    script = ScriptRegistry().get("lock_acquire")
    plan = recover(
        script, ["k"], [], BusyError("BUSY Redis is busy"), 0.0, ScriptSettings(), clock=lambda: 0.0
    )
    step = next(plan)
    assert isinstance(step, Sleep) and waits == [("lock_acquire", step.seconds)]
    assert [kind for (kind,) in recorder.named("redirected")] == ["MOVED", "ASK"]


def test_a_hand_over_and_a_reconnect_are_events(recorder: Recorder, redis_url: str, impl: str) -> None:
    """A waiter handed the lock by a release reports it (then its acquire); a pool that opens a
    connection in place of a lost one reports a reconnect: sync and asyncio."""
    with (
        fastlock.Client(redis_url, max_connections=1) as probe,
        fastlock.Client(redis_url, impl=impl) as client,
    ):
        holder = client.lock("obs-handed", ttl=5.0)
        assert holder.acquire("holder") is not None
        got: list[Any] = []
        waiter = threading.Thread(target=lambda: got.append(holder.acquire("w", timeout=5)))
        waiter.start()
        while probe.execute("ZCARD", holder._main_scope.wake + "q") < 1:
            time.sleep(0.005)
        time.sleep(holder.manager.patience + PATIENCE_RECHECK)  # a release hands the lock over then
        assert holder.release("holder") is not None
        waiter.join(5)
        assert got and got[0] is not None
        assert recorder.named("lock_handed_over") == [("until_executed",)]
        assert recorder.named("lock_acquired")[-1] == ("until_executed", True)
    with (
        fastlock.Client(redis_url, max_connections=1) as probe,
        fastlock.Client(redis_url, impl=impl, max_connections=1) as client,  # one connection: it is replaced
    ):
        _kill(probe, client.execute("CLIENT", "ID"))
        with contextlib.suppress(fastlock.ConnectionError):
            client.execute("PING")
        assert client.execute("PING") == b"PONG"
        assert recorder.named("reconnected") == [()]

        async def main() -> None:
            async with AsyncClient(redis_url, impl=impl) as aio:
                _kill(probe, await aio.execute("CLIENT", "ID"))
                with contextlib.suppress(fastlock.ConnectionError):
                    await aio.execute("PING")
                assert await aio.execute("PING") == b"PONG"

        asyncio.run(main())
        assert recorder.named("reconnected") == [(), ()]


def _kill(probe: fastlock.Client, connection_id: int) -> None:
    assert probe.execute("CLIENT", "KILL", "ID", str(connection_id)) == 1
