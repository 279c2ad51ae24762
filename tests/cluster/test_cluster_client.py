"""What the cluster clients add, on real 3x3 clusters (Redis and Valkey, both cores): scripts on
every node, batches split per node and merged in order, ASK during a slot migration, MOVED
after it, admin across slots, the async client over the same router."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from typing import Any

import pytest
import redis

import fastlock
from fastlock.cluster import AsyncClusterClient, ClusterClient
from fastlock.protocol.slots import hash_tag, key_slot
from fastlock.testing.cluster import TempCluster
from fastlock.testing.raw import bulk_text


def test_scripts_are_loaded_on_every_node_replicas_included(
    client: ClusterClient, cluster: TempCluster
) -> None:
    assert client.lock("x", ttl=5).acquire() is not None
    sha = client.scripts.get("lock_acquire").sha
    for node in cluster.nodes:
        assert node.raw_command("SCRIPT", "EXISTS", sha) == b"*1\r\n:1\r\n", node.port
    assert len(client.nodes()) == 6 and len(client.primaries()) == 3


def test_batches_are_split_per_node_and_merged_in_order(client: ClusterClient) -> None:
    keys = [f"key{i}" for i in range(40)]
    assert len({key_slot(k) // 5462 for k in keys}) == 3  # all three primaries
    assert client.execute_many([("SET", k, i) for i, k in enumerate(keys)]) == [b"OK"] * 40
    replies = client.execute_many([("GET", k) for k in keys] + [("INCR", "key0")])
    assert replies == [str(i).encode() for i in range(40)] + [1]
    with client.pipeline() as pipe:
        pipe.execute_command("GET", "key39").execute_command("GET", "key1")
        assert pipe.execute() == [b"39", b"1"]
    assert client.execute("PING") == b"PONG" and b"redis_version" in client.execute("INFO", "server")


def test_pipelined_script_calls_go_to_their_key_s_node(client: ClusterClient, cluster: TempCluster) -> None:
    script = client.register_script("redis.call('INCR', KEYS[1]) return {KEYS[1], ARGV[1]}")
    keys = ["key1", "key2", "key39"]
    assert len({key_slot(k) // 5462 for k in keys}) > 1
    for key in keys:  # loaded on their nodes (registered after the client met them)
        client.call(script.name, [key], ["warm"])
    with client.pipeline() as pipe:
        for key in keys:
            pipe.call(script.name, [key], [key]).execute_command("GET", key)
        assert pipe.execute() == [reply for key in keys for reply in ([key.encode()] * 2, b"2")]
    for node in cluster.nodes:  # a call not run (NOSCRIPT) is sent again, by ClusterClient.call
        node.raw_command("SCRIPT", "FLUSH")
    assert client.pipeline().call(script.name, ["key2"], [0]).execute() == [[b"key2", b"0"]]
    assert client.execute("GET", "key2") == b"3"


def test_a_pipeline_keeps_its_order_on_each_node(
    client: ClusterClient, cluster: TempCluster, cluster_url: str, impl: str
) -> None:
    """Issue 23, defect 5: a script not seen loaded on a node runs as ``EVAL`` there, in its
    place; one flushed meanwhile on a node is refused where later commands ran there. The
    asyncio cluster client too."""
    source = "return redis.call('INCR', KEYS[1])"
    script = client.register_script(source)
    keys = ["key1", "key2", "key39"]

    async def on_asyncio() -> list[Any]:
        async with AsyncClusterClient(cluster_url, impl=impl) as aclient:
            name = aclient.register_script(source).name
            pipe = aclient.pipeline()
            for key in keys:
                pipe.call(name, [key]).execute_command("GET", key)
            replies = await pipe.execute()
            for node in cluster.nodes:
                node.raw_command("SCRIPT", "FLUSH")
            pipe = aclient.pipeline().call(name, ["key39"]).execute_command("GET", "key39")
            return [*replies, *await pipe.execute(raise_on_error=False)]

    with client.pipeline() as pipe:
        for key in keys:
            pipe.call(script.name, [key]).execute_command("GET", key)
        assert pipe.execute() == [reply for _ in keys for reply in (1, b"1")]
    for node in cluster.nodes:
        node.raw_command("SCRIPT", "FLUSH")
    pipe = client.pipeline().call(script.name, ["key1"]).execute_command("GET", "key1")
    refused, got = pipe.execute(raise_on_error=False)
    assert isinstance(refused, fastlock.ScriptNotRunError) and got == b"1"
    assert client.pipeline().call(script.name, ["key1"]).execute_command("GET", "key1").execute() == [2, b"2"]
    *replies, refused, got = asyncio.run(on_asyncio())
    assert replies == [reply for key in keys for reply in ((3, b"3") if key == "key1" else (2, b"2"))]
    assert isinstance(refused, fastlock.ScriptNotRunError) and got == b"2"


def bucket(lock: Any) -> str:
    """The key of the lock's main bucket (where its holders are)."""
    return str(lock.manager.scope(lock.digest, "", lock.limit).slots[0])


def _migrate(cluster: TempCluster, slot: int) -> tuple[Any, Any, str, str]:
    source = cluster.primary_of(slot)
    target = next(n for n in cluster.primaries() if n is not source)
    source_id, target_id = cluster.node_id(source), cluster.node_id(target)
    assert target.raw_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id) == b"+OK\r\n"
    assert source.raw_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id) == b"+OK\r\n"
    return source, target, source_id, target_id


def _ok(reply: bytes, what: str) -> None:
    assert reply == b"+OK\r\n", f"{what}: {reply!r}"


def _finish(cluster: TempCluster, slot: int, owner_id: str) -> None:
    """End ``slot``'s migration at ``owner_id`` the way a resharding does, each step a command
    checked, none left to gossip: the owner imports the slot (``SETSLOT NODE`` bumps the config
    epoch of an importing node only), the slot's keys left on other primaries are migrated to
    it (a node holding keys refuses to give the slot away), then ``SETSLOT NODE`` goes to the
    owner first and to every other primary. A node still importing the slot after that is made
    stable (one left importing answered a later test's commands with MOVED back and forth)."""
    owner = next(n for n in cluster.primaries() if cluster.node_id(n) == owner_id)
    if f"[{slot}-<-".encode() not in owner.raw_command("CLUSTER", "NODES"):
        holder = cluster.primary_of(slot)
        if holder is not owner:
            _ok(
                owner.raw_command("CLUSTER", "SETSLOT", slot, "IMPORTING", cluster.node_id(holder)),
                "IMPORTING",
            )
    for node in (n for n in cluster.primaries() if n is not owner):
        with redis.Redis(port=node.port) as conn:
            keys = conn.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
        if keys:
            _ok(node.raw_command("MIGRATE", "127.0.0.1", owner.port, "", 0, 5000, "KEYS", *keys), "MIGRATE")
    for node in sorted(cluster.primaries(), key=lambda n: n is not owner):
        _ok(node.raw_command("CLUSTER", "SETSLOT", slot, "NODE", owner_id), f"SETSLOT NODE on {node.port}")
    for node in cluster.primaries():
        if f"[{slot}-<-".encode() in node.raw_command("CLUSTER", "NODES"):
            _ok(node.raw_command("CLUSTER", "SETSLOT", slot, "STABLE"), "STABLE")
    cluster.wait_stable()
    cluster.wait_slot_owned(slot, owner_id)


def test_ask_during_migration_then_moved_after_it(client: ClusterClient, cluster: TempCluster) -> None:
    lock = client.lock("migrating", ttl=30)
    slot = key_slot(bucket(lock))
    old, new = (f"{{{hash_tag(bucket(lock).encode()).decode()}}}:{name}" for name in ("old", "new"))
    assert client.execute("SET", old, "before") == b"OK"
    source, target, source_id, target_id = _migrate(cluster, slot)
    try:
        # a key on neither node: the source answers ASK, ASKING and SET go to the target
        assert client.execute("SET", new, "after") == b"OK"
        assert target.raw_command("CLUSTER", "COUNTKEYSINSLOT", slot) == b":1\r\n"
        assert client.execute("GET", old) == b"before"  # still on the source
        assert client.execute_many([("GET", new), ("GET", old)]) == [b"after", b"before"]
        # a multi-key script whose keys are not all on one side gets TRYAGAIN (from the
        # target, after ASK): waited out until the migration ends, then MOVED to the target
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            finished = pool.submit(lambda: (time.sleep(0.1), _finish(cluster, slot, target_id)))
            started = time.monotonic()
            token = lock.acquire("a")
            finished.result()  # its failure raised here
        assert token is not None and 0.1 < time.monotonic() - started < 3
        assert int(target.raw_command("CLUSTER", "COUNTKEYSINSLOT", slot)[1:]) > 1
        assert lock.release("a") == token
    finally:  # the slot back home, empty
        for node in (source, target):
            node.raw_command("FLUSHALL")
        _finish(cluster, slot, source_id)


def test_a_blocking_command_under_ask_sends_asking_on_its_own_connection(
    client: ClusterClient, cluster: TempCluster, cluster_url: str, impl: str
) -> None:
    """``ASKING`` holds for the next command on its connection only: a blocking command sent
    to the importing node goes in one write with it (else the target answers MOVED back)."""
    key = "{blocking-ask}:jobs"
    slot = key_slot(key)
    source, target, source_id, _ = _migrate(cluster, slot)

    async def pop_async() -> Any:
        async with AsyncClusterClient(cluster_url, impl=impl) as aclient:
            return await aclient.execute_blocking("BLPOP", key, 1, timeout=1)

    try:
        assert client.execute("RPUSH", key, "a", "b") == 2  # ASK: on the target
        assert target.raw_command("CLUSTER", "COUNTKEYSINSLOT", slot) == b":1\r\n"
        assert client.execute_blocking("BLPOP", key, 1, timeout=1) == [key.encode(), b"a"]
        assert asyncio.run(pop_async()) == [key.encode(), b"b"]
    finally:
        for node in (source, target):
            node.raw_command("FLUSHALL")
        _finish(cluster, slot, source_id)


def test_a_script_call_follows_a_moved_slot_and_routes_there_after(
    client: ClusterClient, cluster: TempCluster
) -> None:
    get = client.register_script("return redis.call('GET', KEYS[1])")
    key = "routed"
    slot = key_slot(key)
    assert get([key]) is None  # the route to the slot's primary is filled
    source = cluster.primary_of(slot)
    target = next(n for n in cluster.primaries() if n is not source)
    _finish(cluster, slot, cluster.node_id(target))  # the (empty) slot given to another primary
    try:
        assert target.raw_command("SET", key, "moved") == b"+OK\r\n"
        assert get([key]) == b"moved"  # MOVED from the old route, followed; the route forgotten
        assert client._slots.routes[slot] is None
        assert [get([key]) for _ in range(3)] == [b"moved"] * 3  # the new route, filled once
        assert client._slots.routes[slot] is client.node(("127.0.0.1", target.port))._caller
    finally:
        target.raw_command("FLUSHALL")
        _finish(cluster, slot, cluster.node_id(source))


def test_lock_admin_spans_slots(client: ClusterClient) -> None:
    for i in range(20):
        assert client.lock(f"job-{i}", ttl=30).acquire("me") is not None
    buckets = {key_slot(bucket(client.lock(f"job-{i}", ttl=None))) for i in range(20)}
    assert len(buckets) > 1
    assert isinstance(client.locks, fastlock.LockManager)


async def _async_scenario(url: str, impl: str) -> dict[str, Any]:
    async with AsyncClusterClient(url, impl=impl) as client:
        tokens = []
        for i in range(12):
            lock = client.lock(f"job-{i}", ttl=10)
            tokens.append(await lock.acquire("a"))
            assert await client.lock(f"job-{i}", ttl=10).acquire("b") is None
            assert await lock.release("a") == tokens[-1]
        queue = client.queue("jobs", lease=5.0)
        await queue.enqueue("payload")
        jobs = await queue.claim()
        assert [job.payload for job in jobs] == [b"payload"]
        await queue.complete(jobs)
        assert await queue.claim() == []
        keys = [f"key{i}" for i in range(20)]
        await client.execute_many([("SET", k, i) for i, k in enumerate(keys)])
        replies = await client.execute_many([("GET", k) for k in keys])
        together = await asyncio.gather(*(client.execute("GET", k) for k in keys))
        return {"tokens": tokens, "replies": replies, "together": together, "refreshes": client.refreshes}


def test_async_cluster_client_runs_locks_queues_and_batches(cluster_url: str, impl: str) -> None:
    result = asyncio.run(_async_scenario(cluster_url, impl))
    assert all(token is not None for token in result["tokens"])
    assert result["replies"] == result["together"] == [str(i).encode() for i in range(20)]
    assert result["refreshes"] == 1


def _at_once(client: ClusterClient, keys: list[str]) -> list[Exception]:
    """``SET`` of each key from a thread of its own, all let go at once; what they raised."""
    barrier = threading.Barrier(len(keys))
    errors: list[Exception] = []

    def first(key: str) -> None:
        barrier.wait()
        try:
            client.execute("SET", key, "1")
        except Exception as exc:  # noqa: BLE001 - reaches the test through ``errors``
            errors.append(exc)

    threads = [threading.Thread(target=first, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(t.is_alive() for t in threads)
    return errors


def test_first_calls_made_at_once_wait_for_the_one_map_read(cluster_url: str, impl: str) -> None:
    """Threads (and tasks) calling a new client at once: one reads the slot map, the others
    wait for that read instead of failing with ClusterDownError."""
    keys = [f"first-{i}" for i in range(16)]
    for _ in range(3):
        with ClusterClient(cluster_url, impl=impl) as client:
            assert _at_once(client, keys) == []
            assert client.refreshes == 1

    async def at_once() -> list[Any]:
        async with AsyncClusterClient(cluster_url, impl=impl) as client:
            replies = await asyncio.gather(*(client.execute("SET", key, "2") for key in keys))
            assert client.refreshes == 1
            return replies

    for _ in range(3):
        assert asyncio.run(at_once()) == [b"OK"] * len(keys)


def test_a_seed_that_is_down_is_skipped(cluster: TempCluster, cluster_url: str, impl: str) -> None:
    with ClusterClient("redis://127.0.0.1:1", seeds=[cluster_url], impl=impl, connect_timeout=0.5) as client:
        assert client.execute("SET", "k", "v") == b"OK"
        assert bulk_text(cluster.primary_of(key_slot("k")).raw_command("GET", "k")) == "v"


@pytest.mark.parametrize("command", [("MULTI",), ("SELECT", 1)])
def test_connection_state_commands_are_refused(client: ClusterClient, command: tuple[str, ...]) -> None:
    with pytest.raises(fastlock.ArgumentError):
        client.execute(*command)


def _calls(cluster: TempCluster, name: str) -> int:
    """Calls of command ``name`` (``command|info``) so far, summed over the primaries."""
    total = 0
    for node in cluster.primaries():
        for line in bulk_text(node.raw_command("INFO", "commandstats")).splitlines():
            if line.startswith(f"cmdstat_{name}:"):
                total += int(line.partition("calls=")[2].partition(",")[0])
    return total


def _off_first_argument(client: ClusterClient, cluster: TempCluster) -> list[tuple[Any, ...]]:
    """Commands whose first key is not their first argument, on keys of every primary (made here)."""
    commands: list[tuple[Any, ...]] = []
    tags: dict[int, str] = {}
    for i in range(1000):
        tags.setdefault(cluster.primary_of(key_slot(f"t{i}")).port, f"t{i}")
        if len(tags) == 3:
            break
    for tag in tags.values():
        s, x, li, t = (f"{{{tag}}}:{name}" for name in "sxlt")
        client.execute_many([("SET", s, "v"), ("XADD", x, "*", "f", 1), ("RPUSH", li, 1, 2), ("SADD", t, 1)])
        commands += [
            ("OBJECT", "ENCODING", s),
            ("MEMORY", "USAGE", s),
            ("XINFO", "STREAM", x),
            ("LMPOP", 1, li, "LEFT"),
            ("SINTERCARD", 1, t),
        ]
    return commands


def _check(replies: list[Any], popped: bytes) -> None:
    assert len(replies) == 15, replies
    for encoding, usage, stream, pop, card in zip(*[iter(replies)] * 5, strict=True):
        assert encoding == b"embstr" and usage > 0 and b"length" in stream, replies
        assert pop[1] == [popped] and card == 1, replies


def test_commands_are_routed_by_the_server_s_key_rules_with_one_lookup_per_name(
    client: ClusterClient, cluster: TempCluster
) -> None:
    """``OBJECT ENCODING key``, ``MEMORY USAGE key``, ``XINFO STREAM key``, ``LMPOP 1 key``,
    ``SINTERCARD 1 key`` go to their key's primary: no redirect; ``COMMAND INFO`` asked once for
    each of OBJECT, MEMORY and XINFO (LMPOP and SINTERCARD are built in), GETKEYS never."""
    commands = _off_first_argument(client, cluster)
    redirects, infos, getkeys = (
        client.redirects,
        _calls(cluster, "command|info"),
        _calls(cluster, "command|getkeys"),
    )
    _check([client.execute(*command) for command in commands], b"1")
    _check(client.execute_many(commands), b"2")
    assert client.redirects == redirects
    assert _calls(cluster, "command|info") - infos == 3 and _calls(cluster, "command|getkeys") == getkeys
    # keyless admin commands, wherever they land; an unknown command gets the server's error
    assert client.execute("ACL", "WHOAMI") == b"default" and client.execute("PUBLISH", "channel", "m") == 0
    assert client.execute("DEBUG", "SLEEP", 0) == b"OK" and isinstance(client.execute("OBJECT", "HELP"), list)
    for _ in range(2):
        with pytest.raises(fastlock.ResponseError, match=r"(?i)unknown command"):
            client.execute("NOSUCHCOMMAND", "x")
    assert _calls(cluster, "command|info") - infos == 7  # ACL, PUBLISH, DEBUG, NOSUCHCOMMAND: once each
    assert client.redirects == redirects


def test_the_async_client_learns_key_rules_alike(
    client: ClusterClient, cluster: TempCluster, cluster_url: str, impl: str
) -> None:
    commands = _off_first_argument(client, cluster)
    infos = _calls(cluster, "command|info")

    async def run() -> tuple[list[Any], list[Any], int]:
        async with AsyncClusterClient(cluster_url, impl=impl) as aclient:
            one_by_one = [await aclient.execute(*command) for command in commands]
            return one_by_one, await aclient.execute_many(commands), aclient.redirects

    one_by_one, batched, redirects = asyncio.run(run())
    _check(one_by_one, b"1")
    _check(batched, b"2")
    assert redirects == 0 and _calls(cluster, "command|info") - infos == 3


def _seen(node: Any, name: str) -> int:
    """Commands ``name`` that reached ``node`` since its last ``CONFIG RESETSTAT``, run or
    rejected (a redirect)."""
    for line in bulk_text(node.raw_command("INFO", "commandstats")).splitlines():
        if line.startswith(f"cmdstat_{name}:"):
            fields = dict(field.split("=") for field in line.partition(":")[2].split(","))
            return int(fields["calls"]) + int(fields.get("rejected_calls", 0))
    return 0


def test_a_redirected_batch_command_goes_to_the_reply_s_target_on_both_clients(
    client: ClusterClient, cluster: TempCluster, cluster_url: str, impl: str
) -> None:
    """A command of ``execute_many`` answered ``ASK`` is sent to the node the reply names, not
    routed again from the slot map (which still names the source): the source sees it once."""
    key = "{batch-ask}:key"
    slot = key_slot(key)
    source, _, source_id, _ = _migrate(cluster, slot)

    async def batch_async() -> list[Any]:
        async with AsyncClusterClient(cluster_url, impl=impl) as aclient:
            await aclient.refresh(force=True)
            assert source.raw_command("CONFIG", "RESETSTAT") == b"+OK\r\n"
            return await aclient.execute_many([("GET", key)])

    try:
        assert source.raw_command("CONFIG", "RESETSTAT") == b"+OK\r\n"
        assert client.execute_many([("GET", key)]) == [None]
        assert _seen(source, "get") == 1
        assert asyncio.run(batch_async()) == [None]
        assert _seen(source, "get") == 1
    finally:
        _finish(cluster, slot, source_id)


def test_wait_is_checked_and_applies_when_set_later_on_both_clients(cluster_url: str, impl: str) -> None:
    """``client.wait = ...`` is checked as the constructor checks it, and the script calls
    made after it follow it (``WAIT`` after an acquire), on the sync and the async client."""
    with ClusterClient(cluster_url, impl=impl) as client:
        with pytest.raises(fastlock.ArgumentError, match="wait must be"):
            client.wait = (0, 10)
        client.wait = (1, 1000)
        assert client.wait == (1, 1000) and client.lock("later", ttl=5).acquire("a") is not None
        client.wait = None
        assert client.wait is None and client.lock("later", ttl=5).acquire("a") is not None

    async def run() -> None:
        async with AsyncClusterClient(cluster_url, impl=impl) as aclient:
            with pytest.raises(fastlock.ArgumentError, match="wait must be"):
                aclient.wait = (0, 10)
            aclient.wait = (1, 1000)
            assert aclient.wait == (1, 1000)
            assert await aclient.lock("later-async", ttl=5).acquire("a") is not None
            aclient.wait = None
            assert aclient.wait is None

    asyncio.run(run())
