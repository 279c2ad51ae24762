"""Many threads and several processes contend on one lock; the server's own changelog proves
that no more than ``limit`` jobs held it at any instant and that every release freed exactly
the acquisition it belonged to (fencing tokens identify acquisitions)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest

import fastlock

THREADS = 6
ROUNDS = 25
PROCESSES = 3


def manager(client: fastlock.Client) -> fastlock.LockManager:
    return fastlock.LockManager(client, prefix="contend", max_history=1_000_000)


def contend(url: str, limit: int, worker: str, errors: list[str]) -> None:
    """THREADS threads, each with its own Lock object, acquiring (blocking) and releasing ROUNDS times."""
    with fastlock.Client(url) as client:
        locks = manager(client)

        def run(thread: int) -> None:
            lock = locks.lock("shared", limit=limit, ttl=30, timeout=10)
            for n in range(ROUNDS):
                job = f"{worker}-{thread}-{n}"
                token = lock.acquire(job)
                if token is None:
                    errors.append(f"{job}: timed out")
                    continue
                time.sleep(0.0005)
                freed = locks.lock("shared", limit=limit, ttl=None).release(job)  # another object releases
                if freed != token:
                    errors.append(f"{job}: acquired {token}, release freed {freed}")

        threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def _process_main(url: str, limit: int, worker: str) -> None:
    errors: list[str] = []
    contend(url, limit, worker, errors)
    os._exit(1 if errors else 0)


def replay(client: fastlock.Client, limit: int) -> int:
    """Check the lock's changelog: at most ``limit`` holders at every step, each unlock frees a
    token its job holds, tokens strictly increase, nothing is left held. Returns acquisitions."""
    locks = manager(client)
    digest = locks.digest("shared")
    log = locks.bucket_keys(locks.bucket(digest))[2]
    held: dict[int, str] = {}
    last = acquired = 0
    for _, fields in client.execute("XRANGE", log, "-", "+"):
        record = dict(zip(fields[::2], fields[1::2], strict=True))
        event, job, token = record[b"event"], record[b"job"].decode(), int(record[b"token"])
        if event == b"locked":
            assert token > last, f"token {token} after {last}"
            assert job not in held.values(), f"{job} holds twice"
            last, held[token] = token, job
            acquired += 1
            assert len(held) <= limit, f"{len(held)} holders: {held}"
        elif event == b"unlocked":
            assert held.pop(token) == job, f"{job} freed token {token} it did not hold"
    assert held == {}
    return acquired


@pytest.mark.parametrize("limit", [1, 3])
def test_threads_and_processes_never_exceed_the_limit(redis_url: str, limit: int) -> None:
    context = multiprocessing.get_context("fork")
    children = [
        context.Process(target=_process_main, args=(redis_url, limit, f"p{i}")) for i in range(PROCESSES)
    ]
    for child in children:
        child.start()
    errors: list[str] = []
    contend(redis_url, limit, "main", errors)
    for child in children:
        child.join(60)
    assert errors == []
    assert [child.exitcode for child in children] == [0] * PROCESSES
    with fastlock.Client(redis_url) as client:
        assert replay(client, limit) == (PROCESSES + 1) * THREADS * ROUNDS
        assert not manager(client).lock("shared", limit=limit, ttl=None).locked()


def test_slow_holder_past_its_ttl_frees_nothing_of_others(redis_url: str) -> None:
    with fastlock.Client(redis_url) as client:
        locks = manager(client)
        slow = locks.lock("shared", ttl=0.1)
        slow_token = slow.acquire("slow")
        assert slow_token is not None
        others = [locks.lock("shared", ttl=30, timeout=2).acquire("fast")]  # woken when the ttl runs out
        time.sleep(0.15)
        assert slow.release("slow") is None
        assert slow.extend("slow") is None
        holders = slow.holders()
        assert [(h.job_id, h.token) for h in holders] == [("fast", others[0])]
        assert others[0] is not None and others[0] > slow_token
