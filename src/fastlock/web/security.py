"""What makes the dashboard safe to expose: the bind rule, authentication (a token or basic
auth, compared in constant time), signed double-submit CSRF tokens and the security headers.
Sans-IO: plain functions over header values."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets

from ..exceptions import ArgumentError

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "HEADERS",
    "Auth",
    "check_bind",
    "csrf_valid",
    "host_is_loopback",
    "is_loopback",
    "new_csrf",
]

CSRF_COOKIE = "fastlock_csrf"
CSRF_FIELD = "csrf"
HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self';"
    " frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}
"""Sent with every response: no script may run at all, no framing, no sniffing, no referrer."""


class Auth:
    """The credentials a request must carry: ``token`` (``Authorization: Bearer TOKEN``, or
    basic auth with any user and the token as password) and/or ``basic`` (``"user:password"``).
    No setting: every request passes."""

    def __init__(self, token: str | None = None, basic: str | None = None) -> None:
        if token is not None and not token:
            raise ArgumentError("an auth token is a non-empty str")
        if basic is not None and (":" not in basic or not basic.partition(":")[2]):
            raise ArgumentError("basic auth is 'user:password' with a non-empty password")
        self.token, self.basic = token, basic

    @property
    def enabled(self) -> bool:
        return self.token is not None or self.basic is not None

    def allows(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header value carries the credentials."""
        if not self.enabled:
            return True
        scheme, _, value = (authorization or "").partition(" ")
        scheme = scheme.lower()
        ok = False
        if scheme == "bearer" and self.token is not None:
            ok = _same(value.strip(), self.token)
        elif scheme == "basic":
            try:
                pair = base64.b64decode(value.strip(), validate=True).decode()
            except ValueError:  # binascii.Error, UnicodeDecodeError, non-ASCII text
                return False
            if self.basic is not None:
                ok = _same(pair, self.basic)
            if self.token is not None:
                ok = _same(pair.partition(":")[2], self.token) or ok
        return ok


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) binds to this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_is_loopback(host: str) -> bool:
    """Whether a ``Host`` header (``name[:port]``, ``[v6]:port``) names this machine."""
    name = host.rpartition("]")[0] + "]" if host.startswith("[") else host.partition(":")[0]
    return is_loopback(name)


def check_bind(host: str, auth: Auth) -> None:
    """Refuse (:class:`~fastlock.ArgumentError`) a bind beyond loopback without an auth setting."""
    if not is_loopback(host) and not auth.enabled:
        raise ArgumentError(
            f"refusing to serve on {host!r} without authentication: set a token or basic auth,"
            " or bind to 127.0.0.1"
        )


def _sign(secret: bytes, nonce: str) -> str:
    return hmac.new(secret, nonce.encode(), hashlib.sha256).hexdigest()


def new_csrf(secret: bytes) -> str:
    """A fresh CSRF token: a random nonce and its signature with the app's ``secret``."""
    nonce = secrets.token_urlsafe(18)
    return f"{nonce}.{_sign(secret, nonce)}"


def csrf_valid(secret: bytes, cookie: str | None, field: str | None) -> bool:
    """Signed double submit: the form's token is the cookie's, and the app signed it."""
    if not cookie or not field or not hmac.compare_digest(cookie.encode(), field.encode()):
        return False
    nonce, _, signature = cookie.partition(".")
    return hmac.compare_digest(signature.encode(), _sign(secret, nonce).encode())
