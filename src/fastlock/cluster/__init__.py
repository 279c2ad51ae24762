"""fastlock on Redis/Valkey Cluster: :class:`ClusterClient` (sync) and
:class:`AsyncClusterClient` (asyncio), both over one sans-IO router
(:mod:`~fastlock.cluster.topology`, :mod:`~fastlock.cluster.routing`)."""

from .client import ClusterClient

__all__ = ["AsyncClusterClient", "ClusterClient"]


def __getattr__(name: str) -> object:
    if name == "AsyncClusterClient":  # asyncio is loaded only by those who use it
        from .aio import AsyncClusterClient

        return AsyncClusterClient
    raise AttributeError(name)
