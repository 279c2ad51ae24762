"""Limiters on the shared 3x3 cluster (both kinds, both cores): each keeps its key in its
name's slot (names on every primary, two sharing a {tag}); decisions and waits as standalone,
each limiter one key on its primary."""

from __future__ import annotations

import pytest

from fastlock.cluster import ClusterClient
from fastlock.protocol.slots import key_slot


@pytest.mark.parametrize("kind", ["gcra", "window"])
def test_limiters_across_the_primaries(client: ClusterClient, kind: str) -> None:
    names = [f"tenant-{i}" for i in range(12)] + ["{shared}a", "{shared}b"]  # on all three primaries
    slots = {key_slot(client.limiter(name, kind=kind).key) for name in names}  # type: ignore[arg-type]
    assert len(slots) == 13  # the two {shared} limiters share one slot
    for n, name in enumerate(names):
        limiter = client.limiter(name, rate=3, per=1.0, kind=kind)  # type: ignore[arg-type] # 4 calls in 1 s
        assert key_slot(limiter.key) == key_slot(name if "{" in name else "{" + name + "}")
        assert [limiter.try_acquire().allowed for _ in range(4)] == [True, True, True, False]
        if n in (0, len(names) - 1):  # a wait (about a second) on a primary and on the shared slot
            assert limiter.acquire(timeout=2).allowed
        kept = client.limiter(name, rate=1, per=60.0, kind=kind, prefix="kept")  # type: ignore[arg-type]
        assert kept.try_acquire() and not kept.acquire(timeout=0.01)
    per_node = [len(node.execute("KEYS", "kept:*")) for node in client.primaries()]
    assert sum(per_node) == len(names) and min(per_node) > 0  # one key each, on every primary
