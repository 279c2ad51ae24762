"""Following the master a set of sentinels name, once for both clients (sans-IO: no socket,
clock or sleep here; the callers pass ``now``).

- the replies: ``SENTINEL GET-MASTER-ADDR-BY-NAME`` (:func:`sentinel_reply`), ``ROLE``
  (:func:`master_reply`), the ``+switch-master`` Pub/Sub message (:func:`switch_message`);
- :class:`Watch`: the watcher's plan: which sentinel to subscribe to next, how long to wait
  before reconnecting, when the safety poll is due, and what each reply read on the
  subscription means (the master to switch to, or nothing);
- :class:`Resend`: whether a failed call may be sent again on the master found anew, and
  after which pause (until ``failover_timeout``);
- :class:`SentinelBase`: what :class:`~fastlock.cluster.SentinelClient` and
  :class:`~fastlock.cluster.AsyncSentinelClient` hold: the sentinels' clients, the template
  of the master's client, one client per master address, the switch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, Generic, Protocol, TypeVar

from .._impl import Core, CoreReplyReader
from ..exceptions import ConnectionError, ReadOnlyError, ResponseError
from ..params import ConnectionParams
from ..scripts.calling import ScriptSettings, ScriptSettingsAccess
from ..scripts.registry import ScriptRegistry
from .asking import share_scripts
from .topology import Address, seed_address

__all__ = [
    "SWITCH_CHANNEL",
    "Resend",
    "SentinelBase",
    "Watch",
    "master_reply",
    "resendable",
    "sentinel_reply",
    "switch_message",
]

SWITCH_CHANNEL = "+switch-master"
"""The sentinels' Pub/Sub channel announcing a new master:
``<service> <old host> <old port> <new host> <new port>``."""

_log = logging.getLogger("fastlock.cluster")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def sentinel_reply(reply: Any) -> Address | None:
    """The address in a ``SENTINEL GET-MASTER-ADDR-BY-NAME`` reply (``None``: unknown service)."""
    if not reply:
        return None
    host, port = reply
    return _text(host), int(port)


def master_reply(reply: Any) -> bool:
    """True when a ``ROLE`` reply says master."""
    return bool(reply) and reply[0] in (b"master", "master")


def switch_message(reply: Any, service: str) -> Address | None:
    """The new master in a ``+switch-master`` message about ``service`` (``None``: another
    reply, or another service)."""
    if not isinstance(reply, list) or len(reply) != 3 or _text(reply[0]) != "message":
        return None
    fields = _text(reply[2]).split()
    if _text(reply[1]) != SWITCH_CHANNEL or len(fields) != 5 or fields[0] != service:
        return None
    if not fields[4].isdigit():
        return None
    return fields[3], int(fields[4])


class Watch:
    """The watcher of ``sentinels`` sentinels: it subscribes to ``+switch-master`` on one
    (:attr:`index`), moves to the next when that subscription is lost, and polls every
    ``poll_interval`` seconds (``None``: never) besides, in case a message was missed. It
    waits at most ``tick`` seconds at a time, so that closing the client stops it promptly."""

    def __init__(self, service: str, sentinels: int, poll_interval: float | None, tick: float = 0.1) -> None:
        self.service = service
        self.sentinels = sentinels
        self.poll_interval = poll_interval
        self.tick = tick
        self.index = 0
        self.subscribed = False
        """The subscription to sentinel :attr:`index` is confirmed."""
        self._failures = 0
        self._handshake = 0
        self._next_poll: float | None = None
        self._reader: CoreReplyReader | None = None
        self._not_enough: Any = None

    def subscribe(self, core: Core, handshake: Sequence[tuple[Any, ...]], now: float) -> bytes:
        """What a new subscription sends, in one write: ``handshake`` (whose replies
        :meth:`received` checks first) and ``SUBSCRIBE``. A poll is due ``now``: a message
        may have been missed while there was no subscription."""
        self.subscribed = False
        self._reader, self._not_enough = core.ReplyReader(), core.NOT_ENOUGH
        self._handshake = len(handshake)
        self._next_poll = now
        return core.encode_pipeline([*handshake, ("SUBSCRIBE", SWITCH_CHANNEL)])

    def received(self, data: bytes, master: Address) -> Address | None:
        """The new master the ``data`` read on the subscription announce, unless it is
        ``master`` (``None``: no news). An error reply is raised, as is the end of the
        stream (``data`` empty: a ConnectionError); the subscription is then :meth:`lost`."""
        if not data:
            raise ConnectionError("the sentinel closed the subscription", sent=False)
        reader = self._reader
        assert reader is not None, "subscribe() first"
        reader.feed(data)
        news = None
        while (reply := reader.gets()) is not self._not_enough:
            address = self._read(reply)
            news = news if address is None else address
        return None if news == master else news

    def _read(self, reply: Any) -> Address | None:
        if isinstance(reply, ResponseError):
            raise reply
        if self._handshake:
            self._handshake -= 1
        elif isinstance(reply, list) and reply and _text(reply[0]) == "subscribe":
            self.subscribed = True
            self._failures = 0
        return switch_message(reply, self.service)

    def lost(self) -> float:
        """The subscription ended: move to the next sentinel; the pause before connecting
        (none until every sentinel failed once in a row, then growing to 1 s)."""
        self.subscribed = False
        self.index = (self.index + 1) % self.sentinels
        self._failures += 1
        rounds = self._failures // self.sentinels
        return 0.0 if not rounds else min(0.05 * 2 ** (rounds - 1), 1.0)

    def poll_due(self, now: float) -> bool:
        """True when it is time to ask a sentinel for the master (and then schedules the next poll)."""
        if self._next_poll is None or now < self._next_poll:
            return False
        self._next_poll = None if self.poll_interval is None else now + self.poll_interval
        return True

    def poll_soon(self, now: float) -> None:
        """Poll again within :attr:`tick` (a check failed: the new master was not ready)."""
        self._next_poll = min(self._next_poll or now + self.tick, now + self.tick)

    def wait(self, now: float) -> float:
        """How long to wait for the next message before looking again."""
        if self._next_poll is None:
            return self.tick
        return max(0.0, min(self.tick, self._next_poll - now))


def resendable(error: BaseException) -> bool:
    """True when ``error`` says the command did not run and the master may have moved:
    ``READONLY`` (a demoted master), or a connection error before the write."""
    return isinstance(error, ReadOnlyError) or (isinstance(error, ConnectionError) and not error.sent)


class Resend:
    """Sending a call that failed with ``error`` again, on the master found anew, while the
    error says it did not run (:func:`resendable`), until ``timeout`` seconds after ``now``."""

    def __init__(self, error: BaseException, timeout: float, now: float) -> None:
        self.error = error
        """The last attempt's error (the callers set it)."""
        self.deadline = now + timeout
        self._pause = 0.0

    def pause(self, now: float) -> float:
        """The pause before the next attempt (none before the first, then 10 ms doubling to
        200 ms); :attr:`error` is raised when the call may have run or when the next attempt
        would come after the deadline."""
        if not resendable(self.error) or now + self._pause > self.deadline:
            raise self.error
        pause, self._pause = self._pause, min(max(self._pause * 2, 0.01), 0.2)
        return pause


class NodeClient(Protocol):
    """What :class:`SentinelBase` needs of a standalone client (sync or asyncio)."""

    params: ConnectionParams
    impl: str
    scripts: ScriptRegistry
    script_settings: ScriptSettings


C = TypeVar("C", bound=NodeClient)


class SentinelBase(ScriptSettingsAccess, Generic[C]):
    """The state both sentinel clients share; ``make`` builds a standalone client (the sync or
    the asyncio ``Client``) from a URL and options."""

    def __init__(
        self,
        make: Callable[..., C],
        sentinels: Iterable[str],
        service: str,
        poll_interval: float | None,
        failover_timeout: float,
        sentinel_options: dict[str, Any] | None,
        options: dict[str, Any],
    ) -> None:
        self.service = service
        self.failover_timeout = failover_timeout
        self._make = make
        self._options = options
        urls = [f"redis://{host}:{port}" for host, port in map(seed_address, sentinels)]
        self._sentinels = [make(url, **{"max_connections": 2, **(sentinel_options or {})}) for url in urls]
        self._template = make(**options)  # never connected: the settings of every master's client
        self.impl, self.scripts = self._template.impl, self._template.scripts
        self.script_settings = self._template.script_settings
        self._watch = Watch(service, len(self._sentinels), poll_interval)
        self._nodes: dict[Address, C] = {}
        self._client: C | None = None
        self.switches = 0
        """Times the master changed (the first discovery included)."""

    @property
    def master(self) -> Address:
        """The master's address in use."""
        params = self._current.params
        return params.host, params.port

    @property
    def subscription(self) -> Address | None:
        """The sentinel whose ``+switch-master`` messages are followed (``None``: not subscribed now)."""
        if not self._watch.subscribed:
            return None
        params = self._sentinels[self._watch.index].params
        return params.host, params.port

    @property
    def _current(self) -> C:
        client = self._client
        if client is None:
            raise ConnectionError("the client is not connected (AsyncSentinelClient.connect)", sent=False)
        return client

    def _node(self, address: Address) -> C:
        """The client of the node at ``address`` (made once, never connected here)."""
        node = self._nodes.get(address)
        if node is None:
            made = self._make(**self._options)
            made.params = replace(self._template.params, host=address[0], port=address[1])
            share_scripts(made, self._template)
            node = self._nodes.setdefault(address, made)  # a racing thread's twin is dropped unused
        return node

    def _announce_command(self) -> tuple[Any, ...]:
        return ("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)

    def _unknown(self) -> ConnectionError:
        return ConnectionError(f"no sentinel knows a master of {self.service!r}", sent=False)

    def _verified(self, address: Address, role: Any) -> Address:
        """``address`` if its ``ROLE`` reply says master; else a (not sent) ConnectionError."""
        if not master_reply(role):
            raise ConnectionError(f"{address[0]}:{address[1]} is not (yet) a master", sent=False)
        return address

    def _use(self, address: Address) -> None:
        """Send from now on to the (verified) master at ``address``."""
        if self._client is not None and address == self.master:
            return
        first = self._client is None
        self._client = self._node(address)
        self.switches += 1
        if not first:
            _log.warning("sentinel %r: master now at %s:%s", self.service, *address)
