"""The reaper: bounded passes, one runner at a time, never removing a live holder."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import fastlock
from fastlock.locks.keys import LockEntry
from fastlock.locks.reaping import RUNS_KEPT


def tracked(locks: fastlock.LockManager) -> set[str]:
    return {entry.scope for entry in locks.entries()}


def test_drops_index_entries_of_expired_locks_and_deletes_nothing_else(client: Any) -> None:
    locks = fastlock.LockManager(client, buckets=4)
    for i in range(6):
        locks.lock(f"short{i}", ttl=0.01).acquire("x")
    kept = locks.lock("kept", ttl=30)
    kept.acquire("k")
    forever = locks.lock("forever", ttl=None)
    forever.acquire("f")
    time.sleep(0.03)
    assert len(tracked(locks)) == 8
    result = locks.reaper().run_once()
    assert result is not None and (result.examined, result.dropped, result.released) == (8, 6, 0)
    assert tracked(locks) == {kept.digest, forever.digest}
    assert kept.locked() and forever.locked()


def test_each_pass_is_logged_and_the_log_is_bounded(client: Any) -> None:
    """Every pass logs itself in the namespace (any process's reaper reads the log), the
    newest first, RUNS_KEPT at most."""
    locks = fastlock.LockManager(client, buckets=4)
    locks.lock("logged", ttl=0.01).acquire("x")
    time.sleep(0.03)
    reaper = locks.reaper()
    assert reaper.run_once() is not None
    (run,) = locks.reaper().runs()
    assert (run.examined, run.dropped, run.released) == (1, 1, 0) and run.seconds >= 0
    assert run.runner.endswith(f":{os.getpid()}") and abs(run.at - time.time()) < 60
    for _ in range(RUNS_KEPT + 2):
        reaper.run_once()
    runs = reaper.runs(count=1000)
    assert len(runs) == RUNS_KEPT and runs[0].at >= runs[-1].at and runs[-1].examined == 0
    assert len(reaper.runs(count=3)) == 3


def test_alive_decides_which_holders_are_orphans(client: Any) -> None:
    locks = fastlock.LockManager(client, buckets=4)
    pool = locks.lock("pool", limit=3, ttl=None)
    for job in ("live-1", "dead-1", "dead-2"):
        pool.acquire(job)
    seen: list[tuple[LockEntry, str]] = []

    def alive(entry: LockEntry, job_id: str) -> bool:
        seen.append((entry, job_id))
        return job_id.startswith("live")

    result = locks.reaper(alive=alive).run_once()
    assert result is not None and result.released == 2
    assert [h.job_id for h in pool.holders()] == ["live-1"]
    assert {job for _, job in seen} == {"live-1", "dead-1", "dead-2"}
    assert seen[0][0] == LockEntry(pool.digest, False, 3)


def test_one_runner_at_a_time_and_bounded_batches(client: Any) -> None:
    locks = fastlock.LockManager(client, buckets=2)
    for i in range(12):
        locks.lock(f"gone{i}", ttl=0.01).acquire("x")
    time.sleep(0.03)
    first, second = locks.reaper(batch=5, chunk=2), locks.reaper(batch=5)
    first._mutex.acquire()
    assert second.run_once() is None
    first._mutex.release()
    passes = []
    while tracked(locks):
        result = first.run_once()
        assert result is not None and result.examined <= 5
        passes.append(result.dropped)
    assert sum(passes) == 12 and len(passes) >= 3


def test_reaper_under_concurrent_acquires_never_frees_a_live_holder(redis_url: str) -> None:
    errors: list[str] = []
    stop = threading.Event()
    with fastlock.Client(redis_url) as client:
        locks = fastlock.LockManager(client, buckets=4)
        for i in range(20):
            locks.lock(f"orphan{i}", ttl=None).acquire(f"dead-{i}")

        def work(n: int) -> None:
            lock = locks.lock(f"busy{n % 3}", limit=2, timeout=5, ttl=None)
            i = 0
            while not stop.is_set():
                job = f"live-{n}-{i}"
                token = lock.acquire(job)
                if token is None or lock.release(job) != token:
                    errors.append(f"{job}: acquired {token} but lost it")
                i += 1

        workers = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for worker in workers:
            worker.start()
        reaper = locks.reaper(batch=7, chunk=3, alive=lambda entry, job: not job.startswith("dead"))
        released = 0
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            result = reaper.run_once()
            released += result.released if result else 0
        stop.set()
        for worker in workers:
            worker.join()
        assert errors == []
        assert released == 20
        assert all(not locks.lock(f"orphan{i}", ttl=None).locked() for i in range(20))
        assert reaper.run_once() is not None and tracked(locks) == set()


def test_background_thread(client: Any) -> None:
    locks = fastlock.LockManager(client, buckets=2)
    locks.lock("gone", ttl=0.01).acquire("x")
    time.sleep(0.02)
    reaper = locks.reaper(interval=0.01)
    reaper.start()
    deadline = time.monotonic() + 2
    while tracked(locks) and time.monotonic() < deadline:
        time.sleep(0.01)
    reaper.stop(2)
    assert tracked(locks) == set()
