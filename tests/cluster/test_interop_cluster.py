"""redis-py cluster and Sentinel-managed clients handed to fastlock: the right entry reads
them, ``Client.from_redis`` refuses them with a pointer (it used to raise AttributeError for a
RedisCluster and to map a Sentinel client to localhost:6379)."""

from __future__ import annotations

import pytest
import redis
from redis.cluster import RedisCluster
from redis.sentinel import Sentinel

import fastlock
from fastlock.cluster import ClusterClient
from fastlock.cluster.sentinel import SentinelClient
from fastlock.testing.cluster import TempCluster
from fastlock.testing.sentinel import TempSentinels

pytestmark = pytest.mark.slow  # slow tier: clusters and sentinels of redis-py


def test_cluster_from_redis(cluster: TempCluster, cluster_url: str) -> None:
    node = cluster.nodes[1]
    with RedisCluster(host="127.0.0.1", port=node.port, socket_timeout=3) as rc:
        with pytest.raises(fastlock.ArgumentError, match=r"ClusterClient\.from_redis"):
            fastlock.Client.from_redis(rc)
        with ClusterClient.from_redis(rc) as client:
            assert len(client._seeds) == 6 and client.params.socket_timeout == 3
            assert client.lock("interop", ttl=5).acquire("a") is not None
            rc.set("written-by-redis-py", "1")
            assert client.execute("GET", "written-by-redis-py") == b"1"


def test_sentinel_from_redis(sentinels: TempSentinels) -> None:
    hosts = [(h, int(p)) for h, p in (s.split(":") for s in sentinels.sentinels)]
    managed = Sentinel(hosts, socket_timeout=2).master_for(sentinels.service, socket_timeout=3)
    try:
        with pytest.raises(fastlock.ArgumentError, match=r"SentinelClient\.from_redis"):
            fastlock.Client.from_redis(managed)
        with SentinelClient.from_redis(managed) as client:
            assert client.master == ("127.0.0.1", sentinels.master_port())
            assert client.client.params.socket_timeout == 3
            managed.set("k", "v")
            assert client.execute("GET", "k") == b"v"
    finally:
        managed.close()
    assert isinstance(managed, redis.Redis)
