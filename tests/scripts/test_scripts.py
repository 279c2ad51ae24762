"""The script layer against real Redis and Valkey servers, on both cores: named calls,
metadata, NOSCRIPT recovery, BUSY waits and kills, Lua error reports, debug, counters."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import fastlock
from fastlock.scripts.calling import kill_busy_script
from fastlock.testing.servers import ExternalServer, TempServer
from fastlock.tools.costs import command_calls, measure_cost

LUA = Path(__file__).parents[1] / "lua"
CHECKS = str(LUA / "shared" / "_checks.lua")
BUSY_LOOP = (
    "local t = redis.call('TIME') local stop = t[1] * 1000000 + t[2] + tonumber(ARGV[1]) * 1000 "
    "repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= stop return 1"
)


@pytest.fixture
def client(redis_url: str, impl: str) -> Iterator[fastlock.Client]:
    """A client on the flushed shared server with the test scripts' folder."""
    with fastlock.Client(redis_url, impl=impl, script_paths=[LUA]) as c:
        yield c


def test_named_calls_bound_scripts_and_unknown_names(client: fastlock.Client) -> None:
    assert client.call("echo", keys=["k"], args=[True, None, 1.5, b"\x00"]) == [
        [b"k"],
        [b"1", b"0", b"1.5", b"\x00"],
    ]
    assert [client.call("counter", ["n"]) for _ in range(3)] == [1, 2, 3]
    bound = client.script("counter")
    assert (
        bound(keys=["n"]) == 4 and bound.name == "counter" and bound.sha == client.scripts.get("counter").sha
    )
    inline = client.register_script(
        '-- #include "shared/_checks.lua"\nreturn push(KEYS[1], ARGV[1])', name="pusher"
    )
    assert inline(["l"], ["x"]) == 1 and client.call("pusher", ["l"], ["y"]) == 2
    with pytest.raises(fastlock.ScriptNotFoundError, match="no script 'nope'"):
        client.call("nope")
    assert client.script_stats()["counter"].calls == 4


def test_metadata_is_appended_only_when_declared(client: fastlock.Client) -> None:
    before = time.time()
    args, now, debug, max_history, name, version = client.call("meta_all", ["k"], ["a", "b"])
    assert args == [b"a", b"b"]  # the generated line took the metadata back off ARGV
    assert before - 1 <= float(now) <= time.time() + 1
    assert (debug, max_history, name) == (b"false", 1000, b"meta_all")
    info = client.execute("INFO", "server").decode()
    assert f"redis_version:{version.decode()}\r\n" in info and client.server_version == version.decode()
    args, name, now, debug = client.call("meta_some", [], ["x"])
    assert (args, name, debug) == ([b"x"], b"meta_some", b"nil") and float(now) >= before - 1
    assert client.call("echo", [], ["only", "mine"]) == [[], [b"only", b"mine"]]  # nothing appended
    with fastlock.Client(client.params.address, script_paths=[LUA], debug=True, max_history=7) as other:
        assert other.call("meta_all", [], [])[2:4] == [b"true", 7]


def test_noscript_after_flush_costs_one_extra_round_trip(client: fastlock.Client) -> None:
    assert client.call("counter", ["n"]) == 1
    client.execute("SCRIPT", "FLUSH")
    cost = measure_cost(client, lambda: client.call("counter", ["n"]), 1)
    # failed EVALSHA, then SCRIPT LOAD + EVALSHA in one pipelined write
    assert cost.round_trips == 2
    assert cost.by_command == {"evalsha": 2, "script|load": 1, "incr": 1}
    assert client.execute("GET", "n") == b"2"
    stats = client.script_stats()["counter"]
    assert (stats.calls, stats.errors, stats.reloads) == (2, 0, 2)  # first call, and after the flush
    assert measure_cost(client, lambda: client.call("counter", ["n"]), 5).round_trips_per_op == 1


@pytest.mark.fault
def test_noscript_after_a_restart_fails_no_call(private_server: TempServer, impl: str) -> None:
    with fastlock.Client(
        private_server.url, impl=impl, script_paths=[LUA], health_check_interval=0
    ) as client:
        results = [client.call("counter", ["n"]) for _ in range(5)]
        private_server.restart()  # data and script cache are gone
        results += [client.call("counter", ["n"]) for _ in range(5)]
        assert results == [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]
        stats = client.script_stats()["counter"]
        assert (stats.calls, stats.errors, stats.reloads) == (10, 0, 2)  # first call, and after the restart


@pytest.mark.parametrize("how", ["raise", "table", "reply"])
def test_a_script_failing_with_noscript_text_is_not_run_again(client: fastlock.Client, how: str) -> None:
    client.execute("SCRIPT", "LOAD", client.scripts.get("fake_noscript").body)
    client.execute("CONFIG", "RESETSTAT")
    with pytest.raises(fastlock.LuaRaisedError) as info:
        client.call("fake_noscript", ["runs"], [how])
    assert info.value.code in ("ERR", "NOSCRIPT") and "NOSCRIPT" in str(info.value)
    assert not isinstance(info.value, fastlock.NoScriptError)
    assert client.execute("GET", "runs") == b"1"
    assert client.script_stats()["fake_noscript"].reloads == 0
    assert command_calls(client)["evalsha"] == 1  # sent once, never again


def test_errors_point_into_the_template_files(client: fastlock.Client) -> None:
    with pytest.raises(fastlock.LuaRaisedError) as raised:
        client.call("raise_in_partial", ["k"], ["me"])
    err = raised.value
    assert (err.script, err.file, err.line, err.code) == ("raise_in_partial", CHECKS, 5, "ERR")
    assert err.message == "owner mismatch: someone"
    assert '  => 5 |     error("owner mismatch: " .. tostring(owner))' in err.context.splitlines()
    assert str(err).startswith(f"script raise_in_partial raised an error at {CHECKS}:5: ERR owner mismatch")

    with pytest.raises(fastlock.LuaCommandError) as refused:
        client.call("wrongtype_in_partial", ["k"])
    assert (refused.value.file, refused.value.line, refused.value.code) == (CHECKS, 10, "WRONGTYPE")
    assert refused.value.message == "Operation against a key holding the wrong kind of value"

    with pytest.raises(fastlock.LuaRaisedError) as in_main:
        client.call("raise_in_main")
    err = in_main.value
    assert (err.file, err.line, err.message) == (str(LUA / "raise_in_main.lua"), 7, "main failed with 42")
    assert err.rendered_line is not None and err.rendered_line > 7  # behind the partials and META line
    assert client.script_stats()["raise_in_main"].errors == 1


def test_compile_error_in_a_partial(redis_url: str, impl: str, tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "_broken.lua").write_text("local ok = 1\nlocal broken = = 2\n")
    (tmp_path / "uses_broken.lua").write_text('-- #include "shared/_broken.lua"\nreturn ok\n')
    with fastlock.Client(redis_url, impl=impl, script_paths=[tmp_path]) as client:
        with pytest.raises(fastlock.LuaCompileError) as info:
            client.call("uses_broken")
        err = info.value
        assert (err.file, err.line) == (str(tmp_path / "shared" / "_broken.lua"), 2)
        assert "unexpected symbol near '='" in err.message
        with (
            pytest.raises(fastlock.LuaCompileError),
            fastlock.Client(redis_url, impl=impl, script_paths=[tmp_path], warm_up=True) as eager,
        ):
            eager.execute("PING")  # warm-up on connect fails fast


def test_warm_up_loads_every_script_in_one_round_trip(
    server: TempServer | ExternalServer, redis_url: str, impl: str
) -> None:
    server.raw_command("CONFIG", "RESETSTAT")
    with fastlock.Client(redis_url, impl=impl, script_paths=[LUA], warm_up=True) as client:
        assert client.execute("PING") == b"PONG"
        assert client.pool.round_trips == 2  # the loads in one pipelined write, then PING
        shas = [script.sha for script in client.scripts.load_all()]
        assert command_calls(client)["script|load"] == len(shas) > 10  # the built-in scripts too
        assert client.execute("SCRIPT", "EXISTS", *shas) == [1] * len(shas)
        cost = measure_cost(client, lambda: client.call("counter", ["n"]), 1)
        assert cost.by_command == {"evalsha": 1, "incr": 1}


def test_debug_logs_each_call_and_the_scripts_debug_lines(
    server: TempServer | ExternalServer, redis_url: str, impl: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="fastlock.scripts")
    key = uuid.uuid4().hex
    for debug in (False, True):
        with fastlock.Client(redis_url, impl=impl, script_paths=[LUA], debug=debug) as client:
            assert client.call("debug_line", [f"{key}-{debug}"], ["a"]) == 1
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 1 and messages[0].startswith("script debug_line took ")
    if isinstance(server, TempServer):
        log = server.log_path.read_text()
        assert f"fastlock debug_line: hello {key}-True 42" in log and f"{key}-False" not in log


def test_counters_are_exact_under_many_threads(redis_url: str, impl: str) -> None:
    client = fastlock.Client(redis_url, impl=impl, script_paths=[LUA], max_connections=8, pool_timeout=10)
    start = threading.Barrier(16)
    failures: list[BaseException] = []

    def work() -> None:
        start.wait()
        for i in range(100):
            try:
                client.call("raise_in_partial", ["owned"], ["me"]) if i % 10 == 0 else client.call(
                    "counter", ["n"]
                )
            except fastlock.LuaRaisedError:
                pass
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    stats = client.script_stats()
    assert client.execute("GET", "n") == b"1440"
    assert (stats["counter"].calls, stats["counter"].errors) == (1440, 0)
    assert (stats["raise_in_partial"].calls, stats["raise_in_partial"].errors) == (160, 160)
    assert 0 < stats["counter"].mean_time < stats["counter"].total_time
    client.close()


# --- BUSY -------------------------------------------------------------------------------


class BusyScript:
    """A Lua busy loop of ``seconds`` run from a raw connection of ``server``; entering the
    context returns once the server answers BUSY to everyone else."""

    def __init__(self, server: TempServer, seconds: float, write: bool = False) -> None:
        assert server.raw_command("CONFIG", "SET", "busy-reply-threshold", "20") == b"+OK\r\n"
        source = ("redis.call('SET', KEYS[1], 1) " if write else "") + BUSY_LOOP
        self.reply = b""
        self._thread = threading.Thread(
            target=lambda: setattr(
                self, "reply", server.raw_command("EVAL", source, 1, "busy", seconds * 1000)
            )
        )
        self._server = server

    def __enter__(self) -> BusyScript:
        self._thread.start()
        deadline = time.monotonic() + 5
        while not self._server.raw_command("PING").startswith(b"-BUSY"):
            assert time.monotonic() < deadline, "the server never became busy"
            time.sleep(0.005)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._thread.join()


@pytest.fixture
def busy_client(private_server: TempServer, impl: str) -> Iterator[fastlock.Client]:
    with fastlock.Client(private_server.url, impl=impl, script_paths=[LUA]) as client:
        client.call("counter", ["warm"])  # a pooled connection with the script loaded
        yield client


def test_busy_is_retried_until_the_deadline(busy_client: fastlock.Client, private_server: TempServer) -> None:
    with BusyScript(private_server, 1.5) as busy:
        with pytest.raises(fastlock.ScriptBusyError) as info:
            busy_client.call("counter", ["n"], busy_timeout=0.1)
        # gave up at its own deadline, not the client's 5 s
        assert 0.1 <= info.value.waited < 5.0 and info.value.script == "counter"
        assert isinstance(info.value, fastlock.BusyError) and "is busy running a script" in info.value.text
        assert busy_client.call("counter", ["n"]) == 1  # waits (default busy_timeout 5 s) for the loop
    assert busy.reply == b":1\r\n"  # never killed: the call above waited for the loop
    assert "script|kill" not in command_calls(busy_client)
    stats = busy_client.script_stats()["counter"]
    assert (stats.calls, stats.errors, stats.reloads) == (3, 1, 1)  # the reload is the warm-up call's


def test_kill_policy_ends_a_script_that_has_not_written(
    busy_client: fastlock.Client, private_server: TempServer, caplog: pytest.LogCaptureFixture
) -> None:
    busy_client.kill_busy_after = 0.0
    with BusyScript(private_server, 30.0) as busy:
        started = time.monotonic()
        assert busy_client.call("counter", ["n"]) == 1
        assert time.monotonic() - started < 15  # killed, not waited out (30 s)
    assert busy.reply.startswith(b"-ERR Script killed by user with SCRIPT KILL")
    assert "sent SCRIPT KILL" in caplog.text


def test_kill_policy_waits_for_a_script_that_has_written(
    busy_client: fastlock.Client, private_server: TempServer, caplog: pytest.LogCaptureFixture
) -> None:
    busy_client.kill_busy_after = 0.0
    with BusyScript(private_server, 1.5, write=True) as busy:
        assert busy_client.call("counter", ["n"]) == 1
    assert busy.reply == b":1\r\n"
    assert "SCRIPT KILL refused: the busy script has written" in caplog.text
    assert command_calls(busy_client)["script|kill"] == 1  # asked once, then waited
    # NOTBUSY (the script ended before the kill arrived) means: retry at once.
    not_busy = fastlock.BusyError("BUSY Redis is busy running a script.")
    assert busy_client.run(kill_busy_script(not_busy)) is True


# --- server conditions met inside a script ----------------------------------------------

WRITE = "redis.call('GET', KEYS[1])\nredis.call('SET', KEYS[1], 1)\nreturn 1\n"


@pytest.fixture
def replica(server_factory: Callable[..., TempServer]) -> TempServer:
    """A read-only replica (``replica-read-only yes``, the default) of a private primary,
    its link up."""
    primary, replica = server_factory(extra_args=("--repl-diskless-sync-delay", "0")), server_factory()
    assert replica.raw_command("REPLICAOF", primary.host, primary.port) == b"+OK\r\n"
    deadline = time.monotonic() + 30
    while b"master_link_status:up" not in replica.raw_command("INFO", "replication"):
        assert time.monotonic() < deadline, "the replica never synced"
        time.sleep(0.01)
    return replica


def test_readonly_inside_a_script_is_a_readonly_error(replica: TempServer, impl: str) -> None:
    with fastlock.Client(replica.url, impl=impl) as client:
        writes = client.register_script(WRITE, name="writes")
        with pytest.raises(fastlock.ReadOnlyError) as info:
            writes(["k"])
        err = info.value
        assert isinstance(err, fastlock.LuaCommandError) and (err.code, err.line) == ("READONLY", 2)
        assert err.file == "<writes>" and "=> 2 | redis.call('SET', KEYS[1], 1)" in err.context
        assert str(err).startswith("script writes had a command refused at <writes>:2: READONLY ")
        with pytest.raises(fastlock.ReadOnlyError) as raw:  # without the script layer too
            client.evalsha(writes.sha, ["k"])
        assert isinstance(raw.value, fastlock.LuaCommandError) and raw.value.rendered_line == 2
        returned = client.register_script("return redis.pcall('SET', KEYS[1], 1)")
        with pytest.raises(fastlock.ReadOnlyError):  # a refusal the script returns
            returned(["k"])
        assert client.execute("GET", "k") is None


def test_oom_inside_a_script_is_an_out_of_memory_error(private_server: TempServer, impl: str) -> None:
    with fastlock.Client(private_server.url, impl=impl) as client:
        writes = client.register_script(WRITE, name="writes")
        client.execute("SCRIPT", "LOAD", writes.script.body)
        client.execute("CONFIG", "SET", "maxmemory", "1")
        with pytest.raises(fastlock.OutOfMemoryError) as info:
            writes(["k"])
        err = info.value
        assert isinstance(err, fastlock.LuaCommandError) and (err.code, err.file, err.line) == (
            "OOM",
            "<writes>",
            2,
        )
        with pytest.raises(fastlock.OutOfMemoryError) as raw:
            client.evalsha(writes.sha, ["k"])
        assert isinstance(raw.value, fastlock.LuaCommandError)
        client.execute("CONFIG", "SET", "maxmemory", "0")
        assert writes(["k"]) == 1


# --- replies in the server's own NOSCRIPT / BUSY wording --------------------------------

SERVER_WORDINGS = {
    "redis NOSCRIPT": "NOSCRIPT No matching script. Please use EVAL.",
    "valkey NOSCRIPT": "NOSCRIPT No matching script.",
    "redis BUSY": "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
    "valkey BUSY": "BUSY Valkey is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
    "function BUSY": "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN "
    "NOSAVE.",
}


@pytest.mark.parametrize("how", ["error_reply", "err table", "-err table"])
@pytest.mark.parametrize("wording", SERVER_WORDINGS.values(), ids=SERVER_WORDINGS.keys())
def test_a_script_returning_the_servers_wording_runs_once(
    client: fastlock.Client, wording: str, how: str
) -> None:
    """The text comes from ARGV, so no look at the source could have refused the script."""
    reply = {"error_reply": "redis.error_reply(ARGV[1])", "err table": "{err = ARGV[1]}"}
    source = f"redis.call('INCR', KEYS[1])\nreturn {reply.get(how, '{err = ARGV[2] .. ARGV[1]}')}\n"
    script = client.register_script(source, name="impostor")
    client.execute("SCRIPT", "LOAD", script.script.body)
    client.execute("CONFIG", "RESETSTAT")
    with pytest.raises(fastlock.LuaRaisedError) as info:
        script(["runs"], [wording, "-"], busy_timeout=0.5)
    err = info.value
    assert not isinstance(err, (fastlock.NoScriptError, fastlock.BusyError)) and wording in err.text
    assert (err.file, err.line) == (None, None)  # a returned error has no position in the source
    assert client.execute("GET", "runs") == b"1"
    assert command_calls(client)["evalsha"] == 1  # sent once, never again
    assert client.script_stats()["impostor"].reloads == 0
