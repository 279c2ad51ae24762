"""The lock watchdog (``renew=True``, locks/renewal.py) on real servers, both cores: locks kept
past their ttl while held, in one round trip per renewal period for all of a client's locks;
a release stops it; a SIGSTOPped holder loses its lock to another process and is told."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from harness.size import sized

import fastlock
from fastlock import ArgumentError, ArgumentTypeError
from fastlock.locks.renewal import renewer
from fastlock.locks.renewing import RenewingLock

TTL = 0.3
PAUSED_TTL = 0.5  # the SIGSTOPped holder's: renewed for 1 s, then paused for 1 s
KEPT_TTL = 1.0  # a lock kept past its ttl: periods of 1/3 s, late rounds on a loaded machine tolerated


def test_a_renewed_lock_outlives_its_ttl_and_its_release_stops_the_renewal(client: Any) -> None:
    lock = client.lock("renewed", ttl=KEPT_TTL, renew=True)
    assert isinstance(lock, RenewingLock)
    with lock as token:
        time.sleep(KEPT_TTL * 1.5)
        assert not lock.lost
        assert [h.token for h in lock.holders()] == [token]
    assert not lock.lost and renewer(client).renewals.wait() is None  # nothing held: no round due
    before = client.pool.round_trips
    time.sleep(KEPT_TTL / 2)
    assert client.pool.round_trips == before  # no renewal sent after the release


def renewer_threads() -> int:
    return sum(thread.name == "fastlock-lock-renewer" for thread in threading.enumerate())


def test_the_renewing_thread_runs_only_while_a_renewing_lock_is_held(client: Any) -> None:
    before = renewer_threads()
    for _ in range(2):  # a second hold after the thread ended starts one again
        with client.lock("renewed", ttl=KEPT_TTL, renew=True):
            assert renewer_threads() == before + 1
        deadline = time.monotonic() + 5
        while renewer_threads() > before:  # ends once nothing is held: a closed client leaves none
            assert time.monotonic() < deadline, "the renewing thread outlived its last lock"
            time.sleep(0.01)


def test_a_thousand_locks_in_one_round_trip_per_period(client: Any) -> None:
    ttl, watched = 3.0, 3.5  # past the ttl; periods of 1 s
    locks = [client.lock(f"many:{n}", ttl=ttl, renew=True) for n in range(1000)]
    for lock in locks:
        assert lock.acquire() is not None
    before = client.pool.round_trips
    time.sleep(watched)
    round_trips = client.pool.round_trips - before
    assert 1 <= round_trips <= watched / (ttl / 3) + 1, round_trips
    assert sum(lock.lost for lock in locks) == 0
    slots = [lock._main_scope.slots[0] for lock in locks]
    assert client.execute("EXISTS", *slots) == 1000  # every lock kept past its ttl
    assert all(lock.release() is not None for lock in locks)


def test_a_lost_lock_is_told_and_not_renewed(client: Any) -> None:
    lock = client.lock("deleted", ttl=TTL, renew=True)
    assert lock.acquire() is not None
    client.execute("DEL", *lock._main_scope.slots)  # deleted behind the holder's back
    other = client.lock("deleted", ttl=30)
    assert other.acquire("other") is not None
    time.sleep(TTL)
    assert lock.lost
    assert lock.release() is None and lock.lost
    assert [h.job_id for h in other.holders()] == ["other"]


def test_a_hold_taken_again_keeps_its_known_expiry(client: Any) -> None:
    """A second acquire by the holder returns its token and leaves the server's expiry as it
    was: the expiry the holder knows (when ``lost`` turns true) does not move either."""
    lock = client.lock("again", ttl=KEPT_TTL, renew=True)
    token = lock.acquire()
    (first,) = lock._renewing.values()
    time.sleep(0.05)
    assert lock.acquire() == token
    (again,) = lock._renewing.values()
    assert again is not first and again.expires == first.expires
    assert lock.release() == token


def test_bad_renew_options_are_refused_before_anything_is_sent(client: Any) -> None:
    with pytest.raises(ArgumentTypeError):
        client.lock("bad", ttl=1, renew="yes")
    with pytest.raises(ArgumentError):
        client.lock("bad", ttl=None, renew=True)
    with pytest.raises(ArgumentError, match=r"client\.lock"):
        fastlock.Lock(client.locks, "0" * 64, ttl=1, renew=True)
    with pytest.raises(ArgumentError, match="ttl"):
        RenewingLock(client.locks, "0" * 64, ttl=None)
    assert client.execute("DBSIZE") == 0


_HOLDER = """
import sys
import fastlock
client = fastlock.Client(sys.argv[1], impl=sys.argv[2])
lock = client.lock("paused", ttl=float(sys.argv[3]), renew=True)
print(lock.acquire(), flush=True)
sys.stdin.readline()
print(lock.lost, lock.release(), lock.lost, flush=True)
"""


def test_a_paused_holder_loses_its_lock_to_another_process(client: Any, redis_url: str, impl: str) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, redis_url, impl, str(PAUSED_TTL)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdin is not None and child.stdout is not None
        _pause_and_take(child, client, PAUSED_TTL)


def _pause_and_take(child: subprocess.Popen[str], client: Any, ttl: float) -> None:
    assert child.stdin is not None and child.stdout is not None
    try:
        token = int(child.stdout.readline())
        other = client.lock("paused", ttl=30)
        time.sleep(ttl * 2)
        assert other.acquire("other") is None  # renewed while the holder runs
        os.kill(child.pid, signal.SIGSTOP)
        time.sleep(ttl * 2)
        taken = other.acquire("other")
        assert taken is not None and taken > token  # expired in the pause: taken by another
        os.kill(child.pid, signal.SIGCONT)
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().split() == ["True", "None", "True"]
        assert [h.job_id for h in other.holders()] == ["other"]  # its release freed nothing of ours
    finally:
        os.kill(child.pid, signal.SIGCONT)
        child.kill()


_CONTENDER = """
import json, random, sys, time
import fastlock
client = fastlock.Client(sys.argv[1], impl=sys.argv[2])
lock = client.lock("contended", ttl=float(sys.argv[3]), renew=True)
until, held = time.monotonic() + float(sys.argv[4]), []
while time.monotonic() < until:
    if lock.acquire(timeout=0.5) is None:
        continue
    start = time.monotonic()
    time.sleep(random.uniform(0, 0.6))  # past the ttl, renewed
    end = time.monotonic()
    held.append((start, end, lock.lost))  # lost read after end: a pause before it counts as lost
    lock.release()
print(json.dumps(held), flush=True)
"""


@pytest.mark.slow
def test_no_two_holders_while_holders_are_paused_at_random(redis_url: str, impl: str) -> None:
    """Two renewing holders of one lock, each paused (SIGSTOP) at random, some pauses past the
    ttl: the spans a holder held the lock without being told it was lost never overlap."""
    seconds = sized(60, 10, "FASTLOCK_RENEW_PAUSE_SECONDS")
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CONTENDER, redis_url, impl, str(TTL), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    pick = random.Random(28)
    try:
        until = time.monotonic() + seconds
        while time.monotonic() < until - 1:
            child = pick.choice(children)
            child.send_signal(signal.SIGSTOP)
            time.sleep(pick.uniform(0.01, TTL * 2))
            child.send_signal(signal.SIGCONT)
            time.sleep(pick.uniform(0, TTL * 2))
        spans = [json.loads(child.communicate(timeout=seconds + 30)[0]) for child in children]
    finally:
        for child in children:
            child.send_signal(signal.SIGCONT)
            child.kill()
            child.wait()
            assert child.stdout is not None
            child.stdout.close()
    kept = [[(start, end) for start, end, lost in found if not lost] for found in spans]
    assert all(kept) and any(lost for found in spans for *_, lost in found)  # both held, some lost
    overlaps = [(a, b) for a in kept[0] for b in kept[1] if a[0] < b[1] and b[0] < a[1]]
    assert overlaps == []
