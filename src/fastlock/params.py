"""Where to connect, transport-neutral: :class:`ConnectionParams`, URL parsing, the TLS
context, the handshake commands and a new connection's first write (:func:`first_write`).
The sync transport (:mod:`fastlock.sync.connect`) and the asyncio one
(:mod:`fastlock.aio.connection`) both open connections from these."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias
from urllib.parse import parse_qs, unquote, urlsplit

from .exceptions import ArgumentError, ResponseError

__all__ = [
    "BLOCKING_MARGIN",
    "DEFAULT_URL",
    "ConnectionParams",
    "Load",
    "blocking_wait",
    "first_write",
    "handshake_commands",
    "parse_url",
    "tls_context",
]

DEFAULT_URL = "redis://127.0.0.1:6379/0"

BLOCKING_MARGIN = 1.0
"""Least time a blocking command's reply is waited for beyond the command's own timeout."""


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
    never shows the password. A URL that does not parse (a port or db that is not a number,
    ...) raises :class:`~fastlock.ArgumentError`.
    """
    try:
        fields = _url_fields(url)
    except ArgumentError:
        raise
    except ValueError as exc:  # urllib's port check, int() and float() of the parts
        raise ArgumentError(f"cannot parse {_redacted(url)}: {exc}") from None
    return replace(ConnectionParams(**fields), **overrides)


def _url_fields(url: str) -> dict[str, Any]:
    """The :class:`ConnectionParams` fields of ``url`` (see :func:`parse_url`)."""
    parts = urlsplit(url)
    if "@" in url[len(parts.scheme) + 3 + len(parts.netloc) :]:
        raise ArgumentError(
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
        raise ArgumentError(f"unsupported URL scheme {parts.scheme!r}: use redis://, rediss:// or unix://")
    if "db" in query:
        fields["db"] = int(query["db"])
    for name in ("connect_timeout", "socket_timeout"):
        if name in query:
            fields[name] = _seconds(query[name])
    if "client_name" in query:
        fields["client_name"] = query["client_name"]
    return fields


def handshake_commands(params: ConnectionParams) -> list[tuple[Any, ...]]:
    """The commands a new connection sends first, in one write: AUTH, SELECT, CLIENT SETNAME
    (each only when ``params`` asks for it)."""
    handshake: list[tuple[Any, ...]] = []
    if params.password is not None:
        handshake.append(
            ("AUTH", params.username, params.password) if params.username else ("AUTH", params.password)
        )
    if params.db:
        handshake.append(("SELECT", params.db))
    if params.client_name:
        handshake.append(("CLIENT", "SETNAME", params.client_name))
    return handshake


Load: TypeAlias = tuple[list[tuple[Any, ...]], Callable[[Sequence[Any]], None]]
"""Commands a new connection sends after its handshake, in the same write, and the check of
their replies (a client's warm-up: ``SCRIPT LOAD`` of every script)."""


def first_write(
    params: ConnectionParams, load: Load | None = None
) -> tuple[list[tuple[Any, ...]], Callable[[Sequence[Any]], None]]:
    """A new connection's first write: the handshake, then ``load``'s commands; and the check
    of their replies, which raises the handshake's first error reply, then ``load``'s."""
    handshake = handshake_commands(params)
    commands, then = load or ([], None)

    def check(replies: Sequence[Any]) -> None:
        for reply in replies[: len(handshake)]:
            if isinstance(reply, ResponseError):
                raise reply
        if then is not None:
            then(replies[len(handshake) :])

    return [*handshake, *commands], check


def blocking_wait(timeout: float, socket_timeout: float | None) -> float:
    """How long to wait for the reply of a blocking command that may wait ``timeout`` on the
    server: that plus ``socket_timeout``, and at least :data:`BLOCKING_MARGIN` more."""
    return timeout + max(socket_timeout or 0.0, BLOCKING_MARGIN)
