"""The router without a server: slot maps from CLUSTER SLOTS replies, the refresh gate, which
key routes a command, and the redirect plan fed replies by hand."""

from __future__ import annotations

import pytest

from fastlock.cluster.asking import command_commands, is_redirect, reply
from fastlock.cluster.routing import (
    MAX_REDIRECTS,
    Attempt,
    Pause,
    Refresh,
    SlotCache,
    command_key,
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


def test_command_keys() -> None:
    assert command_key(("GET", "k")) == "k"
    assert command_key((b"zrange", b"idx", 0, 1)) == b"idx"
    assert command_key(("EVALSHA", "sha", 2, "k1", "k2", "arg")) == "k1"
    assert command_key(("EVAL", "return 1", 0)) is None
    assert command_key(("INFO", "server")) is None and command_key(("PING",)) is None
    assert command_key(("XREAD", "COUNT", 1, "STREAMS", "s1", "0")) == "s1"
    assert seed_address("redis://h:7001/0") == ("h", 7001) and seed_address("h:7002") == ("h", 7002)


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
