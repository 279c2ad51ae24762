"""Faults: timeouts, lost replies, killed servers and connections. Never a write twice."""

from __future__ import annotations

import gc
import random
import select
import signal
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import fastlock
from fastlock._impl import load_core
from fastlock.sync.connect import open_connection, parse_url
from fastlock.testing.proxy import TcpProxy
from fastlock.testing.servers import TempServer

pytestmark = pytest.mark.fault

COUNTER = "return redis.call('INCR', KEYS[1])"


def counter(server_url: str, impl: str) -> bytes | None:
    with fastlock.Client(server_url, impl=impl) as direct:
        return direct.execute("GET", "n")


@pytest.mark.parametrize("how", ["command", "script"])
def test_timeout_after_send_is_raised_and_never_resent(
    proxy: TcpProxy, redis_url: str, impl: str, how: str
) -> None:
    client = fastlock.Client(proxy.url, impl=impl, socket_timeout=0.2)
    script = client.register_script(COUNTER)
    assert script(keys=["warm"]) == 1  # loaded, so the timed-out call is one EVALSHA
    proxy.set_reply_delay(0.6)
    started = time.monotonic()
    with pytest.raises(fastlock.TimeoutError) as info:
        client.execute("INCR", "n") if how == "command" else script(keys=["n"])
    assert time.monotonic() - started >= 0.15  # the 0.2 s socket timeout, not the 0.6 s late reply
    assert info.value.sent is True
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, fastlock.ConnectionError)
    assert client.pool.size == 0  # the desynchronised connection was discarded
    time.sleep(0.8)
    assert counter(redis_url, impl) == b"1"  # executed once by the server, never resent
    proxy.set_reply_delay(0)
    assert _read_again(client) == b"1"  # the client works again, on a new connection


def _read_again(client: fastlock.Client) -> Any:
    """``GET n`` on ``client``, tried again on a timeout (idempotent): its 0.2 s socket timeout
    is tight for the proxy thread of a loaded machine."""
    for _ in range(4):
        try:
            return client.execute("GET", "n")
        except fastlock.TimeoutError:
            continue
    return client.execute("GET", "n")


def test_reply_lost_after_execution(proxy: TcpProxy, redis_url: str, impl: str) -> None:
    client = fastlock.Client(proxy.url, impl=impl)
    client.execute("PING")
    proxy.drop_next_reply()
    with pytest.raises(fastlock.ConnectionError) as info:
        client.execute("INCR", "n")
    assert info.value.sent is True and not isinstance(info.value, fastlock.TimeoutError)
    assert counter(redis_url, impl) == b"1"
    assert client.execute("INCR", "n") == 2


def test_reset_connection_is_retried_only_because_nothing_was_sent(proxy: TcpProxy, impl: str) -> None:
    client = fastlock.Client(proxy.url, impl=impl, health_check_interval=None)
    client.execute("SET", "n", 10)
    proxy.cut()  # RST: the pooled socket is dead before the next command is written
    time.sleep(0.05)
    assert client.execute("INCR", "n") == 11
    assert client.execute("GET", "n") == b"11"


def test_a_call_in_flight_when_the_pool_closes_closes_its_connection(proxy: TcpProxy, impl: str) -> None:
    client = fastlock.Client(proxy.url, impl=impl)
    script = client.register_script("return 1")
    assert script() == 1 and client.pool.idle == 1  # loaded, its connection idle
    proxy.hold_replies()
    replies: list[Any] = []
    worker = threading.Thread(target=lambda: replies.append(script()))
    worker.start()
    for _ in range(10_000):  # until the call has taken the connection
        if not client.pool.idle:
            break
        time.sleep(0.001)
    client.pool.close()
    proxy.release_replies()
    worker.join()
    assert replies == [1]
    assert (client.pool.idle, client.pool.size) == (0, 0)  # closed on its way back, not kept


def test_killed_server_then_restart(private_server: TempServer, impl: str) -> None:
    client = fastlock.Client(private_server.url, impl=impl, connect_timeout=1, health_check_interval=None)
    client.execute("SET", "k", 1)
    private_server.kill()
    with pytest.raises(fastlock.ConnectionError):
        client.execute("GET", "k")
    with pytest.raises(fastlock.ConnectionError) as info:
        client.execute("GET", "k")
    assert info.value.sent is False  # connection refused: nothing left the client
    private_server.restart()
    assert client.execute("GET", "k") is None  # persistence is off: data gone
    assert client.execute("SET", "k", 2) == b"OK"
    assert client.pool.size == 1


def test_a_lost_connection_has_the_idle_ones_polled(private_server: TempServer, impl: str) -> None:
    """The server restarted under three idle connections: the first call meets a dead socket
    (raised, it was sent); the retry does not meet another: every idle one is polled first."""
    client = fastlock.Client(private_server.url, impl=impl, health_check_interval=60)
    conns = [client.pool.get() for _ in range(3)]
    for conn in conns:
        conn.execute(("PING",))
        client.pool.put(conn)
    private_server.kill()
    private_server.restart()
    with pytest.raises(fastlock.ConnectionError) as info:
        client.execute("INCR", "n")
    assert info.value.sent is True
    assert client.execute("INCR", "n") == 1  # on a new connection: the first never ran
    assert client.pool.size == 1


def test_client_kill_without_health_check_raises_sent(redis_url: str, impl: str) -> None:
    client = fastlock.Client(redis_url, impl=impl, health_check_interval=None)
    victim = client.execute("CLIENT", "ID")
    with fastlock.Client(redis_url, impl=impl) as admin:
        admin.execute("CLIENT", "KILL", "ID", victim)
    with pytest.raises(fastlock.ConnectionError):
        client.execute("INCR", "n")
    assert client.execute("INCR", "n") == 1  # the killed connection never ran the first INCR


def test_server_pause_times_out_blocking_reader(redis_url: str, impl: str) -> None:
    client = fastlock.Client(redis_url, impl=impl, socket_timeout=0.2)
    with pytest.raises(fastlock.TimeoutError):
        client.execute("BLPOP", "never", 2)
    assert client.execute("PING") == b"PONG"


def test_tls_handshake_timeout_on_a_silent_listener(impl: str) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        client = fastlock.Client(f"rediss://127.0.0.1:{port}", impl=impl, connect_timeout=0.2)
        with pytest.raises(fastlock.TimeoutError) as info:
            client.execute("PING")
        assert info.value.sent is False
    finally:
        listener.close()


def test_connection_refused_is_clear(impl: str) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    with pytest.raises(fastlock.ConnectionError, match=f"cannot connect to redis://127.0.0.1:{port}/0"):
        fastlock.Client(f"redis://127.0.0.1:{port}", impl=impl).execute("PING")


OLD_SERVER_BASE = 10**12  # the killed server's counter starts here; the restarted one's at 0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_server_killed_mid_script_under_threads(private_server: TempServer, impl: str) -> None:
    client = fastlock.Client(private_server.url, impl=impl, max_connections=4, health_check_interval=None)
    script = client.register_script(COUNTER)
    client.execute("SET", "n", OLD_SERVER_BASE)
    replies: list[int] = []  # list.append is atomic: the worker threads share these two lists
    failures: list[fastlock.ConnectionError] = []
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            try:
                replies.append(script(keys=["n"]))
            except fastlock.ConnectionError as exc:
                failures.append(exc)
                time.sleep(0.01)

    def new_server_replies() -> list[int]:
        return sorted(reply for reply in replies if reply < OLD_SERVER_BASE)

    with ThreadPoolExecutor(4) as pool:
        threads = [pool.submit(work) for _ in range(4)]
        try:
            wait_for(lambda: len(replies) >= 20, "calls on the first server")
            private_server.kill()
            wait_for(lambda: len(failures) >= 4, "calls failing on the killed server")
            private_server.restart()
            wait_for(lambda: len(new_server_replies()) >= 20, "calls on the restarted server")
        finally:
            stop.set()
        for thread in threads:
            thread.result()
    # every call the restarted server ran was answered exactly once: its replies are 1..n,
    # with no gap (a call run but reported failed) and no repeat (a reply counted twice)
    assert new_server_replies() == list(range(1, int(client.execute("GET", "n")) + 1))


def _echo_by(client: fastlock.Client, how: str) -> Callable[[Any], Any]:
    """ECHO through ``execute``, a one-command pipeline or a script: reply == argument."""
    echo = client.register_script("return ARGV[1]")
    return {
        "execute": lambda value: client.execute("ECHO", value),
        "pipeline": lambda value: client.pipeline().execute_command("ECHO", value).execute()[0],
        "script": lambda value: echo(args=[value]),
    }[how]


@pytest.mark.parametrize("how", ["execute", "pipeline", "script"])
def test_unsolicited_reply_breaks_the_connection(
    proxy: TcpProxy, redis_url: str, impl: str, how: str
) -> None:
    client = fastlock.Client(proxy.url, impl=impl, max_connections=1, health_check_interval=None)
    run = _echo_by(client, how)
    assert run("warm") == b"warm"
    proxy.append_to_next_reply(b"+INJECTED\r\n")
    with pytest.raises(fastlock.ProtocolError, match="after the reply"):
        run("first")
    assert [run(value) for value in ("a", "b", "c")] == [b"a", b"b", b"c"]
    assert client.pool.size == 1


def test_unsolicited_reply_to_an_idle_connection_is_caught_by_the_health_check(
    proxy: TcpProxy, redis_url: str, impl: str
) -> None:
    client = fastlock.Client(proxy.url, impl=impl, max_connections=1, health_check_interval=None)
    assert client.execute("ECHO", "warm") == b"warm"
    proxy.send_to_clients(b"+INJECTED\r\n")
    conn = client.pool.get()
    assert select.select([conn.sock], [], [], 10)[0]  # the bytes reached the idle connection
    client.pool.put(conn)
    client.pool.health_check_interval = 0
    assert [client.execute("ECHO", value) for value in ("a", "b")] == [b"a", b"b"]


def test_resp3_push_after_a_reply_breaks_the_connection(redis_url: str, impl: str) -> None:
    """A connection switched to RESP3 with tracking (only possible through the core: the
    Client refuses HELLO and CLIENT TRACKING) gets an invalidation push after a write's reply."""
    core = load_core(impl)[1]
    conn = open_connection(parse_url(redis_url), core)
    with pytest.raises(fastlock.ProtocolError):
        conn.execute(("HELLO", "3"))
        conn.execute(("CLIENT", "TRACKING", "on"))
        conn.execute(("GET", "k"))
        conn.execute(("SET", "k", "v"))  # OK, then the push invalidating k, in one write
        conn.execute(("PING",))
    assert conn.broken


class Interrupt(Exception):
    """Raised by the SIGALRM handler at a random point of a call."""


_ARMED = [False]  # the handler raises only inside the call it was armed for


def _raise_interrupt(signum: int, frame: object) -> None:
    # A timer that expires just before it is disarmed runs this handler a few bytecodes
    # later, outside the call: it must not raise there.
    if _ARMED[0]:
        _ARMED[0] = False
        raise Interrupt


def _interrupted_calls(run: Callable[[int], Any], wanted: int, longest: float, seed: int) -> int:
    """Call ``run(i)``, each time with a SIGALRM due at a random time within ``longest``
    seconds, until ``wanted`` calls were interrupted (at most ``50 * wanted`` calls);
    every reply that arrives must be its own. Returns the interrupts."""
    rng = random.Random(seed)
    interrupted = 0
    for i in range(50 * wanted):
        if interrupted == wanted:
            break
        reply = None
        try:
            _ARMED[0] = True
            signal.setitimer(signal.ITIMER_REAL, rng.uniform(1e-6, longest))
            reply = run(i)
            _ARMED[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
        except Interrupt:
            interrupted += 1
        if reply is not None:
            assert reply == b"%d" % i
    return interrupted


# An exception raised at an arbitrary bytecode (inside socket.create_connection, say) can leave a
# socket object that only the garbage collector closes; the pool slot is what must never leak.
@pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
@pytest.mark.parametrize("how", ["execute", "pipeline", "script"])
def test_interrupts_at_random_points_never_leak_the_pool_slot(redis_url: str, impl: str, how: str) -> None:
    client = fastlock.Client(redis_url, impl=impl, max_connections=1, pool_timeout=2.0)
    run = _echo_by(client, how)
    assert run(0) == b"0"
    start = time.perf_counter()
    for i in range(200):
        assert run(i) == b"%d" % i
    one_call = (time.perf_counter() - start) / 200
    gc.collect()  # earlier tests' garbage: its weak-set callbacks must not be interrupted here
    # No automatic collection while the timers run: the interrupt would land in the collector's
    # callbacks (hypothesis installs one in a process that ran its tests), outside the call.
    gc.disable()
    previous = signal.signal(signal.SIGALRM, _raise_interrupt)
    try:
        interrupted = _interrupted_calls(run, 500, 2 * one_call, seed=sum(map(ord, impl + how)))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        gc.enable()
    assert interrupted == 500
    assert [run(i) for i in range(5)] == [b"0", b"1", b"2", b"3", b"4"]
    assert client.pool.size == 1
