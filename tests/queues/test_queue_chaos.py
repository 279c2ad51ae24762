"""Chaos on real servers: worker processes SIGKILLed mid-job and stalled (SIGSTOP) past their
lease, a server restart and SCRIPT FLUSH mid-run. Afterwards every job is completed exactly
once in Redis's view or dead-lettered, none is lost, and fencing tokens never went backwards."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import random
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from harness.cores import AVAILABLE
from harness.size import sized

import fastlock
from fastlock.queues.jobs import Job, Member, QueueStats
from fastlock.queues.queue import Queue
from fastlock.queues.worker import TRANSIENT, Worker
from fastlock.testing.servers import ExternalServer, TempServer

pytestmark = [pytest.mark.fault, pytest.mark.slow]  # slow tier: worker processes

LEASE = 0.4
RETRY_IN = 0.25
MAX_ATTEMPTS = 4
LOG, STALE = "chaos:log", "chaos:stale"


def chaos_queue(client: fastlock.Client, name: str = "chaos", **options: Any) -> Queue:
    options = {"lease": LEASE, "max_attempts": MAX_ATTEMPTS, "backoff": lambda attempt: RETRY_IN, **options}
    return client.queue(name, keep_completed=100_000, **options)


def worker_process(url: str, impl: str, seed: int) -> None:
    """A worker process: logs every claim ``id|token|attempt|pid|time``; payload ``poison``
    raises, ``kill`` SIGKILLs its own process mid-job; counts refused (stale) completes."""
    random.seed(seed)
    client = fastlock.Client(url, impl=impl)
    queue = chaos_queue(client)
    complete = queue.complete

    def counted_complete(jobs: Any, **kwargs: Any) -> Any:
        try:
            return complete(jobs, **kwargs)
        except fastlock.LeaseLost:
            client.execute("INCR", STALE)
            raise

    queue.complete = counted_complete  # type: ignore[method-assign]

    def handler(job: Job) -> None:
        client.execute("RPUSH", LOG, f"{job.id}|{job.token}|{job.attempt}|{os.getpid()}|{time.time():.6f}")
        if job.payload == b"poison":
            raise RuntimeError("poison")
        if job.payload == b"kill":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(random.uniform(0.005, 0.04))

    Worker(queue, handler, batch=random.choice((1, 3, 8)), idle_wait=0.5).run()


def done_members(client: fastlock.Client, queue: Queue) -> dict[str, list[tuple[int, int]]]:
    """Completions in Redis's view: job id -> [(token, attempt)] from the completion history."""
    done: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for member in map(Member.decode, client.execute("ZRANGE", queue.key["done"], 0, -1)):
        done[member.id].append((member.token, member.attempt))
    return done


def finished(queue: Queue, total: int) -> bool:
    """Nothing ready, delayed or leased, and every job completed or dead."""
    stats = queue.stats()
    done = queue.client.execute("ZCARD", queue.key["done"])
    return stats.ready == stats.delayed == stats.active == 0 and done + stats.dead == total


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` (the test's own view; a restarting server just means "not yet")."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except TRANSIENT:
            pass
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_killed_and_stalled_worker_processes(server: TempServer | ExternalServer, redis_url: str) -> None:
    client = fastlock.Client(redis_url)
    queue = chaos_queue(client)
    ok = set(queue.enqueue_many([b"ok"] * 400))
    started = time.time()
    delayed = {queue.enqueue(b"ok", delay=1.0) for _ in range(5)}
    poison = {queue.enqueue(b"poison") for _ in range(3)}
    crash = {queue.enqueue(b"kill", priority=0) for _ in range(2)}  # claimed last, in a batch of their own
    ok |= delayed

    context = multiprocessing.get_context("fork")
    procs: list[Any] = []
    seeds = iter(range(1000))

    def spawn() -> Any:
        seed = next(seeds)
        impl = AVAILABLE[seed % len(AVAILABLE)]  # both cores when both are installed
        proc = context.Process(target=worker_process, args=(redis_url, impl, seed))
        proc.start()
        return proc

    kills = [0.3 + 0.35 * i for i in range(sized(8, 4))]
    stalls = {0.5: None, 1.1: None}  # start time -> stalled process
    try:
        procs = [spawn() for _ in range(5)]
        deadline = time.monotonic() + 45
        while not finished(queue, len(ok | poison | crash)):
            assert time.monotonic() < deadline, queue.stats()
            elapsed = time.time() - started
            stalled = [proc for proc in stalls.values() if proc is not None]
            live = [proc for proc in procs if proc.exitcode is None and proc not in stalled]
            if kills and elapsed >= kills[0] and live:
                kills.pop(0)
                os.kill(random.choice(live).pid, signal.SIGKILL)
            for at, proc in list(stalls.items()):
                if proc is None and elapsed >= at and live:
                    stalls[at] = random.choice(live)
                    os.kill(stalls[at].pid, signal.SIGSTOP)
                elif proc is not None and proc.exitcode is None and elapsed >= at + 3 * LEASE:
                    os.kill(proc.pid, signal.SIGCONT)
            procs = [proc if proc.exitcode is None else spawn() for proc in procs]
            time.sleep(0.02)
        time.sleep(LEASE)  # let resumed stale workers try to complete
    finally:
        for proc in procs:
            proc.kill()
            proc.join()

    # Every job ends completed exactly once, or dead: none lost, none twice.
    done = done_members(client, queue)
    dead = {job.id: job for job in queue.dead(100)}
    assert all(len(runs) == 1 for runs in done.values()) and not set(done) & set(dead)
    assert set(done) | set(dead) == ok | poison | crash
    assert {dead[i].error.split("\n")[0] for i in poison} == {"RuntimeError: poison"}
    # A job claimed in one batch with a process-killing job is abandoned with it each time
    # (abandoned runs count as attempts): it may end dead too, never lost.
    assert {dead[i].error for i in set(dead) - poison} == {"lease expired"}
    assert all(job.attempts == MAX_ATTEMPTS for job in dead.values())
    assert len(dead) - len(poison | crash) <= 7

    claims: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
    by_process: dict[int, list[int]] = defaultdict(list)
    for line in client.execute("LRANGE", LOG, 0, -1):
        job_id, token, attempt, pid, at = line.decode().rsplit("|", 4)
        claims[job_id].append((int(token), int(attempt), float(at)))
        by_process[int(pid)].append(int(token))
    tokens = [token for runs in claims.values() for token, _, _ in runs]
    assert len(tokens) == len(set(tokens))  # each token handed out once
    for pid_tokens in by_process.values():
        assert pid_tokens == sorted(pid_tokens)  # a worker's tokens only grow
    for job_id, runs in claims.items():
        runs.sort()
        assert [a for _, a, _ in runs] == sorted({a for _, a, _ in runs})  # attempts grow with tokens
        if job_id in done:
            assert done[job_id][0][0] == runs[-1][0]  # completed by its latest holder, never a stale one
    assert int(client.execute("GET", STALE) or 0) >= 1  # stalled workers came back and were refused
    assert set(done) | poison <= set(claims) and crash & set(claims)  # collateral may never start
    assert all(runs[-1][1] >= len(runs) for runs in claims.values())  # abandoned runs count as attempts
    assert max(runs[-1][1] for i, runs in claims.items() if i in ok) > 1  # some jobs were rerun
    for job_id in poison:  # retried after RETRY_IN, by the server clock
        times = [at for _, _, at in claims[job_id]]
        assert all(b - a >= RETRY_IN - 0.01 for a, b in itertools.pairwise(times))
    assert all(claims[i][0][2] >= started + 1.0 - 0.01 for i in delayed)


def run_workers_through(
    queue: Queue, disturb: Callable[[], Iterable[str] | None], count: int = 300, workers: int = 3
) -> None:
    """Enqueue ``count`` jobs, run worker threads, call ``disturb()`` (which may enqueue more
    and return their ids) once a third is done; every job must complete exactly once."""
    client = queue.client
    ids = set(queue.enqueue_many([b"x"] * count))
    running = [Worker(queue, lambda job: time.sleep(0.002), batch=5, idle_wait=0.5) for _ in range(workers)]
    threads = [threading.Thread(target=worker.run, daemon=True) for worker in running]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: client.execute("ZCARD", queue.key["done"]) >= count // 3, 20, "progress")
        ids.update(disturb() or ())
        wait_for(lambda: queue.stats() == QueueStats(0, 0, 0, 0), 30, "all jobs done")
    finally:
        for worker in running:
            worker.stop()
        for thread in threads:
            thread.join(10)
    done = done_members(client, queue)
    assert set(done) == ids and all(len(runs) == 1 for runs in done.values())


def test_server_restart_mid_run(server_factory: Callable[..., TempServer], impl: str) -> None:
    server = server_factory(extra_args=("--appendonly", "yes"))
    client = fastlock.Client(server.url, impl=impl, connect_timeout=1)
    queue = chaos_queue(client, "restart", lease=2.0, max_attempts=50)
    run_workers_through(queue, server.restart)
    assert client.execute("SCRIPT", "EXISTS", client.scripts.get("queue_complete").sha) == [1]  # reloaded


def test_script_flush_mid_run(client: fastlock.Client) -> None:
    queue = chaos_queue(client, "flush", max_attempts=50)
    flushes = 0
    stop = threading.Event()

    def flush_repeatedly() -> None:
        nonlocal flushes
        while not stop.wait(0.005):
            client.execute("SCRIPT", "FLUSH")
            flushes += 1

    flusher = threading.Thread(target=flush_repeatedly, daemon=True)

    def disturb() -> list[str]:
        flusher.start()
        time.sleep(0.02)
        return queue.enqueue_many([b"y"] * 10)  # producers reload too

    try:
        run_workers_through(queue, disturb, count=290)
    finally:
        stop.set()
        flusher.join()
    assert flushes >= 5


STALL_JOBS, STALL_BATCH, STALL_AT = 40, 10, 5
RUNS, EFFECTS = "stall:runs", "stall:effects"


def stall_queue(client: fastlock.Client) -> Queue:
    return client.queue("stall", lease=0.5, keep_completed=1000)


def effect_handler(
    client: fastlock.Client, queue: Queue, on_resume: Callable[[], None] | None = None
) -> Callable[[Job], None]:
    """Counts runs per job; commits the job's effect only while ``queue.holds(job)``. With
    ``on_resume``, the STALL_AT-th run stops its own process mid-job (SIGSTOP), mid-batch,
    and calls ``on_resume`` once continued."""

    def handler(job: Job) -> None:
        client.execute("HINCRBY", RUNS, job.id, 1)
        if on_resume is not None and client.execute("INCR", "stall:seq") == STALL_AT:
            os.kill(os.getpid(), signal.SIGSTOP)
            on_resume()
        if queue.holds(job):
            client.execute("HINCRBY", EFFECTS, job.id, 1)

    return handler


def stalling_worker(url: str, impl: str) -> None:
    """Stalls in its STALL_AT-th job; once continued, finishes its batch and exits."""
    client = fastlock.Client(url, impl=impl)
    queue = stall_queue(client)
    worker = Worker(queue, print, batch=STALL_BATCH, idle_wait=0.2)
    worker.handler = effect_handler(client, queue, on_resume=worker.stop)
    worker.run()


def counts(client: fastlock.Client, key: str) -> dict[str, int]:
    flat = client.execute("HGETALL", key)
    return {k.decode(): int(v) for k, v in zip(flat[::2], flat[1::2], strict=True)}


def wait_until_stopped(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        waited, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
        if waited:
            assert os.WIFSTOPPED(status), status
            return
        assert time.monotonic() < deadline, "the worker never reached its stall"
        time.sleep(0.01)


def test_stalled_worker_reruns_at_most_the_job_in_flight(redis_url: str, impl: str) -> None:
    """A worker SIGSTOPped mid-batch past its lease: another recovers and finishes its jobs.
    After SIGCONT, at most the one job in flight ran twice (finished ones were completed as
    they finished, the rest of its batch is skipped as lost), and ``queue.holds`` kept every
    effect to exactly one commit."""
    client = fastlock.Client(redis_url, impl=impl)
    queue = stall_queue(client)
    ids = queue.enqueue_many([b"x"] * STALL_JOBS)
    stalled = multiprocessing.get_context("fork").Process(target=stalling_worker, args=(redis_url, impl))
    stalled.start()
    helper = Worker(queue, effect_handler(client, queue), batch=STALL_BATCH, idle_wait=0.2)
    thread = threading.Thread(target=helper.run, daemon=True)
    try:
        wait_until_stopped(stalled.pid, 30)
        thread.start()
        wait_for(lambda: queue.stats() == QueueStats(0, 0, 0, 0), 30, "the other worker to finish every job")
        helper.stop()
        thread.join(10)
        os.kill(stalled.pid, signal.SIGCONT)
        stalled.join(30)
        assert stalled.exitcode == 0
    finally:
        helper.stop()
        if thread.is_alive():
            thread.join(10)
        stalled.kill()
        stalled.join()
    runs, effects = (counts(client, key) for key in (RUNS, EFFECTS))
    assert set(runs) == set(ids)
    reruns = sum(n - 1 for n in runs.values())
    assert reruns <= 1, runs  # jobs in flight at the stall: 1
    assert effects == dict.fromkeys(ids, 1)
