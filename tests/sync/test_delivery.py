"""The delivery contract of docs/delivery.md, call by call: with the reply lost after the
server ran the call, only an idempotent call (lock acquire) is sent again; every other
call raises ``ConnectionError(sent=True)`` and the server ran it exactly once."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

import fastlock
from fastlock.testing.proxy import TcpProxy
from fastlock.tools.costs import command_calls

pytestmark = pytest.mark.fault

Setup = Callable[[fastlock.Client], Callable[[], object]]
"""Prepares one call on a client (holding a lock, claiming a job, ...) and returns it."""


def _claimed(client: fastlock.Client) -> tuple[fastlock.Queue, Any]:
    queue = client.queue("q", lease=30)
    queue.enqueue("payload")
    return queue, queue.claim(1)[0]


def _held(client: fastlock.Client) -> fastlock.Lock:
    lock = client.lock("l", ttl=30)
    assert lock.acquire("a") is not None
    return lock


def _complete(client: fastlock.Client) -> Callable[[], object]:
    queue, job = _claimed(client)
    return lambda: queue.complete(job)


def _fail(client: fastlock.Client) -> Callable[[], object]:
    queue, job = _claimed(client)
    return lambda: queue.fail(job)


def _pipelined(client: fastlock.Client) -> Callable[[], object]:
    client.pipeline().call("release_if_owner", ["k"], ["me"]).execute()  # seen loaded: EVALSHA next
    return client.pipeline().call("release_if_owner", ["k"], ["me"]).execute


NEVER_RESENT: dict[str, tuple[Setup, str]] = {
    "execute": (lambda client: lambda: client.execute("INCR", "n"), "incr"),
    "pipeline": (lambda client: client.pipeline().execute_command("INCR", "n").execute, "incr"),
    "pipeline call": (_pipelined, "evalsha"),
    "call": (lambda client: lambda: client.call("release_if_owner", ["k"], ["me"]), "evalsha"),
    "evalsha": (
        lambda client: lambda: client.evalsha(client.scripts.get("release_if_owner").sha, ["k"], ["me"]),
        "evalsha",
    ),
    "lock.release": (lambda client: functools.partial(_held(client).release, "a"), "evalsha"),
    "lock.extend": (lambda client: functools.partial(_held(client).extend, "a"), "evalsha"),
    "queue.enqueue": (lambda client: lambda: client.queue("q").enqueue("payload"), "evalsha"),
    "queue.claim": (lambda client: _claimed(client)[0].claim, "evalsha"),
    "queue.complete": (_complete, "evalsha"),
    "queue.fail": (_fail, "evalsha"),
}


@pytest.mark.parametrize("name", NEVER_RESENT)
def test_a_call_whose_reply_is_lost_is_never_sent_again(proxy: TcpProxy, impl: str, name: str) -> None:
    setup, command = NEVER_RESENT[name]
    with fastlock.Client(proxy.url, impl=impl, warm_up=True, health_check_interval=None) as client:
        call = setup(client)
        client.execute("CONFIG", "RESETSTAT")
        proxy.drop_next_reply()
        with pytest.raises(fastlock.ConnectionError) as info:
            call()
        assert info.value.sent is True
        assert command_calls(client).get(command) == 1  # the server ran it once


def test_a_lost_acquire_is_sent_once_more_and_returns_the_same_token(proxy: TcpProxy, impl: str) -> None:
    with fastlock.Client(proxy.url, impl=impl, warm_up=True, health_check_interval=None) as client:
        lock = client.lock("l", ttl=30)
        assert lock.holders() == []  # first use: the manager's one-off eviction-policy check
        client.execute("CONFIG", "RESETSTAT")
        proxy.drop_next_reply()
        token = lock.acquire("a")
        assert command_calls(client)["evalsha"] == 2  # the first run, and the re-send
        assert [(holder.job_id, holder.token) for holder in lock.holders()] == [("a", token)]
        assert lock.release("a") == token
        assert lock.acquire("b") == token + 2  # the re-sent run took a fencing number too
