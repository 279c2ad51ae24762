"""Which argument of a command is its first key, learned from the server (sans-IO).

A cluster client routes a command by its first key. A small built-in table (:data:`FAST`)
covers the hot commands and the common ``numkeys`` forms (``EVAL``/``FCALL`` families,
``LMPOP``, ``ZMPOP``, ``SINTERCARD``, ``ZINTERCARD``, ``ZUNION``, ``ZINTER``, ``ZDIFF``,
``BLMPOP``, ``BZMPOP``) and ``XREAD``/``XREADGROUP`` at no cost. Any other command name is
asked about once per client (:class:`CommandTable`: ``COMMAND INFO name``, one round trip to any
primary, the rule cached): its first key position, or none, or ``movablekeys``; a container
(``OBJECT``, ``MEMORY``, ``XINFO``, ...) has a rule per subcommand (the Redis 7 / Valkey reply's
element 9). A ``movablekeys`` command the table does not know costs ``COMMAND GETKEYS`` per call
(one round trip more). The client drives it: :meth:`CommandTable.key` gives the key, ``None``
(keyless: any primary) or a :class:`Query` to send to any primary, whose reply (or error) goes
to :meth:`CommandTable.answer`, which gives the key, ``None`` or the next query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import ClusterDownError, ConnectionError, LoadingError, ResponseError, TryAgainError

__all__ = ["FAST", "GETKEYS", "CommandTable", "Query", "Rule", "first_key", "parse_command_info"]


@dataclass(frozen=True, slots=True)
class Rule:
    """Where a command's first key is: ``args[at]`` (``at`` 0: keyless); with ``numkeys``,
    ``args[at]`` counts the keys that follow it; with ``after``, the key follows that keyword
    (``XREAD``'s ``STREAMS``); with ``movable``, the server says (``COMMAND GETKEYS``) unless
    ``args[at]`` is a non-empty key; ``subcommands``: the rule by subcommand (``OBJECT ENCODING``)."""

    at: int = 0
    numkeys: bool = False
    after: bytes = b""
    movable: bool = False
    subcommands: Mapping[bytes, Rule] | None = None
    plain: bool = field(init=False, repr=False, compare=False)
    """Only ``at``: the key is ``args[at]`` (the fast path)."""

    def __post_init__(self) -> None:
        plain = not (self.numkeys or self.after or self.movable or self.subcommands is not None)
        object.__setattr__(self, "plain", plain)


@dataclass(frozen=True, slots=True)
class Query:
    """A command to send to any primary (``COMMAND INFO`` or ``COMMAND GETKEYS``)."""

    command: tuple[Any, ...]
    name: bytes


KEYLESS = Rule()
GUESS = Rule(at=1)
"""What a command the server would not describe is routed by: its first argument."""
GETKEYS = object()
"""What :func:`first_key` gives when only ``COMMAND GETKEYS`` can tell."""


def _table() -> dict[bytes, Rule]:
    table = dict.fromkeys(
        b"PING INFO TIME DBSIZE CONFIG SCRIPT FUNCTION CLUSTER COMMAND ECHO LASTSAVE SLOWLOG "
        b"LATENCY ROLE CLIENT FLUSHALL FLUSHDB RANDOMKEY SCAN KEYS WAIT HELLO".split(),
        KEYLESS,
    )
    for names, rule in (
        (
            b"GET SET DEL UNLINK EXISTS TYPE EXPIRE PEXPIRE TTL PTTL PERSIST INCR INCRBY DECR "
            b"HGET HSET HDEL HGETALL HSCAN HLEN ZADD ZREM ZCARD ZSCORE ZRANGE ZRANGEBYSCORE ZSCAN "
            b"LPUSH RPUSH LPOP RPOP LLEN LRANGE BLPOP BRPOP BZPOPMIN BZPOPMAX SADD SREM SMEMBERS "
            b"SCARD XADD XLEN XRANGE XREVRANGE XACK XDEL XTRIM SORT SORT_RO ZUNIONSTORE "
            b"ZINTERSTORE ZDIFFSTORE",
            GUESS,
        ),
        (b"EVAL EVALSHA EVAL_RO EVALSHA_RO FCALL FCALL_RO BLMPOP BZMPOP", Rule(at=2, numkeys=True)),
        (b"LMPOP ZMPOP SINTERCARD ZINTERCARD ZUNION ZINTER ZDIFF", Rule(at=1, numkeys=True)),
        (b"XREAD XREADGROUP", Rule(after=b"STREAMS")),
    ):
        table.update(dict.fromkeys(names.split(), rule))
    return table


FAST: Mapping[bytes, Rule] = _table()
"""The built-in rules: the hot commands and the common ``numkeys`` forms, never asked about."""


def _name(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).upper()
    return str(value).encode().upper()  # (an int is no name: never bytes(n), n zero bytes)


def _rule(entry: Sequence[Any]) -> Rule:
    at, movable = int(entry[3]), b"movablekeys" in entry[2]
    subcommands = entry[9] if len(entry) > 9 else None
    if subcommands:
        return Rule(
            at,
            movable=movable,
            subcommands={_name(sub[0]).partition(b"|")[2]: _rule(sub) for sub in subcommands},
        )
    return Rule(at, movable=movable)


def parse_command_info(reply: Sequence[Any]) -> Rule | None:
    """The rule of the command a ``COMMAND INFO name`` reply describes (``None``: unknown)."""
    entry = reply[0] if reply else None
    return None if entry is None else _rule(entry)


def first_key(rule: Rule, args: Sequence[Any]) -> Any:
    """The first key of ``args`` by ``rule``: ``None`` if it has none (or the arguments are
    malformed: the server says so, from any node); an opaque marker when only
    ``COMMAND GETKEYS`` can tell."""
    if rule.subcommands is not None:
        sub = rule.subcommands.get(_name(args[1])) if len(args) > 1 else None
        if sub is None:
            return GETKEYS if rule.movable else None
        rule = sub
    at = rule.at
    if rule.after:
        names = [_name(a) if isinstance(a, (str, bytes)) else b"" for a in args]
        at = names.index(rule.after) + 1 if rule.after in names else 0
    elif rule.numkeys:
        try:
            at = at + 1 if len(args) > at + 1 and int(args[at]) > 0 else 0
        except (TypeError, ValueError):
            at = 0
    if rule.movable and (at == 0 or len(args) <= at or args[at] in ("", b"")):
        return GETKEYS
    return args[at] if 0 < at < len(args) else None


class CommandTable:
    """Key rules by command name: :data:`FAST`, then those learned from the server (at most
    ``size``, forgotten all at once when full). ``lookups`` counts the queries made."""

    __slots__ = ("_learned", "_seen", "lookups", "size")

    def __init__(self, size: int = 512) -> None:
        self._learned: dict[bytes, Rule] = {}
        self._seen: dict[Any, Rule] = {}  # by the first argument as given: no upper-casing
        self.size = size
        self.lookups = 0

    def rule(self, name: bytes) -> Rule | None:
        """The rule of command ``name`` (upper case), ``None`` until learned."""
        return FAST.get(name) or self._learned.get(name)

    def learn(self, name: bytes, rule: Rule) -> None:
        """Keep ``rule`` for command ``name``."""
        if len(self._learned) >= self.size:
            self._learned.clear()
            self._seen.clear()
        self._learned[name] = rule

    def key(self, args: Sequence[Any]) -> Any:
        """The first key of ``args``, ``None`` (keyless), or a :class:`Query` to send first."""
        if not args:
            return None
        first = args[0]
        rule = self._seen.get(first) if type(first) is str or type(first) is bytes else None
        if rule is None:
            name = _name(first)
            rule = FAST.get(name) or self._learned.get(name)
            if rule is None:
                self.lookups += 1
                return Query(("COMMAND", "INFO", name), name)
            if type(first) is str or type(first) is bytes:
                if len(self._seen) >= 4 * self.size:
                    self._seen.clear()
                self._seen[first] = rule
        if rule.plain:
            at = rule.at
            return args[at] if 0 < at < len(args) else None
        return self._apply(rule, args)

    def _apply(self, rule: Rule, args: Sequence[Any]) -> Any:
        key = first_key(rule, args)
        if key is GETKEYS:
            self.lookups += 1
            return Query(("COMMAND", "GETKEYS", *args), _name(args[0]))
        return key

    def answer(self, query: Query, args: Sequence[Any], reply: Any) -> Any:
        """The key (``None``: keyless) or the next :class:`Query`, given ``reply``, the reply
        to ``query`` or its error. An unknown command is keyless (any node answers the error);
        a ``COMMAND INFO`` refused (ACL, renamed) routes by :data:`GUESS`, and so does one that
        failed for a while (connection, cluster down: not learned, asked again next time)."""
        if query.command[1] == "INFO":
            if isinstance(reply, (ConnectionError, ClusterDownError, TryAgainError, LoadingError)):
                return self._apply(GUESS, args)
            rule = GUESS if isinstance(reply, ResponseError) else parse_command_info(reply) or KEYLESS
            self.learn(query.name, rule)
            return self._apply(rule, args)
        if isinstance(reply, ConnectionError):
            return first_key(GUESS, args)
        if isinstance(reply, ResponseError) or not reply:
            return None  # no key in these arguments (or malformed: any node says so)
        return reply[0]
