"""Where to connect and how: URL parsing, socket setup, TLS, AUTH and SELECT.

The core's ``Connection`` does the per-command I/O; this module opens the socket it
drives and sends the handshake (AUTH, SELECT, CLIENT SETNAME) in one round trip.
"""

from __future__ import annotations

import builtins
import socket
import ssl
import struct
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .._impl import Core, CoreConnection
from ..exceptions import ConnectionError, ResponseError, TimeoutError

__all__ = ["ConnectionParams", "open_connection", "parse_url", "tls_context"]

DEFAULT_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True)
class ConnectionParams:
    """Everything needed to open one connection. Timeouts are seconds; ``None`` waits forever.
    The password is left out of ``repr``."""

    host: str = "127.0.0.1"
    port: int = 6379
    path: str | None = None
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl_context: ssl.SSLContext | None = None
    connect_timeout: float | None = 5.0
    socket_timeout: float | None = 5.0
    client_name: str | None = None

    @property
    def address(self) -> str:
        """Human-readable address, for messages."""
        if self.path:
            return f"unix://{self.path}"
        scheme = "rediss" if self.ssl_context else "redis"
        return f"{scheme}://{self.host}:{self.port}/{self.db}"


def tls_context(
    *,
    ca_certs: str | None = None,
    ca_path: str | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    password: str | None = None,
    verify: bool = True,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """The TLS context of a ``rediss://`` connection (URL options and redis-py settings
    both end here): the CA bundle, an optional client certificate, and verification."""
    context = ssl.create_default_context(cafile=ca_certs, capath=ca_path)
    if certfile:
        context.load_cert_chain(certfile, keyfile, password)
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif not check_hostname:
        context.check_hostname = False
    return context


def _url_tls_context(query: dict[str, str]) -> ssl.SSLContext:
    return tls_context(
        ca_certs=query.get("ssl_ca_certs"),
        certfile=query.get("ssl_certfile"),
        keyfile=query.get("ssl_keyfile"),
        verify=query.get("ssl_cert_reqs", "required").lower() != "none",
        check_hostname=query.get("ssl_check_hostname", "true").lower() not in ("false", "0", "no"),
    )


def _seconds(value: str) -> float | None:
    return None if value.lower() in ("", "none") else float(value)


def _redacted(url: str) -> str:
    """``url`` with everything between ``://`` and the last ``@`` masked."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}***@{rest.rpartition('@')[2]}" if "@" in rest else url


def parse_url(url: str = DEFAULT_URL, **overrides: Any) -> ConnectionParams:
    """Parse ``redis://[user:password@]host[:port][/db]``, ``rediss://...`` (TLS) or
    ``unix://[user:password@]/path/to.sock?db=N``.

    Query options: ``db``, ``connect_timeout``, ``socket_timeout``, ``client_name``,
    and for TLS ``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``,
    ``ssl_cert_reqs=none|required``, ``ssl_check_hostname``. Keyword ``overrides``
    (any :class:`ConnectionParams` field) win over the URL. Percent-encode ``@ : / # ?``
    in the user name and password: an ``@`` after the host part is refused, and the error
    never shows the password.
    """
    parts = urlsplit(url)
    if "@" in url[len(parts.scheme) + 3 + len(parts.netloc) :]:
        raise ValueError(
            f"cannot parse {_redacted(url)}: a '/', '#' or '?' in the user name or password ends "
            "them early; percent-encode them (urllib.parse.quote(password, safe=''))"
        )
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    fields: dict[str, Any] = {
        "username": unquote(parts.username) if parts.username else None,
        "password": unquote(parts.password) if parts.password is not None else None,
    }
    if parts.scheme == "unix":
        fields["path"] = unquote(parts.path)
    elif parts.scheme in ("redis", "rediss"):
        fields["host"] = parts.hostname or "127.0.0.1"
        fields["port"] = parts.port or 6379
        db_path = parts.path.strip("/")
        if db_path:
            fields["db"] = int(db_path)
        if parts.scheme == "rediss":
            fields["ssl_context"] = _url_tls_context(query)
    else:
        raise ValueError(f"unsupported URL scheme {parts.scheme!r}: use redis://, rediss:// or unix://")
    if "db" in query:
        fields["db"] = int(query["db"])
    for name in ("connect_timeout", "socket_timeout"):
        if name in query:
            fields[name] = _seconds(query[name])
    if "client_name" in query:
        fields["client_name"] = query["client_name"]
    return replace(ConnectionParams(**fields), **overrides)


def set_io_timeout(sock: socket.socket, seconds: float | None) -> None:
    """Apply a send/receive timeout that costs no extra syscall per command.

    Plain sockets stay blocking and get SO_SNDTIMEO/SO_RCVTIMEO, so a command is one
    ``send`` and one ``recv``; TLS sockets use Python's own timeout.
    """
    if isinstance(sock, ssl.SSLSocket):
        sock.settimeout(seconds)
        return
    sock.settimeout(None)
    whole = int(seconds or 0)
    micros = round(((seconds or 0) - whole) * 1_000_000)
    timeval = struct.pack("ll", whole, micros)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


def _open_socket(params: ConnectionParams) -> socket.socket:
    if params.path:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(params.connect_timeout)
            sock.connect(params.path)
        except BaseException:
            sock.close()
            raise
        return sock
    sock = socket.create_connection((params.host, params.port), timeout=params.connect_timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if params.ssl_context is not None:
            return params.ssl_context.wrap_socket(sock, server_hostname=params.host)
    except BaseException:
        sock.close()
        raise
    return sock


def open_connection(params: ConnectionParams, core: Core) -> CoreConnection:
    """Connect, authenticate and select the database; return a core ``Connection``."""
    try:
        sock = _open_socket(params)
    except builtins.TimeoutError as exc:
        raise TimeoutError(f"connecting to {params.address} timed out", sent=False) from exc
    except OSError as exc:
        raise ConnectionError(f"cannot connect to {params.address}: {exc}", sent=False) from exc
    try:
        set_io_timeout(sock, params.socket_timeout)
    except OSError as exc:
        sock.close()
        raise ConnectionError(f"cannot configure the socket to {params.address}: {exc}") from exc
    conn = core.Connection(sock)
    handshake: list[tuple[Any, ...]] = []
    if params.password is not None:
        handshake.append(
            ("AUTH", params.username, params.password) if params.username else ("AUTH", params.password)
        )
    if params.db:
        handshake.append(("SELECT", params.db))
    if params.client_name:
        handshake.append(("CLIENT", "SETNAME", params.client_name))
    if handshake:
        try:
            replies = conn.pipeline(handshake)
        except BaseException:
            conn.close()
            raise
        for reply in replies:
            if isinstance(reply, ResponseError):
                conn.close()
                raise reply
    return conn
