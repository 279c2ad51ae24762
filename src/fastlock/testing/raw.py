"""Raw RESP over plain sockets: one command, one reply, no client library (not even fastlock's)."""

from __future__ import annotations

import re
import socket
import ssl

__all__ = ["ServerError", "bulk_text", "connect", "info_version", "raw_command", "roundtrip"]


class ServerError(RuntimeError):
    """A server failed to start, or answered a setup command with an error."""


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


def info_version(info: str) -> tuple[int, ...]:
    """The server version in an ``INFO server`` text (``valkey_version`` on Valkey, which also
    reports ``redis_version:7.2.4``)."""
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    return tuple(
        int(x) for x in re.findall(r"\d+", fields.get("valkey_version", fields["redis_version"]))[:3]
    )
