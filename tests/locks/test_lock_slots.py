"""Every key each lock (and read-write lock) script touches hashes to one cluster slot, checked
on a standalone server.

A MONITOR connection records a lifecycle that runs every lock script and admin call, and
``harness.monitor`` checks each recorded script call and top-level command.
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harness.cores import CYTHON_CORE, needs_cython
from harness.monitor import monitor, scripts_in_one_slot
from hypothesis import given, settings
from hypothesis import strategies as st

import fastlock
from fastlock import _core_py
from fastlock.locks.keys import KeySpace, Scope
from fastlock.protocol.slots import key_slot

LUA = Path(__file__).resolve().parents[2] / "lua"


def lifecycle(client: Any, prefix: str = "fastlock") -> None:
    """Run every lock script and admin entry point at least once."""
    manager = fastlock.LockManager(client, prefix=prefix, buckets=8, max_history=50)
    lock = manager.lock("slots", ttl=30)
    lock.acquire("a")
    lock.acquire("a")
    assert manager.lock("slots", ttl=30).acquire("b", timeout=0.05) is None  # flags the holder
    lock.extend("a")
    lock.holders()
    lock.locked()
    lock.release("a")  # wakes the (timed-out) waiter's list
    pool = manager.lock("pool", limit=3, ttl=30)
    for job in ("a", "b", "c", "d"):
        pool.acquire(job)
    pool.release("b")
    both = manager.lock("both", type="until_and_while_executing", ttl=30)
    both.enqueue("j")
    both.execute("j", both.info)
    manager.lock("dead", limit=2, ttl=None).acquire("ghost")
    manager.reaper(alive=lambda entry, job_id: job_id != "ghost").run_once()
    renewed = manager.lock("renewed", limit=2, ttl=0.15, renew=True)
    renewed.acquire()
    time.sleep(0.12)  # a renewal round (lock_renew) or two
    renewed.release()
    manager.lock("gone", ttl=0.01).acquire("x")
    time.sleep(0.02)
    manager.reaper().run_once()
    list(manager.entries())
    manager.inspect(pool.digest)
    manager.changelog(pool.digest)
    manager.delete(lock.digest)
    manager.delete_matching("*")


def rwlock_lifecycle(client: Any, name: str, prefix: str) -> None:
    """Run every read-write lock script: both sides, conflicts, waits on the listener and on
    the wake list, their timeouts, the wake-ups of releases, holders."""
    rw = client.rwlock(name, ttl=30, prefix=prefix)
    rw.read.acquire("r")
    rw.read.acquire("r")
    rw.read.holders()
    assert rw.write.acquire("w", timeout=0.02) is None  # registered as waiting, then left
    assert client.run(rw._waiting("w", "w", 0.02, None)) is not None  # the same on the wake list
    waiter = threading.Thread(target=rw.write.acquire, args=("w",), kwargs={"timeout": 5})
    waiter.start()
    time.sleep(0.1)
    rw.read.release("r")  # wakes the writer
    waiter.join(5)
    rw.write.holders()
    rw.read.acquire("w")  # the writer reads too
    rw.read.release("w")
    rw.write.release("w")


@pytest.mark.parametrize(
    "name, prefix", [("doc", "fl"), ("{t}doc", "fl"), ("doc", "app:{locks}"), ("doc", "{"), ("doc", "}")]
)
def test_every_key_of_every_rwlock_script_shares_one_slot(
    server: Any, redis_url: str, name: str, prefix: str
) -> None:
    with fastlock.Client(redis_url) as client:
        client.execute("PING")
        with monitor(server.unix_path) as recorded:
            rwlock_lifecycle(client, name, prefix)
        assert scripts_in_one_slot(client, recorded[0]) == {path.stem for path in LUA.glob("rwlock_*.lua")}


@pytest.mark.parametrize("prefix", ["fastlock", "app:{locks}", "{", "}", "a{b", "}{", "x}{y", "{a{}}"])
def test_every_key_of_every_script_shares_one_slot(server: Any, redis_url: str, prefix: str) -> None:
    with fastlock.Client(redis_url) as client:
        client.execute("PING")
        with monitor(server.unix_path) as recorded:
            lifecycle(client, prefix)
        assert scripts_in_one_slot(client, recorded[0]) == {path.stem for path in LUA.glob("lock_*.lua")}


def test_any_prefix_gives_one_slot_per_script_or_is_refused(redis_url: str) -> None:
    """Every prefix of up to 5 characters from ``{``, ``}``, ``a``, ``:``: either refused with
    ValueError, or every key a script of a digest can take (both scopes, limit 3, the bucket's
    index, counter, changelog) shares one slot. Refused: exactly the prefixes whose first
    ``{`` is followed by ``}`` (an empty hash tag makes the server hash each key whole)."""
    with fastlock.Client(redis_url) as client:  # for the eviction-policy check at first use
        digests = [f"{i:08x}" + "0" * 56 for i in range(0, 2**32, 2**28)]
        for size in range(6):
            for chars in itertools.product("{}a:", repeat=size):
                prefix = "".join(chars)
                start = prefix.find("{")
                if start >= 0 and prefix[start + 1 : start + 2] == "}":
                    with pytest.raises(ValueError, match="hash tag"):
                        fastlock.LockManager(client, prefix=prefix, buckets=16)
                    continue
                manager = fastlock.LockManager(client, prefix=prefix, buckets=16)
                for digest in digests:
                    queue, runtime = manager.scope(digest, "", 3), manager.scope(digest, ":run", 3)
                    slots = {key_slot(key) for key in (*queue.keys, *runtime.keys)}
                    assert len(slots) == 1, (prefix, digest)


@needs_cython
@settings(max_examples=500, deadline=None)
@given(
    prefix=st.sampled_from(["fastlock", "app:{locks}", "{", "a{b", "é"]),
    buckets=st.sampled_from([1, 7, 1024, 65536]),
    digest=st.text("0123456789abcdefAF", min_size=8, max_size=70) | st.text(min_size=1, max_size=9),
    suffix=st.sampled_from(["", ":run"]),
    limit=st.integers(-1, 4) | st.just(1001),
)
def test_the_core_builds_the_scopes_keyspace_builds(
    prefix: str, buckets: int, digest: str, suffix: str, limit: int
) -> None:
    """``_core._lock_scope`` (_coreparts/domain_keys.pxi) gives ``KeySpace.scope``'s scope (name, keys, and
    the bucket's cached keys), or None for a digest it leaves to it (then the same error)."""
    core, python = KeySpace(prefix, buckets, CYTHON_CORE), KeySpace(prefix, buckets, _core_py)  # type: ignore[arg-type]

    def outcome(build: Any) -> Any:
        try:
            scope = build(digest, suffix, limit)
        except Exception as exc:  # noqa: BLE001 - compared
            return type(exc), str(exc)
        return type(scope), scope.name, scope.keys

    fast = CYTHON_CORE._lock_scope(core, Scope, digest, suffix, limit)  # type: ignore[union-attr]
    expected = outcome(python.scope)
    assert fast is None or (type(fast), fast.name, fast.keys) == expected
    assert outcome(core.scope) == expected
    assert core._bucket_keys == python._bucket_keys
