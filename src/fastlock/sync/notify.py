"""The sync client's wake-up listener: one subscribed connection per client and process for
every waiting thread of every lock name (the rules: :mod:`fastlock.locks.notify`; the design:
docs/locks.md). One thread, the reader, does all its I/O (a TLS socket is not safe to share
between threads); waiting threads queue requests for it, poke it through a socket pair it
selects on, and sleep on a ``threading.Event``. A fork's child makes its own listener. A routed
one (a cluster node's, a sentinel's master's) forgets its waiters at a loss instead of waking
them: they enter again where their channel is now."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import ssl
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import ProtocolError, ResponseError
from ..locks.notify import MAX_NAP, Channels, ThreadSignal, WaiterTable, logger
from ..operations import Runner
from ..params import ConnectionParams
from .connect import open_socket

__all__ = ["Listener", "ThreadSignal"]


@dataclass(slots=True)
class _Join:
    """A waiter entering: done once its channel's subscription is confirmed (or failed)."""

    channel: bytes
    signal: ThreadSignal
    done: threading.Event = field(default_factory=threading.Event)
    error: ResponseError | None = None


LINGER = 10.0  # seconds a channel stays subscribed after its last waiter left
MAX_IDLE = 1024  # channels kept subscribed without a waiter, at most


class Listener(Channels):
    """The subscribed connection of one client (``params``, the core's RESP reader/encoders;
    ``runner``, the client, runs :meth:`abandon`) and its reader thread. The waiter table and
    the subscription state are shared under one mutex by every thread (:meth:`join`,
    :meth:`listen`, :meth:`leave`, :meth:`abandon`); the socket is the reader thread's alone."""

    _table: WaiterTable[ThreadSignal]

    def __init__(
        self, params: ConnectionParams, core: Any, runner: Runner | None = None, **kind: bool
    ) -> None:
        super().__init__(params, core, runner, **kind)
        self.pid = os.getpid()
        self._mutex = threading.Lock()
        self._requests: deque[tuple[Any, ...]] = deque()
        self._thread: threading.Thread | None = None
        self._poke_r: socket.socket | None = None
        self._poke_w: socket.socket | None = None
        # Under the mutex:
        self._confirmed: set[bytes] = set()  # channels whose SUBSCRIBE the server confirmed
        self._asked: set[bytes] = set()  # channels with a SUBSCRIBE queued or awaiting its reply
        self._joining: dict[bytes, list[_Join]] = {}  # waiters awaiting those replies
        self._idle: dict[bytes, float] = {}  # subscribed channels without a waiter: since when
        # The reader thread's alone:
        self._sock: socket.socket | None = None
        self._outstanding: dict[bytes, int] = {}  # SUBSCRIBE replies awaited, by channel
        self._rewake = False  # wake every waiter once the reconnect's subscriptions are confirmed
        self._retry_at = 0.0

    def joins(self, channel: bytes) -> bool:
        """Whether ``channel`` has waiters of this client, its subscription confirmed: a new
        waiter joins them before its first attempt (which queues it). A channel lingering
        without waiters does not count: an acquire that finds the lock free needs no queue.
        Read without the mutex: a waiter told wrong by a racing thread waits the other way."""
        return channel in self._confirmed and self._table.has(channel)

    def join(self, channel: bytes, job: str = "") -> ThreadSignal | None:
        """A new waiter on ``channel`` if its subscription is confirmed already (no I/O, the
        reader is not woken), else ``None`` (enter with :meth:`listen`)."""
        with self._mutex:
            if channel not in self._confirmed:
                return None
            self._idle.pop(channel, None)
            return self._table.entered(channel, ThreadSignal(job))

    def listen(self, channel: bytes, job: str = "") -> ThreadSignal:
        """A new waiter on ``channel`` once the server has confirmed the subscription (or after
        ``connect_timeout`` without it: the waiter then re-checks every
        :data:`~fastlock.locks.notify.MAX_NAP`; a routed listener's leaves, ``lost``). An error
        reply to the handshake or the subscription raises it."""
        signal = ThreadSignal(job)
        with self._mutex:
            self._table.add(channel, signal)
            if channel in self._confirmed:
                self._idle.pop(channel, None)
                return signal
            if self._closed:
                return signal
            join = _Join(channel, signal)
            self._joining.setdefault(channel, []).append(join)
            ask = channel not in self._asked
            self._asked.add(channel)
        if ask:
            self._submit(("subscribe", channel))
        join.done.wait(self._params.connect_timeout)
        if join.error is not None:
            raise join.error
        if self._routed:
            with self._mutex:
                if channel not in self._confirmed:  # it enters again after its nap
                    self._table.remove(channel, signal)
                    signal.lost = True
        return signal

    def leave(self, channel: bytes, signal: ThreadSignal) -> None:
        """The waiter is done (served, timed out or interrupted)."""
        with self._mutex:
            if self._table.remove(channel, signal) is None or channel not in self._confirmed:
                return
            idle = self._idle
            idle[channel] = time.monotonic()  # subscribed still, for LINGER
            first = len(idle) == 1
        if first:
            self._submit(("linger",))  # the reader's select learns the deadline

    def abandon(self, call: Any) -> None:
        """Run ``call`` (a ``Call``) for a waiter leaving on an exception, its failure logged."""
        if self._runner is None or self._closed:
            return
        try:
            self._runner.call(call.name, call.keys, call.args)
        except Exception as error:  # noqa: BLE001 - the waiter's own exception goes on
            logger.warning("a leaving lock waiter's release failed: %r", error)

    def close(self) -> None:
        """Stop the reader thread and close the connection (a fork's child: its descriptors)."""
        self._closed = True
        if self.pid != os.getpid():
            self.forsake()
            return
        thread = self._thread
        if thread is None:
            return
        self._submit(("close",))
        if thread is not threading.current_thread():
            thread.join(self._params.connect_timeout)

    def drop(self) -> None:
        """Close the connection, the listener kept (a routed one's waiters enter again elsewhere)."""
        if self._thread is not None:
            self._submit(("drop",))

    def forsake(self) -> None:
        """In a fork's child: close the inherited descriptors without any I/O on them."""
        for sock in (self._sock, self._poke_r, self._poke_w):
            if sock is not None:
                sock.close()

    def _submit(self, request: tuple[Any, ...]) -> None:
        """Queue ``request`` for the reader thread (started if need be) and poke it."""
        if self._thread is None:
            with self._mutex:
                if self._thread is None:
                    if self._closed:
                        return
                    self._poke_r, self._poke_w = socket.socketpair()
                    self._poke_r.setblocking(False)
                    self._poke_w.setblocking(False)
                    thread = threading.Thread(target=self._run, name="fastlock-listener", daemon=True)
                    thread.start()
                    self._thread = thread
        self._requests.append(request)
        with contextlib.suppress(OSError):  # full (the reader has pokes to read already) or closed
            self._poke_w.send(b"\0")  # type: ignore[union-attr]

    def _run(self) -> None:
        poke = self._poke_r
        assert poke is not None
        try:
            while True:
                now = time.monotonic()
                if self._sock is None and self._asked and now >= self._retry_at:
                    self._connect()
                sock = self._sock
                if sock is None:
                    nap = max(0.0, self._retry_at - now) if self._asked else None
                    ready = select.select([poke], [], [], nap)[0]
                else:
                    ready = select.select([poke, sock], [], [], self._linger(now))[0]
                if poke in ready:
                    with contextlib.suppress(OSError):  # drained
                        while poke.recv(4096):
                            pass
                    if not self._serve():
                        return
                if sock is not None and sock in ready and sock is self._sock:
                    self._receive(sock)
        finally:
            self._drop()
            with self._mutex:
                self._wake_all()
                self._release_joins()
            poke.close()
            if self._poke_w is not None:
                self._poke_w.close()

    def _linger(self, now: float) -> float | None:
        """Unsubscribe channels idle for LINGER (past MAX_IDLE, the oldest): seconds to the next."""
        gone: list[tuple[Any, ...]] = []
        with self._mutex:
            idle = self._idle
            while idle:
                channel, since = next(iter(idle.items()))  # the oldest
                if since + LINGER > now and len(idle) <= MAX_IDLE:
                    break
                del idle[channel]
                self._confirmed.discard(channel)
                gone.append(self._table.unsubscribe(channel))
            due = next(iter(idle.values()), None)
        self._send(gone)
        return None if due is None else max(0.0, due + LINGER - now)

    def _serve(self) -> bool:
        """Handle the queued requests; False on ``close``."""
        requests, commands = self._requests, []
        while requests:
            request = requests.popleft()
            kind = request[0]
            if kind == "subscribe":
                channel = request[1]
                if self._sock is None and time.monotonic() < self._retry_at:
                    with self._mutex:  # no connection for now: the waiter re-checks every MAX_NAP
                        self._asked.discard(channel)
                        self._joined(channel)
                elif self._sock is not None:
                    self._outstanding[channel] = self._outstanding.get(channel, 0) + 1
                    commands.append(self._table.subscribe(channel))
            elif kind == "drop":
                self._lost()
            elif kind == "close":
                return False
        self._send(commands)
        return True

    def _connect(self) -> None:
        """Open the connection; its handshake and every channel's SUBSCRIBE in one write."""
        params = self._params
        try:
            sock = open_socket(params)
        except OSError:
            self._retry_at = time.monotonic() + MAX_NAP
            with self._mutex:
                self._release_joins()
            return
        sock.settimeout(params.socket_timeout or params.connect_timeout)
        self._sock, self._reader = sock, self._core.ReplyReader()
        with self._mutex:
            channels = list(dict.fromkeys([*self._table.channels(), *self._asked]))
            self._asked.update(channels)
        self._outstanding = dict.fromkeys(channels, 1)
        self._rewake = self._retry_at > 0  # a reconnect: releases meanwhile went unheard
        self._send(self._greeting([self._table.subscribe(channel) for channel in channels]))

    def _send(self, commands: list[tuple[Any, ...]]) -> None:
        sock = self._sock
        if sock is not None and commands:
            try:
                sock.sendall(self._core.encode_pipeline(commands))
            except OSError:
                self._lost()

    def _receive(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
            if isinstance(sock, ssl.SSLSocket):
                while sock.pending():
                    data += sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._lost()
            return
        try:
            replies, error = self._replies(data)
        except ProtocolError:
            self._lost()
            return
        with self._mutex:
            for reply in replies:
                self._on_reply(reply)
        if error is not None:
            self._refused(error)

    def _on_reply(self, reply: Any) -> None:
        """One reply of the subscribed connection (under the mutex)."""
        news = self._table.on_reply(reply)  # a message hands a waiter its lock
        if news is None:
            return
        confirmed, channel = news
        if not confirmed:  # dropped by the server (the slot moved): its waiters forgotten
            self._confirmed.discard(channel)
            self._idle.pop(channel, None)
            return
        left = self._outstanding.get(channel, 0) - 1
        if left > 0:
            self._outstanding[channel] = left
            return
        self._outstanding.pop(channel, None)
        self._asked.discard(channel)
        self._confirmed.add(channel)
        if not self._table.has(channel):
            self._idle.setdefault(channel, time.monotonic())  # its waiters left meanwhile
        self._joined(channel)
        if self._rewake and not self._outstanding:
            self._rewake = False
            self._table.wake_all()

    def _refused(self, reply: ResponseError) -> None:
        """An error reply (handshake, SUBSCRIBE) to the waiters entering (a routed listener's
        subscription: a loss); connected again later."""
        with self._mutex:
            for joins in self._joining.values() if not self._moved() else ():
                for join in joins:
                    self._table.remove(join.channel, join.signal)
                    join.error = reply
            self._asked.clear()
        self._lost()

    def _lost(self) -> None:
        self._drop()
        self._retry_at = time.monotonic() + MAX_NAP
        with self._mutex:
            self._confirmed.clear()
            self._idle.clear()
            self._wake_all()
            self._release_joins()
            self._asked = set(self._table.channels())  # subscribed again at the reconnect

    def _joined(self, channel: bytes) -> None:
        """The waiters entering ``channel`` go on (under the mutex)."""
        for join in self._joining.pop(channel, ()):
            join.done.set()

    def _release_joins(self) -> None:
        """The waiters entering go on unsubscribed (they re-check every MAX_NAP; under the mutex)."""
        for channel in list(self._joining):
            self._joined(channel)

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock, self._outstanding = None, {}
