"""What the locks of one namespace share: the transport, the key space, the options, the
conflict strategies, the scopes' keys (cached) and the server's eviction policy, checked once.
:class:`~fastlock.LockManager` is a namespace with its locks and admin on top."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping
from typing import Any

from ..digest import Digester, HashFunction
from ..exceptions import LockError, ResponseError
from ..operations import Call, Command, Operation, Runner
from .conflict import STRATEGIES, Strategy
from .keys import KeySpace, Scope
from .replies import token_reply
from .types import FENCING, TRACK

__all__ = ["Namespace", "eviction_policy"]

logger = logging.getLogger("fastlock.lock")

_POLICY = re.compile(rb"^maxmemory_policy:(\S+)", re.MULTILINE)
_SCOPES_CACHED = 1024  # scopes (key sets) kept per namespace, least recently used dropped first


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


class Namespace:
    """A lock namespace on one transport (``client``: a :class:`~fastlock.operations.Runner`,
    such as :class:`~fastlock.Client`); see :class:`~fastlock.LockManager` for the options."""

    def __init__(
        self,
        client: Runner,
        *,
        prefix: str = "fastlock",
        buckets: int = 1024,
        hash: str | HashFunction = "sha256",  # noqa: A002 - mirrors hashlib naming
        track: bool = True,
        fencing: bool = True,
        max_history: int = 0,
        strategies: Mapping[str, Strategy] | None = None,
    ) -> None:
        if max_history < 0:
            raise ValueError("max_history must be >= 0")
        self.keys = KeySpace(prefix, buckets)
        self.runner = client
        self.digester = Digester(hash)
        self.track = track
        self.fencing = fencing
        self.max_history = max_history
        self.flags = (TRACK if track else 0) | (FENCING if fencing else 0)
        self.strategies: dict[str, Strategy] = {**STRATEGIES, **(strategies or {})}
        self.call = client.call  # the hot path's script call, bound once
        self._scopes = functools.lru_cache(maxsize=_SCOPES_CACHED)(self.keys.scope)
        self._policy_checked = False

    @property
    def prefix(self) -> str:
        return self.keys.prefix

    @property
    def buckets(self) -> int:
        return self.keys.buckets

    # --- scopes -----------------------------------------------------------------------

    def scope(self, digest: str, suffix: str, limit: int) -> Scope:
        """The keys of ``digest``'s queue-time (``suffix=""``) or runtime (``":run"``) scope
        (the recently used ones are cached); the first one checks the eviction policy."""
        if not self._policy_checked:
            self.runner.run(self.check_eviction_policy())
        return self._scopes(digest, suffix, limit)

    def scoping(self, digest: str, suffix: str, limit: int) -> Operation[Scope]:
        """:meth:`scope` as an operation."""
        if not self._policy_checked:
            yield from self.check_eviction_policy()
        return self._scopes(digest, suffix, limit)

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
        self._policy_checked = True

    # --- release ----------------------------------------------------------------------

    def release_scope(self, scope: Scope, job_id: str, token: str | int = "") -> int | None:
        """Release what ``job_id`` holds in ``scope`` (only the acquisition with fencing token
        ``token``, if given): the token freed, or ``None``."""
        return token_reply(
            "lock_release", self.call("lock_release", scope.keys, self._release_args(scope, job_id, token))
        )

    def release_call(self, scope: Scope, job_id: str, token: str | int = "") -> Call:
        """The call :meth:`release_scope` makes, as a step."""
        return Call("lock_release", scope.keys, self._release_args(scope, job_id, token))

    def _release_args(self, scope: Scope, job_id: str, token: str | int) -> tuple[Any, ...]:
        return (job_id, scope.name, token, self.track, self.max_history)

    def releasing(self, scope: Scope, job_id: str, token: str | int = "") -> Operation[int | None]:
        """:meth:`release_scope` as an operation."""
        return token_reply("lock_release", (yield self.release_call(scope, job_id, token)))
