"""Rate limiters on real servers (Redis and Valkey, both cores): GCRA and the sliding window,
their decisions, the waiting acquire, validation before anything is sent; the wait loop alone
with a fake clock."""

from __future__ import annotations

import time
from typing import Any

import pytest

import fastlock
from fastlock import ArgumentError, ArgumentTypeError, Decision, Limiter
from fastlock.limits.base import decided, wait_until_admitted
from fastlock.operations import Call, Sleep


def test_gcra_admits_the_burst_then_spaces_admissions(client: fastlock.Client) -> None:
    limiter = client.limiter("api", rate=10, per=1.0, burst=3)
    assert isinstance(limiter, Limiter) and repr(limiter) == "<fastlock.Limiter 'api' gcra rate=10 per=1.0>"
    assert [d.remaining for d in (limiter.try_acquire() for _ in range(3))] == [2, 1, 0]
    denied = limiter.try_acquire()
    assert not denied and denied.remaining == 0 and 0.05 < denied.retry_after <= 0.1
    assert client.execute("PTTL", limiter.key) > 0  # the key goes once idle
    time.sleep(denied.retry_after)
    assert limiter.try_acquire().allowed
    limiter.reset()
    assert limiter.try_acquire(3) == Decision(True, 0, 0.0)


def test_gcra_n_at_once_and_the_default_burst(client: fastlock.Client) -> None:
    limiter = client.limiter("bulk", rate=100, per=10.0)  # burst 100, one every 100 ms
    assert limiter.try_acquire(60).remaining == 40
    denied = limiter.try_acquire(41)
    assert not denied and denied.remaining == 40 and 0.05 < denied.retry_after <= 0.1
    assert limiter.try_acquire(40).remaining == 0


def test_window_admits_rate_per_window(client: fastlock.Client) -> None:
    limiter = client.limiter("win", rate=3, per=0.3, kind="window")
    assert [d.remaining for d in (limiter.try_acquire() for _ in range(2))] == [2, 1]
    assert limiter.try_acquire(2).retry_after > 0  # 2 more do not fit: nothing taken
    assert limiter.try_acquire().remaining == 0
    denied = limiter.try_acquire()
    assert not denied and 0.2 < denied.retry_after <= 0.3
    time.sleep(denied.retry_after)
    assert limiter.try_acquire().allowed  # the oldest admission has left the window
    time.sleep(limiter.try_acquire(3).retry_after)  # until all three have
    assert limiter.try_acquire(3).allowed


def test_acquire_sleeps_the_retry_after(client: fastlock.Client) -> None:
    for kind in ("gcra", "window"):
        limiter = client.limiter(f"wait-{kind}", rate=2, per=0.2, kind=kind)  # type: ignore[arg-type]
        assert limiter.try_acquire(2).allowed
        started = time.monotonic()
        assert limiter.acquire(timeout=5).allowed
        assert time.monotonic() - started >= 0.09  # the server's retry-after, slept
        refused = limiter.acquire(2, timeout=0.01)  # would need longer than the timeout: at once
        assert not refused and refused.retry_after > 0.01


def test_kinds_use_their_own_keys_in_one_slot(client: fastlock.Client) -> None:
    gcra, window = client.limiter("same"), client.limiter("same", kind="window")
    assert gcra.key == "fl:{same}:limit:gcra" and window.key == "fl:{same}:limit:window"
    assert client.limiter("{t}x", prefix="p").key == "p:{t}x:limit:gcra"
    assert gcra.try_acquire() and window.try_acquire()


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"rate": 0}, ArgumentError),
        ({"rate": 10**10}, ArgumentError),
        ({"rate": 1.5}, ArgumentTypeError),
        ({"rate": True}, ArgumentTypeError),
        ({"per": 0}, ArgumentError),
        ({"per": -1}, ArgumentError),
        ({"per": float("nan")}, ArgumentError),
        ({"per": "1"}, ArgumentTypeError),
        ({"burst": 0}, ArgumentError),
        ({"burst": 2.0}, ArgumentTypeError),
        ({"kind": "bucket"}, ArgumentError),
        ({"kind": "window", "burst": 5}, ArgumentError),
        ({"kind": "window", "rate": 10_001}, ArgumentError),
        ({"name": ""}, ArgumentError),
        ({"name": "a{b"}, ArgumentError),
        ({"name": 5}, ArgumentTypeError),
    ],
)
def test_bad_options_are_refused(client: fastlock.Client, options: dict[str, Any], error: type) -> None:
    options = dict(options)  # the parameter is shared by every run
    name = options.pop("name", "bad")
    with pytest.raises(error):
        client.limiter(name, **options)


def test_bad_n_and_timeout_are_refused_before_sending(client: fastlock.Client) -> None:
    limiter = client.limiter("n", rate=5, burst=2)
    window = client.limiter("n", rate=5, kind="window")
    bad_ns = ((0, ArgumentError), (3, ArgumentError), (1.0, ArgumentTypeError), (True, ArgumentTypeError))
    for bad, error in bad_ns:
        with pytest.raises(error):
            limiter.try_acquire(bad)  # type: ignore[arg-type]
        with pytest.raises(error):
            limiter.acquire(bad, timeout=1)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError):
        window.try_acquire(6)
    with pytest.raises(ArgumentError):
        limiter.acquire(timeout=-1)
    with pytest.raises(ArgumentTypeError):
        limiter.acquire(timeout="1")  # type: ignore[arg-type]
    assert client.execute("EXISTS", limiter.key, window.key) == 0


def test_the_wait_loop_with_a_fake_clock() -> None:
    """Each denial's retry-after is slept, once; a wait past the timeout returns the denial."""
    now = [100.0]
    call = Call("limit_gcra", ("k",), (1, 0, 1))
    plan = wait_until_admitted(lambda: call, 1.0, clock=lambda: now[0])
    assert next(plan) is call
    assert plan.send([0, 0, 400_000]) == Sleep(0.4)
    now[0] += 0.4
    assert plan.send(None) is call
    assert plan.send([0, 0, 500_000]) == Sleep(0.5)  # ends at 100.9: within the timeout
    now[0] += 0.5
    assert plan.send(None) is call
    with pytest.raises(StopIteration) as stop:
        plan.send([0, 0, 200_000])  # would end at 101.1, past 101.0
    assert stop.value.value == Decision(False, 0, 0.2)
    admitted = wait_until_admitted(lambda: call, None, clock=lambda: now[0])
    next(admitted)
    with pytest.raises(StopIteration) as stop:
        admitted.send([1, 4, 0])
    assert stop.value.value == Decision(True, 4, 0.0)


@pytest.mark.parametrize("reply", [None, [1, 2], [1, 2, b"3"], "x", [1, 2, 3, 4]])
def test_unexpected_replies(reply: object) -> None:
    with pytest.raises(fastlock.ProtocolError):
        decided(reply)
