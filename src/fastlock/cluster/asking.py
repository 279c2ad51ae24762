"""``ASKING`` (a slot being migrated) and the scripts every node shares (sans-IO).

``ASKING`` goes in the same write as the command it lets through (:func:`script_commands`,
:func:`command_commands`); a failed ``ASKING`` aborts the command's result
(:func:`reply`). A script sent under ``ASKING`` is loaded in that same write: the importing
node may not have it yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..exceptions import AskError, ClusterDownError, LoadingError, MovedError, ResponseError, TryAgainError
from ..scripts.calling import ScriptSettings, meta_values
from ..scripts.errors import lua_error
from ..scripts.registry import Script

__all__ = ["command_commands", "is_redirect", "reply", "script_commands", "share_scripts"]

_NOT_RUN = (MovedError, AskError, TryAgainError, ClusterDownError, LoadingError)


def share_scripts(node: Any, first: Any) -> None:
    """Make ``node`` (a standalone client of one cluster node) use the registry and script
    settings of ``first``: one rendering and one set of counters for the whole cluster."""
    node.scripts = first.scripts
    node._loaded = first.scripts.loaded
    node.script_settings = first.script_settings


def script_commands(
    script: Script, settings: ScriptSettings, keys: Sequence[Any], args: Sequence[Any], *, meta: bool = True
) -> list[tuple[Any, ...]]:
    """``SCRIPT LOAD``, ``ASKING`` and the ``EVALSHA`` of a call of ``script``, for one write
    (``meta``: append the script's ``#meta`` values; false when ``args`` has them)."""
    if meta and script.meta:
        args = [*args, *meta_values(script, settings)]
    return [("SCRIPT", "LOAD", script.body), ("ASKING",), ("EVALSHA", script.sha, len(keys), *keys, *args)]


def command_commands(args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """``ASKING`` and the command, for one write."""
    return [("ASKING",), args]


def reply(replies: Sequence[Any], script: Script | None = None) -> Any:
    """The command's reply from the replies of :func:`script_commands` or
    :func:`command_commands`; raises the first error (``ASKING``'s included)."""
    for earlier in replies[:-1]:
        if isinstance(earlier, ResponseError):
            raise earlier
    last = replies[-1]
    if isinstance(last, ResponseError):
        raise lua_error(last, script) if script is not None else last
    return last


def is_redirect(reply: Any) -> bool:
    """True for an error reply meaning the command did not run and may be sent elsewhere or later."""
    return isinstance(reply, _NOT_RUN)
