"""Opt-in durability: ``WAIT replicas ms`` after a lock acquire or a claim (sans-IO).

``WAIT`` covers the writes made on its own connection, so it goes in the same write as the
script call, on the same connection (:func:`durable_commands`), and its count is checked
(:func:`durable_reply`): fewer replicas than asked raise :class:`ReplicationError` *after the
script ran* (the lock is held, the jobs are claimed: release or fail them by job id, or let
the ttl/lease end it). It narrows the window in which a failover loses an acknowledged
acquire; it does not close it (docs/cluster.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..exceptions import ArgumentError, FastlockError, NoScriptError, ResponseError
from ..operations import AsyncRunner, Runner
from ..scripts.calling import ScriptSettings, meta_values
from ..scripts.errors import lua_error
from ..scripts.registry import Script

__all__ = [
    "DURABLE_SCRIPTS",
    "ReplicationError",
    "check_wait",
    "durable_call",
    "durable_call_async",
    "durable_commands",
    "durable_reply",
]

DURABLE_SCRIPTS = frozenset({"lock_acquire", "queue_claim"})
"""The scripts followed by ``WAIT`` when a client is built with ``wait=(replicas, ms)``."""


class ReplicationError(FastlockError):
    """Fewer replicas than asked acknowledged the write within the ``WAIT`` timeout. The
    script ran: ``reply`` is its reply, ``acked`` the replicas that have the write."""

    def __init__(self, message: str, *, reply: Any, acked: int, wanted: int) -> None:
        super().__init__(message)
        self.reply, self.acked, self.wanted = reply, acked, wanted


def check_wait(wait: tuple[int, int] | None) -> tuple[int, int] | None:
    """``wait`` checked: ``(replicas >= 1, milliseconds >= 0)`` or ``None``."""
    if wait is None:
        return None
    replicas, ms = wait
    if not (isinstance(replicas, int) and isinstance(ms, int) and replicas >= 1 and ms >= 0):
        raise ArgumentError(f"wait must be (replicas >= 1, milliseconds >= 0), not {wait!r}")
    return replicas, ms


def durable_commands(
    script: Script,
    settings: ScriptSettings,
    keys: Sequence[Any],
    args: Sequence[Any],
    wait: tuple[int, int],
    *,
    load: bool = False,
    asking: bool = False,
    meta: bool = True,
) -> list[tuple[Any, ...]]:
    """The call of ``script`` then ``WAIT``, for one write (``load``: ``SCRIPT LOAD`` first;
    ``asking``: ``ASKING`` just before the call, the script loaded; ``meta``: append the
    script's ``#meta`` values, false when ``args`` has them)."""
    if meta and script.meta:
        args = [*args, *meta_values(script, settings)]
    commands: list[tuple[Any, ...]] = [("SCRIPT", "LOAD", script.body)] if load or asking else []
    if asking:
        commands.append(("ASKING",))
    return [*commands, ("EVALSHA", script.sha, len(keys), *keys, *args), ("WAIT", *wait)]


def durable_reply(replies: Sequence[Any], script: Script, wanted: int) -> Any:
    """The script's reply from the replies of :func:`durable_commands`; raises its error (a
    ``NOSCRIPT`` or a redirect unchanged: the caller sends again) or :class:`ReplicationError`
    (too few replicas, or ``WAIT`` itself failed after the script ran)."""
    for earlier in replies[:-2]:
        if isinstance(earlier, ResponseError):
            raise earlier
    reply, acked = replies[-2], replies[-1]
    if isinstance(reply, ResponseError):
        raise lua_error(reply, script)
    if isinstance(acked, ResponseError):  # e.g. UNBLOCKED: the primary was demoted meanwhile
        raise ReplicationError(
            f"{script.name}: WAIT failed ({acked}) (the script ran)", reply=reply, acked=0, wanted=wanted
        ) from acked
    if acked < wanted:
        raise ReplicationError(
            f"{script.name}: {acked} of {wanted} replicas acknowledged in time (the script ran)",
            reply=reply,
            acked=acked,
            wanted=wanted,
        )
    return reply


def durable_call(
    node: Runner,
    script: Script,
    settings: ScriptSettings,
    keys: Sequence[Any],
    args: Sequence[Any],
    wait: tuple[int, int],
    asking: bool = False,
    meta: bool = True,
) -> Any:
    """Call ``script`` then ``WAIT`` in one write on ``node`` (loading the script on
    ``NOSCRIPT``; ``meta``: append the script's ``#meta`` values, false when ``args`` has them)."""
    try:
        commands = durable_commands(script, settings, keys, args, wait, asking=asking, meta=meta)
        return durable_reply(node.execute_many(commands), script, wait[0])
    except NoScriptError:
        commands = durable_commands(script, settings, keys, args, wait, load=True, meta=meta)
        return durable_reply(node.execute_many(commands), script, wait[0])


async def durable_call_async(
    node: AsyncRunner,
    script: Script,
    settings: ScriptSettings,
    keys: Sequence[Any],
    args: Sequence[Any],
    wait: tuple[int, int],
    asking: bool = False,
    meta: bool = True,
) -> Any:
    """:func:`durable_call` on an asyncio node."""
    try:
        commands = durable_commands(script, settings, keys, args, wait, asking=asking, meta=meta)
        return durable_reply(await node.execute_many(commands), script, wait[0])
    except NoScriptError:
        commands = durable_commands(script, settings, keys, args, wait, load=True, meta=meta)
        return durable_reply(await node.execute_many(commands), script, wait[0])
