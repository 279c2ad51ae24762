"""Routing costs no server command and no round trip: every lock type's lifecycle through a
``ClusterClient`` stays within the standalone budgets of bench/budgets.toml (commands summed
over the primaries' ``INFO commandstats``, round trips over the node clients' pools)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import fastlock
from fastlock.cluster import ClusterClient
from fastlock.testing.cluster import TempCluster
from fastlock.testing.raw import bulk_text
from fastlock.tools.costs import lifecycle

BUDGETS = tomllib.loads((Path(__file__).parents[2] / "bench" / "budgets.toml").read_text())["lock"]
OPERATIONS = 30
_NOT_COUNTED = ("info", "config", "replconf", "cluster", "ping")  # the harness's and replication's


def _commands(cluster: TempCluster) -> int:
    total = 0
    for node in cluster.primaries():
        for line in bulk_text(node.raw_command("INFO", "commandstats")).splitlines():
            name, _, stats = line.removeprefix("cmdstat_").partition(":")
            if line.startswith("cmdstat_") and not name.startswith(_NOT_COUNTED):
                total += int(stats.split(",")[0].split("=")[1])
    return total


def _round_trips(client: ClusterClient) -> int:
    return sum(node.pool.round_trips for node in client.nodes().values())


def test_lifecycles_cost_what_they_cost_standalone(client: ClusterClient, cluster: TempCluster) -> None:
    manager = fastlock.LockManager(client, prefix="cost")
    over, seen = [], []
    for kind in fastlock.LockType:
        run = lifecycle(manager, kind)
        run()  # the eviction policy checked once: not part of a lifecycle
        for node in cluster.primaries():
            assert node.raw_command("CONFIG", "RESETSTAT") == b"+OK\r\n"
        before = _round_trips(client)
        for _ in range(OPERATIONS):
            run()
        commands, round_trips = _commands(cluster) / OPERATIONS, (_round_trips(client) - before) / OPERATIONS
        budget = BUDGETS[kind.value]
        seen.append((kind.value, commands, round_trips))
        if commands > budget["commands"] or round_trips > budget["round_trips"]:
            over.append(f"{kind.value}: {commands} commands, {round_trips} round trips")
    assert over == [] and all(commands > 0 and round_trips > 0 for _, commands, round_trips in seen), seen
