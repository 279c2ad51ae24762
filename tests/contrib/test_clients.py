"""fastlock.contrib.clients: one client per process and server, reused, fork-safe."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from redis import Redis

from fastlock.contrib import clients


@pytest.fixture(autouse=True)
def fresh_clients() -> Iterator[None]:
    yield
    clients.close_all()


def test_one_client_per_url_and_per_connection(redis_url: str) -> None:
    client = clients.client_for_url(redis_url)
    assert clients.client_for_url(redis_url) is client
    with Redis.from_url(redis_url) as redis, Redis.from_url(redis_url) as other:
        from_redis = clients.client_for_redis(redis)
        assert clients.client_for_redis(redis) is from_redis
        assert clients.client_for_redis(other) is not from_redis
        assert from_redis.execute("PING") == b"PONG"
    clients.close_all()
    assert clients.client_for_url(redis_url) is not client


def test_a_forked_child_uses_the_parents_client_on_its_own_connection(redis_url: str) -> None:
    """A client built before fork() (a prefork pool, RQ's work horse) works in the child, on a
    connection of the child's own; the parent's keeps working."""
    client = clients.client_for_url(redis_url)
    parent_id = client.execute("CLIENT", "ID")
    lock = client.lock("forked", ttl=30)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report its connection id after taking and freeing the lock, or nothing
        try:
            child = clients.client_for_url(redis_url)
            assert child is client
            token = child.lock("forked", ttl=30).acquire("child")
            assert token is not None and child.lock("forked", ttl=None).release("child") == token
            os.write(write, str(child.execute("CLIENT", "ID")).encode())
        finally:
            os._exit(0)
    os.close(write)
    report = os.read(read, 64)
    os.close(read)
    os.waitpid(pid, 0)
    assert report and int(report) != parent_id
    assert client.execute("CLIENT", "ID") == parent_id
    assert lock.acquire("parent") is not None
