"""One :class:`~fastlock.Client` per process and server for the integrations, built on first
use from a URL or from the framework's own redis-py connection (:meth:`Client.from_redis
<fastlock.Client.from_redis>`), then reused by every task. Fork-safe: a client built before
``fork()`` (a prefork worker, RQ's work horse) hands the child fresh connections, as its pool
drops the parent's (:mod:`fastlock.sync.pool`)."""

from __future__ import annotations

import threading
from typing import Any

from ..sync.client import Client

__all__ = ["client_for_redis", "client_for_url", "close_all"]

_by_url: dict[str, Client] = {}
_by_connection: dict[int, tuple[Any, Client]] = {}  # id -> (the connection, kept alive; its client)
_building = threading.Lock()


def client_for_url(url: str) -> Client:
    """The process's client for ``url``."""
    client = _by_url.get(url)
    if client is None:
        with _building:
            client = _by_url.get(url) or _by_url.setdefault(url, Client(url))
    return client


def close_all() -> None:
    """Close and forget the process's clients (the next task builds new ones)."""
    with _building:
        clients = [*_by_url.values(), *(client for _, client in _by_connection.values())]
        _by_url.clear()
        _by_connection.clear()
    for client in clients:
        client.close()


def client_for_redis(connection: Any) -> Client:
    """The process's client for the server, database and credentials of a redis-py client."""
    entry = _by_connection.get(id(connection))
    if entry is None or entry[0] is not connection:
        with _building:
            entry = _by_connection.get(id(connection))
            if entry is None or entry[0] is not connection:
                entry = _by_connection[id(connection)] = (connection, Client.from_redis(connection))
    return entry[1]
