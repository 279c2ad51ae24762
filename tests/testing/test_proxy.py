"""The fault proxy (fastlock.testing.proxy), exercised with raw sockets only."""

from __future__ import annotations

import socket
import time

import pytest

from fastlock.testing.proxy import TcpProxy
from fastlock.testing.raw import connect, roundtrip
from fastlock.testing.servers import ExternalServer, TempServer


def _closed_by_peer(sock: socket.socket) -> bool:
    """True if the peer closed or reset the connection (waits up to the socket timeout)."""
    try:
        return sock.recv(1024) == b""
    except ConnectionError:
        return True


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
