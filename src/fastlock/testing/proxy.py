"""A fault-injecting TCP proxy: put it between a client and a local server to delay, hold,
drop or cut replies, or slip in unsolicited ones."""

from __future__ import annotations

import collections
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable

from ..exceptions import ArgumentError
from .servers import HOST

__all__ = ["TcpProxy"]


class _Link:
    """One proxied connection: client socket, upstream socket and the pending server->client chunks."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client, self.upstream = client, upstream
        self.pending: collections.deque[tuple[float, bytes]] = collections.deque()
        self.closed = False


class TcpProxy:
    """A 127.0.0.1 TCP proxy in front of a local server that can delay, hold, drop or cut replies.

    Per connection: one thread pumps client->server, one reads server->client chunks (stamped on arrival)
    and one writes them to the client once they are due (arrival + reply delay) and not held.
    """

    host = HOST

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        if upstream_host not in ("127.0.0.1", "localhost"):
            raise ArgumentError("TcpProxy only proxies to 127.0.0.1")
        self._upstream = (HOST, upstream_port)
        self._cond = threading.Condition()
        self._links: list[_Link] = []
        self._threads: list[threading.Thread] = []
        self._delay = 0.0
        self._held = False
        self._drop_next = False
        self._extra = b""
        self._closing = False
        self._listener = socket.socket()
        self._listener.bind((HOST, 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self._spawn(self._accept_loop)

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}"

    @property
    def connections(self) -> int:
        """Number of currently open proxied connections."""
        with self._cond:
            return sum(not link.closed for link in self._links)

    # ---- controls

    def set_reply_delay(self, seconds: float) -> None:
        """Delay every server->client chunk by `seconds` from its arrival at the proxy."""
        with self._cond:
            self._delay = seconds
            self._cond.notify_all()

    def hold_replies(self) -> None:
        """Buffer server->client bytes until release_replies()."""
        with self._cond:
            self._held = True

    def release_replies(self) -> None:
        """Let held replies through (each still waits for its reply delay)."""
        with self._cond:
            self._held = False
            self._cond.notify_all()

    def drop_next_reply(self) -> None:
        """When the next server->client chunk arrives, discard it and reset that client connection."""
        with self._cond:
            self._drop_next = True

    def append_to_next_reply(self, data: bytes) -> None:
        """Send `data` (an unsolicited reply) right after the next server->client chunk, in the same write."""
        with self._cond:
            self._extra = data

    def send_to_clients(self, data: bytes) -> None:
        """Send `data` (an unsolicited reply) now to every proxied client, between replies."""
        with self._cond:
            links = list(self._links)
        for link in links:
            link.client.sendall(data)

    def cut(self) -> None:
        """Abruptly close (RST) every current connection; new connections are still accepted."""
        with self._cond:
            links = list(self._links)
        for link in links:
            self._close_link(link, reset=True)

    def close(self) -> None:
        """Stop listening, reset all connections and join every thread."""
        with self._cond:
            self._closing = True
        _shutdown(self._listener)
        self._listener.close()
        self.cut()
        for thread in list(self._threads):
            thread.join(5)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._cond:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._upstream, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            link = _Link(client, upstream)
            with self._cond:
                if self._closing:
                    client.close()
                    upstream.close()
                    return
                self._links.append(link)
            self._spawn(self._pump_to_server, link)
            self._spawn(self._read_replies, link)
            self._spawn(self._write_replies, link)

    def _pump_to_server(self, link: _Link) -> None:
        try:
            while data := link.client.recv(65536):
                link.upstream.sendall(data)
        except OSError:
            pass
        self._close_link(link, reset=False)

    def _read_replies(self, link: _Link) -> None:
        while True:
            try:
                data = link.upstream.recv(65536)
            except OSError:
                data = b""
            with self._cond:
                if data and self._drop_next:
                    self._drop_next = False
                    drop = True
                else:
                    drop = False
                    if data and self._extra:
                        data, self._extra = data + self._extra, b""
                    link.pending.append((time.monotonic(), data))  # b"" marks upstream EOF
                    self._cond.notify_all()
            if drop:
                self._close_link(link, reset=True)
            if drop or not data:
                return

    def _write_replies(self, link: _Link) -> None:
        while True:
            with self._cond:
                while True:
                    if link.closed:
                        return
                    if link.pending and not self._held:
                        wait = link.pending[0][0] + self._delay - time.monotonic()
                        if wait <= 0:
                            data = link.pending.popleft()[1]
                            break
                        self._cond.wait(wait)
                    else:
                        self._cond.wait()
            if not data:
                self._close_link(link, reset=False)
                return
            try:
                link.client.sendall(data)
            except OSError:
                self._close_link(link, reset=True)
                return

    def _close_link(self, link: _Link, reset: bool) -> None:
        with self._cond:
            if link.closed:
                return
            link.closed = True
            self._links.remove(link)
            self._cond.notify_all()
        if reset:  # SO_LINGER 0: close() sends RST instead of FIN
            link.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        for sock in (link.client, link.upstream):
            _shutdown(sock)  # wakes this link's threads blocked in recv() so close() really releases
            sock.close()


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
