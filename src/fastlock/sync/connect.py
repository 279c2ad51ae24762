"""Opening a blocking connection: socket setup, TLS, and the handshake (AUTH, SELECT,
CLIENT SETNAME) in one round trip. Where to connect (:class:`ConnectionParams`,
:func:`parse_url`, :func:`tls_context`) is transport-neutral: :mod:`fastlock.params`.

The core's ``Connection`` does the per-command I/O; this module opens the socket it drives.
"""

from __future__ import annotations

import builtins
import socket
import ssl
import struct

from .._impl import Core, CoreConnection
from ..exceptions import ConnectionError, TimeoutError
from ..params import DEFAULT_URL, ConnectionParams, Load, first_write, parse_url, tls_context

__all__ = [
    "DEFAULT_URL",
    "ConnectionParams",
    "open_connection",
    "open_socket",
    "parse_url",
    "set_io_timeout",
    "tls_context",
]


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


def open_socket(params: ConnectionParams) -> socket.socket:
    """A socket connected to ``params``' server (TLS-wrapped if asked), before the handshake."""
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


def open_connection(params: ConnectionParams, core: Core, load: Load | None = None) -> CoreConnection:
    """Connect, authenticate and select the database, and send ``load`` (a client's warm-up)
    in the same write; return a core ``Connection``."""
    try:
        sock = open_socket(params)
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
    commands, check = first_write(params, load)
    if commands:
        try:
            check(conn.pipeline(commands))
        except BaseException:
            conn.close()
            raise
    return conn
