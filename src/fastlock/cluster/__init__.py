"""fastlock on Redis/Valkey Cluster and Sentinel: :class:`ClusterClient` and
:class:`AsyncClusterClient` over one sans-IO router (:mod:`~fastlock.cluster.topology`,
:mod:`~fastlock.cluster.routing`), :class:`SentinelClient` and :class:`AsyncSentinelClient`
following the master the sentinels name (docs/cluster.md)."""

from typing import Any

from .client import ClusterClient
from .durability import ReplicationError
from .sentinel import SentinelClient

__all__ = ["AsyncClusterClient", "AsyncSentinelClient", "ClusterClient", "ReplicationError", "SentinelClient"]


def __getattr__(name: str) -> Any:
    """The asyncio clients, imported on first use (asyncio is loaded only by those who use it)."""
    if name == "AsyncClusterClient":
        from .aio import AsyncClusterClient

        return AsyncClusterClient
    if name == "AsyncSentinelClient":
        from .sentinel_aio import AsyncSentinelClient

        return AsyncSentinelClient
    raise AttributeError(name)
