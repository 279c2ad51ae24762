"""The test harness itself, exercised with raw sockets only."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable

import pytest

from fastlock.testing.proxy import TcpProxy
from fastlock.testing.raw import connect, raw_command, roundtrip
from fastlock.testing.servers import ExternalServer, TempServer


def _closed_by_peer(sock: socket.socket) -> bool:
    """True if the peer closed or reset the connection (waits up to the socket timeout)."""
    try:
        return sock.recv(1024) == b""
    except ConnectionError:
        return True


def test_ping_tcp_unix_and_debug(server: TempServer | ExternalServer, redis_url: str) -> None:
    assert server.raw_command("PING") == b"+PONG\r\n"
    if server.unix_path is not None:
        assert server.raw_command("PING", unix=True) == b"+PONG\r\n"
    assert server.version >= (7,)
    if isinstance(server, TempServer):  # DEBUG is enabled on private servers (DEBUG SLEEP for timeout tests)
        assert server.raw_command("DEBUG", "SLEEP", "0") == b"+OK\r\n"
        assert redis_url == f"redis://127.0.0.1:{server.port}"


def test_redis_url_flushes_data_and_scripts(
    server: TempServer | ExternalServer, request: pytest.FixtureRequest
) -> None:
    assert server.raw_command("SET", "leftover", "1") == b"+OK\r\n"
    sha = server.raw_command("SCRIPT", "LOAD", "return 1").split(b"\r\n")[1]
    request.getfixturevalue("redis_url")
    assert server.raw_command("DBSIZE") == b":0\r\n"
    assert server.raw_command("SCRIPT", "EXISTS", sha) == b"*1\r\n:0\r\n"


@pytest.mark.fault
def test_restart_keeps_port_and_loses_data(private_server: TempServer) -> None:
    port, unix_path, pid = private_server.port, private_server.unix_path, private_server.pid
    assert private_server.raw_command("SET", "k", "v") == b"+OK\r\n"
    private_server.kill()
    with pytest.raises(OSError):
        private_server.raw_command("PING")
    private_server.restart()
    assert (private_server.port, private_server.unix_path) == (port, unix_path)
    assert private_server.pid != pid
    assert private_server.raw_command("GET", "k") == b"$-1\r\n"
    assert private_server.raw_command("PING", unix=True) == b"+PONG\r\n"


def test_proxy_passes_traffic(proxy: TcpProxy) -> None:
    with connect((proxy.host, proxy.port)) as sock:
        assert roundtrip(sock, "SET", "k", "v" * 100_000) == b"+OK\r\n"
        assert roundtrip(sock, "STRLEN", "k") == b":100000\r\n"
        assert proxy.connections == 1
    deadline = time.monotonic() + 2
    while proxy.connections and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy.connections == 0


def test_proxy_delays_replies(proxy: TcpProxy) -> None:
    with connect((proxy.host, proxy.port)) as sock:
        assert roundtrip(sock, "PING") == b"+PONG\r\n"
        proxy.set_reply_delay(2.0)
        start = time.monotonic()
        assert roundtrip(sock, "PING") == b"+PONG\r\n"
        assert time.monotonic() - start >= 2.0
        proxy.set_reply_delay(0)
        start = time.monotonic()
        assert roundtrip(sock, "PING") == b"+PONG\r\n"
        assert time.monotonic() - start < 1.0  # the 2 s delay is gone


def test_proxy_holds_and_releases_replies(proxy: TcpProxy) -> None:
    with connect((proxy.host, proxy.port), timeout=0.3) as sock:
        proxy.hold_replies()
        sock.sendall(b"PING\r\n")
        with pytest.raises(socket.timeout):
            sock.recv(16)
        proxy.release_replies()
        sock.settimeout(2)
        assert sock.recv(16) == b"+PONG\r\n"


@pytest.mark.fault
def test_proxy_cut_resets_clients(proxy: TcpProxy) -> None:
    with connect((proxy.host, proxy.port)) as sock:
        assert roundtrip(sock, "PING") == b"+PONG\r\n"
        proxy.cut()
        assert _closed_by_peer(sock)
    assert proxy.connections == 0
    with connect((proxy.host, proxy.port)) as sock:  # still accepts new connections
        assert roundtrip(sock, "PING") == b"+PONG\r\n"


@pytest.mark.fault
def test_proxy_drop_next_reply_executes_but_loses_reply(
    server: TempServer | ExternalServer, proxy: TcpProxy
) -> None:
    with connect((proxy.host, proxy.port)) as sock:
        proxy.drop_next_reply()
        sock.sendall(b"SET dropped yes\r\n")
        assert _closed_by_peer(sock)
    assert server.raw_command("GET", "dropped") == b"$3\r\nyes\r\n"
    with connect((proxy.host, proxy.port)) as sock:  # only one reply is dropped
        assert roundtrip(sock, "PING") == b"+PONG\r\n"


def test_tls_server_answers_over_ssl(tls_server: TempServer) -> None:
    assert tls_server.tls_url == f"rediss://127.0.0.1:{tls_server.port}"
    address = (tls_server.host, tls_server.port)
    assert raw_command(address, "PING", ssl_context=tls_server.ssl_context()) == b"+PONG\r\n"
    ctx = tls_server.ssl_context(client_cert=True)
    assert raw_command(address, "PING", ssl_context=ctx) == b"+PONG\r\n"
    with pytest.raises(ssl.SSLCertVerificationError):  # the CA is really checked
        raw_command(address, "PING", ssl_context=ssl.create_default_context())
    assert tls_server.raw_command("PING", unix=True) == b"+PONG\r\n"  # unix socket stays plain


def test_password_and_acl_user(server_factory: Callable[..., TempServer]) -> None:
    srv = server_factory(password="topsecret", acl_users=[("alice", "secret", "~* &* +@all")])
    address = (srv.host, srv.port)
    assert raw_command(address, "PING").startswith(b"-NOAUTH")
    assert raw_command(address, "PING", password="topsecret") == b"+PONG\r\n"
    assert raw_command(address, "SET", "k", "v", username="alice", password="secret") == b"+OK\r\n"
    with connect(address) as sock:
        assert roundtrip(sock, "AUTH", "alice", "wrong").startswith(b"-WRONGPASS")
