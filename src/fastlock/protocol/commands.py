"""Commands a pooled connection must not run: they change the state of the connection they
run on (its transaction, protocol, database, user, reply mode or subscriptions), so later
commands on it would get wrong replies. Every transport refuses them before sending."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..exceptions import ArgumentError

__all__ = ["REFUSED", "refuse_connection_state", "refuse_each"]

_SCRIPT_INSTEAD = "for atomic work use a Lua script (Client.register_script)"
_PUBSUB_INSTEAD = "use redis-py's PubSub, on its own connection"
_OWN_CONNECTION = "use a dedicated redis-py connection"
REFUSED: dict[str, str] = {
    **dict.fromkeys(("MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH"), _SCRIPT_INSTEAD),
    **dict.fromkeys(
        ("SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE"),
        _PUBSUB_INSTEAD,
    ),
    **dict.fromkeys(
        (
            "MONITOR",
            "SYNC",
            "PSYNC",
            "READONLY",
            "READWRITE",
            "CLIENT REPLY",
            "CLIENT TRACKING",
            "CLIENT CACHING",
        ),
        _OWN_CONNECTION,
    ),
    "SELECT": "pass db= to Client (or /<db> in the URL)",
    "AUTH": "pass username= and password= to Client (or put them in the URL)",
    "CLIENT SETNAME": "pass client_name= to Client",
    "HELLO": "fastlock speaks RESP2 only",
    "RESET": "build a new Client",
    "QUIT": "call Client.close()",
}
"""The refused commands (``CLIENT`` ones with their subcommand); the value says what to use instead."""


def _command_word(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return value.decode("latin-1").upper()
    return value.upper() if isinstance(value, str) else ""


_ALLOWED: set[str | bytes] = set()
"""Command names (as given) already found not refused, so that the check of a repeated
command is one set lookup; bounded by :data:`_ALLOWED_MAX`."""
_ALLOWED_MAX = 512


def refuse_each(commands: Iterable[tuple[Any, ...]]) -> None:
    """:func:`refuse_connection_state` for each of ``commands`` (one write's)."""
    for args in commands:
        refuse_connection_state(args)


def refuse_connection_state(args: tuple[Any, ...], *, queued: bool = False) -> None:
    """Raise :class:`~fastlock.ArgumentError` for a command in :data:`REFUSED` (name and, for
    ``CLIENT``, subcommand compared case-insensitively), and for one without a name when it is
    ``queued`` in a pipeline."""
    if not args:
        if queued:
            raise ArgumentError("a command needs at least its name")
        return
    name = args[0]
    if (type(name) is str or type(name) is bytes) and name in _ALLOWED:
        return
    word = _command_word(name)
    if word not in REFUSED and word != "CLIENT":
        if (type(name) is str or type(name) is bytes) and len(_ALLOWED) < _ALLOWED_MAX:
            _ALLOWED.add(name)
        return
    if word == "CLIENT" and len(args) > 1:
        word = f"CLIENT {_command_word(args[1])}"
    instead = REFUSED.get(word)
    if instead is not None:
        raise ArgumentError(
            f"{word} changes the state of the pooled connection it runs on, so later commands "
            f"on that connection would get wrong replies; fastlock refuses it: {instead}"
        )
