"""``SentinelClient``: a :class:`~fastlock.operations.Runner` on the master a set of Redis
Sentinels name, following failovers.

The master is found by ``SENTINEL GET-MASTER-ADDR-BY-NAME`` (each sentinel in turn) and
verified by ``ROLE`` before use. It is followed in two ways: a watcher thread asks a sentinel
every ``poll_interval`` seconds (a demoted master may accept writes for seconds after the
sentinels announced its successor, so waiting for an error is not enough), and a
``READONLY`` reply or a connection error before the write (the topology moved) makes the
call find the master again and run again, until ``failover_timeout``. Like everywhere else,
what may have run (a timeout, a connection lost after the write) is raised, never re-sent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from ..exceptions import ConnectionError, ReadOnlyError, ResponseError
from ..operations import Operation, Runner
from ..scripts.calling import ScriptSettingsAccess
from ..sync.client import Client, LockQueueAccess
from ..sync.drive import drive
from .asking import share_scripts
from .client import durable_call
from .durability import DURABLE_SCRIPTS, check_wait
from .topology import Address, seed_address

__all__ = ["SentinelClient", "master_reply", "sentinel_reply"]

T = TypeVar("T")
_log = logging.getLogger("fastlock.cluster")


def sentinel_reply(reply: Any) -> Address | None:
    """The address in a ``SENTINEL GET-MASTER-ADDR-BY-NAME`` reply (``None``: unknown service)."""
    if not reply:
        return None
    host, port = reply
    return (host.decode() if isinstance(host, bytes) else str(host)), int(port)


def master_reply(reply: Any) -> bool:
    """True when a ``ROLE`` reply says master."""
    return bool(reply) and reply[0] in (b"master", "master")


class SentinelClient(ScriptSettingsAccess, LockQueueAccess):
    """A client of the master of ``service`` as ``sentinels`` (``host:port`` or URLs) name it.
    ``options`` are those of :class:`fastlock.Client` for the master (``sentinel_options`` for
    the sentinels, e.g. their password); ``wait=(replicas, ms)`` as for
    :class:`~fastlock.cluster.ClusterClient`. Locks and queues work unchanged on it."""

    def __init__(
        self,
        sentinels: Iterable[str],
        service: str,
        *,
        poll_interval: float | None = 0.1,
        failover_timeout: float = 10.0,
        sentinel_options: dict[str, Any] | None = None,
        wait: tuple[int, int] | None = None,
        **options: Any,
    ) -> None:
        self.service = service
        self.wait = check_wait(wait)
        self.failover_timeout = failover_timeout
        self._options = options
        self._sentinels = [Client(_url(s), max_connections=2, **(sentinel_options or {})) for s in sentinels]
        self._template = Client(**options)  # never connected: the settings of every master's client
        self.impl, self.scripts = self._template.impl, self._template.scripts
        self.script_settings = self._template.script_settings
        self._nodes: dict[Address, Client] = {}
        self._switch_lock = threading.Lock()
        self._closed = threading.Event()
        self.switches = 0
        """Times the master changed (the first discovery included)."""
        self._watcher: threading.Thread | None = None
        try:
            self._client = self._node(self._discover())
        except BaseException:
            self.close()
            raise
        if poll_interval is not None:
            self._watcher = threading.Thread(target=self._watch, args=(poll_interval,), daemon=True)
            self._watcher.start()

    @classmethod
    def from_redis(cls, redis_client: Any, **kwargs: Any) -> SentinelClient:
        """A client of the master a redis-py ``Sentinel.master_for(...)`` client follows (the
        same sentinels, service, credentials and timeouts); ``kwargs`` go to the constructor."""
        from ..interop.redis_py import sentinel_from_redis

        sentinels, service, master, sentinel_options = sentinel_from_redis(redis_client)
        return cls(sentinels, service, sentinel_options=sentinel_options, **{**master, **kwargs})

    @property
    def master(self) -> Address:
        """The master's address in use."""
        params = self._client.params
        return params.host, params.port

    @property
    def client(self) -> Client:
        """The client of the master in use."""
        return self._client

    def _announced(self) -> Address:
        for sentinel in list(self._sentinels):
            try:
                address = sentinel_reply(
                    sentinel.execute("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
                )
            except (ConnectionError, ResponseError):
                continue
            if address is not None:
                return address
        raise ConnectionError(f"no sentinel knows a master of {self.service!r}", sent=False)

    def _discover(self) -> Address:
        """The master the sentinels announce, verified by ``ROLE``."""
        address = self._announced()
        if not master_reply(self._node(address).execute("ROLE")):
            raise ConnectionError(f"{address[0]}:{address[1]} is not (yet) a master", sent=False)
        return address

    def _node(self, address: Address) -> Client:
        node = self._nodes.get(address)
        if node is None:
            node = self._nodes[address] = Client(**self._options)
            node.params = replace(self._template.params, host=address[0], port=address[1])
            share_scripts(node, self._template)
            self.switches += 1
        return node

    def _switch(self, address: Address) -> None:
        with self._switch_lock:
            if address != self.master:
                self._client = self._node(address)
                _log.warning("sentinel %r: master now at %s:%s", self.service, *address)

    def _watch(self, interval: float) -> None:
        while not self._closed.wait(interval):
            try:
                if self._announced() != self.master:
                    self._switch(self._discover())
            except (ConnectionError, ResponseError) as exc:
                _log.debug("sentinel watch: %s", exc)

    def _again(self, send: Callable[[Client], Any], error: BaseException) -> Any:
        """After ``error`` (the call did not run): find the master and send again, with
        growing pauses, until ``failover_timeout``."""
        deadline = time.monotonic() + self.failover_timeout
        pause = 0.01
        while True:
            try:
                self._switch(self._discover())
                return send(self._client)
            except ReadOnlyError as exc:
                error = exc
            except ConnectionError as exc:
                if exc.sent:
                    raise
                error = exc
            if time.monotonic() + pause > deadline:
                raise error
            time.sleep(pause)
            pause = min(pause * 2, 0.2)

    def _send(self, send: Callable[[Client], Any]) -> Any:
        try:
            return send(self._client)
        except ReadOnlyError as exc:
            return self._again(send, exc)
        except ConnectionError as exc:
            if exc.sent:
                raise
            return self._again(send, exc)

    def call(
        self,
        name: str,
        keys: Sequence[Any] = (),
        args: Sequence[Any] = (),
        *,
        busy_timeout: float | None = None,
    ) -> Any:
        """Run script ``name`` on the master (see :meth:`fastlock.Client.call`)."""
        if self.wait is not None and name in DURABLE_SCRIPTS:
            script, settings, wait = self.scripts.get(name), self.script_settings, self.wait
            return self._send(lambda c: durable_call(c, script, settings, keys, args, wait))
        try:
            return self._client.call(name, keys, args, busy_timeout=busy_timeout)
        except (ReadOnlyError, ConnectionError) as exc:
            if isinstance(exc, ConnectionError) and exc.sent:
                raise
            error = exc
        return self._again(lambda c: c.call(name, keys, args, busy_timeout=busy_timeout), error)

    def execute(self, *args: Any) -> Any:
        """Run one command on the master."""
        return self._send(lambda c: c.execute(*args))

    def execute_blocking(self, *args: Any, timeout: float) -> Any:
        """Run a blocking command on the master."""
        return self._send(lambda c: c.execute_blocking(*args, timeout=timeout))

    def execute_many(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Send ``commands`` to the master in one write."""
        replies: list[Any] = self._send(lambda c: c.execute_many(commands))
        return replies

    def run(self, operation: Operation[T]) -> T:
        """Run a multi-step :data:`~fastlock.operations.Operation` with blocking calls."""
        return drive(self, operation)

    def close(self) -> None:
        """Stop watching and close every connection."""
        self._closed.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(5.0)
        for client in (*self._nodes.values(), *self._sentinels):
            client.close()

    def __enter__(self) -> SentinelClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<fastlock.SentinelClient {self.service!r} at {self.master[0]}:{self.master[1]}>"


def _url(sentinel: str) -> str:
    host, port = seed_address(sentinel)
    return f"redis://{host}:{port}"


if TYPE_CHECKING:
    _RUNNER: type[Runner] = SentinelClient  # mypy checks that a SentinelClient is a Runner
