"""``LockManager``: a lock namespace (key layout and options), its locks and its admin.

Key layout (``P`` = prefix, ``b`` = the digest's bucket, ``int(digest[:8], 16) % buckets``)::

    P:{b}:idx                 zset   tracking index: member "<scope>#<limit>", score 0 (lex pages)
    P:{b}:seq                 string fencing counter (INCR), shared by the bucket's locks
    P:{b}:log                 stream changelog, when max_history > 0 (XADD MAXLEN)
    P:{b}:<digest>            string slot 1 of the queue-time scope: "<token>:<waited>:<job_id>"
    P:{b}:<digest>:<i>        string slot i+1 (limit > 1)
    P:{b}:<digest>:w          list   wake list of blocked acquirers (short TTL)
    P:{b}:<digest>:run[...]   the same for the runtime scope

Every key of a digest carries its bucket's hash tag ``{b}``, as do the bucket's index,
counter and changelog, so each script touches one cluster slot. Buckets spread a
namespace over ``buckets`` slots; there is no global key. A prefix that already holds a
hash tag (``app:{locks}``) wins: everything then shares that one slot. A prefix whose first
``{`` is followed by ``}`` is refused (see :func:`check_prefix`).
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..digest import Digester, HashFunction, check_digest
from ..exceptions import LockError, ResponseError
from ..protocol.slots import hash_tag
from .conflict import STRATEGIES, Strategy
from .lock import Holder, Lock, Scope, parse_holders, token_reply, unexpected_reply

if TYPE_CHECKING:
    from ..sync.client import Client
    from .reaper import Reaper

__all__ = ["ChangelogEntry", "LockEntry", "LockManager"]

logger = logging.getLogger("fastlock.lock")

_BUCKETS_PER_CALL = 256
_POLICY = re.compile(rb"^maxmemory_policy:(\S+)", re.MULTILINE)
_SCOPES_CACHED = 1024  # scopes (key sets) kept per manager, least recently used dropped first


@dataclass(frozen=True)
class LockEntry:
    """One tracked lock scope: its digest, whether it is the runtime (``:run``) scope, its limit."""

    digest: str
    runtime: bool
    limit: int

    @property
    def scope(self) -> str:
        return self.digest + (":run" if self.runtime else "")

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


def check_prefix(prefix: str) -> str:
    """``prefix`` unless its first ``{`` is followed by ``}``: such an empty hash tag makes the
    server hash every key whole, so a script's keys would span cluster slots (``ValueError``).
    Any other prefix works: a non-empty tag in it puts the namespace in that one slot, an
    unclosed ``{`` merges into the bucket's tag."""
    start = prefix.find("{")
    if start >= 0 and prefix[start + 1 : start + 2] == "}":
        raise ValueError(
            f"lock prefix {prefix!r}: its first '{{' is followed by '}}', an empty hash tag, "
            "so a lock's keys would hash to different cluster slots"
        )
    return prefix


class LockManager:
    """A lock namespace on one client.

    ``prefix`` and ``buckets`` fix the key layout (every process of a deployment must use
    the same ones); ``hash`` the digest function (:mod:`fastlock.digest`). ``track`` keeps
    the per-bucket index that admin and the reaper walk (one ZADD per first holder, one
    ZREM per last release); ``fencing`` hands out tokens from the per-bucket counter (one
    INCR per acquire; off, every token is 1); ``max_history`` > 0 writes a per-bucket
    changelog stream of that length (one XADD per transition). ``strategies`` adds or
    replaces conflict strategies by name (:mod:`fastlock.locks.conflict`). At its first use the
    manager reads the server's ``maxmemory-policy``: ``allkeys-*`` is refused (``LockError``).
    """

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = "fastlock",
        buckets: int = 1024,
        hash: str | HashFunction = "sha256",  # noqa: A002 - mirrors hashlib naming
        track: bool = True,
        fencing: bool = True,
        max_history: int = 0,
        strategies: Mapping[str, Strategy] | None = None,
    ) -> None:
        if not 1 <= buckets <= 65536:
            raise ValueError(f"buckets must be between 1 and 65536, not {buckets!r}")
        if max_history < 0:
            raise ValueError("max_history must be >= 0")
        check_prefix(prefix)
        self.client = client
        self.prefix = prefix
        self.buckets = buckets
        self.digester = Digester(hash)
        self.track = track
        self.fencing = fencing
        self.max_history = max_history
        self.flags = (1 if track else 0) | (2 if fencing else 0)
        self.strategies: dict[str, Strategy] = {**STRATEGIES, **(strategies or {})}
        self._tagged = hash_tag(prefix.encode()) != prefix.encode()
        self.run = client.call
        self._scopes = functools.lru_cache(maxsize=_SCOPES_CACHED)(self._new_scope)
        self._policy_checked = False

    # --- locks ------------------------------------------------------------------------

    def digest(self, name: str, queue: str | None = None, args: Any = None) -> str:
        """The digest of ``name`` (a job class or resource) on ``queue`` with ``args``."""
        return self.digester.digest(name, queue, args)

    def lock(
        self,
        name: str | None = None,
        *,
        digest: str | None = None,
        queue: str | None = None,
        args: Any = None,
        **options: Any,
    ) -> Lock:
        """A lock on ``digest``, or on the digest of (``name``, ``queue``, ``args``);
        ``options`` (``type``, ``ttl``, ``timeout``, ``limit``, ``job_id``, ``on_conflict``)
        are :class:`Lock`'s."""
        if digest is None:
            if name is None:
                raise ValueError("give a lock name or a digest")
            digest = self.digest(name, queue, args)
        else:
            check_digest(digest)
        return Lock(self, digest, name=name, **options)

    def reaper(self, **options: Any) -> Reaper:
        """A :class:`~fastlock.locks.reaper.Reaper` for this namespace (options: see there)."""
        from .reaper import Reaper

        return Reaper(self, **options)

    # --- key layout -------------------------------------------------------------------

    def bucket(self, digest: str) -> int:
        """The bucket of ``digest``: ``int(digest[:8], 16) % buckets``."""
        return int(digest[:8], 16) % self.buckets

    def _bucket_prefix(self, bucket: int) -> str:
        return f"{self.prefix}:{bucket}" if self._tagged else f"{self.prefix}:{{{bucket}}}"

    def bucket_keys(self, bucket: int) -> tuple[str, str, str]:
        """(index, fencing counter, changelog) keys of ``bucket``."""
        prefix = self._bucket_prefix(bucket)
        return f"{prefix}:idx", f"{prefix}:seq", f"{prefix}:log"

    def scope(self, digest: str, suffix: str, limit: int) -> Scope:
        """The keys of ``digest``'s queue-time (``suffix=""``) or runtime (``":run"``) scope
        (the recently used ones are cached)."""
        return self._scopes(digest, suffix, limit)

    def _new_scope(self, digest: str, suffix: str, limit: int) -> Scope:
        if not self._policy_checked:
            self._check_eviction_policy()
        bucket = self.bucket(digest)
        base = f"{self._bucket_prefix(bucket)}:{digest}{suffix}"
        slots = [base]
        if limit > 1:
            slots += [f"{base}:{i}" for i in range(1, limit)]
        return Scope(digest + suffix, self.bucket_keys(bucket), f"{base}:w", slots)

    def _check_eviction_policy(self) -> None:
        """At first use: refuse a server whose ``maxmemory-policy`` may evict any key
        (``allkeys-*``: held locks and the fencing counter would go, tokens would restart),
        warn when it may evict keys with a ttl (``volatile-*``: a held lock with a ttl may go
        early, tokens stay monotonic). An unreadable policy is logged at INFO and assumed safe."""
        policy = self._eviction_policy()
        if policy is not None and policy.startswith("allkeys-"):
            raise LockError(
                f"the server's maxmemory-policy {policy} may evict held locks and the fencing "
                "counters (two holders, tokens going backwards): use noeviction (or volatile-*) "
                "on the server that holds locks"
            )
        if policy is not None and policy.startswith("volatile-"):
            logger.warning(
                "the server's maxmemory-policy %s may evict a held lock with a ttl under memory "
                "pressure (fencing tokens stay increasing); noeviction is safe",
                policy,
            )
        self._policy_checked = True

    def _eviction_policy(self) -> str | None:
        execute = self.client.execute
        try:
            found = _POLICY.search(execute("INFO", "memory"))
            return found[1].decode() if found else None
        except ResponseError as info_refused:
            try:
                reply = execute("CONFIG", "GET", "maxmemory-policy")
                return reply[1].decode() if len(reply) == 2 else None
            except ResponseError as config_refused:
                logger.info(
                    "cannot read maxmemory-policy (%s; %s): locks assume the server evicts no lock key",
                    info_refused,
                    config_refused,
                )
                return None

    def release_scope(self, scope: Scope, job_id: str, token: str | int = "") -> int | None:
        """Release what ``job_id`` holds in ``scope`` (only the acquisition with fencing token
        ``token``, if given): the token freed, or ``None``."""
        args = (job_id, scope.name, token, self.track, self.max_history)
        return token_reply("lock_release", self.run("lock_release", scope.keys, args))

    # --- admin (bounded per call) -----------------------------------------------------

    def scan(
        self, cursor: str = "0", *, match: str | None = None, count: int = 100
    ) -> tuple[str, list[LockEntry]]:
        """One page of tracked lock scopes: ``(next_cursor, entries)``; ``"0"`` ends the walk.

        ``match`` is a glob on the scope (``<digest>`` or ``<digest>:run``). A call reads at
        most ``count`` index entries from at most 256 buckets, so a page may be short or
        empty. Entries present for the whole walk are returned exactly once."""
        bucket_text, _, after = cursor.partition(":") if cursor != "0" else ("0", "", "")
        bucket = int(bucket_text)
        entries: list[LockEntry] = []
        examined = visited = 0
        while examined < count and visited < _BUCKETS_PER_CALL:
            page = self.page(bucket, after, count - examined)
            examined += len(page)
            entries += page if match is None else [e for e in page if fnmatch.fnmatchcase(e.scope, match)]
            if examined < count:
                bucket, after, visited = bucket + 1, "", visited + 1
                if bucket == self.buckets:
                    return "0", entries
            else:
                after = page[-1].member
        return f"{bucket}:{after}", entries

    def page(self, bucket: int, after: str, count: int) -> list[LockEntry]:
        """Up to ``count`` index entries of ``bucket`` after member ``after`` ("": from the start)."""
        start = f"({after}" if after else "-"
        members = self.client.execute(
            "ZRANGE", self.bucket_keys(bucket)[0], start, "+", "BYLEX", "LIMIT", 0, count
        )
        return [LockEntry.parse(member) for member in members]

    def entries(self, *, match: str | None = None, count: int = 100) -> Iterator[LockEntry]:
        """Every tracked lock scope, page by page (each page a bounded :meth:`scan`)."""
        cursor = "0"
        while True:
            cursor, page = self.scan(cursor, match=match, count=count)
            yield from page
            if cursor == "0":
                return

    def limit_of(self, digest: str, runtime: bool = False) -> int | None:
        """The limit recorded in the index for a tracked scope (``None``: not tracked)."""
        scope = LockEntry(digest, runtime, 0).scope
        index = self.bucket_keys(self.bucket(digest))[0]
        members = self.client.execute("ZRANGE", index, f"[{scope}#", f"({scope}$", "BYLEX", "LIMIT", 0, 1)
        return LockEntry.parse(members[0]).limit if members else None

    def entry_scope(self, entry: LockEntry) -> Scope:
        """The keys of a tracked scope."""
        return self.scope(entry.digest, ":run" if entry.runtime else "", entry.limit)

    def _entry(self, digest: str, runtime: bool, limit: int | None) -> LockEntry:
        return LockEntry(digest, runtime, limit or self.limit_of(digest, runtime) or 1)

    def inspect(self, digest: str, *, runtime: bool = False, limit: int | None = None) -> list[Holder]:
        """Holders of a digest's scope; ``limit`` defaults to the one tracked (else 1)."""
        scope = self.entry_scope(self._entry(digest, runtime, limit))
        return parse_holders(self.run("lock_inspect", scope.keys, ()), runtime)

    def delete(self, digest: str, *, limit: int | None = None) -> int:
        """Delete a digest's locks (both scopes) whoever holds them; wakes their waiters.
        Returns the number of holders removed. ``limit`` defaults to the tracked one (else 1)."""
        return sum(self._delete(self._entry(digest, runtime, limit)) for runtime in (False, True))

    def delete_matching(self, match: str, cursor: str = "0", *, count: int = 100) -> tuple[str, int]:
        """Delete the tracked scopes whose name matches the glob ``match``, one bounded page
        per call: ``(next_cursor, holders removed)``; call again until the cursor is ``"0"``."""
        cursor, page = self.scan(cursor, match=match, count=count)
        return cursor, sum(self._delete(entry) for entry in page)

    def _delete(self, entry: LockEntry) -> int:
        scope = self.entry_scope(entry)
        deleted = self.run("lock_delete", scope.keys, (scope.name, self.max_history))
        if type(deleted) is not int or deleted < 0:
            raise unexpected_reply("lock_delete", deleted)
        return deleted

    def changelog(self, digest: str, *, count: int = 100) -> list[ChangelogEntry]:
        """The digest's changelog entries, newest first, among the newest ``count`` entries of
        its bucket's stream (empty unless ``max_history`` > 0)."""
        log = self.bucket_keys(self.bucket(digest))[2]
        entries = []
        for entry_id, fields in self.client.execute("XREVRANGE", log, "+", "-", "COUNT", count):
            record = dict(zip(fields[::2], fields[1::2], strict=True))
            scope = record[b"lock"].decode()
            if scope.split(":", 1)[0] == digest:
                time_ms = int(entry_id.split(b"-")[0])
                job, token = record[b"job"].decode(), int(record[b"token"])
                entries.append(ChangelogEntry(time_ms, record[b"event"].decode(), scope, job, token))
        return entries

    def __repr__(self) -> str:
        return f"<fastlock.LockManager prefix={self.prefix!r} buckets={self.buckets}>"
