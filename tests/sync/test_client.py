"""Client, pipeline, pool and connection set-up against real servers, for both cores."""

from __future__ import annotations

import inspect
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

import fastlock
from fastlock.operations import Blocking, Call, Command, Commands, Operation, Runner, Sleep
from fastlock.testing.servers import TempServer


def test_commands_round_trip(client: fastlock.Client) -> None:
    assert client.execute("SET", "k", 1.5) == b"OK"
    assert client.execute("GET", "k") == b"1.5"
    assert client.execute("INCRBY", "n", 41) == 41
    assert client.execute("RPUSH", "l", "a", b"b", True, None) == 4
    assert client.execute("LRANGE", "l", 0, -1) == [b"a", b"b", b"1", b"0"]
    assert client.execute("GET", "missing") is None
    for size in (300_000, 12 * 1024 * 1024):
        big = os.urandom(size)
        assert client.execute("SET", "big", memoryview(big)) == b"OK"
        assert client.execute("GET", "big") == big


def test_error_replies_raise_typed_and_keep_the_connection(client: fastlock.Client) -> None:
    client.execute("SET", "k", "v")
    with pytest.raises(fastlock.WrongTypeError) as info:
        client.execute("LPUSH", "k", 1)
    assert info.value.code == "WRONGTYPE"
    with pytest.raises(fastlock.ResponseError) as info:
        client.execute("NOSUCHCOMMAND")
    assert info.value.code == "ERR"
    assert client.execute("GET", "k") == b"v"
    assert client.pool.size == 1


def test_bad_argument_leaves_the_connection_clean(client: fastlock.Client) -> None:
    client.execute("PING")
    with pytest.raises(fastlock.ArgumentTypeError, match="argument 3"):
        client.execute("SET", "k", "v", object())
    with pytest.raises(fastlock.ArgumentError):
        client.evalsha("0" * 40, ["k"], ["ok", float("nan")])
    assert client.execute("ECHO", "still in step") == b"still in step"
    assert client.execute("EXISTS", "k") == 0
    assert client.pool.size == 1


RUNNER_METHODS = ("call", "execute", "execute_blocking", "execute_many", "run")


def test_client_is_a_runner(client: fastlock.Client) -> None:
    """Structurally, method by method (mypy checks the same in fastlock.sync.client), and it
    drives every step an operation yields."""
    for name in RUNNER_METHODS:
        assert inspect.signature(getattr(fastlock.Client, name)) == inspect.signature(getattr(Runner, name))
    counter = client.register_script("return redis.call('INCR', KEYS[1])", name="incr_by_script")

    def operation() -> Operation[list[Any]]:
        got = [(yield Command(("SET", "k", "v")))]
        got.append((yield Commands([("GET", "k"), ("LPUSH", "k", 1)])))
        got.append((yield Call(counter.name, ["n"])))
        got.append((yield Sleep(0.001)))
        got.append((yield Blocking(("BLPOP", "empty", 0.01), timeout=0.01)))
        try:
            yield Command(("INCR", "k"))
        except fastlock.ResponseError as exc:  # error replies are thrown in
            got.append(type(exc))
        return got

    runner: Runner = client
    got = runner.run(operation())
    assert got[:2] == [b"OK", [b"v", got[1][1]]] and isinstance(got[1][1], fastlock.WrongTypeError)
    assert got[2:] == [1, None, None, fastlock.ResponseError]


def test_pipeline_one_write_many_replies(client: fastlock.Client) -> None:
    pipe = client.pipeline()
    for i in range(100):
        pipe.execute_command("RPUSH", "l", i)
    pipe.execute_command("LLEN", "l")
    replies = pipe.execute()
    assert replies == [*range(1, 101), 100]
    assert len(pipe) == 0


def test_pipeline_errors_in_place_or_raised_after_all_replies(client: fastlock.Client) -> None:
    client.execute("SET", "s", "x")
    pipe = client.pipeline().execute_command("INCR", "n").execute_command("LPUSH", "s", 1)
    replies = pipe.execute_command("INCR", "n").execute(raise_on_error=False)
    assert replies[0] == 1 and isinstance(replies[1], fastlock.WrongTypeError) and replies[2] == 2
    pipe = client.pipeline().execute_command("LPUSH", "s", 1).execute_command("INCR", "n")
    with pytest.raises(fastlock.WrongTypeError):
        pipe.execute()
    assert client.execute("GET", "n") == b"3"


def test_register_script_loads_on_noscript(client: fastlock.Client) -> None:
    script = client.register_script("return {KEYS[1], ARGV[1], tonumber(ARGV[2]) + 1}")
    assert script(keys=["k"], args=[True, 41]) == [b"k", b"1", 42]
    client.execute("SCRIPT", "FLUSH")
    assert script(keys=["k"], args=[None, 1]) == [b"k", b"0", 2]
    assert client.execute("SCRIPT", "EXISTS", script.sha) == [1]


def test_script_raising_noscript_text_is_not_rerun(client: fastlock.Client) -> None:
    script = client.register_script("redis.call('INCR', KEYS[1]) error('NOSCRIPT fake')")
    with pytest.raises(fastlock.ScriptError) as info:
        script(keys=["runs"])
    assert not isinstance(info.value, fastlock.NoScriptError)
    assert client.execute("GET", "runs") == b"1"


def test_unix_socket_and_db_selection(unix_url: str, impl: str) -> None:
    with fastlock.Client(f"{unix_url}?db=3", impl=impl) as c3, fastlock.Client(unix_url, impl=impl) as c0:
        c3.execute("SET", "where", "db3")
        assert c0.execute("GET", "where") is None
        assert c3.execute("GET", "where") == b"db3"
        assert c3.execute("CLIENT", "INFO").split(b" db=")[1].startswith(b"3 ")


def test_url_db_path_and_overrides(redis_url: str, impl: str) -> None:
    with fastlock.Client(f"{redis_url}/5", impl=impl, client_name="flt") as client:
        client.execute("SET", "x", 1)
        info = client.execute("CLIENT", "INFO")
        assert b" db=5 " in info and b" name=flt " in info
    assert fastlock.parse_url("redis://u:p%40ss@h:7000/2").password == "p@ss"
    with pytest.raises(ValueError, match="unsupported URL scheme"):
        fastlock.parse_url("http://x")


def test_password_and_acl_user(server_factory: Callable[..., TempServer], impl: str) -> None:
    srv = server_factory(password="s3cret", acl_users=[("alice", "wonder", "+@all ~*")])
    with fastlock.Client(srv.url, impl=impl, password="s3cret") as client:
        assert client.execute("PING") == b"PONG"
    with fastlock.Client(srv.url, impl=impl, username="alice", password="wonder") as client:
        assert client.execute("ACL", "WHOAMI") == b"alice"
    with fastlock.Client(srv.url, impl=impl, username="alice", password="wrong") as client:
        with pytest.raises(fastlock.AuthenticationError):
            client.execute("PING")
        assert client.pool.size == 0
    with fastlock.Client(srv.url, impl=impl) as client, pytest.raises(fastlock.AuthenticationError):
        client.execute("SET", "k", 1)


def test_tls(tls_server: TempServer, impl: str) -> None:
    url = f"{tls_server.tls_url}?ssl_ca_certs={tls_server.ca_path}"
    with fastlock.Client(url, impl=impl) as client:
        assert client.execute("SET", "tls", "yes") == b"OK"
        assert client.execute("GET", "tls") == b"yes"
        assert client.register_script("return ARGV[1]")(args=["over tls"]) == b"over tls"
    with (
        fastlock.Client(tls_server.tls_url, impl=impl) as client,
        pytest.raises(fastlock.ConnectionError) as info,
    ):
        client.execute("PING")
    assert info.value.sent is False


def test_from_redis(server: Any, impl: str) -> None:
    import redis  # in the test extra: a missing package fails the test, never skips it

    r = redis.Redis(host=server.host, port=server.port, db=4)
    client = fastlock.Client.from_redis(r, impl=impl)
    client.execute("SET", "shared", "from fastlock")
    assert r.get("shared") == b"from fastlock"
    assert client.params.db == 4 and client.params.port == server.port
    unix_redis = redis.Redis(unix_socket_path=server.unix_path, db=4)
    unix = fastlock.Client.from_redis(unix_redis, impl=impl)
    assert unix.execute("GET", "shared") == b"from fastlock"
    r.close()
    unix_redis.close()


def test_from_redis_tls(tls_server: TempServer, impl: str) -> None:
    import redis  # in the test extra: a missing package fails the test, never skips it

    r = redis.Redis(host="127.0.0.1", port=tls_server.port, ssl=True, ssl_ca_certs=tls_server.ca_path)
    with fastlock.Client.from_redis(r, impl=impl) as client:
        assert client.params.ssl_context is not None
        assert client.execute("PING") == b"PONG"
    r.close()


def test_pool_is_bounded_and_times_out(redis_url: str, impl: str) -> None:
    client = fastlock.Client(redis_url, impl=impl, max_connections=2, pool_timeout=0.2)
    held = [client.pool.get(), client.pool.get()]
    with pytest.raises(fastlock.PoolTimeoutError, match="all 2 in use"):
        client.pool.get()
    released = threading.Timer(0.05, client.pool.put, [held.pop()])
    released.start()
    conn = client.pool.get()  # handed over by the release
    assert client.pool.size == 2
    client.pool.put(conn)
    client.pool.put(held.pop())
    assert client.pool.idle == 2
    client.close()


def test_pool_under_many_threads(redis_url: str, impl: str) -> None:
    client = fastlock.Client(redis_url, impl=impl, max_connections=4, pool_timeout=10)
    script = client.register_script("return redis.call('INCR', KEYS[1])")
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for i in range(150):
                client.execute("INCR", "n") if i % 2 else script(keys=["n"])
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert client.execute("GET", "n") == b"1800"
    assert client.pool.size <= 4


def test_fork_child_never_reuses_parent_sockets(client: fastlock.Client) -> None:
    parent_id = client.execute("CLIENT", "ID")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report its connection id, or -1 on failure
        try:
            child_id = client.execute("CLIENT", "ID")
            client.execute("INCR", "forked")
            os.write(write, str(child_id).encode())
        finally:
            os._exit(0)
    os.close(write)
    child_report = os.read(read, 64)
    os.close(read)
    os.waitpid(pid, 0)
    assert int(child_report) != parent_id
    assert client.execute("CLIENT", "ID") == parent_id
    assert client.execute("GET", "forked") == b"1"


def test_idle_connection_killed_by_server_is_replaced(redis_url: str, impl: str) -> None:
    client = fastlock.Client(redis_url, impl=impl, health_check_interval=0)
    first = client.execute("CLIENT", "ID")
    with fastlock.Client(redis_url, impl=impl) as admin:
        assert admin.execute("CLIENT", "KILL", "ID", first) == 1
    assert client.execute("PING") == b"PONG"
    assert client.execute("CLIENT", "ID") != first


def test_impl_attribute(client: fastlock.Client, impl: str) -> None:
    assert client.impl == impl
    assert fastlock.__impl__ in ("cython", "python")


def test_blocking_command_outlives_the_socket_timeout(redis_url: str, impl: str) -> None:
    client = fastlock.Client(redis_url, impl=impl, socket_timeout=0.2)
    pusher = threading.Timer(0.5, client.execute, ["RPUSH", "wake", "up"])
    pusher.start()
    assert client.execute_blocking("BLPOP", "wake", 2, timeout=2) == [b"wake", b"up"]
    with pytest.raises(fastlock.TimeoutError):  # the normal timeout is back
        client.execute("BLPOP", "wake", 1)


def test_measure_cost_counts_inner_commands_and_round_trips(client: fastlock.Client) -> None:
    from fastlock.tools.costs import measure_cost

    script = client.register_script("redis.call('SET', KEYS[1], 1) return redis.call('GET', KEYS[1])")
    script(keys=["k"])
    cost = measure_cost(client, lambda: script(keys=["k"]), 20)
    assert (cost.commands_per_op, cost.round_trips_per_op) == (3, 1)
    assert cost.by_command == {"evalsha": 20, "set": 20, "get": 20}
    client.execute("SCRIPT", "FLUSH")
    noscript = measure_cost(client, lambda: script(keys=["k"]), 1)
    # EVALSHA refused, then SCRIPT LOAD + EVALSHA in one write (plus the 2 inner commands)
    assert (noscript.round_trips, noscript.commands) == (2, 5)


@pytest.mark.slow  # slow tier: waits out timeouts
def test_blocking_waits_work_without_a_socket_timeout(redis_url: str, impl: str) -> None:
    """redis-py's default socket_timeout is None (wait for ever): every blocking wait must
    still end by its own timeout, on the connection it started on."""
    redis = pytest.importorskip("redis")
    client = fastlock.Client.from_redis(redis.Redis.from_url(redis_url), impl=impl)
    assert client.params.socket_timeout is None
    holder = client.lock("job", ttl=30)
    assert holder.acquire("holder", blocking=False) is not None
    waiter = client.lock("job", ttl=30)
    for _ in range(3):
        assert waiter.acquire("waiter", timeout=0.3) is None
        assert client.queue("q").wait(0.3) is False
        assert client.execute_blocking("BLPOP", "nothing", 0.3, timeout=0.3) is None
    assert client.pool.size == 1
    assert client.execute("PING") == b"PONG"


def test_idle_worker_waits_quietly_without_a_socket_timeout(
    redis_url: str, impl: str, caplog: pytest.LogCaptureFixture
) -> None:
    redis = pytest.importorskip("redis")
    client = fastlock.Client.from_redis(redis.Redis.from_url(redis_url), impl=impl)
    worker = fastlock.Worker(client.queue("idle"), lambda job: None, idle_wait=0.3)
    runner = threading.Thread(target=worker.run)
    with caplog.at_level(logging.WARNING, logger="fastlock"):
        runner.start()
        threading.Event().wait(1.5)  # about five idle waits
        worker.stop()
        runner.join(10)
    assert not runner.is_alive()
    assert [record.getMessage() for record in caplog.records] == []
    assert client.pool.size <= 2


def test_password_is_never_shown() -> None:
    params = fastlock.parse_url("redis://user:hunter2@127.0.0.1:1/0")
    assert params.password == "hunter2"
    assert "hunter2" not in repr(params) and "hunter2" not in str(params)
    client = fastlock.Client("redis://user:hunter2@127.0.0.1:1/0", impl="python")
    assert "hunter2" not in repr(client) and "hunter2" not in repr(client.params)


@pytest.mark.parametrize(
    "url",
    [
        "redis://user:hun/ter2@127.0.0.1:6379/0",
        "redis://user:hun#ter2@127.0.0.1:6379",
        "redis://user:hun?ter2@127.0.0.1:6379",
        "redis://:12/hunter2@127.0.0.1",
        "unix://user:hun/ter2@/tmp/redis.sock",
    ],
)
def test_unencoded_password_is_refused_without_showing_it(url: str) -> None:
    with pytest.raises(ValueError, match="percent-encode") as info:
        fastlock.parse_url(url)
    assert "ter2" not in str(info.value) and "hunter2" not in str(info.value)


REFUSED = [
    ("MULTI",),
    ("exec",),
    ("DISCARD",),
    ("WATCH", "k"),
    ("UNWATCH",),
    ("SUBSCRIBE", "ch"),
    ("psubscribe", "c*"),
    ("SSUBSCRIBE", "ch"),
    ("UNSUBSCRIBE",),
    ("PUNSUBSCRIBE",),
    ("SUNSUBSCRIBE",),
    ("MONITOR",),
    ("SELECT", 1),
    (b"HELLO", 3),
    ("AUTH", "pw"),
    ("RESET",),
    ("QUIT",),
    ("READONLY",),
    ("READWRITE",),
    ("SYNC",),
    ("PSYNC", "?", -1),
    ("CLIENT", "REPLY", "OFF"),
    ("client", "tracking", "on"),
    ("CLIENT", "CACHING", "yes"),
    ("CLIENT", "SETNAME", "x"),
]


@pytest.mark.parametrize("command", REFUSED, ids=lambda c: " ".join(map(str, c[:2])))
def test_connection_state_commands_are_refused_before_sending(
    client: fastlock.Client, command: tuple[Any, ...]
) -> None:
    client.execute("SET", "k", "v")
    sent = client.pool.round_trips
    with pytest.raises(fastlock.ArgumentError, match="pooled connection") as info:
        client.execute(*command)
    name = command[0].decode() if isinstance(command[0], bytes) else command[0]
    assert f"{name.upper()} " in str(info.value)
    with pytest.raises(fastlock.ArgumentError, match="pooled connection"):
        client.pipeline().execute_command("GET", "k").execute_command(*command)
    assert client.pool.round_trips == sent  # nothing was written
    assert client.execute("GET", "k") == b"v"
    assert client.pipeline().execute_command("GET", "k").execute() == [b"v"]


def test_other_client_subcommands_are_allowed(client: fastlock.Client) -> None:
    assert isinstance(client.execute("CLIENT", "ID"), int)
    assert client.execute("CLIENT", "GETNAME") is None
