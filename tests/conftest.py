"""Real-server fixtures: one private server per flavour per session, or FASTLOCK_TEST_URL if set."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from harness.cores import core_params
from harness.skips import SkipAudit

from fastlock.testing.proxy import TcpProxy
from fastlock.testing.servers import (
    FLAVOURS,
    ExternalServer,
    ServerError,
    TempServer,
    binary_version,
    find_binaries,
    tls_supported,
)

EXTERNAL_URL = os.environ.get("FASTLOCK_TEST_URL")
BINARIES = find_binaries()
ENV_VARS = ("FASTLOCK_TEST_URL", "FASTLOCK_REDIS_SERVER", "FASTLOCK_VALKEY_SERVER")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto`` (the default, in pyproject's addopts): ``FASTLOCK_TEST_WORKERS``, else
    two per CPU this process may use. The suite mostly waits on its servers (timeouts, failovers,
    child processes), so two workers per CPU keep the CPUs busy; each worker starts its own servers."""
    wanted = os.environ.get("FASTLOCK_TEST_WORKERS")
    if wanted is not None:
        try:
            return int(wanted)
        except ValueError:
            raise pytest.UsageError(f"FASTLOCK_TEST_WORKERS must be an integer, not {wanted!r}") from None
    return 2 * len(os.sched_getaffinity(0))


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SkipAudit(), "fastlock-skip-audit")


def pytest_report_header(config: pytest.Config) -> list[str]:
    env = [f"{name}={os.environ[name]}" for name in ENV_VARS if os.environ.get(name)]
    lines = [f"fastlock servers env: {' '.join(env) or '(none set)'}"]
    if EXTERNAL_URL:
        return [*lines, f"  external: {EXTERNAL_URL} (private-server tests skip)"]
    for flavour, (path, why) in BINARIES.items():
        if path is None:
            lines.append(f"  {flavour}: SKIPPED: {why}")
        else:
            try:
                tls = "tls" if tls_supported(path) else "no tls (built without TLS)"
            except ServerError as exc:
                tls = f"TLS BROKEN, its tests will fail: {exc}"
            lines.append(f"  {flavour}: {path} ({why}) v{binary_version(path)}, {tls}")
    return lines


def _binary(flavour: str) -> str:
    path, why = BINARIES[flavour]
    if path is None:
        pytest.skip(f"{flavour} server unavailable: {why}")
    return path


@pytest.fixture(scope="session", params=["external"] if EXTERNAL_URL else FLAVOURS)
def server(request: pytest.FixtureRequest) -> Iterator[TempServer | ExternalServer]:
    """The shared server of one flavour ("redis", "valkey"), or the FASTLOCK_TEST_URL server ("external")."""
    if request.param == "external":
        yield ExternalServer(EXTERNAL_URL or "")
        return
    with TempServer(_binary(request.param), request.param) as srv:
        yield srv


def _flush(srv: TempServer | ExternalServer) -> None:
    for command in (("FLUSHALL",), ("SCRIPT", "FLUSH")):
        reply = srv.raw_command(*command)
        if reply != b"+OK\r\n":
            raise ServerError(f"{' '.join(command)} failed: {reply!r}")


@pytest.fixture
def redis_url(server: TempServer | ExternalServer) -> str:
    """TCP URL of the shared server, flushed (data and script cache) for this test."""
    _flush(server)
    return server.url


@pytest.fixture
def unix_url(server: TempServer | ExternalServer) -> str:
    """unix:// URL of the shared server, flushed for this test."""
    if server.unix_url is None:
        pytest.skip("FASTLOCK_TEST_URL is not a unix:// URL")
    _flush(server)
    return server.unix_url


@pytest.fixture
def server_factory(server: TempServer | ExternalServer) -> Iterator[Callable[..., TempServer]]:
    """Start private servers of the current flavour: `server_factory(**TempServer kwargs)`; stopped after."""
    if not isinstance(server, TempServer):
        pytest.skip("needs a private server, not available with FASTLOCK_TEST_URL")
    started: list[TempServer] = []

    def make(**kwargs: Any) -> TempServer:
        srv = TempServer(server.binary, server.flavour, **kwargs).start()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()


@pytest.fixture
def private_server(server_factory: Callable[..., TempServer]) -> TempServer:
    """A fresh server of the current flavour that the test may kill/restart."""
    return server_factory()


@pytest.fixture
def proxy(server: TempServer | ExternalServer) -> Iterator[TcpProxy]:
    """A fault-injecting TcpProxy in front of the shared server (flushed for this test)."""
    if isinstance(server, ExternalServer) and (
        server.unix_path or server.host not in ("127.0.0.1", "localhost")
    ):
        pytest.skip("TcpProxy needs FASTLOCK_TEST_URL to be a redis:// URL on 127.0.0.1")
    _flush(server)
    with TcpProxy(server.host, server.port) as prox:
        yield prox


@pytest.fixture(scope="session", params=FLAVOURS)
def tls_server(request: pytest.FixtureRequest) -> Iterator[TempServer]:
    """A TLS-only server (plus plain unix socket) with a CA, server and client certs, per flavour."""
    if EXTERNAL_URL:
        pytest.skip("needs a private server, not available with FASTLOCK_TEST_URL")
    binary = _binary(request.param)
    if not tls_supported(binary):
        pytest.skip(f"{request.param} binary {binary} is built without TLS")
    with TempServer(binary, request.param, tls=True) as srv:
        yield srv


@pytest.fixture(autouse=True)
def close_clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Close every fastlock.Client the test made, when it ends. A client dropped unclosed leaves
    its sockets to the garbage collector, whose ResourceWarning (an error here) would then fail
    whichever later test happened to collect them."""
    import fastlock

    made: list[fastlock.Client] = []
    init = fastlock.Client.__init__

    def tracked_init(self: fastlock.Client, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(fastlock.Client, "__init__", tracked_init)
    yield
    for client in made:
        client.close()


@pytest.fixture(params=core_params("cython", "python"))
def impl(request: pytest.FixtureRequest) -> str:
    """The core implementation under test: every client test runs against both."""
    return str(request.param)


@pytest.fixture
def client(redis_url: str, impl: str) -> Iterator[Any]:
    """A fastlock.Client on the flushed shared server, for the current core."""
    import fastlock

    with fastlock.Client(redis_url, impl=impl) as c:
        yield c
