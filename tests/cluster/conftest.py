"""Cluster fixtures: one 3x3 cluster per flavour for the session (flushed per test), and
``fresh_cluster`` for the tests that fail a primary over (module-scoped: they run in order on
one cluster and leave it stable)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from fastlock.cluster import ClusterClient
from fastlock.testing.cluster import TempCluster
from fastlock.testing.sentinel import TempSentinels
from fastlock.testing.servers import FLAVOURS, ServerError, find_binaries


def _binary(flavour: str) -> str:
    if os.environ.get("FASTLOCK_TEST_URL"):
        pytest.skip("needs private servers, not available with FASTLOCK_TEST_URL")
    path, why = find_binaries()[flavour]
    if path is None:
        pytest.skip(f"{flavour} server unavailable: {why}")
    return path


@pytest.fixture(scope="session", params=FLAVOURS)
def cluster(request: pytest.FixtureRequest) -> Iterator[TempCluster]:
    """A running 3-primary/3-replica cluster of one flavour, shared by the session."""
    with TempCluster(_binary(request.param), request.param) as started:
        yield started


def flush(cluster: TempCluster) -> None:
    """Empty every primary (the script caches stay: the clients loaded them on every node)."""
    for node in cluster.primaries():
        reply = node.raw_command("FLUSHALL")
        if reply != b"+OK\r\n":
            raise ServerError(f"FLUSHALL failed: {reply!r}")


@pytest.fixture
def cluster_url(cluster: TempCluster) -> str:
    """A seed URL of the shared cluster, flushed for this test."""
    cluster.wait_stable()
    flush(cluster)
    return cluster.url


@pytest.fixture(scope="module", params=FLAVOURS)
def flavour_binary(request: pytest.FixtureRequest) -> tuple[str, str]:
    """A flavour and its server binary, for a module that starts deployments of its own."""
    return request.param, _binary(request.param)


@pytest.fixture(scope="module")
def fresh_cluster(flavour_binary: tuple[str, str]) -> Iterator[TempCluster]:
    """A cluster of its own for the module (its tests fail primaries over)."""
    flavour, binary = flavour_binary
    with TempCluster(binary, flavour) as started:
        yield started


@pytest.fixture
def client(cluster_url: str, impl: str) -> Iterator[ClusterClient]:
    """A ClusterClient on the flushed shared cluster, for the current core: the standalone
    scenarios imported into this folder take it for their ``client``."""
    with ClusterClient(cluster_url, impl=impl) as made:
        made.refresh(force=True)  # the map read and the scripts loaded: timed scenarios start even
        yield made


@pytest.fixture(scope="module", params=FLAVOURS)
def sentinels(request: pytest.FixtureRequest) -> Iterator[TempSentinels]:
    """A master, a replica and three sentinels of one flavour, for the module."""
    with TempSentinels(_binary(request.param), request.param) as started:
        yield started


@pytest.fixture(params=FLAVOURS)
def fresh_sentinels(request: pytest.FixtureRequest) -> Iterator[TempSentinels]:
    """A sentinel deployment of its own for one test that fails the master over (the demoted
    master is reconfigured by the sentinels only seconds later: no second failover soon)."""
    with TempSentinels(_binary(request.param), request.param) as started:
        yield started
