"""Script calls in a pipeline (``Pipeline.call``): encoded and refused as they are queued, in
one write with the commands, in order (a script not known loaded runs as ``EVAL`` in its
place), replies as ``Client.call`` returns them; a call the server did not run (``NOSCRIPT``)
sent again only when nothing queued after it ran (else ``ScriptNotRunError``), anything
else never."""

from __future__ import annotations

from typing import Any

import pytest

import fastlock
from fastlock.tools.costs import command_calls

COUNT = "redis.call('INCR', KEYS[1]) return {KEYS[1], ARGV[1]}"
FAIL_AFTER_WRITE = "redis.call('INCR', KEYS[1]) error('no luck')"


def test_calls_and_commands_go_in_one_write_in_order(client: fastlock.Client) -> None:
    count = client.register_script(COUNT).name
    assert client.call(count, ["warm"], [0]) == [b"warm", b"0"]  # loaded
    sent = client.pool.round_trips
    with client.pipeline() as pipe:
        assert pipe.call(count, ["a"], ["x"]).execute_command("INCR", "a").call(count, ("a",), (2.5,)) is pipe
        assert len(pipe) == 3
        assert pipe.execute() == [[b"a", b"x"], 2, [b"a", b"2.5"]]
        assert len(pipe) == 0
    assert client.pool.round_trips == sent + 1
    assert client.execute("GET", "a") == b"3"


def test_round_trips_count_a_connection_in_use(client: fastlock.Client) -> None:
    """A write counts from when it is sent, not when its connection comes back to the pool
    (a renewing thread's round in flight must not make the count go back)."""
    client.execute("PING")
    sent = client.pool.round_trips
    conn = client.pool.get()
    assert client.pool.round_trips == sent  # lent: still counted
    assert conn.execute(("PING",)) == b"PONG"
    assert client.pool.round_trips == sent + 1
    client.pool.put(conn)
    assert client.pool.round_trips == sent + 1


def test_meta_values_are_appended_as_client_call_appends_them(client: fastlock.Client) -> None:
    script = client.register_script(
        "-- #meta max_history script_name\nreturn {ARGV[1], META.max_history, META.script_name}"
    )
    client.max_history = 77
    expected = [b"first", 77, script.name.encode()]
    assert client.pipeline().call(script.name, [], ["first"]).execute() == [expected]
    assert client.call(script.name, [], ["first"]) == expected


def test_an_invalid_argument_is_refused_when_queued(client: fastlock.Client) -> None:
    count = client.register_script(COUNT).name
    client.call(count, ["warm"], [0])
    pipe = client.pipeline().call(count, ["a"], [1])
    with pytest.raises(fastlock.ArgumentTypeError, match=r"^command 1 args\[1\]: unsupported type 'object'"):
        pipe.call(count, ["a"], [2, object()])
    with pytest.raises(fastlock.ScriptNotFoundError):
        pipe.call("no_such_script", ["a"])
    assert len(pipe) == 1  # the refused calls left nothing behind
    assert pipe.execute() == [[b"a", b"1"]]
    assert client.execute("GET", "a") == b"1"


def test_a_script_not_loaded_yet_runs_in_its_place(client: fastlock.Client) -> None:
    """Issue 23, defect 5: ``[script INCR n, GET n]`` gives ``[1, b"1"]`` as in redis-py. The
    first call of a script the pipeline has not seen loaded is an ``EVAL`` in its place (the
    same write, the same command count); later calls and pipelines send ``EVALSHA``."""
    incr = client.register_script("return redis.call('INCR', KEYS[1])").name
    client.execute("SCRIPT", "FLUSH")
    client.execute("CONFIG", "RESETSTAT")
    sent = client.pool.round_trips
    pipe = client.pipeline().call(incr, ["n"]).execute_command("GET", "n").call(incr, ["n"])
    assert pipe.execute() == [1, b"1", 2]
    assert client.pool.round_trips == sent + 1
    assert client.pipeline().call(incr, ["n"]).execute_command("GET", "n").execute() == [3, b"3"]
    calls = command_calls(client)
    assert (calls["eval"], calls["evalsha"], calls["get"], calls["incr"]) == (1, 2, 2, 3)
    assert "script|load" not in calls


def _flushed_after_a_pipeline(client: fastlock.Client) -> str:
    count = client.register_script(COUNT).name
    assert client.pipeline().call(count, ["warm"], [0]).execute() == [[b"warm", b"0"]]  # loaded: EVALSHA next
    client.execute("SCRIPT", "FLUSH")  # another client, a restart, a failover
    client.execute("CONFIG", "RESETSTAT")
    return count


def test_a_call_not_run_mid_pipeline_is_refused_not_run_out_of_order(client: fastlock.Client) -> None:
    count = _flushed_after_a_pipeline(client)
    pipe = client.pipeline().call(count, ["a"], [1]).execute_command("INCR", "b").call(count, ["a"], [2])
    refused, incremented, last = pipe.execute(raise_on_error=False)
    assert isinstance(refused, fastlock.ScriptNotRunError) and isinstance(refused, fastlock.ResponseError)
    assert (refused.script, refused.index, refused.code) == (count, 0, "NOSCRIPT")
    assert "out of order" in str(refused) and "allow_reorder" in str(refused)
    assert incremented == 1 and last == [b"a", b"2"]  # the last call: nothing after it ran, sent again
    assert client.execute("GET", "a") == b"1" and client.execute("GET", "b") == b"1"
    calls = command_calls(client)
    assert (calls["incr"], calls["evalsha"]) == (2, 2 + 2)  # each INCR once; the last call reloaded
    assert client.pipeline().call(count, ["c"], [0]).execute() == [[b"c", b"0"]]  # in place: loaded again
    pipe = client.pipeline().call(count, ["a"], [3]).execute_command("INCR", "b")
    client.execute("SCRIPT", "FLUSH")
    with pytest.raises(fastlock.ScriptNotRunError):  # raise_on_error: the refusal is raised
        pipe.execute()
    assert client.execute("GET", "a") == b"1"
    # the next pipeline loads the script in place again
    assert client.pipeline().call(count, ["a"], [4]).execute_command("GET", "a").execute() == [
        [b"a", b"4"],
        b"2",
    ]


def test_allow_reorder_sends_a_call_not_run_again_after_the_rest(client: fastlock.Client) -> None:
    count = _flushed_after_a_pipeline(client)
    pipe = client.pipeline().call(count, ["a"], [1]).execute_command("GET", "a").call(count, ["a"], [2])
    assert pipe.execute(allow_reorder=True) == [[b"a", b"1"], None, [b"a", b"2"]]  # GET ran first
    assert client.execute("GET", "a") == b"2"
    calls = command_calls(client)
    assert (calls["incr"], calls["script|load"]) == (2, 1)  # each call once; one reload


def test_an_error_reply_is_the_call_s_report_and_never_sent_again(client: fastlock.Client) -> None:
    fail = client.register_script(FAIL_AFTER_WRITE).name
    count = client.register_script(COUNT).name
    client.call(count, ["warm"], [0])
    with pytest.raises(fastlock.LuaError):
        client.call(fail, ["warm"])
    pipe = client.pipeline().call(fail, ["f"]).call(count, ["a"], [1])
    error, counted = pipe.execute(raise_on_error=False)
    assert isinstance(error, fastlock.LuaRaisedError) and error.script == fail and "no luck" in str(error)
    assert counted == [b"a", b"1"]
    with pytest.raises(fastlock.LuaRaisedError):
        client.pipeline().call(fail, ["f"]).call(count, ["a"], [2]).execute()
    assert client.execute("GET", "f") == b"2"  # once per pipeline: never sent again
    assert client.execute("GET", "a") == b"2"  # the call after the error ran before it was raised


def test_an_exit_drops_what_was_queued(client: fastlock.Client) -> None:
    count = client.register_script(COUNT).name
    with client.pipeline() as pipe:
        pipe.call(count, ["a"], [1]).execute_command("INCR", "a")
    assert len(pipe) == 0 and pipe.execute() == []
    assert client.execute("GET", "a") is None


class Counting(fastlock.Client):
    """A subclass overriding ``call``: its override is what the client and the lock layer call."""

    calls = 0

    def call(self, name: str, keys: Any = (), args: Any = (), *, busy_timeout: float | None = None) -> Any:
        self.calls += 1
        return super().call(name, keys, args, busy_timeout=busy_timeout)


def test_a_subclass_overriding_call_keeps_its_override(redis_url: str, impl: str) -> None:
    with Counting(redis_url, impl=impl) as client:
        script = client.register_script("return 1")
        assert client.call(script.name) == 1 and script() == 1
        assert client.calls == 2
    with fastlock.Client(redis_url, impl=impl) as plain:
        assert plain.call == plain._caller.call  # bound to the core's method: no Python frame


def test_a_script_that_does_not_compile_is_its_calls_report_and_never_seen_loaded(
    client: fastlock.Client,
) -> None:
    broken = client.register_script("return (").name
    pipe = client.pipeline().call(broken).execute_command("INCR", "n").call(broken)
    first, incremented, second = pipe.execute(raise_on_error=False)
    assert isinstance(first, fastlock.LuaCompileError) and first.script == broken
    assert incremented == 1
    # the second call got NOSCRIPT (the EVAL did not load it), nothing ran after it: sent
    # again by Client.call, which reports the compile error
    assert isinstance(second, fastlock.LuaCompileError)
    pipe = client.pipeline().call(broken).execute_command("INCR", "n")
    with pytest.raises(fastlock.LuaCompileError):  # still an EVAL: never seen loaded
        pipe.execute()
    assert client.execute("GET", "n") == b"2"
