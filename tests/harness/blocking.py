"""Wait, by the server's own account (``CLIENT LIST``), until connections are blocked in a
blocking command: a test then knows its waiter is waiting instead of guessing with a sleep;
and the next message of a pub/sub channel a test listens to."""

from __future__ import annotations

import time
from typing import Any

DEADLINE = 30.0  # seconds: far more than a loaded machine needs to issue one command


def blocked_in(client: Any, command: str, ids: list[int] | None = None) -> list[int]:
    """Ids of the connections (of ``ids``, or any) blocked in ``command`` (e.g. ``"blpop"``)."""
    listing = client.execute("CLIENT", "LIST", *(("ID", *ids) if ids else ()))
    found = []
    for line in listing.decode().splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if fields.get("cmd") == command and "b" in fields.get("flags", ""):
            found.append(int(fields["id"]))
    return found


def wait_until_blocked(client: Any, command: str, ids: list[int] | None = None, count: int = 1) -> None:
    """Return once every connection in ``ids`` (or ``count`` connections) is blocked in ``command``."""
    wanted = len(ids) if ids else count
    deadline = time.monotonic() + DEADLINE
    while len(blocked_in(client, command, ids)) < wanted:
        assert time.monotonic() < deadline, f"fewer than {wanted} connections ever blocked in {command}"
        time.sleep(0.01)


def connection_id(client: Any) -> int:
    """The server's id of the one pooled connection of ``client`` (made with max_connections=1)."""
    assert client.pool.max_size == 1
    return int(client.execute("CLIENT", "ID"))


def wait_until_subscribed(client: Any, count: int = 1) -> None:
    """Return once ``count`` channels have subscribers (lock waiters on a client's listener)."""
    deadline = time.monotonic() + DEADLINE
    while len(client.execute("PUBSUB", "CHANNELS")) < count:
        assert time.monotonic() < deadline, f"fewer than {count} channels ever subscribed"
        time.sleep(0.01)


def wait_until_listening(client: Any, count: int = 1) -> None:
    """Return once the channels have ``count`` subscriptions in all (each a client's listener
    with a waiter on that channel)."""
    deadline = time.monotonic() + DEADLINE
    while True:
        channels = client.execute("PUBSUB", "CHANNELS")
        numsub = client.execute("PUBSUB", "NUMSUB", *channels) if channels else []
        if sum(numsub[1::2]) >= count:
            return
        assert time.monotonic() < deadline, f"fewer than {count} subscriptions ever made"
        time.sleep(0.01)


def next_message(pubsub: Any) -> bytes:
    """The next message published on a redis-py ``pubsub``'s channels (within 5 s)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        found = pubsub.get_message(timeout=0.1)
        if found is not None and found["type"] == "message":
            return found["data"]  # type: ignore[no-any-return]
    raise AssertionError("no message published")


PATIENCE_RECHECK = 0.15
"""Seconds past a queued waiter's patience by which it has made its one re-check (a test that
counts a release's commands waits that long, so the re-check is not counted)."""
