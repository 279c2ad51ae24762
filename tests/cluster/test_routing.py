"""The router without a server: slot maps from CLUSTER SLOTS replies, the refresh gate, which
key routes a command (the key rules also checked against a real server's ``COMMAND GETKEYS``),
and the redirect plan fed replies by hand."""

from __future__ import annotations

import pytest

from fastlock.cluster import ClusterClient
from fastlock.cluster.asking import command_commands, is_redirect, reply
from fastlock.cluster.commands import FAST, GETKEYS, CommandTable, Query, Rule, first_key, parse_command_info
from fastlock.cluster.routing import (
    MAX_REDIRECTS,
    Attempt,
    Pause,
    Refresh,
    SlotCache,
    redirected,
)
from fastlock.cluster.topology import SlotMap, parse_slots, seed_address
from fastlock.exceptions import (
    AskError,
    ClusterDownError,
    ConnectionError,
    MovedError,
    ResponseError,
    TimeoutError,
    TryAgainError,
)
from fastlock.protocol.slots import key_slot

A, B, C = ("127.0.0.1", 7000), ("127.0.0.1", 7001), ("127.0.0.1", 7002)
REPLY = [
    [0, 8191, [b"127.0.0.1", 7000, b"id-a"], [b"127.0.0.1", 7002, b"id-c"]],
    [8192, 16383, [b"", 7001, b"id-b"]],
]


def two_nodes() -> SlotMap:
    return parse_slots(REPLY, ("127.0.0.1", 7001))


def test_cluster_slots_reply_gives_primaries_and_replicas() -> None:
    slots = two_nodes()
    assert slots.primary(0) == slots.primary(8191) == A
    assert slots.primary(8192) == B  # an empty host is the address the reply came from
    assert slots.replicas == {A: [C], B: []}
    assert slots.nodes() == [A, B, C] and slots.primary_nodes() == [A, B]


def test_an_unserved_slot_is_cluster_down_and_moved_patches_one_slot() -> None:
    slots = SlotMap()
    with pytest.raises(ClusterDownError):
        slots.primary(5)
    slots.move(5, B)
    assert slots.primary(5) == B and slots.primaries[6] is None


def test_refresh_gate_is_single_flight_with_a_jittered_cooldown() -> None:
    from fastlock.cluster.topology import RefreshGate

    gate = RefreshGate(cooldown=1.0)
    assert gate.begin(0.0) and not gate.begin(0.0)  # one at a time
    gate.end(10.0)
    assert not gate.begin(10.99)
    assert gate.begin(11.31)  # cooldown plus at most 30% jitter
    gate.end(11.31)
    starts = sum(gate.begin(t / 100) and (gate.end(t / 100) or True) for t in range(1200, 2200))
    assert starts <= 10  # at most one per cooldown: never a storm


def test_built_in_command_keys_cost_no_lookup() -> None:
    table = CommandTable()
    assert table.key(("GET", "k")) == "k"
    assert table.key((b"zrange", b"idx", 0, 1)) == b"idx"
    assert table.key(("EVALSHA", "sha", 2, "k1", "k2", "arg")) == "k1"
    assert table.key(("EVAL", "return 1", 0)) is None
    assert table.key(("INFO", "server")) is None and table.key(("PING",)) is None
    assert table.key(("XREAD", "COUNT", 1, "STREAMS", "s1", "0")) == "s1"
    assert table.key(("LMPOP", 2, "a", "b", "LEFT")) == "a" and table.key(("BZMPOP", 0, 1, "z", "MIN")) == "z"
    assert table.key(("SINTERCARD", "x", "a")) is None  # malformed: any node says so
    assert table.key(("EVAL", "return 1", None, "k")) is None
    assert table.lookups == 0
    assert seed_address("redis://h:7001/0") == ("h", 7001) and seed_address("h:7002") == ("h", 7002)


# Captured from Redis 7.0.15 (OBJECT trimmed to two of its subcommands); Valkey 9 answers alike.
OBJECT_INFO = [
    [b"object", -2, [], 0, 0, 0, [b"@slow"], [], [], [
        [b"object|encoding", 3, [b"readonly"], 2, 2, 1, [b"@keyspace", b"@read", b"@slow"],
         [b"nondeterministic_output"], [[b"flags", [b"RO"], b"begin_search",
         [b"type", b"index", b"spec", [b"index", 2]], b"find_keys",
         [b"type", b"range", b"spec", [b"lastkey", 0, b"keystep", 1, b"limit", 0]]]], []],
        [b"object|help", 2, [b"loading", b"stale"], 0, 0, 0, [b"@keyspace", b"@slow"], [], [], []],
    ]]
]  # fmt: skip
LMPOP_INFO = [
    [b"lmpop", -4, [b"write", b"movablekeys"], 0, 0, 0, [b"@write", b"@list", b"@slow"], [], [], []]
]
MIGRATE_INFO = [[b"migrate", -6, [b"write", b"movablekeys"], 3, 3, 1]]  # a Redis 6 style reply


def test_command_info_replies_give_key_rules() -> None:
    rule = parse_command_info(OBJECT_INFO)
    assert rule is not None and rule.subcommands is not None
    assert first_key(rule, ("object", "encoding", "k")) == "k"
    assert first_key(rule, ("OBJECT", "HELP")) is None and first_key(rule, ("OBJECT", "NOPE", "k")) is None
    assert first_key(rule, ("OBJECT", 10**9, "k")) is None  # not a subcommand (and no 1 GB name)
    assert parse_command_info([None]) is None  # an unknown command
    lmpop = parse_command_info(LMPOP_INFO)
    assert lmpop == Rule(0, movable=True) and first_key(lmpop, ("LMPOP", 1, "l", "LEFT")) is GETKEYS
    migrate = parse_command_info(MIGRATE_INFO)
    assert migrate is not None and first_key(migrate, ("MIGRATE", "h", 1, "k", 0, 10)) == "k"
    assert first_key(migrate, ("MIGRATE", "h", 1, "", 0, 10, "KEYS", "k")) is GETKEYS


def test_the_table_asks_once_per_name_and_keeps_what_it_learned() -> None:
    table = CommandTable(size=2)
    query = table.key(("OBJECT", "ENCODING", "k"))
    assert query == Query(("COMMAND", "INFO", b"OBJECT"), b"OBJECT")
    assert table.answer(query, ("OBJECT", "ENCODING", "k"), OBJECT_INFO) == "k"
    assert table.key(("object", "encoding", "j")) == "j" and table.lookups == 1
    query = table.key(("NOSUCH", "x"))
    assert table.answer(query, ("NOSUCH", "x"), [None]) is None and table.key(("NOSUCH", "y")) is None
    args = ("MIGRATE", "h", 1, "", 0, 10, "KEYS", "k")
    getkeys = table.answer(table.key(args), args, MIGRATE_INFO)
    assert getkeys == Query(("COMMAND", "GETKEYS", *args), b"MIGRATE")  # each call: movable
    assert table.answer(getkeys, args, [b"k"]) == b"k" and table.key(args) == getkeys
    assert table.answer(getkeys, args, ResponseError("ERR The command has no key arguments")) is None
    assert table.rule(b"OBJECT") is None  # full (size 2): forgotten all at once
    assert isinstance(table.key(("OBJECT", "ENCODING", "k")), Query)  # asked again


def test_a_lookup_refused_routes_by_the_first_argument_and_a_failed_one_is_asked_again() -> None:
    table = CommandTable()
    query = table.key(("RENAMED", "k"))
    assert table.answer(query, ("RENAMED", "k"), ConnectionError("refused")) == "k"
    assert table.rule(b"RENAMED") is None  # not learned: asked again
    assert table.answer(query, ("RENAMED", "k"), ResponseError("NOPERM no COMMAND")) == "k"
    assert table.rule(b"RENAMED") == Rule(at=1)


SAMPLES = [
    ("GET", "k"),
    ("OBJECT", "ENCODING", "k"),
    ("MEMORY", "USAGE", "k"),
    ("XINFO", "STREAM", "s"),
    ("XINFO", "GROUPS", "s"),
    ("LMPOP", 2, "a", "b", "LEFT"),
    ("ZMPOP", 1, "z", "MIN"),
    ("BLMPOP", 0, 2, "l", "m", "RIGHT"),
    ("BZMPOP", 0, 1, "z", "MAX"),
    ("SINTERCARD", 2, "a", "b"),
    ("ZINTERCARD", 1, "z"),
    ("ZUNION", 2, "a", "b"),
    ("ZINTER", 1, "a"),
    ("ZDIFF", 2, "a", "b"),
    ("ZUNIONSTORE", "d", 2, "a", "b"),
    ("EVAL", "return 1", 1, "k", "arg"),
    ("EVAL_RO", "return 1", 0, "arg"),
    ("FCALL", "f", 2, "k", "j"),
    ("XREAD", "COUNT", 1, "STREAMS", "s", "t", "0", "0"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
    ("GEORADIUS_RO", "g", 0, 0, 1, "m"),
    ("SORT", "k", "STORE", "d"),
    ("BLPOP", "a", "b", 0),
    ("MIGRATE", "h", 1, "", 0, 10, "KEYS", "k", "j"),
    ("MIGRATE", "h", 1, "k", 0, 10),
    ("PUBLISH", "channel", "message"),
    ("ACL", "WHOAMI"),
]


def _server_first_key(client: ClusterClient, args: tuple[object, ...]) -> object:
    try:
        keys = client.execute("COMMAND", "GETKEYS", *args)
    except ResponseError:  # "no key arguments" (Valkey) / "wrong number of arguments" (Redis 7.0)
        return None
    return keys[0].decode() if keys else None


def test_key_rules_agree_with_the_server_s_command_getkeys(client: ClusterClient) -> None:
    table = CommandTable()
    disagree = []
    for args in SAMPLES:
        expected = _server_first_key(client, args)
        name = str(args[0]).upper().encode()
        learned = parse_command_info(client.execute("COMMAND", "INFO", name))
        assert learned is not None, name
        by_info = first_key(learned, args)
        fast = FAST.get(name)
        key = table.key(args)
        while isinstance(key, Query):
            try:
                reply = client.execute(*key.command)
            except ResponseError as exc:
                reply = exc
            key = table.answer(key, args, reply)
        key = key.decode() if isinstance(key, bytes) else key
        if (
            key != expected
            or (by_info is not GETKEYS and by_info != expected)
            or (fast is not None and first_key(fast, args) != expected)
        ):
            disagree.append((args, expected, key, by_info))
    assert disagree == []


def test_slot_cache_computes_each_key_once_and_stays_bounded() -> None:
    cache = SlotCache(size=2)
    assert cache("{a}x") == cache(b"{a}y") == key_slot("a")
    cache("b")
    cache("c")  # full: forgotten, then filled again
    assert len(cache._slots) <= 2


def test_routes_are_forgotten_when_a_slot_moves_or_the_map_is_read_again() -> None:
    slots = two_nodes()
    routes = slots.routes
    routes[100], routes[9000] = "caller of A", "caller of B"
    slots.move(100, B)
    assert routes[100] is None and routes[9000] == "caller of B"
    slots.update(parse_slots(REPLY, B))
    assert slots.routes is routes and routes == [None] * len(routes)  # in place: the core holds it
    assert slots.primary(100) == A  # the map read again


def test_slot_cache_known_is_the_dict_cleared_in_place() -> None:
    cache = SlotCache(size=1)
    known = cache.known
    cache("a")
    cache("b")  # full: cleared, then filled
    assert cache.known is known and known == {"b": key_slot("b")}


def test_moved_patches_the_map_refreshes_and_goes_to_the_new_node() -> None:
    slots = two_nodes()
    slot = 100
    plan = redirected(slots, slot, MovedError(f"{slot} 127.0.0.1:7001"))
    assert next(plan) == Refresh() and slots.primary(slot) == B
    assert plan.send(None) == Attempt(B, asking=False)
    with pytest.raises(StopIteration) as stop:
        plan.send(b"reply")
    assert stop.value.value == b"reply"


def test_ask_is_one_attempt_with_asking_and_leaves_the_map() -> None:
    slots = two_nodes()
    plan = redirected(slots, 100, AskError("100 127.0.0.1:7001"))
    assert next(plan) == Attempt(B, asking=True) and slots.primary(100) == A


def test_tryagain_and_unsent_connection_errors_wait_then_retry_the_primary() -> None:
    plan = redirected(two_nodes(), 100, TryAgainError("TRYAGAIN Multiple keys request during rehashing"))
    first = next(plan)
    assert isinstance(first, Pause) and first.seconds > 0
    assert plan.send(None) == Attempt(A)
    step = plan.throw(ConnectionError("refused", sent=False))
    seen = [step]
    while not isinstance(step, Attempt):
        step = plan.send(None)
        seen.append(step)
    assert Refresh() in seen and any(isinstance(s, Pause) for s in seen)


@pytest.mark.parametrize(
    "error",
    [
        TimeoutError("no reply", sent=True),
        ConnectionError("lost after the write", sent=True),
        ResponseError("ERR x"),
    ],
)
def test_what_may_have_run_is_never_sent_again(error: Exception) -> None:
    plan = redirected(two_nodes(), 100, error)
    with pytest.raises(type(error)):
        next(plan)


def test_redirects_are_bounded() -> None:
    plan = redirected(two_nodes(), 100, AskError("100 127.0.0.1:7001"))
    step = next(plan)
    attempts = 1
    with pytest.raises(AskError):
        while True:
            step = (
                plan.throw(AskError("100 127.0.0.1:7001")) if isinstance(step, Attempt) else plan.send(None)
            )
            attempts += isinstance(step, Attempt)
    assert attempts == MAX_REDIRECTS


def test_asking_replies() -> None:
    assert command_commands(("GET", "k")) == [("ASKING",), ("GET", "k")]
    assert reply([b"OK", b"v"]) == b"v"
    with pytest.raises(ResponseError, match="nope"):
        reply([ResponseError("ERR nope"), b"v"])  # a failed ASKING aborts
    assert (
        is_redirect(MovedError("1 h:1")) and not is_redirect(ResponseError("ERR x")) and not is_redirect(b"x")
    )


def test_an_unreachable_primary_s_replica_is_tried_and_patched_in_once_promoted() -> None:
    slots = two_nodes()
    plan = redirected(slots, 100, ConnectionError("refused", sent=False))
    steps = []
    step = next(plan)
    while not isinstance(step, Attempt):
        steps.append(step)
        step = plan.send(None)
    assert step == Attempt(C) and Refresh() in steps  # A's replica
    for _ in range(MAX_REDIRECTS + 5):  # not promoted yet: MOVED back to A is a wait, not a redirect
        step = plan.throw(MovedError("100 127.0.0.1:7000"))
        while not isinstance(step, Attempt):
            step = plan.send(None)
        assert step == Attempt(C)
    with pytest.raises(StopIteration):
        plan.send(b"OK")  # promoted: it answered for the slot
    assert slots.primary(100) == C


def test_a_moved_back_and_forth_waits_for_the_nodes_to_agree() -> None:
    """While a slot's move ends, the source may already say MOVED to the target and the target
    (still importing) MOVED back: each bounce after the first pauses, as TRYAGAIN does, so the
    command outlives the window instead of spending its redirects at once."""
    plan = redirected(two_nodes(), 100, MovedError("100 127.0.0.1:7001"))
    steps: list[object] = []
    step = next(plan)
    for _ in range(MAX_REDIRECTS * 2):
        while not isinstance(step, Attempt):
            steps.append(step)
            step = plan.send(None)
        back = "100 127.0.0.1:7000" if step == Attempt(B) else "100 127.0.0.1:7001"
        step = plan.throw(MovedError(back))
    pauses = [s for s in steps if isinstance(s, Pause)]
    assert len(pauses) >= MAX_REDIRECTS * 2 - 2
    while not isinstance(step, Attempt):
        step = plan.send(None)
    with pytest.raises(StopIteration):
        plan.send(b"OK")  # the nodes agree: it answers
