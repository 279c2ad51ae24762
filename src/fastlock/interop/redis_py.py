"""Interoperation with redis-py and valkey-py clients."""

from __future__ import annotations

import ssl
from typing import Any

from ..params import tls_context

__all__ = ["params_from_redis"]


def _tls_context(kwargs: dict[str, Any]) -> ssl.SSLContext:
    return tls_context(
        ca_certs=kwargs.get("ssl_ca_certs"),
        ca_path=kwargs.get("ssl_ca_path"),
        certfile=kwargs.get("ssl_certfile"),
        keyfile=kwargs.get("ssl_keyfile"),
        password=kwargs.get("ssl_password"),
        verify=kwargs.get("ssl_cert_reqs", "required") not in (None, "none", ssl.CERT_NONE),
        check_hostname=bool(kwargs.get("ssl_check_hostname", True)),
    )


def params_from_redis(redis_client: Any) -> dict[str, Any]:
    """Read host/port or unix path, db, credentials, timeouts and TLS from a redis-py client.

    Returns keyword arguments for :class:`fastlock.Client` (``url`` included).
    """
    pool = redis_client.connection_pool
    kwargs: dict[str, Any] = dict(pool.connection_kwargs)
    username, password = kwargs.get("username"), kwargs.get("password")
    provider = kwargs.get("credential_provider")
    if provider is not None:
        credentials = provider.get_credentials()
        username, password = (None, credentials[0]) if len(credentials) == 1 else credentials
    params: dict[str, Any] = {
        "db": int(kwargs.get("db") or 0),
        "username": username,
        "password": password,
        "client_name": kwargs.get("client_name"),
        "socket_timeout": kwargs.get("socket_timeout"),
        "connect_timeout": kwargs.get("socket_connect_timeout", kwargs.get("socket_timeout")),
    }
    if kwargs.get("path"):
        params["url"] = f"unix://{kwargs['path']}"
    else:
        params["url"] = f"redis://{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
        if "SSL" in pool.connection_class.__name__ or kwargs.get("ssl"):
            params["ssl_context"] = _tls_context(kwargs)
    return params
