"""fastlock on Redis/Valkey Cluster: :class:`ClusterClient` (sync) and
:class:`AsyncClusterClient` (asyncio), both over one sans-IO router
(:mod:`~fastlock.cluster.topology`, :mod:`~fastlock.cluster.routing`)."""

from .client import ClusterClient

__all__ = ["ClusterClient"]
