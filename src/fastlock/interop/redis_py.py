"""Interoperation with redis-py and valkey-py clients."""

from __future__ import annotations

import ssl
from typing import Any

from ..exceptions import ArgumentError
from ..params import tls_context

__all__ = ["cluster_from_redis", "params_from_redis", "sentinel_from_redis"]


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

    Returns keyword arguments for :class:`fastlock.Client` (``url`` included). A cluster
    client or a Sentinel-managed one is refused: their own entries read them
    (:func:`cluster_from_redis`, :func:`sentinel_from_redis`).
    """
    if _is_cluster(redis_client):
        raise ArgumentError(
            "a redis-py RedisCluster: use fastlock.cluster.ClusterClient.from_redis(...) "
            "(or AsyncClusterClient.from_redis for redis.asyncio)"
        )
    if _service(redis_client) is not None:
        raise ArgumentError(
            "a Sentinel-managed redis-py client: use fastlock.cluster.SentinelClient.from_redis(...), "
            "which follows the master the sentinels name"
        )
    return _params(redis_client.connection_pool.connection_kwargs, redis_client.connection_pool)


def _is_cluster(redis_client: Any) -> bool:
    return hasattr(redis_client, "nodes_manager")


def _service(redis_client: Any) -> str | None:
    pool = getattr(redis_client, "connection_pool", None)
    return getattr(pool, "service_name", None) if hasattr(pool, "sentinel_manager") else None


def cluster_from_redis(redis_client: Any) -> tuple[list[str], dict[str, Any]]:
    """The seed nodes (``host:port``) and the per-node keyword arguments of a redis-py
    ``RedisCluster`` (sync or asyncio): for :class:`fastlock.cluster.ClusterClient`."""
    if not _is_cluster(redis_client):
        raise ArgumentError(f"not a redis-py RedisCluster: {type(redis_client).__qualname__}")
    manager = redis_client.nodes_manager
    nodes = list(manager.startup_nodes.values()) or list(redis_client.get_nodes())
    seeds = [f"{node.host}:{node.port}" for node in nodes]
    params = _params(dict(getattr(manager, "connection_kwargs", {})), None)
    params["url"] = f"redis://{seeds[0]}"
    return seeds[1:], params


def sentinel_from_redis(redis_client: Any) -> tuple[list[str], str, dict[str, Any], dict[str, Any]]:
    """The sentinels (``host:port``), the service name, the master's keyword arguments and
    the sentinels' of a client from redis-py's ``Sentinel.master_for``: for
    :class:`fastlock.cluster.SentinelClient`."""
    service = _service(redis_client)
    if service is None:
        raise ArgumentError("not a Sentinel-managed redis-py client (made by Sentinel.master_for)")
    pool = redis_client.connection_pool
    sentinels = pool.sentinel_manager.sentinels
    addresses = []
    for sentinel in sentinels:
        kwargs = sentinel.connection_pool.connection_kwargs
        addresses.append(f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 26379)}")
    master = _params(dict(pool.connection_kwargs), None)
    del master["url"]
    sentinel_params = _params(dict(sentinels[0].connection_pool.connection_kwargs), None) if sentinels else {}
    sentinel_params.pop("url", None)
    return addresses, service, master, sentinel_params


def _params(kwargs: dict[str, Any], pool: Any) -> dict[str, Any]:
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
        if (pool is not None and "SSL" in pool.connection_class.__name__) or kwargs.get("ssl"):
            params["ssl_context"] = _tls_context(kwargs)
    return params
