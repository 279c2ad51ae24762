"""The key layout of a lock namespace: :class:`KeySpace`, a :class:`Scope`'s keys, and the
records that name scopes (:class:`LockEntry`, :class:`ChangelogEntry`).

Key layout (``P`` = prefix, ``b`` = the digest's bucket, ``int(digest[:8], 16) % buckets``)::

    P:{b}:idx                 zset   tracking index: member "<scope>#<limit>", score 0 (lex pages)
    P:{b}:seq                 string fencing counter (INCR), shared by the bucket's locks
    P:{b}:log                 stream changelog, when max_history > 0 (XADD MAXLEN)
    P:{b}:<digest>            string slot 1 of the queue-time scope: "<token>:<waited>:<job_id>"
    P:{b}:<digest>:<i>        string slot i+1 (limit > 1)
    P:{b}:<digest>:w          list   wake list of blocked acquirers (short TTL)
    P:{b}:<mutex>:runs        list   the reaper's run log (JSON, newest first; <mutex>: the
                                     digest of the reaper lock "fastlock:reaper")
    P:{b}:<digest>:run[...]   the same for the runtime scope

Every key of a digest carries its bucket's hash tag ``{b}``, as do the bucket's index,
counter and changelog, so each script touches one cluster slot. Buckets spread a
namespace over ``buckets`` slots; there is no global key. A prefix that already holds a
hash tag (``app:{locks}``) wins: everything then shares that one slot. A prefix whose first
``{`` is followed by ``}`` is refused (see :func:`check_prefix`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._impl import Core, default_core
from ..exceptions import ArgumentError
from ..protocol.slots import hash_tag

__all__ = ["RUNTIME", "ChangelogEntry", "KeySpace", "LockEntry", "Scope", "bucket_of", "check_prefix"]

RUNTIME = ":run"  # the suffix of a digest's runtime scope


def bucket_of(digest: str, buckets: int) -> int:
    """The bucket of ``digest`` among ``buckets``: ``int(digest[:8], 16) % buckets``."""
    return int(digest[:8], 16) % buckets


# The core's twins (``_coreparts/domain_keys.pxi``, chosen once by ``default_core``): of
# bucket_of (the same result or error) and of KeySpace.scope (the same scope, or None to leave
# it to it).


class Scope:
    """The keys of one lock scope (queue-time ``<digest>`` or runtime ``<digest>:run``):
    ``keys`` is what its scripts take (bucket index, counter, changelog, wake list, slots)."""

    __slots__ = ("keys", "name")

    def __init__(self, name: str, keys: tuple[str, ...]) -> None:
        self.name = name
        self.keys = keys

    @property
    def wake(self) -> str:
        """The wake list of the scope's blocked acquirers."""
        return self.keys[3]

    @property
    def slots(self) -> tuple[str, ...]:
        """The slot keys, one per holder of the limit."""
        return self.keys[4:]

    def name_key(self, suffix: str) -> str:
        """A key of this scope's own, in its slot: its first slot key and ``suffix``."""
        return self.keys[4] + suffix


def check_prefix(prefix: str) -> str:
    """``prefix`` unless its first ``{`` is followed by ``}``: such an empty hash tag makes the
    server hash every key whole, so a script's keys would span cluster slots (``ValueError``).
    Any other prefix works: a non-empty tag in it puts the namespace in that one slot, an
    unclosed ``{`` merges into the bucket's tag."""
    start = prefix.find("{")
    if start >= 0 and prefix[start + 1 : start + 2] == "}":
        raise ArgumentError(
            f"lock prefix {prefix!r}: its first '{{' is followed by '}}', an empty hash tag, "
            "so a lock's keys would hash to different cluster slots"
        )
    return prefix


class KeySpace:
    """The keys of a namespace with ``prefix`` spread over ``buckets`` (see the module docstring)."""

    __slots__ = ("_bucket_keys", "_tagged", "buckets", "core", "prefix")

    def __init__(self, prefix: str, buckets: int, core: Core | None = None) -> None:
        if not 1 <= buckets <= 65536:
            raise ArgumentError(f"buckets must be between 1 and 65536, not {buckets!r}")
        self.prefix = check_prefix(prefix)
        self.buckets = buckets
        self._tagged = hash_tag(prefix.encode()) != prefix.encode()
        self.core = core or default_core()  # its bucket and scope helpers (the namespace's client's)
        # bucket -> (index, counter, changelog) and the prefix of its digests' keys, built on first use
        self._bucket_keys: dict[int, tuple[tuple[str, str, str], str]] = {}

    def bucket(self, digest: str) -> int:
        """The bucket of ``digest``: ``int(digest[:8], 16) % buckets``."""
        return self.core._digest_bucket(digest, self.buckets)

    def bucket_keys(self, bucket: int) -> tuple[str, str, str]:
        """(index, fencing counter, changelog) keys of ``bucket``."""
        return (self._bucket_keys.get(bucket) or self._new_bucket(bucket))[0]

    def _new_bucket(self, bucket: int) -> tuple[tuple[str, str, str], str]:
        prefix = f"{self.prefix}:{bucket}:" if self._tagged else f"{self.prefix}:{{{bucket}}}:"
        keys = self._bucket_keys[bucket] = ((prefix + "idx", prefix + "seq", prefix + "log"), prefix)
        return keys

    def scope(self, digest: str, suffix: str, limit: int) -> Scope:
        """The keys of ``digest``'s queue-time (``suffix=""``) or runtime (:data:`RUNTIME`) scope."""
        core = self.core
        found = core._lock_scope(self, Scope, digest, suffix, limit)
        if found is not None:
            return found
        bucket = core._digest_bucket(digest, self.buckets)
        keys, prefix = self._bucket_keys.get(bucket) or self._new_bucket(bucket)
        name = digest + suffix
        base = prefix + name
        return Scope(name, (*keys, base + ":w", base, *[f"{base}:{i}" for i in range(1, limit)]))


@dataclass(frozen=True)
class LockEntry:
    """One tracked lock scope: its digest, whether it is the runtime (``:run``) scope, its limit."""

    digest: str
    runtime: bool
    limit: int

    @property
    def scope(self) -> str:
        return self.digest + (RUNTIME if self.runtime else "")

    @property
    def member(self) -> str:
        """Its member in the bucket's index."""
        return f"{self.scope}#{self.limit}"

    @classmethod
    def parse(cls, member: bytes) -> LockEntry:
        scope, _, limit = member.decode().rpartition("#")
        digest, _, run = scope.partition(":")
        return cls(digest, run == "run", int(limit))


@dataclass(frozen=True)
class ChangelogEntry:
    """One changelog record: server time in ms, event (locked, conflict, unlocked, deleted,
    reaped), scope, job id and token."""

    time_ms: int
    event: str
    scope: str
    job_id: str
    token: int
