"""Waiting threads under contention on one sync client (issue 27): they sleep on the client's
one wake-up listener (a reader thread doing all its I/O), never on a pooled connection; a
release hands the lock to the queued thread it names; a waiter that leaves (killed, timed out)
passes the lock on; a fork's child listens on its own."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import threading
import time
from typing import Any

import pytest
import redis
from harness.blocking import PATIENCE_RECHECK, next_message, wait_until_listening
from harness.size import sized

import fastlock
from fastlock.locks.notify import MAX_NAP
from fastlock.locks.types import QUEUED
from fastlock.sync.notify import Listener
from fastlock.testing.cluster import wait_until
from fastlock.testing.servers import TempServer
from fastlock.tools.costs import command_calls

WAITERS = sized(200, 60, "FASTLOCK_SYNC_WAITERS")
PROMPT = MAX_NAP / 2  # a hand-over within this came from a wake-up, not from a re-check


def _clients(probe: fastlock.Client) -> int:
    info = probe.execute("INFO", "clients").decode()
    return int(
        next(line for line in info.splitlines() if line.startswith("connected_clients:")).split(":")[1]
    )


def _crowd(client: fastlock.Client, probe: fastlock.Client, waiters: int, timeout: float) -> None:
    """``waiters`` threads wait on one held lock of ``client``: the server sees the pool's
    connections and the listener, no more; the holder's release (on the same client) answers at
    once; each waiter gets the lock (or None) by its own timeout, one holder at a time."""
    baseline = _clients(probe)
    holder = client.lock("hot", ttl=30)
    assert holder.acquire("holder") is not None
    guard = threading.Lock()
    inside = [0]
    tokens: list[int] = []
    failures: list[BaseException] = []
    late: list[float] = []

    def waiter(n: int) -> None:
        try:
            lock = client.lock("hot", ttl=30, timeout=timeout)
            started = time.monotonic()
            token = lock.acquire(f"w{n}")
            if time.monotonic() - started > timeout + PROMPT:
                late.append(time.monotonic() - started)
            if token is None:
                return
            with guard:
                inside[0] += 1
                two = inside[0] > 1
            time.sleep(0)
            with guard:
                inside[0] -= 1
                tokens.append(token)
            assert not two, "two holders"
            assert lock.release(f"w{n}") == token
        except BaseException as exc:  # noqa: BLE001 - reaches the test below
            failures.append(exc)

    threads = [threading.Thread(target=waiter, args=(n,)) for n in range(waiters)]
    for thread in threads:
        thread.start()
    wait_until_listening(probe, 1)
    time.sleep(0.3)  # every thread has made its attempts and sleeps
    assert not failures, failures[:3]
    peak = _clients(probe) - baseline
    assert 1 <= peak <= client.pool.max_size + 1, peak
    released = time.monotonic()
    assert holder.release("holder") is not None
    assert time.monotonic() - released < PROMPT  # not queued behind the waiters
    for thread in threads:
        thread.join(timeout + 10)
    assert not any(thread.is_alive() for thread in threads)
    assert not failures, failures[:3]
    assert not late, late[:3]
    assert len(tokens) == waiters and len(set(tokens)) == waiters  # each its own fencing token


def test_two_hundred_threads_wait_on_one_default_client(redis_url: str, impl: str) -> None:
    with (
        fastlock.Client(redis_url, max_connections=1) as probe,
        fastlock.Client(redis_url, impl=impl) as client,
    ):
        _crowd(client, probe, WAITERS, 8)


def test_waiters_over_tls(tls_server: TempServer, impl: str) -> None:
    """The listener's TLS socket is read and written by its reader thread alone."""
    url = f"{tls_server.tls_url}?ssl_ca_certs={tls_server.ca_path}"
    with fastlock.Client(url, max_connections=1) as probe, fastlock.Client(url, impl=impl) as client:
        _crowd(client, probe, WAITERS // 4, 8)


def _kill(thread: threading.Thread) -> None:
    """Raise SystemExit in ``thread`` as soon as it runs Python code again (for a waiter: once
    it is woken, before its next attempt)."""
    assert thread.ident is not None
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread.ident), ctypes.py_object(SystemExit)
    )
    assert done == 1


@pytest.mark.parametrize("how", ["killed", "timed out"])
def test_a_waiter_that_leaves_does_not_delay_the_next(redis_url: str, impl: str, how: str) -> None:
    """The first waiter leaves (killed as the release hands it the lock, or by its own
    timeout): the lock passes on, and the second waiter holds it well within MAX_NAP."""
    with (
        fastlock.Client(redis_url, max_connections=1) as probe,
        fastlock.Client(redis_url, impl=impl) as client,
    ):
        holder = client.lock("leave", ttl=30)
        assert holder.acquire("holder") is not None
        results: dict[str, Any] = {}

        def waiter(name: str, timeout: float) -> None:
            try:
                results[name] = client.lock("leave", ttl=30, timeout=timeout).acquire(name)
            except BaseException as exc:  # noqa: BLE001 - the test reads it
                results[name] = exc

        first = threading.Thread(target=waiter, args=("a", 0.3 if how == "timed out" else 20))
        first.start()
        wait_until_listening(probe, 1)
        time.sleep(0.05)  # the first has made its flagged attempt and sleeps
        second = threading.Thread(target=waiter, args=("b", 20))
        second.start()
        time.sleep(0.1)
        if how == "killed":
            _kill(first)
        else:
            first.join()
            assert results["a"] is None
        released = time.monotonic()
        assert holder.release("holder") is not None
        second.join(20)
        assert isinstance(results["b"], int), results
        assert time.monotonic() - released < PROMPT
        first.join(20)
        if how == "killed":
            assert isinstance(results["a"], SystemExit), results


def test_a_forked_child_listens_on_its_own(redis_url: str, impl: str) -> None:
    """A fork while the listener has a waiter: the child's waits use a listener of its own,
    and the parent's goes on working (the child never touched its socket)."""
    with fastlock.Client(redis_url, impl=impl) as client:
        held = client.lock("parent", ttl=30)
        assert held.acquire("holder") is not None
        got: list[Any] = []
        waiting = threading.Thread(
            target=lambda: got.append(client.lock("parent", ttl=30, timeout=20).acquire("pw"))
        )
        waiting.start()
        wait_until_listening(client, 1)
        parent_listener = client.listener
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its own listener, woken by its own release
            code = 1
            try:
                assert client.listener is not parent_listener
                own = client.lock("child", ttl=30)
                own.acquire("ch")
                timer = threading.Timer(0.2, own.release, args=("ch",))
                timer.start()
                started = time.monotonic()
                token = client.lock("child", ttl=30, timeout=10).acquire("cw")
                os.write(write, f"{token is not None} {time.monotonic() - started:.3f}".encode())
                timer.join()
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        with os.fdopen(read) as pipe:
            report = pipe.read().split()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0 and report[0] == "True", report
        assert float(report[1]) < 0.2 + PROMPT
        assert client.listener is parent_listener
        released = time.monotonic()
        assert held.release("holder") is not None
        waiting.join(20)
        assert got and got[0] is not None
        assert time.monotonic() - released < PROMPT


def test_a_refused_handshake_is_raised_to_the_waiter(redis_url: str, impl: str) -> None:
    """A listener whose handshake fails (SELECT of a database the server lacks) raises the
    server's error to the waiter entering, instead of leaving it unheard."""
    with fastlock.Client(redis_url, impl=impl) as client:
        listener = Listener(dataclasses.replace(client.params, db=99), client._core)
        try:
            with pytest.raises(fastlock.ResponseError, match="DB index"):
                listener.listen(b"some-channel")
        finally:
            listener.close()


def test_a_lost_listener_connection_subscribes_again_and_wakes_its_waiters(redis_url: str, impl: str) -> None:
    """The server drops the listener's connection while a thread waits: the reader connects
    again (within MAX_NAP), subscribes the channel again, and the next release still wakes
    the waiter at once."""
    with (
        fastlock.Client(redis_url, max_connections=1) as probe,
        fastlock.Client(redis_url, impl=impl) as client,
    ):
        holder = client.lock("lost", ttl=30)
        assert holder.acquire("holder") is not None
        got: list[Any] = []
        waiting = threading.Thread(
            target=lambda: got.append(client.lock("lost", ttl=30, timeout=20).acquire("w"))
        )
        waiting.start()
        wait_until_listening(probe, 1)
        assert probe.execute("CLIENT", "KILL", "TYPE", "pubsub") == 1
        wait_until_listening(probe, 1)  # subscribed again
        time.sleep(0.1)  # the waiter, woken by the loss and again by the resubscription, sleeps
        assert not got
        released = time.monotonic()
        assert holder.release("holder") is not None
        waiting.join(20)
        assert got and got[0] is not None
        assert time.monotonic() - released < PROMPT


def _queued(probe: fastlock.Client, lock: Any, count: int) -> None:
    """Until ``count`` waiters of ``lock`` are queued for a hand-over, and their patience has
    run out (a release hands them the lock then)."""
    queue = (lock._main_scope.wake + "q").encode()
    deadline = time.monotonic() + 10
    while probe.execute("ZCARD", queue) < count:
        assert time.monotonic() < deadline, "the waiters never queued"
        time.sleep(0.005)
    if lock.manager.patience:
        time.sleep(lock.manager.patience + PATIENCE_RECHECK)


def test_a_release_hands_the_lock_to_the_named_thread_only(redis_url: str, impl: str) -> None:
    """A release with a queued thread gives it the lock inside the release script: the thread
    returns the new token with no attempt of its own; a waiter of another job on the same
    channel, on another client's listener (as in another process), is not woken."""
    with (
        fastlock.Client(redis_url, max_connections=1) as probe,
        fastlock.Client(redis_url, impl=impl) as client,
        fastlock.Client(redis_url, impl=impl) as other,
    ):
        holder = client.lock("named", ttl=30)
        assert holder.acquire("holder") is not None
        got: list[Any] = []
        waiter = threading.Thread(
            target=lambda: got.append(client.lock("named", ttl=30).acquire("w", timeout=10))
        )
        waiter.start()
        _queued(probe, holder, 1)
        bystander = other.listener.listen(other.listener.channel(holder._main_scope.wake), "bystander")
        try:
            assert holder.release("nobody") is None  # the release script is loaded
            probe.execute("CONFIG", "RESETSTAT")
            freed = holder.release("holder")
            waiter.join(10)
            assert freed is not None and got and got[0] is not None and got[0] > freed
            calls = command_calls(probe)
            # the release, no second attempt (a script reloaded by another test: re-sent once)
            assert calls["evalsha"] - calls.get("script|load", 0) == 1, calls
            assert calls.get("publish") == 1, calls
            time.sleep(0.05)  # the message has reached both listeners
            assert not bystander.is_set() and bystander.token is None
            assert [h.job_id for h in holder.holders()] == ["w"]
        finally:
            other.listener.leave(other.listener.channel(holder._main_scope.wake), bystander)
        assert holder.release("w") == got[0]


def test_a_hand_over_message_read_late_reaches_no_later_wait(redis_url: str, impl: str) -> None:
    """A release's hand-over message names one wait, not only its job: the message of an
    earlier wait, read late (its waiter took the lock by a re-check meanwhile, released it and
    waits again), is not taken by the job's next wait as the token of a lock it holds."""
    with (
        fastlock.Client(redis_url, max_connections=1) as probe,
        fastlock.Client(redis_url, impl=impl) as client,
        redis.Redis.from_url(redis_url) as spy,
        spy.pubsub() as heard,
    ):
        holder = client.lock("late", ttl=30)
        assert holder.acquire("holder") is not None
        channel = client.listener.channel(holder._main_scope.wake)
        heard.subscribe(channel)
        got: list[Any] = []
        waiting = threading.Thread(target=lambda: got.append(holder.acquire("w", timeout=10)))
        waiting.start()
        _queued(probe, holder, 1)
        assert holder.release("holder") is not None  # handed over to the waiting "w"
        waiting.join(10)
        message = next_message(heard)
        assert got and got[0] is not None
        assert holder.release("w") == got[0]
        assert holder.acquire("holder") is not None
        waiting = threading.Thread(target=lambda: got.append(holder.acquire("w", timeout=1.5)))
        waiting.start()
        _queued(probe, holder, 1)
        probe.execute("PUBLISH", channel, message)  # the earlier wait's message, late
        waiting.join(10)
        assert got[1] is None  # timed out: "holder" holds it all along
        assert [h.job_id for h in holder.holders()] == ["holder"]


def test_within_its_patience_a_waiter_is_woken_and_a_running_caller_may_barge(
    redis_url: str, impl: str
) -> None:
    """A release before its queued waiter's patience ran out frees the lock and wakes that
    waiter to try again (no 1 s nap while the lock is free); a caller already running may take
    it first (barging); once the patience ran out, a release hands it the lock in one step."""
    patience = 0.3
    with fastlock.Client(redis_url, impl=impl) as client:
        locks = fastlock.LockManager(client, patience=patience)
        holder = locks.lock("patient", ttl=30)
        assert holder.acquire("holder") is not None
        got: list[tuple[Any, float]] = []

        def wait() -> None:
            token = locks.lock("patient", ttl=30).acquire("w", timeout=10)
            got.append((token, time.monotonic()))

        waiting = threading.Thread(target=wait)
        waiting.start()
        queue = (holder._main_scope.wake + "q").encode()
        while client.execute("ZCARD", queue) < 1:
            time.sleep(0.002)
        queued = time.monotonic()
        scope = holder._main_scope
        pipe = client.pipeline()  # the running caller's release, then its next acquire at once
        pipe.call("lock_release", scope.keys, locks.release_args(scope, "holder"))
        pipe.call(*holder._acquire_call(scope, "holder", locks.flags, False))
        freed, barged = pipe.execute()
        assert freed > 0 and barged > freed  # young waiter: the lock was freed, the caller barged
        time.sleep(0.05)
        assert not got  # the waiter was woken, tried, lost, and waits on
        time.sleep(max(0.0, queued + patience - time.monotonic()))
        assert holder.release("holder") is not None  # past its patience: handed over
        waiting.join(10)
        assert got and got[0][0] is not None and got[0][1] - queued < patience + MAX_NAP / 2
        assert [h.job_id for h in holder.holders()] == ["w"]
        assert holder.release("w") is not None

        holder.acquire("holder")
        got.clear()
        waiting = threading.Thread(target=wait)
        waiting.start()
        while client.execute("ZCARD", queue) < 1:
            time.sleep(0.002)
        client.execute("SET", queue[:-1] + b"n", "an earlier head", "PX", 10_000)  # told before
        released = time.monotonic()
        assert holder.release("holder") is not None  # young waiter, nobody barges
        waiting.join(10)
        assert got and got[0][0] is not None and got[0][1] - released < patience / 2  # woken at once


@pytest.mark.parametrize("patience", [-0.1, 61, "1", None])
def test_a_wrong_patience_is_refused(client: fastlock.Client, patience: Any) -> None:
    with pytest.raises(
        fastlock.ArgumentError if isinstance(patience, int | float) else fastlock.ArgumentTypeError
    ):
        fastlock.LockManager(client, patience=patience)


def _waited_bits(probe: fastlock.Client, slot: str) -> bytes:
    return probe.execute("GET", slot).split(b":")[1]


def test_a_release_pushes_the_wake_list_only_for_waiters_without_a_listener(
    redis_url: str, impl: str
) -> None:
    """A conflict flags the holder's slot with who waits (shared/_lock_slots.lua): a listening
    waiter with QUEUED_BY (2), so a release pushes nothing on the wake list, which nobody reads;
    a waiter without a listener (``BLPOP``) with BLOCKED (1) too, and a release wakes it there,
    while the listening one is woken on the listener (young: the lock freed, told to try again)."""
    with fastlock.Client(redis_url, impl=impl) as client:
        locks = fastlock.LockManager(client, patience=0.5)
        holder = locks.lock("kinds", ttl=30)
        assert holder.acquire("holder") is not None
        scope = holder._main_scope
        slot, queue = scope.slots[0], scope.wake + "q"
        got: dict[str, tuple[Any, float, Any]] = {}  # the token, when, what its release freed

        def listening() -> None:
            lock = locks.lock("kinds", ttl=30)
            token, at = lock.acquire("l", timeout=10), time.monotonic()
            got["l"] = (token, at, lock.release("l"))

        def blocked() -> None:
            lock = locks.lock("kinds", ttl=30)
            token, at = client.run(lock._waiting(scope, "b", 10.0)), time.monotonic()
            got["b"] = (token, at, lock.release("b"))

        waiter = threading.Thread(target=listening)
        waiter.start()
        wait_until(lambda: client.execute("ZCARD", queue) >= 1, 10, "queued", 0.002)
        assert _waited_bits(client, slot) == b"2"
        assert holder.release("holder") is not None
        waiter.join(10)
        assert type(got["l"][0]) is int and got["l"][2] == got["l"][0]
        assert client.execute("EXISTS", scope.wake) == 0  # nothing pushed: nobody blocks on it

        assert holder.acquire("holder") is not None
        waiters = [threading.Thread(target=blocked), threading.Thread(target=listening)]
        waiters[0].start()
        wait_until(lambda: _waited_bits(client, slot) == b"1", 10, "flagged BLOCKED", 0.002)
        waiters[1].start()
        wait_until(lambda: client.execute("ZCARD", queue) >= 1, 10, "queued", 0.002)
        assert _waited_bits(client, slot) == b"3"
        released = time.monotonic()
        assert holder.release("holder") is not None
        for thread in waiters:
            thread.join(15)
        assert got.keys() == {"l", "b"}
        assert all(
            type(token) is int and at - released < MAX_NAP * 2 and freed == token
            for token, at, freed in got.values()
        ), got


def test_a_wait_on_a_free_lock_costs_what_an_attempt_costs_on_a_lingering_channel(
    redis_url: str, impl: str
) -> None:
    """After a wait, the lock's channel stays subscribed without waiters (``LINGER``): an acquire
    with a timeout that finds the lock free still sends what one without a timeout sends (it
    does not join the channel and queue first: nobody of this client waits there)."""
    with fastlock.Client(redis_url, impl=impl) as client, fastlock.Client(redis_url, impl=impl) as probe:
        holder = client.lock("lingers", ttl=30)
        assert holder.acquire("holder") is not None
        got: list[int | None] = []
        waiter = threading.Thread(
            target=lambda: got.append(client.lock("lingers", ttl=30).acquire("w", timeout=10))
        )
        waiter.start()
        wait_until_listening(probe, 1)
        assert holder.release("holder") is not None
        waiter.join(10)
        assert type(got[0]) is int and holder.release("w") == got[0]
        channel = client.listener.channel(holder._main_scope.wake)
        assert channel in probe.execute("PUBSUB", "CHANNELS")  # lingering, no waiter

        def lifecycles(timeout: float) -> dict[str, int]:
            lock = client.lock("lingers", ttl=30, timeout=timeout)
            probe.execute("CONFIG", "RESETSTAT")
            for n in range(20):
                assert lock.acquire(f"j{n}") is not None
                assert lock.release(f"j{n}") is not None
            return command_calls(probe)

        assert lifecycles(5.0) == lifecycles(0.0)
        assert channel in probe.execute("PUBSUB", "CHANNELS")


def test_a_waiters_first_queued_attempt_dequeues_nothing(redis_url: str, impl: str) -> None:
    """A waiter that joins its client's waiters sends a first attempt that queues it (``FRESH``):
    on a free lock it takes the lock without a ``ZREM`` (its member is not queued yet); on a
    held one it is queued, and a later attempt that takes the lock dequeues it."""
    with fastlock.Client(redis_url, impl=impl) as client, fastlock.Client(redis_url, impl=impl) as probe:
        lock = client.lock("fresh", ttl=30)
        scope = lock._main_scope or lock._bind()
        queue = (scope.wake + "q").encode()
        _, _, first = lock._joining(scope, "w", client.listener, lock.manager.patience)
        assert type(client.call(first.name, first.keys, first.args)) is int  # warm: scripts loaded
        assert lock.release("w") is not None
        _, member, first = lock._joining(scope, "w", client.listener, lock.manager.patience)
        probe.execute("CONFIG", "RESETSTAT")
        assert type(client.call(first.name, first.keys, first.args)) is int
        assert "zrem" not in command_calls(probe) and not probe.execute("EXISTS", queue)
        assert lock.release("w") is not None
        assert lock.acquire("holder") is not None
        assert type(client.call(first.name, first.keys, first.args)) is list  # a conflict queues it
        assert probe.execute("ZRANGE", queue, 0, -1) == [member.encode()]
        assert lock.release("holder") is not None
        again = lock._queued_call(scope, "w", client.listener, QUEUED, member)
        assert type(client.call(again.name, again.keys, again.args)) is int
        assert not probe.execute("EXISTS", queue)
        assert lock.release("w") is not None
