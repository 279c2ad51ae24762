"""The blocking connection in pure Python: the twin of the Cython ``_coreparts/conn.pxi``,
writing with the encoders of :mod:`fastlock._coreparts.resp_py` and reading with its
reader."""

from __future__ import annotations

import builtins
import socket
from collections.abc import Iterable, Sequence
from time import monotonic
from typing import Any, final

from ..exceptions import OUT_OF_STEP, ConnectionError, ProtocolError, ResponseError, TimeoutError
from .resp_py import NOT_ENOUGH, ReplyReader, put_command, put_evalsha, put_pipeline

__all__ = ["Connection"]

_READ_SIZE = 65536
_TIMEOUTS = (builtins.TimeoutError, BlockingIOError)


@final
class Connection:
    """One socket to one server, driven through the socket's Python methods.

    Plain sockets are blocking with SO_SNDTIMEO/SO_RCVTIMEO timeouts (so one ``send``
    and one ``recv`` syscall per command); TLS sockets use their own timeout. Bytes left
    in the reader after a command's reply(ies) close the connection: ``ProtocolError``.
    ``round_trips`` counts the writes sent (a pipeline is one); it, ``sock`` and ``broken``
    are read-only, as in the Cython core.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._broken = False
        self.last_used = 0.0  # time.monotonic() of the last reply read
        self.generation = 0
        self._round_trips = 0
        self._reader = ReplyReader()
        self._in = bytearray(_READ_SIZE)

    @property
    def sock(self) -> socket.socket:
        return self._sock

    @property
    def broken(self) -> bool:
        return self._broken

    @property
    def round_trips(self) -> int:
        return self._round_trips

    def close(self) -> None:
        """Close the socket; the connection cannot be used again."""
        self._broken = True
        self._sock.close()

    def _usable(self) -> None:
        if self._broken:
            raise ConnectionError("connection is closed", sent=False)

    def _lost(self, exc: OSError, what: str, sent: bool) -> ConnectionError:
        self.close()
        cls = TimeoutError if isinstance(exc, _TIMEOUTS) else ConnectionError
        return cls(f"{what}: {exc}", sent=sent)

    def _flush(self, payload: bytes) -> None:
        self._round_trips += 1
        view = memoryview(payload)
        total = 0
        try:
            while total < len(view):
                total += self._sock.send(view[total:])
        except OSError as exc:
            raise self._lost(exc, "send failed", total > 0) from None

    def _read_reply(self) -> Any:
        reader = self._reader
        try:
            reply = reader.gets()
            while reply is NOT_ENOUGH:
                try:
                    n = self._sock.recv_into(self._in)
                except OSError as exc:
                    raise self._lost(exc, "receive failed", True) from None
                if n == 0:
                    self.close()
                    raise ConnectionError("connection closed by the server", sent=True)
                reader._take(self._in, n)
                reply = reader.gets()
        except ProtocolError:
            self.close()
            raise
        self.last_used = monotonic()
        return reply

    def _check_drained(self) -> None:
        """Raise if anything follows the last reply read: the stream is out of step."""
        if self._reader.has_data():
            self.close()
            raise ProtocolError(OUT_OF_STEP)

    def _roundtrip(self, payload: bytes) -> Any:
        self._flush(payload)
        reply = self._read_reply()
        self._check_drained()
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    def execute(self, args: tuple[Any, ...]) -> Any:
        """Send one command and return its reply; an error reply is raised."""
        self._usable()
        out: list[bytes] = []
        put_command(out, args, -1)
        return self._roundtrip(b"".join(out))

    def evalsha(self, sha: Any, keys: Iterable[Any], args: Iterable[Any]) -> Any:
        """Run ``EVALSHA sha len(keys) *keys *args``; an error reply is raised."""
        return self._evalsha(sha, keys, args, None)

    def _evalsha(self, sha: Any, keys: Iterable[Any], args: Iterable[Any], head: bytes | None) -> Any:
        self._usable()
        out: list[bytes] = []
        put_evalsha(out, sha, keys, args, head)
        return self._roundtrip(b"".join(out))

    def pipeline(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Send commands in one write, read all replies; error replies are returned."""
        count = len(commands)
        self._usable()
        out: list[bytes] = []
        put_pipeline(out, commands)
        self._flush(b"".join(out))
        return self._read_replies(count)

    def send_batch(self, batch: Any) -> list[Any]:
        """Send the commands of ``batch`` (a ``CommandQueue``) in one write, read all replies; error
        replies are returned. The batch keeps them."""
        self._usable()
        self._flush(b"".join(batch._out))
        return self._read_replies(len(batch))

    def _read_replies(self, count: int) -> list[Any]:
        replies = [self._read_reply() for _ in range(count)]
        self._check_drained()
        return replies
