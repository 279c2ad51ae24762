"""Client-side slot computation agrees with a cluster-enabled server's CLUSTER KEYSLOT."""

from __future__ import annotations

import random
from collections.abc import Callable

import fastlock
from fastlock.protocol.slots import hash_tag, key_slot, same_slot
from fastlock.testing.servers import TempServer, free_port


def test_known_slots_and_tags() -> None:
    assert key_slot("123456789") == 12739  # the CRC16/XMODEM check value 0x31C3 mod 16384
    assert key_slot("fl:{q}:ready") == key_slot("q") == key_slot(b"{q}:active")
    assert hash_tag(b"a{}b{c}") == b"a{}b{c}" and hash_tag(b"x{y}{z}") == b"y"
    assert same_slot(["fl:{job}:a", "fl:{job}:b"]) and not same_slot(["a", "b"])


def test_matches_cluster_keyslot(server_factory: Callable[..., TempServer], impl: str) -> None:
    cluster = (
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-port",
        str(free_port()),
    )
    srv = server_factory(extra_args=cluster)
    rng = random.Random(7)
    alphabet = b"ab{}:\x00\xff"
    keys = [bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 10))) for _ in range(400)]
    keys += [rng.randbytes(rng.randrange(0, 40)) for _ in range(400)]
    with fastlock.Client(srv.url, impl=impl) as client:
        pipe = client.pipeline()
        for key in keys:
            pipe.execute_command("CLUSTER", "KEYSLOT", key)
        assert pipe.execute() == [key_slot(key) for key in keys]
