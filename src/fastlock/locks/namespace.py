"""What the locks of one namespace share, whatever the transport: the runner, the key space,
the options, the conflict strategies, the scopes' keys (cached), digests, the release call and
the server's eviction policy, checked once (as an operation). :class:`~fastlock.LockManager`
and :class:`~fastlock.aio.AsyncLockManager` are namespaces with their locks and admin on top."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._impl import core_of
from ..digest import Digester, HashFunction, check_digest
from ..exceptions import ArgumentError, ArgumentTypeError, LockError, ResponseError
from ..operations import Call, Command, Operation
from ..protocol.arguments import duration_ms
from .conflict import STRATEGIES, Strategy
from .gate import Gate
from .keys import KeySpace, Scope
from .replies import token_reply
from .types import FAIR, FENCING, TRACK

if TYPE_CHECKING:
    from ..operations import AsyncRunner, Runner

__all__ = ["MAX_PATIENCE", "PATIENCE", "Namespace", "eviction_policy"]

logger = logging.getLogger("fastlock.lock")

R = TypeVar("R", bound="Runner | AsyncRunner")

_POLICY = re.compile(rb"^maxmemory_policy:(\S+)", re.MULTILINE)
_SCOPES_CACHED = 1024  # scopes (key sets) kept per namespace, least recently used dropped first
PATIENCE = 0.05
"""Default seconds a queued waiter lets running callers take a freed lock (barging) before a
release hands the lock to it (docs/locks.md, "Hand-over and fairness")."""
MAX_PATIENCE = 60.0
"""Longest ``patience`` a namespace takes."""


def eviction_policy() -> Operation[str | None]:
    """The server's ``maxmemory-policy`` (``INFO memory``, else ``CONFIG GET``); ``None``
    (logged at INFO) when both are refused or it is not there."""
    try:
        found = _POLICY.search((yield Command(("INFO", "memory"))))
        return found[1].decode() if found else None
    except ResponseError as info_refused:
        try:
            reply = yield Command(("CONFIG", "GET", "maxmemory-policy"))
            return reply[1].decode() if len(reply) == 2 else None
        except ResponseError as config_refused:
            logger.info(
                "cannot read maxmemory-policy (%s; %s): locks assume the server evicts no lock key",
                info_refused,
                config_refused,
            )
            return None


def _check_names(name: object, queue: object) -> None:
    if name is not None and not isinstance(name, str):
        raise ArgumentTypeError(f"a lock name must be a str, not {type(name).__qualname__!r}")
    if queue is not None and not isinstance(queue, str):
        raise ArgumentTypeError(f"queue must be a str, not {type(queue).__qualname__!r}")


class Namespace(Generic[R]):
    """A lock namespace on one transport (``client``: a :class:`~fastlock.operations.Runner`
    such as :class:`~fastlock.Client`, or an :class:`~fastlock.operations.AsyncRunner`); see
    :class:`~fastlock.LockManager` for the options. ``default_strategies`` are the conflict
    strategies a subclass's locks know by name before ``strategies`` are added."""

    default_strategies: Mapping[str, Strategy] = STRATEGIES
    signal_type: Callable[[str], Any]
    """What a waiter of this transport waits on for its turn (:mod:`fastlock.locks.gate`)."""

    def __init__(
        self,
        client: R,
        *,
        prefix: str = "fastlock",
        buckets: int = 1024,
        hash: str | HashFunction = "sha256",  # noqa: A002 - mirrors hashlib naming
        track: bool = True,
        fencing: bool = True,
        fair: bool = False,
        patience: float = PATIENCE,
        max_history: int = 0,
        strategies: Mapping[str, Strategy] | None = None,
        local_queue: bool = True,
    ) -> None:
        if max_history < 0:
            raise ArgumentError("max_history must be >= 0")
        patience_ms = duration_ms(patience, "patience", minimum_ms=0)
        if patience_ms > MAX_PATIENCE * 1000:
            raise ArgumentError(f"patience is at most {MAX_PATIENCE} s, not {patience!r}")
        self.core = core_of(client)  # the client's core: digests, scopes, lock building
        # a manager's lock builder (the core's), bound at its first lock; an attribute set here,
        # not a cached_property, which would write to the instance __dict__ and slow every lookup
        self._new_lock: Any = None
        self.keys = KeySpace(prefix, buckets, self.core)
        self.runner = client
        self.digester = Digester(hash, core=self.core)
        self.track = track
        self.fencing = fencing
        self.max_history = max_history
        self.fair = fair
        self.patience = 0.0 if fair else patience_ms / 1000
        """Seconds a queued waiter lets running callers take a freed lock before a release
        hands it over (0 with ``fair``: at once)."""
        self.flags = (TRACK if track else 0) | (FENCING if fencing else 0) | (FAIR if fair else 0)
        self.strategies: dict[str, Strategy] = {**self.default_strategies, **(strategies or {})}
        self.call: Callable[..., Any] = client.call  # the hot path's script call, bound once
        self.scope = functools.lru_cache(maxsize=_SCOPES_CACHED)(self.keys.scope)
        """The keys of ``digest``'s queue-time (``suffix=""``) or runtime (``":run"``) scope
        (the recently used ones are cached); :meth:`checking` comes first."""
        self.policy_checked = False
        self.gate = Gate(self.signal_type, self.patience) if local_queue else None
        """The turns of this manager's waiters (:mod:`fastlock.locks.gate`); ``None``: every
        waiter contends at the server."""
        self.turns: Mapping[str, object] = {} if self.gate is None else self.gate.turns
        """The gate's turns by scope (always empty without one): a release with none skips it."""

    @property
    def prefix(self) -> str:
        return self.keys.prefix

    @property
    def buckets(self) -> int:
        return self.keys.buckets

    # --- digests and scopes -----------------------------------------------------------

    def digest(self, name: str, queue: str | None = None, args: Any = None) -> str:
        """The digest of ``name`` (a job class or resource) on ``queue`` with ``args``."""
        return self.digester.digest(name, queue, args)

    def lock_digest(self, name: str | None, digest: str | None, queue: str | None, args: Any) -> str:
        """``digest`` checked, or the digest of (``name``, ``queue``, ``args``)."""
        if type(name) is not str or (queue is not None and type(queue) is not str):
            _check_names(name, queue)  # two exact str (the common case) pass without a call
        if digest is not None:
            return check_digest(digest, self.core)
        if name is None:
            raise ArgumentError("give a lock name or a digest")
        return self.digester.digest(name, queue, args)

    def bucket(self, digest: str) -> int:
        """The bucket of ``digest``: ``int(digest[:8], 16) % buckets``."""
        return self.keys.bucket(digest)

    def bucket_keys(self, bucket: int) -> tuple[str, str, str]:
        """(index, fencing counter, changelog) keys of ``bucket``."""
        return self.keys.bucket_keys(bucket)

    def scoping(self, digest: str, suffix: str, limit: int) -> Operation[Scope]:
        """:meth:`scope` after :meth:`checking`, as an operation."""
        yield from self.checking()
        return self.scope(digest, suffix, limit)

    def checking(self) -> Operation[None]:
        """:meth:`check_eviction_policy` unless done already."""
        if not self.policy_checked:
            yield from self.check_eviction_policy()

    def check_eviction_policy(self) -> Operation[None]:
        """Refuse a server whose ``maxmemory-policy`` may evict any key (``allkeys-*``: held
        locks and the fencing counter would go, tokens would restart; ``LockError``), warn when
        it may evict keys with a ttl (``volatile-*``: a held lock with a ttl may go early,
        tokens stay monotonic). An unreadable policy is assumed safe."""
        policy = yield from eviction_policy()
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
        self.policy_checked = True

    # --- release ----------------------------------------------------------------------

    def release_call(self, scope: Scope, job_id: str, token: str | int = "") -> Call:
        """The call releasing what ``job_id`` holds in ``scope`` (only the acquisition with
        fencing token ``token``, if given); :func:`~fastlock.locks.replies.token_reply` reads
        its reply: the token freed, or ``None``."""
        return Call("lock_release", scope.keys, self.release_args(scope, job_id, token))

    def release_args(self, scope: Scope, job_id: str, token: str | int = "") -> tuple[Any, ...]:
        """The arguments of :meth:`release_call` (the hot path calls with them directly);
        ``max_history`` last, left out when 0 (the script's default)."""
        if self.max_history:
            return (job_id, scope.name, token, self.track, self.max_history)
        return (job_id, scope.name, token, self.track)

    def releasing(self, scope: Scope, job_id: str, token: str | int = "") -> Operation[int | None]:
        """:meth:`release_call` as an operation."""
        return token_reply("lock_release", (yield self.release_call(scope, job_id, token)))
