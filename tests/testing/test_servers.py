"""The server launchers (fastlock.testing.servers) and raw RESP helpers, exercised with raw sockets only."""

from __future__ import annotations

import ssl
from collections.abc import Callable

import pytest

from fastlock.testing.raw import connect, raw_command, roundtrip
from fastlock.testing.servers import ExternalServer, TempServer, find_binaries, find_server_binary


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


def test_temp_server_defaults_to_the_binary_found(monkeypatch: pytest.MonkeyPatch) -> None:
    found = find_binaries()
    if found["valkey"][0] is None and found["redis"][0] is None:
        pytest.skip(f"valkey server unavailable: {found['valkey'][1]}; redis too: {found['redis'][1]}")
    with TempServer() as srv:
        assert srv.binary == find_server_binary() == (found["valkey"][0] or found["redis"][0])
        assert srv.flavour == ("valkey" if found["valkey"][0] else "redis")
        assert srv.unix_url == f"unix://{srv.unix_path}"
        assert raw_command(srv.unix_path, "PING") == b"+PONG\r\n"
        directory = srv.dir
    assert not directory.exists()
    monkeypatch.setenv("FASTLOCK_VALKEY_SERVER", "/nonexistent/valkey-server")
    monkeypatch.setenv("FASTLOCK_REDIS_SERVER", "/nonexistent/redis-server")
    with pytest.raises(FileNotFoundError, match="no Redis/Valkey server found"):
        find_server_binary()
