"""The worker loop: batches, failures, heartbeat, recovery, blocking waits without polling."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from harness.blocking import wait_until_blocked

import fastlock
from fastlock.queues.jobs import Job, QueueStats
from fastlock.queues.queue import Queue
from fastlock.queues.worker import Worker
from fastlock.testing.servers import TempServer, free_port
from fastlock.tools.costs import command_calls


@pytest.fixture
def start() -> Iterator[Callable[[Worker], threading.Thread]]:
    """Run workers in threads; stopped and joined after the test."""
    running: list[tuple[Worker, threading.Thread]] = []

    def run(worker: Worker) -> threading.Thread:
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        running.append((worker, thread))
        return thread

    yield run
    for worker, _ in running:
        worker.stop()
    for _, thread in running:
        thread.join(10)
        assert not thread.is_alive()


# An idle worker that misses its wake-up sleeps out its whole idle wait; woken as it should be,
# it is back within milliseconds. Half the idle wait tells the two apart on any loaded machine.
IDLE_WAIT = 60.0
WOKEN_WITHIN = IDLE_WAIT / 2


def settle(queue: Queue, expected: QueueStats, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while queue.stats() != expected:
        assert time.monotonic() < deadline, queue.stats()
        time.sleep(0.02)


def test_worker_handles_batches_and_stops_at_max_jobs(client: fastlock.Client) -> None:
    queue = client.queue("w")
    queue.enqueue_many(b"%d" % i for i in range(35))
    seen: list[bytes] = []
    assert Worker(queue, lambda job: seen.append(job.payload), batch=10).run(max_jobs=30) == 30
    assert seen == [b"%d" % i for i in range(30)]
    assert queue.stats() == QueueStats(ready=5, delayed=0, active=0, dead=0)


def test_failing_handler_retries_then_dead_letters(client: fastlock.Client) -> None:
    queue = client.queue("w", max_attempts=3, backoff=lambda attempt: 0.05 * attempt)
    queue.enqueue(b"bad")
    attempts: list[tuple[int, float]] = []

    def handler(job: Job) -> None:
        attempts.append((job.attempt, time.monotonic()))
        raise KeyError("missing")

    assert Worker(queue, handler, idle_wait=1.0).run(max_jobs=3) == 3
    assert [a for a, _ in attempts] == [1, 2, 3]
    assert attempts[1][1] - attempts[0][1] >= 0.05 and attempts[2][1] - attempts[1][1] >= 0.1
    [dead] = queue.dead()
    assert (dead.attempts, dead.error.split("\n")[0]) == (3, "KeyError: 'missing'")
    assert 'in handler\n    raise KeyError("missing")' in dead.error  # the traceback is kept


@pytest.mark.slow  # slow tier: a job outliving leases
def test_heartbeat_keeps_a_long_job_leased(client: fastlock.Client) -> None:
    queue = client.queue("w", lease=1.5)  # renewed every 0.5 s: a 1 s stall of the heartbeat is tolerated
    queue.enqueue(b"slow")
    recovered = []
    lost: list[bool] = []  # checked here: Worker._handle turns a handler's exception into a retry

    def handler(job: Job) -> None:
        deadline = time.monotonic() + 3.2  # > 2 leases; someone else keeps trying to recover
        while time.monotonic() < deadline:
            recovered.append(queue.recover())
            time.sleep(0.05)
        lost.append(job.lost)

    assert Worker(queue, handler).run(max_jobs=1) == 1
    assert lost == [False]
    assert all(r.requeued == r.dead == 0 for r in recovered)
    assert queue.stats() == QueueStats(0, 0, 0, 0)


def test_lost_lease_is_flagged_to_the_handler(client: fastlock.Client) -> None:
    queue = client.queue("w", lease=0.3)
    queue.enqueue(b"x")
    flags: list[bool] = []

    def handler(job: Job) -> None:
        queue.extend([job], lease=0.001)
        time.sleep(0.01)
        queue.recover()  # someone took the job back: the next heartbeat notices
        deadline = time.monotonic() + 30
        while not job.lost and time.monotonic() < deadline:
            time.sleep(0.01)
        flags.append(job.lost)

    Worker(queue, handler).run(max_jobs=1)
    assert flags == [True]
    assert queue.stats().ready == 1  # the stale complete was refused: the job is still queued


def test_idle_worker_blocks_instead_of_polling(
    client: fastlock.Client, start: Callable[[Worker], threading.Thread]
) -> None:
    queue = client.queue("w", lease=60)
    done = threading.Event()
    start(Worker(queue, lambda job: done.set(), idle_wait=IDLE_WAIT))
    wait_until_blocked(client, "bzpopmin")
    client.execute("CONFIG", "RESETSTAT")
    time.sleep(1.0)
    idle = command_calls(client)
    assert idle.get("evalsha", 0) == 0 and idle.get("bzpopmin", 0) == 0, idle
    queue.enqueue(b"wake up")
    assert done.wait(WOKEN_WITHIN)  # woken by the enqueue, not by the end of its idle wait


def test_idle_worker_wakes_when_a_delayed_job_is_due(
    client: fastlock.Client, start: Callable[[Worker], threading.Thread]
) -> None:
    queue = client.queue("w")
    ran = threading.Event()
    start(Worker(queue, lambda job: ran.set(), idle_wait=IDLE_WAIT))
    wait_until_blocked(client, "bzpopmin")
    started = time.monotonic()
    queue.enqueue(b"soon", delay=0.4)
    assert ran.wait(WOKEN_WITHIN)  # woken when the job is due, not by the end of its idle wait
    assert time.monotonic() - started >= 0.39


def test_workers_recover_abandoned_jobs(
    client: fastlock.Client, start: Callable[[Worker], threading.Thread]
) -> None:
    queue = client.queue("w", lease=0.2)
    queue.enqueue_many([b"a", b"b"])
    abandoned = queue.claim(2)  # a worker that died holding them
    start(Worker(queue, lambda job: None, idle_wait=0.2))
    settle(queue, QueueStats(0, 0, 0, 0))
    with pytest.raises(fastlock.LeaseLost):
        queue.complete(abandoned)


def test_several_workers_share_a_trickle(
    client: fastlock.Client, start: Callable[[Worker], threading.Thread]
) -> None:
    queue = client.queue("w")
    handled: list[str] = []
    lock = threading.Lock()

    def handler(job: Job) -> None:
        with lock:
            handled.append(job.id)

    for _ in range(3):
        start(Worker(queue, handler, batch=5, idle_wait=5.0))
    ids = []
    for i in range(40):
        ids.append(queue.enqueue(b"%d" % i))
        if i % 10 == 0:
            ids += queue.enqueue_many([b"burst"] * 20)
        time.sleep(0.005)
    settle(queue, QueueStats(0, 0, 0, 0))
    assert sorted(handled) == sorted(ids)


FAULTS = {
    "readonly": (("REPLICAOF", "127.0.0.1", "{port}"), ("REPLICAOF", "NO", "ONE")),
    "oom": (("CONFIG", "SET", "maxmemory", "1"), ("CONFIG", "SET", "maxmemory", "0")),
}
CODES = {"readonly": "READONLY", "oom": "OOM"}


@pytest.mark.slow  # slow tier: a fault held for a while
@pytest.mark.fault
@pytest.mark.parametrize("fault", FAULTS)
def test_worker_waits_out_a_readonly_or_full_server(
    private_server: TempServer, impl: str, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A server turned replica (READONLY) or out of memory (OOM) for a while: the worker
    waits it out as transient, with few warnings, then handles every job. (Under OOM the
    claim and complete scripts still run, their first write frees memory; renewing a
    batch's leases between slow jobs is refused.)"""
    client = fastlock.Client(private_server.url, impl=impl)
    queue = client.queue("w", lease=0.3)
    ids = queue.enqueue_many([b"x"] * 20)
    handled: list[str] = []
    errors: list[BaseException] = []

    def handler(job: Job) -> None:
        handled.append(job.id)
        time.sleep(0.04)  # a batch of 5 outlasts half a lease: the worker renews between jobs

    worker = Worker(queue, handler, batch=5, idle_wait=0.2)

    def run() -> None:
        try:
            worker.run()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    start, end = FAULTS[fault]
    private_server.raw_command(*(str(free_port()) if a == "{port}" else a for a in start))
    caplog.set_level(logging.WARNING, "fastlock.worker")
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        time.sleep(1.5)
        assert not errors, errors
        Worker(queue, print).stop()  # waking a worker is a write: refused, logged, not raised
        assert private_server.raw_command(*end) == b"+OK\r\n"
        settle(queue, QueueStats(0, 0, 0, 0), timeout=10)
    finally:
        worker.stop()
        thread.join(10)
    assert not errors and set(handled) == set(ids)
    trouble = [r.getMessage() for r in caplog.records if CODES[fault] in r.getMessage()]
    assert 1 <= len(trouble) <= 4, trouble  # the worker's and the heartbeat's, rate-limited


def test_holds_is_a_fenced_server_side_check(client: fastlock.Client) -> None:
    queue = client.queue("w", lease=5.0)
    queue.enqueue_many([b"a", b"b"])
    first, second = queue.claim(2)
    assert queue.holds(first) and not first.lost
    queue.extend([first], lease=0.001)
    time.sleep(0.01)
    assert queue.holds(first)  # past its deadline, nobody took it: still ours, and renewed
    assert queue.recover().requeued == 0
    queue.extend([first], lease=0.001)
    time.sleep(0.01)
    queue.recover()
    [again] = queue.claim()
    assert again.id == first.id and not queue.holds(first) and first.lost
    assert queue.holds(again)
    queue.complete(second)
    assert not queue.holds(second)


def test_worker_raises_script_errors_that_are_not_transient(client: fastlock.Client) -> None:
    queue = client.queue("w")
    client.execute("SET", queue.key["ready"], "not a list")  # WRONGTYPE inside the claim script
    with pytest.raises(fastlock.LuaCommandError) as info:
        Worker(queue, print, idle_wait=0.1).run(max_jobs=1)
    assert info.value.code == "WRONGTYPE"
