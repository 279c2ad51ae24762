"""Read-write locks on real servers (Redis and Valkey, both cores): readers together, a writer
alone (checked inside the critical section with server-side counters, from threads), writer
preference (a writer behind a stream of readers gets in within one reader ttl), fencing tokens
across both sides, a reader's own ttl, waits woken by a release without polling (on the
client's listener and on the wake stream), timeouts, arguments checked before anything is sent.
The tests taking only ``client`` run on the 3x3 cluster too (tests/cluster/test_rwlock_cluster.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from harness.blocking import wait_until_listening
from harness.size import sized

import fastlock
from fastlock import ArgumentError, ArgumentTypeError, LockConflictError, LockError, LockNotOwnedError
from fastlock.locks.notify import MAX_NAP
from fastlock.locks.types import WAITING
from fastlock.protocol.slots import key_slot
from fastlock.tools.costs import command_calls

PROMPT = MAX_NAP / 2  # a wait that ended within this after a release was woken by it, not by a re-check


def _in_threads(*work: Callable[[], Any]) -> list[Any]:
    """Run each callable in a thread of its own: their results (an exception raised in one is
    raised here)."""
    with ThreadPoolExecutor(len(work)) as pool:
        futures = [pool.submit(fn) for fn in work]
        return [future.result(timeout=60) for future in futures]


def test_readers_hold_together_a_writer_alone(client: Any) -> None:
    rw = client.rwlock("doc", ttl=30)
    assert isinstance(rw, fastlock.RWLock) and rw.keys[0] == "fl:{doc}:rwlock:w"
    first, second = rw.read.acquire("r1"), rw.read.acquire("r2")
    assert first is not None and second is not None and second > first
    assert rw.read.acquire("r1") == first  # a holder gets its own token back
    assert {h.job_id for h in rw.read.holders()} == {"r1", "r2"} and rw.write.holders() == []
    assert rw.write.acquire("w") is None
    assert rw.read.release("r1") == first and rw.read.release("r1") is None
    assert rw.write.acquire("w") is None  # r2 still reads
    assert rw.read.release("r2") == second
    writer = rw.write.acquire("w")
    assert writer is not None and writer > second
    assert rw.write.acquire("w") == writer
    assert rw.read.acquire("r1") is None and rw.write.acquire("w2") is None
    [holder] = rw.write.holders()
    assert (holder.job_id, holder.token) == ("w", writer) and 29 < holder.ttl <= 30
    assert rw.write.release("w2") is None and rw.write.release("w") == writer
    assert rw.read.acquire("r1") is not None


def test_the_writer_may_read_a_reader_may_not_write(client: Any) -> None:
    """A downgrade (the writer takes the read side) is allowed; an upgrade is refused at once
    (it would wait for itself)."""
    rw = client.rwlock("grade", ttl=30, timeout=5)
    writer = rw.write.acquire("job")
    reader = rw.read.acquire("job")
    assert writer is not None and reader is not None and reader > writer
    assert rw.read.acquire("other", timeout=0) is None
    assert rw.write.release("job") == writer
    assert rw.read.acquire("other") is not None  # the writer is gone: readers together
    with pytest.raises(LockError, match="upgrade refused: job job holds the read side"):
        rw.write.acquire("job")
    started = time.monotonic()
    with pytest.raises(LockError, match="upgrade"):
        rw.write.acquire("job", timeout=5)
    assert time.monotonic() - started < 1


def test_fencing_tokens_increase_across_both_sides(client: Any) -> None:
    rw = client.rwlock("fence", ttl=30)
    tokens = []
    for i in range(4):
        tokens.append(rw.read.acquire(f"r{i}"))
        tokens.append(rw.read.acquire(f"s{i}"))
        assert rw.read.release(f"r{i}") == tokens[-2] and rw.read.release(f"s{i}") == tokens[-1]
        tokens.append(rw.write.acquire("w"))
        assert rw.write.release("w") == tokens[-1]
    assert tokens == sorted(set(tokens)) and None not in tokens
    other = client.rwlock("fence", ttl=5, prefix="other")  # another prefix: another lock
    assert other.write.acquire("w") == 1


def test_a_readers_ttl_expires_alone(client: Any) -> None:
    short, long = client.rwlock("ttl", ttl=0.15), client.rwlock("ttl", ttl=30)
    gone, kept = short.read.acquire("gone"), long.read.acquire("kept")
    assert gone is not None and kept is not None
    time.sleep(0.2)
    assert [h.job_id for h in long.read.holders()] == ["kept"]
    assert short.read.release("gone") is None  # its ttl ran out: it held nothing
    assert long.write.acquire("w") is None
    assert long.read.release("kept") == kept
    assert long.write.acquire("w") is not None
    forever = client.rwlock("forever", ttl=None)
    assert forever.read.acquire("r") is not None
    [holder] = forever.read.holders()
    assert holder.ttl is None
    assert forever.write.acquire("w") is None


def test_the_readers_keys_live_as_long_as_their_last_reader(client: Any) -> None:
    """Expired readers are dropped a bounded number at a time (16 per read acquire) and the
    readers' keys expire with the longest-lived reader: a crashed reader's entry goes at the
    latest with them."""
    # (the first reader outlives the 20 short ones and the long one's acquire by far, on a
    # loaded machine too: its 0.3 s once ran out before the long reader came, in a CI rehearsal)
    first, short, long = (client.rwlock("keys", ttl=ttl) for ttl in (2, 0.05, 30))
    assert first.read.acquire("first") is not None
    first_ends = time.monotonic() + 2
    assert all(short.read.acquire(f"s{i}") is not None for i in range(20))
    readers, tokens = first.keys[1], first.keys[2]
    assert 1000 < client.execute("PTTL", readers) <= 2000 and 1000 < client.execute("PTTL", tokens) <= 2000
    time.sleep(0.1)
    assert long.read.acquire("long") is not None
    assert client.execute("ZCARD", readers) == client.execute("HLEN", tokens) == 1 + 4 + 1
    assert client.execute("PTTL", readers) > 29_000 and client.execute("PTTL", tokens) > 29_000
    assert [h.job_id for h in long.read.holders()] == ["first", "long"]
    assert long.read.release("long") is not None
    time.sleep(max(0.0, first_ends - time.monotonic()) + 0.05)
    assert client.execute("EXISTS", readers, tokens) == 2  # the expired ones, until the keys' expiry
    assert long.write.acquire("w") is not None


def test_an_expired_writer_frees_the_lock(client: Any) -> None:
    rw = client.rwlock("lapse", ttl=0.1, timeout=2)
    assert rw.write.acquire("crashed") is not None
    started = time.monotonic()
    assert rw.read.acquire("r") is not None  # woken by the writer's expiry
    assert 0.05 < time.monotonic() - started < PROMPT
    assert rw.write.release("crashed") is None


def test_the_context_managers_give_the_token(client: Any) -> None:
    rw = client.rwlock("with", ttl=30)
    with rw.read as reader:
        assert rw.read.acquire() == reader  # one holder: the thread's
        assert rw.write.acquire("w") is None
    with rw.write as writer:
        assert writer > reader and rw.write.holders()[0].job_id == rw.write.job_id
    assert rw.write.acquire("w") is not None
    with pytest.raises(LockConflictError, match="read side not acquired"), rw.read:
        pass
    assert rw.write.release("w") is not None
    lapsing = client.rwlock("with", ttl=0.05)
    with pytest.raises(LockNotOwnedError, match="lost"), lapsing.read:
        time.sleep(0.1)


def test_a_timeout_returns_none(client: Any) -> None:
    rw = client.rwlock("late", ttl=30, timeout=0.1)
    assert rw.write.acquire("w") is not None
    started = time.monotonic()
    assert rw.read.acquire("r") is None
    assert rw.write.acquire("w2", timeout=0.05) is None
    assert 0.15 <= time.monotonic() - started < 0.15 + PROMPT
    assert rw.write.release("w") is not None
    assert rw.read.acquire("r") is not None  # the timed-out writer does not hold readers back


def test_never_a_writer_alongside_anyone(client: Any) -> None:
    """Threads sharing one lock (each its own default holder), a third of the turns writing:
    inside the critical section a writer sees itself alone and a reader no writer, by counters
    on the server."""
    rw = client.rwlock("excl", ttl=10, timeout=10)
    turns, state = sized(30, 12), "excl-state"

    def worker(n: int) -> list[Any]:
        bad = []
        for i in range(turns):
            if (n + i) % 3 == 0:
                with rw.write:
                    writers = client.execute("HINCRBY", state, "w", 1)
                    readers = int(client.execute("HGET", state, "r") or 0)
                    if writers != 1 or readers:
                        bad.append(("writer beside", writers, readers))
                    client.execute("HINCRBY", state, "w", -1)
            else:
                with rw.read:
                    client.execute("HINCRBY", state, "r", 1)
                    if int(client.execute("HGET", state, "w") or 0):
                        bad.append(("reader beside a writer", n, i))
                    time.sleep(0.001)
                    client.execute("HINCRBY", state, "r", -1)
        return bad

    assert _in_threads(*(lambda n=n: worker(n) for n in range(6))) == [[]] * 6


def test_a_writer_behind_a_stream_of_readers_gets_in_within_a_reader_ttl(client: Any) -> None:
    """Readers keep coming (every other one never releases: it holds until its ttl), so some
    reader is always live; a writer that starts waiting holds new readers back and gets the
    lock once the live ones are gone: within one reader ttl."""
    ttl = 0.3
    rw = client.rwlock("stream", ttl=ttl, timeout=5)
    stop, entered = threading.Event(), []

    def reader(n: int) -> None:
        i = 0
        while not stop.is_set():
            job, i = f"r{n}-{i}", i + 1
            if rw.read.acquire(job) is not None:
                entered.append(time.monotonic())
                time.sleep(0.01)
                if i % 2:
                    rw.read.release(job)

    def writer() -> tuple[int | None, float, int]:
        try:
            deadline = time.monotonic() + 10
            while len(entered) < 6 or not rw.read.holders():  # the stream is on, a reader live
                assert time.monotonic() < deadline, f"the readers did not stream: {len(entered)} entered"
                time.sleep(0.01)
            started = time.monotonic()
            token = rw.write.acquire("writer")
            waited = time.monotonic() - started
            readers_live = len(rw.read.holders())
        finally:
            stop.set()
        rw.write.release("writer")
        return token, waited, readers_live

    *_, (token, waited, readers_live) = _in_threads(*(lambda n=n: reader(n) for n in range(3)), writer)
    assert token is not None and readers_live == 0
    assert waited < ttl + PROMPT


def test_keys_share_the_names_slot(client: Any) -> None:
    for name, prefix in (("a", "fl"), ("{t}b", "p"), ("x:y", "{z}")):
        rw = client.rwlock(name, ttl=5, prefix=prefix)
        assert len({key_slot(key) for key in rw.keys}) == 1
        assert rw.read.acquire("r") is not None and rw.write.acquire("w") is None


def test_a_writers_release_wakes_every_waiting_reader(client: Any) -> None:
    """Three readers wait on the listener behind a writer and are all woken by its release."""
    rw = client.rwlock("wake", ttl=30, timeout=5)
    assert rw.write.acquire("w") is not None
    released = [0.0]

    def read(n: int) -> tuple[int | None, float]:
        token = rw.read.acquire(f"r{n}")
        return token, time.monotonic() - released[0]

    def release() -> None:
        time.sleep(0.3)
        released[0] = time.monotonic()
        assert rw.write.release("w") is not None

    *results, _ = _in_threads(*(lambda n=n: read(n) for n in range(3)), release)
    assert all(token is not None and late < PROMPT for token, late in results), results


# --- standalone only: server statistics, waits on the wake stream, the arguments ------------


def test_a_wait_sends_nothing_until_the_release_wakes_it(client: fastlock.Client) -> None:
    rw = client.rwlock("quiet", ttl=30, timeout=5)
    assert rw.read.acquire("r") is not None
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(rw.write.acquire("w")))
    waiter.start()
    wait_until_listening(client)  # then it tries once more, and sleeps
    client.execute("CONFIG", "RESETSTAT")
    time.sleep(0.4)  # under MAX_NAP: a sleeping waiter sends nothing
    idle = command_calls(client)
    released = time.monotonic()
    assert rw.read.release("r") is not None
    waiter.join(5)
    assert got and got[0] is not None and time.monotonic() - released < PROMPT
    assert idle.get("evalsha", 0) <= 1, idle  # at most its attempt after the subscription
    calls = command_calls(client)
    attempts = calls["evalsha"] - calls.get("script|load", 0) - idle.get("evalsha", 0)
    assert attempts == 2, (calls, idle)  # the release, one attempt
    assert calls.get("publish") == 1, calls


def test_a_wait_on_the_wake_stream(client: fastlock.Client) -> None:
    """Without a listener (the cluster and sentinel clients) a waiter blocks on the wake stream
    (XREAD), woken by the release's entry; a writer's timeout leaves no waiter behind."""
    rw = client.rwlock("list", ttl=30)
    assert rw.write.acquire("w") is not None
    released = [0.0]

    def wait(job: str) -> tuple[Any, float]:
        reply = client.run(rw._waiting("r", job, 5.0, None))
        return reply, time.monotonic() - released[0]

    def release() -> None:
        time.sleep(0.2)
        released[0] = time.monotonic()
        assert rw.write.release("w") is not None

    *results, _ = _in_threads(lambda: wait("a"), lambda: wait("b"), release)
    assert all(type(reply) is int and late < PROMPT for reply, late in results), results
    assert rw.write.acquire("w2") is None
    assert client.run(rw._waiting("w", "w2", 0.05, None))[1] == b"readers"  # timed out: left
    assert client.execute("EXISTS", rw.keys[4], rw.keys[5]) == 0


def test_a_wake_up_of_blocked_waiters_is_seen_by_each_not_taken_by_one(client: fastlock.Client) -> None:
    """A blocked waiter is told the wake stream's last entry at its attempt and waits for a
    newer one (XREAD): a release's one entry wakes every waiter registered before it, however
    many read it, and none registered after it (no waiter takes another's wake-up)."""
    rw = client.rwlock("seen", ttl=30)
    assert rw.write.acquire("w") is not None

    def wait(job: str) -> list[Any]:
        return client.call("rwlock_acquire", rw.keys, ("r", job, "30000", WAITING, f"b:{job}"))  # type: ignore[no-any-return]

    early, also = wait("a"), wait("c")
    assert early[1] == b"writer" and early[2] == also[2] == b"0-0"
    assert rw.write.release("w") is not None  # wakes them
    assert rw.write.acquire("w2") is not None  # a writer barges in before they try again
    late = wait("b")
    assert late[2] > early[2]

    def woken(conflict: list[Any]) -> bool:
        read = ("XREAD", "COUNT", 1, "BLOCK", 50, "STREAMS", rw.wake, conflict[2])
        return client.execute_blocking(*read, timeout=0.05) is not None

    assert [woken(early), woken(also), woken(early), woken(late)] == [True, True, True, False]


def test_bad_arguments_send_nothing(client: fastlock.Client) -> None:
    client.execute("CONFIG", "RESETSTAT")
    mistakes: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({}, ArgumentError, "ttl=<seconds>"),
        ({"ttl": "30"}, ArgumentTypeError, "ttl"),
        ({"ttl": 0}, ArgumentError, "ttl"),
        ({"ttl": float("nan")}, ArgumentError, "ttl"),
        ({"ttl": 5, "timeout": -1}, ArgumentError, "timeout"),
        ({"ttl": 5, "timeout": True}, ArgumentTypeError, "timeout"),
        ({"ttl": 5, "prefix": 3}, ArgumentTypeError, "prefix"),
        ({"ttl": 5, "prefix": "{}"}, ArgumentError, "hash tag"),
        ({"ttl": 5, "tiemout": 1}, fastlock.UnknownOptionError, "did you mean 'timeout'"),
    ]
    for options, error, match in mistakes:
        with pytest.raises(error, match=match):
            client.rwlock("bad", **options)
    for name in ("", "a{b", "{x}"):
        with pytest.raises(ArgumentError):
            client.rwlock(name, ttl=5)
    with pytest.raises(ArgumentTypeError):
        client.rwlock(5, ttl=5)  # type: ignore[arg-type]
    rw = client.rwlock("bad", ttl=5)
    with pytest.raises(ArgumentTypeError, match="job id"):
        rw.read.acquire(5)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="job id"):
        rw.write.release("")
    with pytest.raises(ArgumentError, match="timeout"):
        rw.write.acquire(timeout=float("inf"))
    assert command_calls(client) == {}
