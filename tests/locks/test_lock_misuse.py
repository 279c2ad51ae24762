"""Locks under misuse: one object shared by threads or across fork(), bad job ids, bad durations."""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any

import pytest
from harness.blocking import PATIENCE_RECHECK, wait_until_listening

import fastlock
from fastlock.protocol.arguments import MAX_DURATION
from fastlock.testing.raw import connect, roundtrip


def in_child(fn: Any) -> str:
    """Run ``fn()`` in a forked child and return what it returned, as text."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(write, repr(fn()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        out = pipe.read()
    os.waitpid(pid, 0)
    return out


# --- item 1: an object shared across fork() -------------------------------------------------


def test_a_lock_built_before_fork_is_another_holder_in_the_child(client: Any) -> None:
    lock = client.lock("forked", ttl=30)
    with lock as token:
        assert in_child(lambda: (lock.acquire(blocking=False), lock.release(), lock.locked())) == repr(
            (None, None, True)
        )
        assert [h.token for h in lock.holders()] == [token]
    child_token = in_child(lambda: lock.acquire(blocking=False))
    assert child_token != "None"
    assert lock.acquire(blocking=False) is None  # the child's holder is still there
    assert [h.token for h in lock.holders()] == [int(child_token)]


def test_a_reaper_built_before_fork_is_another_runner_in_the_child(client: Any) -> None:
    reaper = client.locks.reaper()
    assert reaper.run_once() is not None
    reaper._mutex.acquire(blocking=False)
    assert in_child(reaper.run_once) == "None"
    assert reaper._mutex.locked()
    reaper._mutex.release()


# --- item 2: an object shared by threads ------------------------------------------------------


def overlap(lock: fastlock.Lock, threads: int = 4, rounds: int = 15) -> int:
    """Most threads inside ``with lock:`` at once, all threads using that one object."""
    inside = most = 0
    count = threading.Lock()
    errors: list[BaseException] = []

    def run() -> None:
        nonlocal inside, most
        try:
            for _ in range(rounds):
                with lock:
                    with count:
                        inside += 1
                        most = max(most, inside)
                    threading.Event().wait(0.001)
                    with count:
                        inside -= 1
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    return most


@pytest.mark.parametrize("limit", [1, 3])
def test_threads_through_one_object_respect_the_limit(client: Any, limit: int) -> None:
    lock = client.lock("threads", ttl=30, timeout=20, limit=limit)
    assert 1 <= overlap(lock, threads=limit + 3) <= limit
    assert not lock.locked()


def test_the_default_holder_is_per_thread(client: Any) -> None:
    lock = client.lock("mine", ttl=30)
    token = lock.acquire()
    seen: list[Any] = []
    thread = threading.Thread(target=lambda: seen.extend((lock.job_id, lock.release(), lock.acquire())))
    thread.start()
    thread.join()
    assert seen[0] != lock.job_id and seen[1:] == [None, None]
    assert lock.release() == token


def test_an_explicit_job_id_is_one_holder_everywhere(client: Any) -> None:
    lock = client.lock("explicit", ttl=30, job_id="job-1")
    token = lock.acquire()
    assert in_child(lock.acquire) == repr(token)
    assert lock.job_id == "job-1" and lock.release() == token


# --- item 11: job ids are checked, never replaced by the default ------------------------------


@pytest.mark.parametrize("bad", [0, "", b"job", 1.5, ["j"]])
def test_bad_job_ids_are_refused_before_anything_is_sent(client: Any, bad: Any) -> None:
    lock = client.lock("ids", ttl=30)
    token = lock.acquire()
    for call in (lock.acquire, lock.release, lock.extend, lock.enqueue):
        with pytest.raises((TypeError, ValueError), match="job id"):
            call(bad)
    with pytest.raises((TypeError, ValueError), match="job id"):
        lock.execute(bad, lambda: None)
    with pytest.raises((TypeError, ValueError), match="job id"):
        client.lock("ids", ttl=30, job_id=bad)
    conflicts: list[fastlock.Conflict] = []
    client.lock("ids", ttl=30, on_conflict=conflicts.append).enqueue("other")
    with pytest.raises((TypeError, ValueError), match="job id"):
        conflicts[0].evict(bad)
    assert [h.token for h in lock.holders()] == [token]
    assert lock.release() == token


# --- item 10: every duration is bounded before anything is sent --------------------------------


@pytest.mark.parametrize("bad", [math.inf, math.nan, -1.0, 1e16, MAX_DURATION * 2, "30", True])
def test_bad_durations_are_refused_before_anything_is_sent(client: Any, bad: Any) -> None:
    for options in ({"ttl": bad}, {"ttl": 30, "timeout": bad}, {"type": "until_expired", "ttl": bad}):
        with pytest.raises((TypeError, ValueError), match=r"ttl|timeout"):
            client.lock("durations", **options)
    lock = client.lock("durations", ttl=30)
    for blocking in (None, True, False):
        with pytest.raises((TypeError, ValueError), match="timeout"):
            lock.acquire(blocking=blocking, timeout=bad)
    assert not lock.locked()
    token = lock.acquire()
    with pytest.raises((TypeError, ValueError), match="ttl"):
        lock.extend(ttl=bad)
    assert lock.holders()[0].ttl > 29 and lock.release() == token
    for options in ({"lease": bad}, {"interval": bad}):
        with pytest.raises((TypeError, ValueError), match=r"ttl|interval"):
            client.locks.reaper(**options)
    assert [key for key in client.execute("KEYS", "*") if not key.endswith(b":seq")] == []


def test_the_longest_durations_are_taken(client: Any) -> None:
    lock = client.lock("long", ttl=MAX_DURATION, timeout=MAX_DURATION)
    token = lock.acquire()
    assert lock.extend(ttl=MAX_DURATION) == token
    ttl = lock.holders()[0].ttl
    assert ttl is not None and ttl > MAX_DURATION - 60
    assert lock.acquire("other", timeout=0.01) is None and lock.release() == token


# --- item 3: until_and_while_executing keeps the lock it holds while running ------------------


def test_a_long_until_and_while_executing_job_keeps_its_runtime_lock(client: Any) -> None:
    worker, other = (
        client.lock("long", type="until_and_while_executing", ttl=5, on_conflict={"execute": "raise"})
        for _ in range(2)
    )
    assert worker.enqueue("1")

    def body() -> tuple[int | None, list[Any], bool]:
        token = worker.extend("1", ttl=600)  # the heartbeat of a long job
        assert other.enqueue("2")
        with pytest.raises(fastlock.LockConflictError):
            other.execute("2", lambda: None)
        return token, worker.holders(), worker.locked()

    token, holders, locked = worker.execute("1", body)
    assert token is not None and locked
    assert [(h.job_id, h.token, h.runtime) for h in holders] == [("1", token, True)]
    assert holders[0].ttl is not None and holders[0].ttl > 500  # extended the runtime lock
    assert worker.holders() == [] and worker.extend("1") is None
    assert other.enqueue("3") and [(h.job_id, h.runtime) for h in worker.holders()] == [("3", False)]
    assert worker.extend("3") is not None


# --- item 16: a waiter blocked on the wake list takes nothing a queued live waiter is handed -----


def blocked_clients(client: fastlock.Client) -> int:
    info = client.execute("INFO", "clients").decode()
    return int(info.split("blocked_clients:")[1].split()[0])


def wait_for(condition: Any) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in 10 s"
        time.sleep(0.005)


@pytest.mark.parametrize("limit", [1, 2])
def test_a_release_hands_over_to_the_live_waiter_not_the_wake_list(
    server: Any, client: Any, limit: int
) -> None:
    holders = [client.lock("lost-wake", ttl=30, limit=limit) for _ in range(limit)]
    for holder in holders:
        holder.acquire()
    wake = holders[0]._queue.wake
    ghost = connect(server.unix_path, timeout=20)  # a waiter blocked on the wake list, then gone
    popped: list[bytes] = []
    got: list[Any] = []

    def die() -> None:
        popped.append(roundtrip(ghost, "BLPOP", wake, 2))
        ghost.close()

    def wait() -> None:
        got.append((client.lock("lost-wake", limit=limit, ttl=None).acquire(timeout=20), time.monotonic()))

    dying, waiter = threading.Thread(target=die), threading.Thread(target=wait)
    dying.start()
    wait_for(lambda: blocked_clients(client) == 1)
    waiter.start()
    wait_until_listening(client, 1)  # the live waiter sleeps on the client's listener
    time.sleep(client.locks.patience + PATIENCE_RECHECK)  # queued, past its patience and its re-check
    released = time.monotonic()
    assert holders[0].release() is not None
    dying.join()
    waiter.join()
    # the release handed the lock to the live queued waiter: no wake-up for the ghost to take
    assert popped[0] == b"*-1\r\n"
    token, woke = got[0]
    assert token is not None and woke - released < 5  # not the 20 s timeout, nor the 30 s net


# --- item 20: a lock script's reply of an unexpected shape is a ProtocolError ------------------

HOSTILE: list[tuple[str, str, str, Any]] = [
    ("lock_acquire", "return -1", "until_executed", lambda lock: lock.acquire("j")),
    ("lock_acquire", "return 0", "until_executed", lambda lock: lock.acquire("j")),
    ("lock_acquire", "return 'x'", "until_executed", lambda lock: lock.acquire("j")),
    ("lock_acquire", "return {}", "until_executed", lambda lock: lock.acquire("j", timeout=1)),
    ("lock_acquire", "return {'a'}", "until_executed", lambda lock: lock.acquire("j", timeout=1)),
    ("lock_acquire", "return {-1, 5}", "until_executed", lambda lock: lock.enqueue("j")),
    ("lock_handoff", "return 'x'", "until_and_while_executing", lambda lock: lock.execute("j", int)),
    ("lock_release", "return 'x'", "until_executed", lambda lock: lock.release("j")),
    ("lock_release", "return -3", "until_executed", lambda lock: lock.release("j")),
    ("lock_release", "return {1}", "until_executed", lambda lock: lock.execute("j", int)),
    ("lock_extend", "return {1}", "until_executed", lambda lock: lock.extend("j")),
    ("lock_extend", "return -1", "until_executed", lambda lock: lock.extend("j")),
    ("lock_inspect", "return {'garbage', 5}", "until_executed", lambda lock: lock.holders()),
    ("lock_inspect", "return {'1:0:j'}", "until_executed", lambda lock: lock.holders()),
    ("lock_inspect", "return {'1:0:j', 'x'}", "until_executed", lambda lock: lock.info()),
    ("lock_inspect", "return 7", "until_executed", lambda lock: lock.manager.inspect(lock.digest)),
    ("lock_delete", "return 'x'", "until_executed", lambda lock: lock.manager.delete(lock.digest)),
    ("lock_reap", "return {'x'}", "until_executed", lambda lock: lock.manager.reaper().run_once()),
    ("lock_reap", "return 3", "until_executed", lambda lock: lock.manager.reaper().run_once()),
    (
        "lock_reap",
        "return {0, 'nope', 1, '1:0:j'}",
        "until_executed",
        lambda lock: lock.manager.reaper(alive=lambda entry, job: False).run_once(),
    ),
    (
        "lock_reap",
        "return {0, ARGV[2], 2, '1:0:j'}",
        "until_executed",
        lambda lock: lock.manager.reaper(alive=lambda entry, job: False).run_once(),
    ),
]


@pytest.mark.parametrize(("script", "source", "kind", "call"), HOSTILE)
def test_an_unexpected_lock_script_reply_is_a_protocol_error(
    redis_url: str, impl: str, script: str, source: str, kind: str, call: Any
) -> None:
    with fastlock.Client(redis_url) as normal:
        normal.lock("hostile", ttl=30).acquire("real")  # tracked: the reaper has an entry to pass
    with fastlock.Client(redis_url, impl=impl) as client:
        client.register_script(source, name=script)
        lock = client.lock("hostile", type=kind, ttl=30, on_conflict="raise")
        with pytest.raises(fastlock.ProtocolError, match=script):
            call(lock)


# --- item 14: a server that may evict lock keys ------------------------------------------------


def test_a_server_that_may_evict_any_key_is_refused_at_first_use(
    server_factory: Any, impl: str, caplog: pytest.LogCaptureFixture
) -> None:
    srv = server_factory(
        extra_args=("--maxmemory-policy", "allkeys-lru"),
        acl_users=[("app", "pw", "~* &* +@all -info -config"), ("cfg", "pw", "~* &* +@all -info")],
    )
    with fastlock.Client(srv.url, impl=impl) as client:
        for _ in range(2):  # refused at every first use, not only once
            with pytest.raises(fastlock.LockError, match="maxmemory-policy allkeys-lru"):
                fastlock.LockManager(client).lock("evictable", ttl=30).acquire()
        assert client.execute("DBSIZE") == 0
        client.execute("CONFIG", "SET", "maxmemory-policy", "volatile-lru")
        with caplog.at_level("WARNING", logger="fastlock.lock"):
            assert fastlock.LockManager(client).lock("evictable", ttl=30).acquire() is not None
        assert "maxmemory-policy volatile-lru" in caplog.text
        caplog.clear()
        client.execute("CONFIG", "SET", "maxmemory-policy", "noeviction")
        with caplog.at_level("INFO", logger="fastlock.lock"):
            assert fastlock.LockManager(client).lock("evictable", ttl=30).acquire("other") is None
        assert "maxmemory" not in caplog.text
        client.execute("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
    cfg = fastlock.Client(srv.url, impl=impl, username="cfg", password="pw")  # no INFO: CONFIG GET
    with cfg, pytest.raises(fastlock.LockError, match="maxmemory-policy allkeys-lfu"):
        fastlock.LockManager(cfg).lock("evictable", ttl=30).acquire()
    # a user who may read neither INFO nor CONFIG: the policy is unknown, locks work, it is logged
    with fastlock.Client(srv.url, impl=impl, username="app", password="pw") as client:
        with caplog.at_level("INFO", logger="fastlock.lock"):
            assert fastlock.LockManager(client).lock("evictable", ttl=30).acquire("other") is None
        assert "cannot read maxmemory-policy" in caplog.text


# --- an unknown option ----------------------------------------------------------------------

UNKNOWN = r"unknown lock option 'ttll' \(did you mean 'ttl'\?\); the lock options are .*timeout, ttl, type"


@pytest.mark.parametrize("entry", ["client.lock", "client.locks.lock", "LockManager.lock", "Lock"])
def test_an_unknown_lock_option_is_refused_before_anything_is_sent(client: Any, entry: str) -> None:
    build = {
        "client.lock": client.lock,
        "client.locks.lock": client.locks.lock,
        "LockManager.lock": fastlock.LockManager(client, prefix="other").lock,
        "Lock": lambda name, **options: fastlock.Lock(client.locks, "ab" * 16, name, **options),
    }[entry]
    with pytest.raises(fastlock.UnknownOptionError, match=UNKNOWN) as info:
        build("job", ttl=30, ttll=5)
    assert isinstance(info.value, fastlock.ArgumentError) and isinstance(info.value, TypeError)
    with pytest.raises(
        fastlock.UnknownOptionError, match=r"options 'limt' \(did you mean 'limit'\?\), 'zz';"
    ):
        build("job", ttl=30, limt=2, zz=1)
    assert client.pool.round_trips == 0  # nothing was sent: no connection was even opened
