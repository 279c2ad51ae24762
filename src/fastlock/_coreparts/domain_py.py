"""The pure-Python twins of the domain helpers (``domain_*.pxi``): where the Cython core has a
faster path, the twin leaves the work to the domain module's own code (``None``), or is it.

``_lock_new`` builds a lock by the class call, ``_digest_bucket``, ``_is_digest`` and
``_numbered`` compute what their Cython twins do; ``_canonical_json``, ``_lock_scope``,
``_claimed_jobs``, ``_completed_jobs`` and ``_enqueued`` answer ``None`` (the json encoder of
``digest.py``, ``KeySpace.scope`` and ``queues.jobs``' ``claimed``, ``completed`` and
``enqueued`` do the work), and so does ``_manager_lock`` (the managers' ``lock`` method reads
its own keywords); ``_lock_spec`` needs no vocabulary.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = [
    "_canonical_json",
    "_claimed_jobs",
    "_completed_jobs",
    "_digest_bucket",
    "_enqueued",
    "_is_digest",
    "_lock_new",
    "_lock_scope",
    "_lock_spec",
    "_manager_lock",
    "_fresh",
    "_fresh_id",
    "_numbered",
]

T = TypeVar("T")
_HEX = re.compile(r"[0-9a-f]{8,128}")


def _canonical_json(name: str, queue: str | None, args: Any) -> bytes | None:
    """``None``: the json encoder of :func:`fastlock.digest.canonical` encodes every value."""
    return None


def _is_digest(value: object) -> bool:
    """Whether ``value`` is a str of 8 to 128 lowercase hex digits."""
    return type(value) is str and _HEX.fullmatch(value) is not None


def _digest_bucket(digest: str, buckets: int) -> int:
    """``int(digest[:8], 16) % buckets``."""
    return int(digest[:8], 16) % buckets


def _lock_scope(space: Any, scope_type: type[T], digest: str, suffix: str, limit: int) -> T | None:
    """``None``: ``KeySpace.scope`` builds every scope."""
    return None


def _lock_spec(
    lock_type: Any,
    specs: dict[Any, Any],
    names: dict[Any, Any],
    no_strategies: Any,
    max_duration: float,
    max_limit: int,
) -> None:
    """Nothing: the class call of :func:`_lock_new` checks the options itself."""


def _lock_new(
    cls: type[T],
    manager: Any,
    digest: str,
    name: str | None,
    kind: Any,
    ttl: float | None,
    timeout: float,
    limit: int,
    job_id: str | None,
    on_conflict: Any,
) -> T:
    """``cls(manager, digest, name, type=kind, ttl=ttl, ...)``: how the managers build locks."""
    return cls(  # type: ignore[call-arg]
        manager,
        digest,
        name,
        type=kind,
        ttl=ttl,
        timeout=timeout,
        limit=limit,
        job_id=job_id,
        on_conflict=on_conflict,
    )


def _manager_lock(
    manager: Any, method: Callable[..., Any], plain: type[Any], constructor: Callable[[bytes], Any] | None
) -> Callable[..., Any] | None:
    """``None``: the managers' ``lock`` method reads its keywords itself."""
    return None


def _claimed_jobs(reply: Any, job_type: type[Any], batch_type: type[T]) -> T | None:
    """``None``: :func:`fastlock.queues.jobs.claimed` reads every claim reply."""
    return None


def _enqueued(reply: Any, job_id: str) -> str | None:
    """``None``: :func:`fastlock.queues.jobs.enqueued` reads every enqueue reply."""
    return None


def _completed_jobs(reply: Any, job_type: type[Any], batch_type: type[T]) -> T | None:
    """``None``: :func:`fastlock.queues.jobs.completed` reads every complete reply."""
    return None


def _numbered(head: str, numbers: Iterator[int], n: int) -> list[str]:
    """``n`` ids: ``head`` then each of the next ``n`` numbers of ``numbers`` in lowercase hex."""
    return [f"{head}{number:x}" for number in itertools.islice(numbers, n)]


def _fresh(prefix: str, numbers: Iterator[int], n: int, now: float, delay_ms: int) -> list[str]:
    """``n`` fresh job ids due ``delay_ms`` after ``now`` (seconds since the epoch): ``~``, the
    due time in ms in lowercase hex, ``.``, then :func:`_numbered`'s ids after ``prefix``
    (:mod:`fastlock.queues.ids`)."""
    return _numbered(f"~{_due(now, delay_ms):x}.{prefix}", numbers, n)


def _fresh_id(prefix: str, numbers: Iterator[int], now: float, delay_ms: int) -> str:
    """One fresh job id (:func:`_fresh`'s), of the next number of ``numbers``."""
    return f"~{_due(now, delay_ms):x}.{prefix}{next(numbers):x}"


def _due(now: float, delay_ms: int) -> int:
    ms = now * 1000
    return int(ms) + delay_ms if ms > 0 else delay_ms
