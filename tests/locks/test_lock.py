"""Lock primitives, job helpers per type, conflict strategies and admin, on real servers and both cores."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from harness.blocking import wait_until_listening

import fastlock
from fastlock import LockConflictError, LockError, LockNotOwnedError, LockType
from fastlock.locks.waiting import MAX_BLOCK


def lock_keys(client: Any) -> list[bytes]:
    """Keys other than the buckets' shared counter and changelog."""
    return sorted(k for k in client.execute("KEYS", "*") if not k.endswith((b":seq", b":log")))


def test_acquire_is_idempotent_and_tokens_increase(client: Any) -> None:
    lock = client.lock("report", args=[1], ttl=30)
    first = lock.acquire("a")
    assert first is not None and lock.acquire("a") == first
    assert lock.acquire("b") is None
    assert lock.release("a") == first
    second = lock.acquire("b")
    assert second is not None and second > first


def test_release_by_another_object_frees_only_what_the_job_holds(client: Any) -> None:
    token = client.lock("job", args=[7], ttl=30).acquire("a")
    other = client.lock("job", args=[7], ttl=30)
    assert other.release("b") is None
    assert other.locked()
    assert other.release("a") == token
    assert not other.locked()
    assert other.release("a") is None
    assert lock_keys(client) == []


def test_default_job_id_and_context_manager(client: Any) -> None:
    lock = client.lock("ctx", ttl=30)
    with lock as token:
        assert [h.token for h in lock.holders()] == [token]
        assert lock.holders()[0].job_id == lock.job_id
        with pytest.raises(LockConflictError):
            client.lock("ctx", ttl=30).__enter__()
    assert not lock.locked()
    with pytest.raises(LockNotOwnedError), lock:
        client.locks.delete(lock.digest)


def test_default_job_ids_are_unique_across_objects_and_forked_processes() -> None:
    locks = fastlock.LockManager(fastlock.Client("redis://127.0.0.1:1"))  # no connection is made
    ids = {locks.lock("x", ttl=None).job_id for _ in range(1000)}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports its first ids and exits
        os.write(write, " ".join(locks.lock("x", ttl=None).job_id for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    os.waitpid(pid, 0)
    ids |= {locks.lock("x", ttl=None).job_id for _ in range(3)}
    assert len(ids) == 1003 and len(child) == 3 and not ids & set(child)


def test_limit_admits_that_many_holders(client: Any) -> None:
    lock = client.lock("pool", limit=3, ttl=30)
    tokens = [lock.acquire(f"j{i}") for i in range(4)]
    assert tokens[3] is None and None not in tokens[:3]
    assert {h.job_id for h in lock.holders()} == {"j0", "j1", "j2"}
    assert lock.acquire("j1") == tokens[1]
    assert lock.release("j1") == tokens[1]
    assert lock.acquire("j3") is not None
    for job in ("j0", "j2", "j3"):
        assert lock.release(job)
    assert lock_keys(client) == []


def test_ttl_expiry_frees_the_slot_and_a_late_release_frees_nothing(client: Any) -> None:
    slow = client.lock("ttl", ttl=0.05)
    slow_token = slow.acquire("slow")
    time.sleep(0.12)
    fast = client.lock("ttl", ttl=30)
    fast_token = fast.acquire("fast")
    assert fast_token is not None and slow_token is not None and fast_token > slow_token
    assert slow.release("slow") is None
    assert [h.job_id for h in fast.holders()] == ["fast"]


def test_extend(client: Any) -> None:
    lock = client.lock("ext", ttl=0.2)
    token = lock.acquire()
    assert lock.extend(ttl=30) == token
    time.sleep(0.3)
    assert lock.holders()[0].ttl is not None and lock.holders()[0].ttl > 29
    assert lock.extend("nobody") is None
    with pytest.raises(ValueError):
        client.lock("ext2", ttl=None).extend()


# A waiter that misses its wake-up sleeps out the whole safety-net block (30 s) before it looks
# again; woken as it should be, it is back within milliseconds. Half the safety net tells the two
# apart on any machine, however loaded.
WOKEN_WITHIN = MAX_BLOCK / 2


def test_blocking_waiter_is_woken_by_the_release_not_the_safety_net(redis_url: str, impl: str) -> None:
    with (
        fastlock.Client(redis_url, impl=impl) as client,
        fastlock.Client(redis_url, impl=impl, max_connections=1) as waiting_client,
        ThreadPoolExecutor(1) as pool,
    ):
        holder = client.lock("wake", ttl=300)
        held = holder.acquire("h")
        waiter = waiting_client.lock("wake", ttl=300, timeout=300)
        waiting = pool.submit(waiter.acquire, "w")
        wait_until_listening(client, 1)
        released = time.monotonic()
        assert holder.release("h") == held
        token = waiting.result(timeout=2 * MAX_BLOCK)
        assert time.monotonic() - released < WOKEN_WITHIN
        assert token is not None and token > held


def test_blocking_waiter_times_out_cleanly(client: Any) -> None:
    client.lock("busy", ttl=300).acquire("h")
    waiter = client.lock("busy", ttl=300)
    start = time.monotonic()
    assert waiter.acquire("w", timeout=0.2) is None
    assert 0.2 <= time.monotonic() - start < WOKEN_WITHIN
    assert waiter.acquire("w", blocking=False) is None
    with pytest.raises(LockError):
        waiter.acquire("w", blocking=True)


def test_blocking_waiter_wakes_when_the_holder_expires(client: Any) -> None:
    start = time.monotonic()  # before the holder's acquire: its ttl runs from then at the latest
    client.lock("exp", ttl=0.2).acquire("h")
    assert client.lock("exp", ttl=30).acquire("w", timeout=300) is not None
    assert 0.2 <= time.monotonic() - start < WOKEN_WITHIN


def test_many_waiters_all_get_their_turn(redis_url: str, impl: str) -> None:
    clients = [fastlock.Client(redis_url, impl=impl, max_connections=1) for _ in range(5)]
    admin, waiting_clients = clients[0], clients[1:]
    holder = admin.lock("queue", ttl=300)
    held = holder.acquire("h")

    def wait(n: int) -> tuple[int | None, int | None]:
        lock = waiting_clients[n].lock("queue", ttl=300, timeout=300)
        token = lock.acquire(f"w{n}")
        time.sleep(0.01)
        return token, lock.release(f"w{n}")

    try:
        with ThreadPoolExecutor(len(waiting_clients)) as pool:
            waiting = [pool.submit(wait, n) for n in range(len(waiting_clients))]
            wait_until_listening(admin, len(waiting_clients))  # one listener per client
            released = time.monotonic()
            assert holder.release("h") == held
            results = [future.result(timeout=len(waiting) * 2 * MAX_BLOCK) for future in waiting]
        assert time.monotonic() - released < WOKEN_WITHIN
        tokens = [token for token, _ in results]
        assert all(token is not None and token > held for token in tokens) and len(set(tokens)) == 4
        assert all(freed == token for token, freed in results)
    finally:
        for c in clients:
            c.close()


def test_lost_reply_on_acquire_is_retried_safely(proxy: Any, impl: str) -> None:
    with fastlock.Client(proxy.url, impl=impl, socket_timeout=1.0) as client:
        lock = client.lock("lost", ttl=30)
        lock.acquire("warm")
        lock.release("warm")
        proxy.drop_next_reply()
        token = lock.acquire("a")
        assert token is not None
        assert [(h.job_id, h.token) for h in lock.holders()] == [("a", token)]
        assert lock.release("a") == token
        assert lock.acquire("b") == token + 2  # ran twice: the re-sent call returned the first token


def test_fencing_and_tracking_off(client: Any) -> None:
    manager = fastlock.LockManager(client, prefix="plain", track=False, fencing=False)
    lock = manager.lock("x", ttl=30)
    assert lock.acquire("a") == 1
    assert client.execute("KEYS", "*") == [lock._queue.slots[0].encode()]
    assert lock.release("a") == 1
    assert client.execute("KEYS", "*") == []


def test_options_are_validated(client: Any) -> None:
    with pytest.raises(ValueError):
        client.lock("x", type="until_expired", ttl=None)
    with pytest.raises(ValueError):
        client.lock("x", type="nope", ttl=30)
    with pytest.raises(ValueError):
        client.lock("x", limit=0, ttl=30)
    with pytest.raises(ValueError):
        client.lock("x", ttl=0)
    with pytest.raises(ValueError):
        client.lock(digest="not hex", ttl=30)
    with pytest.raises(ValueError):
        client.lock("x", on_conflict="reschedule", ttl=30)
    with pytest.raises(ValueError):
        client.lock("x", type="while_executing", on_conflict="replace", ttl=30)
    assert client.lock("x", type="until_completed", ttl=30).type is LockType.UNTIL_EXECUTED


# --- job helpers per type ---------------------------------------------------------------


class Boom(Exception):
    pass


def boom() -> None:
    raise Boom


def run_types(client: Any, kind: str, **options: Any) -> tuple[Any, Any]:
    """(producer-side lock, worker-side lock) on one digest."""
    return client.lock("job", type=kind, ttl=30, **options), client.lock("job", type=kind, ttl=30, **options)


def test_until_executing(client: Any) -> None:
    producer, worker = run_types(client, "until_executing")
    assert producer.enqueue("1") and not producer.enqueue("2")
    assert worker.execute("1", lambda: producer.enqueue("2")) is True
    worker.release("2")
    assert producer.enqueue("3")
    with pytest.raises(Boom):
        worker.execute("3", boom)
    assert [h.job_id for h in worker.holders()] == ["3"]


def test_until_executed(client: Any) -> None:
    producer, worker = run_types(client, "until_executed")
    assert producer.enqueue("1")
    assert worker.execute("1", lambda: producer.enqueue("2")) is False
    assert not worker.locked()
    assert producer.enqueue("3")
    with pytest.raises(Boom):
        worker.execute("3", boom)
    assert [h.job_id for h in worker.holders()] == ["3"]


def test_until_expired(client: Any) -> None:
    producer, worker = run_types(client, "until_expired")
    assert producer.enqueue("1")
    assert worker.execute("1", lambda: 42) == 42
    assert not producer.enqueue("2")
    assert worker.release("1")


@pytest.mark.parametrize("kind", ["while_executing", "while_executing_reject"])
def test_while_executing(client: Any, kind: str) -> None:
    rejected: list[Any] = []
    manager = fastlock.LockManager(client, strategies={"reject": rejected.append})
    producer = manager.lock("job", type=kind, ttl=30, on_conflict="log")
    worker = manager.lock("job", type=kind, ttl=30, on_conflict="log")
    assert producer.enqueue("1") and producer.enqueue("2")
    assert not client.execute("KEYS", "*")
    inner = worker.execute("1", lambda: (worker.info().runtime_holders, worker.execute("2", lambda: "ran")))
    holders, nested = inner
    assert [h.job_id for h in holders] == ["1"] and nested is None
    assert [c.job_id for c in rejected] == (["2"] if kind == "while_executing_reject" else [])
    with pytest.raises(Boom):
        worker.execute("3", boom)
    assert not worker.locked()


def test_while_executing_waits_for_the_runtime_lock(client: Any) -> None:
    worker = client.lock("job", type="while_executing", ttl=30, timeout=5)
    worker.acquire("1")
    threading.Timer(0.1, worker.release, args=("1",)).start()
    assert worker.execute("2", lambda: "ran") == "ran"


def test_until_and_while_executing(client: Any) -> None:
    producer, worker = run_types(client, "until_and_while_executing", on_conflict={"execute": "raise"})
    assert producer.enqueue("1") and not producer.enqueue("2")

    def body() -> tuple[bool, list[str]]:
        return producer.enqueue("2"), [h.job_id for h in worker.info().runtime_holders]

    assert worker.execute("1", body) == (True, ["1"])
    assert [h.job_id for h in worker.holders()] == ["2"]
    with pytest.raises(Boom):
        worker.execute("2", boom)
    assert [h.job_id for h in worker.holders()] == ["2"] and worker.info().runtime_holders == []
    worker.acquire("3", blocking=False)
    client.locks.delete(worker.digest)
    runner = client.lock("job", type="until_and_while_executing", ttl=30)
    runner._bound()
    runner._take(runner._runtime, "busy", 0.0)
    with pytest.raises(LockConflictError) as raised:
        worker.execute("4", lambda: None)
    assert raised.value.conflict.holders == ("busy",)


# --- conflict strategies ------------------------------------------------------------------


def test_strategies(client: Any, caplog: pytest.LogCaptureFixture) -> None:
    client.lock("s", ttl=30).acquire("old")
    with caplog.at_level("INFO", logger="fastlock.lock"):
        assert not client.lock("s", ttl=30, on_conflict="log").enqueue("new")
    assert "skipping job new" in caplog.text
    with pytest.raises(LockConflictError):
        client.lock("s", ttl=30, on_conflict="raise").enqueue("new")
    with pytest.raises(LockError, match="needs a job framework"):
        client.lock("s", ttl=30, on_conflict="reject").enqueue("new")
    seen: list[fastlock.Conflict] = []
    assert not client.lock("s", ttl=30, on_conflict=seen.append).enqueue("new", job={"id": "new"})
    assert seen[0].holders == ("old",) and seen[0].job == {"id": "new"} and seen[0].side == "enqueue"
    replacing = client.lock("s", ttl=30, on_conflict={"enqueue": "replace"})
    assert replacing.enqueue("new")
    assert [h.job_id for h in replacing.holders()] == ["new"]


# --- admin --------------------------------------------------------------------------------


def test_scan_inspect_delete_and_changelog(client: Any) -> None:
    manager = fastlock.LockManager(client, buckets=4, max_history=100)
    locks = [manager.lock(f"n{i}", ttl=30, limit=2) for i in range(10)]
    for lock in locks:
        lock.acquire("a")
    runtime = manager.lock("n0", type="while_executing", ttl=30, limit=2)
    runtime.acquire("r")
    entries = list(manager.entries(count=3))
    assert len(entries) == 11
    assert {(e.digest, e.runtime, e.limit) for e in entries} == {
        *((lock.digest, False, 2) for lock in locks),
        (locks[0].digest, True, 2),
    }
    target = locks[3].digest
    assert [e.digest for e in manager.entries(match=target[:12] + "*")] == [target]
    assert [h.job_id for h in manager.inspect(target)] == ["a"]
    assert manager.delete(locks[0].digest) == 2
    assert not runtime.locked() and not locks[0].locked()
    cursor, deleted = "0", 0
    while True:
        cursor, n = manager.delete_matching("*", cursor, count=2)
        deleted += n
        if cursor == "0":
            break
    assert deleted == 9 and list(manager.entries()) == []
    assert lock_keys(client) == []
    events = [(e.event, e.job_id) for e in manager.changelog(locks[1].digest)]
    assert events == [("deleted", "a"), ("locked", "a")]
