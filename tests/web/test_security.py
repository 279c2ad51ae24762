"""The dashboard's safety rules without a browser: the bind rule, the credentials, the CSRF
tokens, and the command line refusing an exposed bind without auth."""

from __future__ import annotations

import base64
import http.client
import os
import signal
import subprocess
import sys
import time

import pytest
from harness.web import Running

import fastlock.aio
from fastlock import ArgumentError
from fastlock.testing.servers import free_port
from fastlock.web import Auth, check_bind
from fastlock.web.security import csrf_valid, host_is_loopback, is_loopback, new_csrf


def _basic(pair: str) -> str:
    return "Basic " + base64.b64encode(pair.encode()).decode()


def test_only_loopback_binds_go_without_auth() -> None:
    for host in ("127.0.0.1", "127.3.4.5", "localhost", "::1", "[::1]"):
        assert is_loopback(host)
        check_bind(host, Auth())
    for host in ("0.0.0.0", "::", "10.1.2.3", "example.org", ""):
        assert not is_loopback(host)
        with pytest.raises(ArgumentError, match="without authentication"):
            check_bind(host, Auth())
        check_bind(host, Auth(token="t"))
        check_bind(host, Auth(basic="u:p"))


def test_loopback_host_headers() -> None:
    for host in ("127.0.0.1:8080", "localhost", "localhost:1", "[::1]:8080", "[::1]"):
        assert host_is_loopback(host)
    for host in ("evil.example:8080", "", "[::2]:80", "10.0.0.1", "localhost.evil.example"):
        assert not host_is_loopback(host)


def test_credentials() -> None:
    assert Auth().allows(None)
    token, basic = Auth(token="s3cret"), Auth(basic="admin:pw")
    assert (
        token.allows("Bearer s3cret") and token.allows("bearer  s3cret") and token.allows(_basic("x:s3cret"))
    )
    for wrong in (
        None,
        "",
        "Bearer",
        "Bearer s3cre",
        "Bearer s3cretx",
        _basic("s3cret:"),
        "Basic !!",
        "Token s3cret",
    ):
        assert not token.allows(wrong)
    assert basic.allows(_basic("admin:pw"))
    for wrong in (_basic("admin:pwx"), _basic("root:pw"), "Bearer admin:pw", "Basic " + "\u00e9"):
        assert not basic.allows(wrong)
    for bad in ({"token": ""}, {"basic": "nopassword"}, {"basic": "user:"}):
        with pytest.raises(ArgumentError):
            Auth(**bad)


def test_csrf_tokens_are_signed_double_submits() -> None:
    secret = b"k" * 32
    token = new_csrf(secret)
    assert csrf_valid(secret, token, token)
    assert not csrf_valid(secret, token, None) and not csrf_valid(secret, None, token)
    assert not csrf_valid(secret, token, new_csrf(secret))  # not the cookie's
    assert not csrf_valid(b"other" * 8, token, token)  # not signed by this app
    nonce = token.partition(".")[0]
    assert not csrf_valid(secret, f"{nonce}.00", f"{nonce}.00")


def test_the_command_refuses_an_exposed_bind_without_auth(redis_url: str) -> None:
    command = [
        sys.executable,
        "-m",
        "fastlock",
        "web",
        "--url",
        redis_url,
        "--host",
        "0.0.0.0",
        "--port",
        "1",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env={"PATH": ""})
    assert done.returncode == 2, done.stderr
    assert "refusing to serve on '0.0.0.0' without authentication" in done.stderr


def test_a_wrong_argument_is_a_page_not_a_crash(redis_url: str) -> None:
    board = Running(fastlock.aio.Client(redis_url))
    try:
        connection = http.client.HTTPConnection(board.url.removeprefix("http://"), timeout=10)
        connection.request("GET", "/", headers={"host": "rebound.example:8080"})
        assert connection.getresponse().status == 400  # a rebound name, without auth
        connection.close()
        wrong = ("/locks?cursor=abc", "/locks?cursor=99999:", "/queues/q?state=nope", "/queues/q?offset=-1",
                 "/locks/not-a-digest", "/queues/a%7Bb/jobs/x")  # fmt: skip
        for path in wrong:
            connection = http.client.HTTPConnection(board.url.removeprefix("http://"), timeout=10)
            connection.request("GET", path)
            response = connection.getresponse()
            assert response.status == 400, path
            assert "Error" in response.read().decode()
            connection.close()
    finally:
        board.stop()


def test_the_command_serves_with_auth(redis_url: str) -> None:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "fastlock",
        "web",
        "--url",
        redis_url,
        "--port",
        str(port),
        "--queue",
        "q",
    ]
    env = {**os.environ, "FASTLOCK_WEB_TOKEN": "s3cret"}
    with subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True) as served:
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                    connection.request("GET", "/")
                    break
                except ConnectionRefusedError:
                    assert served.poll() is None and time.monotonic() < deadline, (
                        "the dashboard did not start"
                    )
                    time.sleep(0.05)
            assert connection.getresponse().status == 401
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/", headers={"authorization": "Bearer s3cret"})
            response = connection.getresponse()
            assert response.status == 200 and "<td>0</td>" in response.read().decode()
            connection.close()
        finally:
            served.terminate()
        # uvicorn shuts down, then re-raises the signal it caught
        assert served.wait(10) == -signal.SIGTERM, served.stderr.read() if served.stderr else ""
