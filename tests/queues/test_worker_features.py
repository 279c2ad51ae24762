"""The Worker's production features on real servers (both cores, Redis and Valkey): the
hand-back call, job_timeout, graceful SIGTERM/SIGINT, concurrency as threads, burst mode,
hooks, Retry and DeadLetter, tracebacks in dead letters, and the outage log."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from typing import Any

import pytest

import fastlock
from fastlock.queues.jobs import Job, QueueStats
from fastlock.queues.outcomes import DeadLetter, Retry
from fastlock.queues.worker import Worker
from fastlock.testing.servers import TempServer


def test_release_hands_jobs_back_unstarted_at_the_head(client: fastlock.Client) -> None:
    queue = client.queue("r", lease=0.2)
    first, second = queue.enqueue(b"1"), queue.enqueue(b"2")
    urgent = queue.enqueue(b"p", priority=0)
    third = queue.enqueue(b"3")
    a, b = queue.claim(2)
    assert (a.id, b.id) == (first, second)
    assert queue.release([a, b]) == []
    again = queue.claim(2)
    assert [(j.id, j.attempt) for j in again] == [(first, 1), (second, 1)]  # first in line, attempt unspent
    queue.extend([again[0]], lease=0.001)
    time.sleep(0.01)
    queue.recover()  # again[0] is no longer ours
    assert queue.release(again) == [again[0]] and again[0].lost and not again[1].lost
    rest = queue.claim(4)
    assert rest[0].id == second and {j.id for j in rest} == {first, second, third, urgent}
    assert [j.attempt for j in rest if j.id in (first, second)] == [1, 2]  # recovered: spent
    prio = next(j for j in rest if j.id == urgent)
    assert queue.release([prio]) == [] and [j.id for j in queue.claim(1)] == [urgent]  # priority kept
    assert queue.release([]) == []
    with pytest.raises(TypeError):
        queue.release(prio)  # type: ignore[arg-type]
    with pytest.raises(fastlock.ProtocolError):
        fastlock.queues.jobs.released(b"OK", [prio])


def test_job_timeout_fails_the_job_and_the_worker_moves_on(client: fastlock.Client) -> None:
    queue = client.queue("t", max_attempts=2, backoff=0.01)
    hung = queue.enqueue(b"hang")
    ok = queue.enqueue(b"ok")
    release = threading.Event()
    seen: list[tuple[str, int]] = []
    flags: list[Job] = []

    def handler(job: Job) -> None:
        seen.append((job.id, job.attempt))
        if job.payload == b"hang":
            flags.append(job)
            release.wait(30)  # hangs: Python cannot kill this thread, the worker abandons it

    started = time.monotonic()
    try:
        assert Worker(queue, handler, job_timeout=0.3, idle_wait=0.5).run(max_jobs=3) == 3
        elapsed = time.monotonic() - started
    finally:
        release.set()
    assert sorted(seen) == sorted([(hung, 1), (ok, 1), (hung, 2)])
    assert elapsed < 10  # two 0.3 s timeouts, not two 30 s hangs
    assert all(job.lost for job in flags)  # an abandoned handler can tell its job is gone
    [dead] = queue.dead()
    assert dead.id == hung and dead.error.startswith("JobTimeout: job ") and dead.attempts == 2
    assert queue.stats() == QueueStats(0, 0, 0, 1)


def test_concurrency_runs_loops_in_threads_sharing_the_budget(client: fastlock.Client) -> None:
    queue = client.queue("c", lease=5.0)
    ids = set(queue.enqueue_many([b"x"] * 60))
    lock = threading.Lock()
    running = most = 0
    handled: list[str] = []

    def handler(job: Job) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with lock:
            running -= 1
            handled.append(job.id)

    assert Worker(queue, handler, concurrency=4, batch=3).run(max_jobs=50) == 50
    assert most == 4 and len(handled) == len(set(handled)) == 50
    assert queue.stats() == QueueStats(10, 0, 0, 0)
    assert Worker(queue, handler, concurrency=3, burst=True).run() == 10
    assert set(handled) == ids and queue.stats() == QueueStats(0, 0, 0, 0)


def test_a_failing_loop_stops_the_others_and_is_raised(client: fastlock.Client) -> None:
    queue = client.queue("e")
    client.execute("SET", queue.key["ready"], "not a list")  # WRONGTYPE inside the claim script
    with pytest.raises(fastlock.LuaCommandError):
        Worker(queue, print, concurrency=3, idle_wait=0.1).run()


def test_burst_runs_until_empty_including_retries_due_soon(client: fastlock.Client) -> None:
    queue = client.queue("b", backoff=0.05)
    ids = queue.enqueue_many([b"x"] * 25)
    flaky = queue.enqueue(b"flaky")
    queue.enqueue(b"later", delay=60)  # not due within idle_wait: left for a later run
    runs: list[str] = []

    def handler(job: Job) -> None:
        runs.append(job.id)
        if job.payload == b"flaky" and job.attempt == 1:
            raise RuntimeError("once")

    assert Worker(queue, handler, batch=10, burst=True, idle_wait=1.0).run() == 27
    assert sorted(runs) == sorted([*ids, flaky, flaky])
    assert queue.stats() == QueueStats(0, 1, 0, 0)


def test_hooks_retry_and_dead_letter(client: fastlock.Client) -> None:
    queue = client.queue("h", max_attempts=3)
    plain, retried, buried, bad = (queue.enqueue(p) for p in (b"ok", b"retry", b"bury", b"before"))
    events: list[tuple[str, str, int, str]] = []
    times: dict[str, list[float]] = {}

    def record(name: str) -> Any:
        def hook(job: Job, exc: BaseException | None = None) -> None:
            events.append((name, job.id, job.attempt, type(exc).__name__ if exc else ""))
            if name == "before" and job.payload == b"before":
                raise ValueError("refused by before")
            if name == "after" and job.payload == b"ok":
                raise RuntimeError("a failing after hook is logged, the job still completes")

        return hook

    def handler(job: Job) -> None:
        times.setdefault(job.id, []).append(time.monotonic())
        if job.payload == b"retry" and job.attempt == 1:
            raise Retry("not yet", in_=0.3)
        if job.payload == b"bury":
            raise DeadLetter("malformed payload")

    hooks = {name: record(name) for name in ("before", "after", "on_failure", "on_retry")}
    assert Worker(queue, handler, idle_wait=0.5, **hooks).run(max_jobs=5) == 5
    assert times[retried][1] - times[retried][0] >= 0.29  # its own delay, not the backoff
    assert ("after", plain, 1, "") in events and ("after", retried, 2, "") in events
    assert ("on_retry", retried, 1, "Retry") in events
    assert ("on_failure", buried, 1, "DeadLetter") in events  # dead at once, attempts left
    assert ("on_retry", bad, 1, "ValueError") in events and bad not in times  # before failed it
    dead = {job.id: job for job in queue.dead()}
    assert dead[buried].error == "malformed payload" and dead[buried].attempts == 1
    assert queue.stats() == QueueStats(0, 1, 0, 1)  # "before" waits for its retry


def signal_worker(url: str, impl: str, sig: int, pipe: Any) -> None:
    """A worker process on queue ``g`` with install_signals; reports when its handler runs."""
    client = fastlock.Client(url, impl=impl)
    queue = client.queue("g", lease=30)

    def handler(job: Job) -> None:
        pipe.send(("start", job.id, time.monotonic()))
        time.sleep(0.3)
        client.execute("HINCRBY", "g:runs", job.id, 1)

    handled = Worker(queue, handler, batch=10, idle_wait=30).run(install_signals=True)
    pipe.send(("done", handled, time.monotonic()))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_finishes_the_job_and_hands_the_batch_back(redis_url: str, impl: str, sig: int) -> None:
    client = fastlock.Client(redis_url, impl=impl)
    queue = client.queue("g", lease=30)
    queue.enqueue_many([b"x"] * 30)
    ours, theirs = multiprocessing.get_context("fork").Pipe()
    proc = multiprocessing.get_context("fork").Process(
        target=signal_worker, args=(redis_url, impl, sig, theirs)
    )
    proc.start()
    try:
        starts = [ours.recv() for _ in range(3)]  # in its 3rd job of a batch of 10
        signalled = time.monotonic()
        os.kill(proc.pid, sig)
        assert ours.poll(30)
        kind, handled, finished = ours.recv()
        proc.join(30)
    finally:
        proc.kill()
        proc.join()
    assert kind == "done" and handled == 3 and proc.exitcode == 0
    drain = finished - signalled
    remaining = 0.3 - (signalled - starts[-1][2])
    assert drain < 5.0, drain  # measured: the rest of the current job + ~5 ms
    print(f"drain after {signal.Signals(sig).name}: {drain:.3f} s, current job's remaining {remaining:.3f} s")
    assert queue.stats() == QueueStats(27, 0, 0, 0)  # the 7 unstarted handed back at once
    rest = queue.claim(30)
    assert all(job.attempt == 1 for job in rest)  # no attempt spent on them


def test_idle_worker_stops_at_once_on_a_signal(redis_url: str, impl: str) -> None:
    ours, theirs = multiprocessing.get_context("fork").Pipe()
    proc = multiprocessing.get_context("fork").Process(
        target=signal_worker, args=(redis_url, impl, signal.SIGTERM, theirs)
    )
    proc.start()
    try:
        time.sleep(0.5)  # idle in its 30 s wait (or still starting: the signal is kept)
        signalled = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        assert ours.poll(30)
        kind, handled, finished = ours.recv()
        proc.join(30)
    finally:
        proc.kill()
        proc.join()
    assert (kind, handled, proc.exitcode) == ("done", 0, 0)
    assert finished - signalled < 5.0  # woken by its stop key, not by the end of a 30 s wait


@pytest.mark.slow  # slow tier: a 3 s outage
@pytest.mark.fault
def test_an_outage_logs_a_handful_of_lines_and_one_recovery(
    server_factory: Any, impl: str, caplog: pytest.LogCaptureFixture
) -> None:
    server: TempServer = server_factory(extra_args=("--appendonly", "yes"))
    client = fastlock.Client(server.url, impl=impl, connect_timeout=0.5)
    queue = client.queue("o", lease=2.0, max_attempts=50)
    ids = set(queue.enqueue_many([b"x"] * 400))
    handled: list[str] = []

    def handler(job: Job) -> None:
        handled.append(job.id)
        time.sleep(0.01)

    worker = Worker(queue, handler, batch=5, concurrency=2, idle_wait=0.5)
    caplog.set_level(logging.INFO, "fastlock")
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        while len(handled) < 50:
            time.sleep(0.01)
        server.kill()
        time.sleep(3.0)
        server.restart()
        deadline = time.monotonic() + 30
        while queue.stats() != QueueStats(0, 0, 0, 0):
            assert time.monotonic() < deadline, queue.stats()
            time.sleep(0.05)
    finally:
        worker.stop()
        thread.join(10)
    assert set(handled) >= ids
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    print(f"{len(lines)} warning lines during a 3 s outage:", *lines, sep="\n  ")
    recovered = [line for line in lines if "recovered after" in line]
    assert len(recovered) == 1 and 2.5 < float(recovered[0].split()[-2]) < 10, lines
    assert len(lines) <= 8, lines
