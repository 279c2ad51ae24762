"""``wait=(replicas, ms)``: ``WAIT`` in the same write as the lock acquire or claim, its count
checked; on the cluster (each primary has one replica) and without a server."""

from __future__ import annotations

import asyncio

import pytest

from fastlock.cluster import AsyncClusterClient, ClusterClient
from fastlock.cluster.durability import ReplicationError, check_wait, durable_commands, durable_reply
from fastlock.exceptions import NoScriptError, ResponseError
from fastlock.scripts.calling import ScriptSettings
from fastlock.scripts.registry import ScriptRegistry


def test_commands_and_replies_without_a_server() -> None:
    script = ScriptRegistry().get("lock_acquire")
    settings = ScriptSettings()
    commands = durable_commands(script, settings, ["k"], ["a"], (1, 100))
    assert commands[0][:4] == ("EVALSHA", script.sha, 1, "k") and commands[-1] == ("WAIT", 1, 100)
    loaded = durable_commands(script, settings, ["k"], ["a"], (1, 100), asking=True)
    assert [c[0] for c in loaded] == ["SCRIPT", "ASKING", "EVALSHA", "WAIT"]
    assert durable_reply([7, 1], script, 1) == 7
    with pytest.raises(ReplicationError) as short:
        durable_reply([7, 0], script, 1)
    assert short.value.reply == 7 and short.value.acked == 0
    with pytest.raises(NoScriptError):
        durable_reply([NoScriptError("NOSCRIPT No matching script."), 0], script, 1)
    unblocked = ResponseError("UNBLOCKED force unblock from blocking operation, instance state changed")
    with pytest.raises(ReplicationError) as failed:  # WAIT cut by a CLUSTER FAILOVER: the script ran
        durable_reply([7, unblocked], script, 1)
    assert failed.value.reply == 7 and failed.value.acked == 0 and failed.value.__cause__ is unblocked
    for wrong in ((0, 10), (1, -1), (1.5, 10)):
        with pytest.raises(ValueError):
            check_wait(wrong)  # type: ignore[arg-type]


def test_wait_after_acquire_and_claim_on_the_cluster(cluster_url: str, impl: str) -> None:
    with ClusterClient(cluster_url, impl=impl, wait=(1, 1000)) as client:
        lock = client.lock("durable", ttl=10)
        token = lock.acquire("a")
        assert token is not None and lock.release("a") == token
        queue = client.queue("durable-jobs")
        queue.enqueue("x")
        assert [job.payload for job in queue.claim()] == [b"x"]
        reads = client.script_stats()["lock_acquire"]
        assert reads.errors == 0


def test_too_few_replicas_raise_after_the_acquire_ran(cluster_url: str, impl: str) -> None:
    with ClusterClient(cluster_url, impl=impl, wait=(2, 50)) as client:  # one replica each
        lock = client.lock("durable", ttl=10)
        with pytest.raises(ReplicationError) as short:
            lock.acquire("a")
        assert short.value.acked == 1 and short.value.reply is not None
        assert lock.locked() and lock.release("a") is not None  # it ran: released by job id


async def _async_durable(url: str, impl: str) -> None:
    async with AsyncClusterClient(url, impl=impl, wait=(1, 1000)) as client:
        lock = client.lock("durable", ttl=10)
        token = await lock.acquire("a")
        assert token is not None and await lock.release("a") == token
        queue = client.queue("durable-jobs")
        await queue.enqueue("x")
        assert [job.payload for job in await queue.claim()] == [b"x"]
    async with AsyncClusterClient(url, impl=impl, wait=(2, 20)) as client:
        with pytest.raises(ReplicationError):
            await client.lock("durable-2", ttl=10).acquire("a")


def test_async_wait(cluster_url: str, impl: str) -> None:
    asyncio.run(_async_durable(cluster_url, impl))
