"""A namespace's admin, as operations (each bounded per call): paging the buckets' tracking
indexes, inspecting and deleting scopes whoever holds them, reading the changelog.
:class:`~fastlock.LockManager` runs them; its methods document them for users."""

from __future__ import annotations

import fnmatch
from typing import Any

from ..operations import Call, Command, Operation
from .keys import RUNTIME, ChangelogEntry, LockEntry, Scope
from .namespace import Namespace
from .replies import changelog_reply, count_reply, entries_reply, holders_reply
from .types import Holder

__all__ = [
    "BUCKETS_PER_CALL",
    "changelog",
    "delete",
    "delete_matching",
    "entry_scope",
    "inspect",
    "limit_of",
    "page",
    "scan",
]

BUCKETS_PER_CALL = 256  # most buckets one scan call visits


def page(ns: Namespace[Any], bucket: int, after: str, count: int) -> Operation[list[LockEntry]]:
    """Up to ``count`` index entries of ``bucket`` after member ``after`` ("": from the start)."""
    start = f"({after}" if after else "-"
    index = ns.keys.bucket_keys(bucket)[0]
    return entries_reply((yield Command(("ZRANGE", index, start, "+", "BYLEX", "LIMIT", 0, count))))


def scan(
    ns: Namespace[Any], cursor: str, match: str | None, count: int
) -> Operation[tuple[str, list[LockEntry]]]:
    """One page of tracked scopes: ``(next_cursor, entries)``, see :meth:`LockManager.scan
    <fastlock.LockManager.scan>`."""
    bucket_text, _, after = cursor.partition(":") if cursor != "0" else ("0", "", "")
    bucket = int(bucket_text)
    entries: list[LockEntry] = []
    examined = visited = 0
    while examined < count and visited < BUCKETS_PER_CALL:
        found = yield from page(ns, bucket, after, count - examined)
        examined += len(found)
        entries += found if match is None else [e for e in found if fnmatch.fnmatchcase(e.scope, match)]
        if examined < count:
            bucket, after, visited = bucket + 1, "", visited + 1
            if bucket == ns.buckets:
                return "0", entries
        else:
            after = found[-1].member
    return f"{bucket}:{after}", entries


def limit_of(ns: Namespace[Any], digest: str, runtime: bool) -> Operation[int | None]:
    """The limit recorded in the index for a tracked scope (``None``: not tracked)."""
    scope = LockEntry(digest, runtime, 0).scope
    index = ns.keys.bucket_keys(ns.keys.bucket(digest))[0]
    members = yield Command(("ZRANGE", index, f"[{scope}#", f"({scope}$", "BYLEX", "LIMIT", 0, 1))
    return LockEntry.parse(members[0]).limit if members else None


def entry_scope(ns: Namespace[Any], entry: LockEntry) -> Operation[Scope]:
    """The keys of a tracked scope."""
    return (yield from ns.scoping(entry.digest, RUNTIME if entry.runtime else "", entry.limit))


def _tracked(ns: Namespace[Any], digest: str, runtime: bool, limit: int | None) -> Operation[Scope]:
    """The keys of a digest's scope; ``limit`` defaults to the tracked one (else 1)."""
    if not limit:
        limit = (yield from limit_of(ns, digest, runtime)) or 1
    return (yield from entry_scope(ns, LockEntry(digest, runtime, limit)))


def inspect(ns: Namespace[Any], digest: str, runtime: bool, limit: int | None) -> Operation[list[Holder]]:
    """Holders of a digest's scope; ``limit`` defaults to the tracked one (else 1)."""
    scope = yield from _tracked(ns, digest, runtime, limit)
    return holders_reply((yield Call("lock_inspect", scope.keys, ())), runtime)


def _delete(ns: Namespace[Any], scope: Scope) -> Operation[int]:
    return count_reply("lock_delete", (yield Call("lock_delete", scope.keys, (scope.name, ns.max_history))))


def delete(ns: Namespace[Any], digest: str, limit: int | None) -> Operation[int]:
    """Delete a digest's locks (both scopes): the number of holders removed."""
    deleted = 0
    for runtime in (False, True):
        deleted += yield from _delete(ns, (yield from _tracked(ns, digest, runtime, limit)))
    return deleted


def delete_matching(ns: Namespace[Any], match: str, cursor: str, count: int) -> Operation[tuple[str, int]]:
    """Delete one bounded page of the tracked scopes matching ``match``: ``(next_cursor, removed)``."""
    cursor, found = yield from scan(ns, cursor, match, count)
    deleted = 0
    for entry in found:
        deleted += yield from _delete(ns, (yield from entry_scope(ns, entry)))
    return cursor, deleted


def changelog(ns: Namespace[Any], digest: str, count: int) -> Operation[list[ChangelogEntry]]:
    """The digest's entries among the newest ``count`` of its bucket's changelog, newest first."""
    log = ns.keys.bucket_keys(ns.keys.bucket(digest))[2]
    return changelog_reply((yield Command(("XREVRANGE", log, "+", "-", "COUNT", count))), digest)
