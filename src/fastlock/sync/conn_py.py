"""The blocking connection in pure Python: the twin of the Cython ``sync/conn.pxi``,
writing with the encoders of :mod:`fastlock.protocol.resp_py` and reading with its
reader."""

from __future__ import annotations

import builtins
import socket
from collections.abc import Callable, Iterable, Sequence
from time import monotonic
from typing import Any, final

from ..exceptions import OUT_OF_STEP, ConnectionError, ProtocolError, ResponseError, TimeoutError
from ..protocol.resp_py import NOT_ENOUGH, ReplyReader, put_command, put_evalsha, put_pipeline

__all__ = ["Connection", "ScriptCaller", "SlotRouter"]

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
                reader.feed(self._in, 0, n)
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
        self._usable()
        out: list[bytes] = []
        put_evalsha(out, sha, keys, args)
        return self._roundtrip(b"".join(out))

    def pipeline(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Send commands in one write, read all replies; error replies are returned."""
        count = len(commands)
        self._usable()
        out: list[bytes] = []
        put_pipeline(out, commands)
        self._flush(b"".join(out))
        replies = [self._read_reply() for _ in range(count)]
        self._check_drained()
        return replies


class _Entry:
    """What a call of one script needs, read once (the twin of ``sync/call.pxi``'s)."""

    __slots__ = ("durations", "meta", "script", "sha")

    def __init__(self, script: Any) -> None:
        self.script = script
        self.sha = script.sha
        self.durations: list[float] = script.stats.durations
        self.meta = bool(script.meta)


class _Scripts:
    """The scripts a caller runs by name, an ``_Entry`` per name called (the twin of
    ``sync/call.pxi``'s)."""

    __slots__ = ("entries", "registry", "settings", "with_meta")

    def __init__(self, registry: Any, settings: Any, with_meta: Callable[..., Any]) -> None:
        self.registry = registry
        self.settings = settings
        self.with_meta = with_meta
        self.entries: dict[Any, _Entry] = {}

    def named(self, name: Any) -> _Entry:
        entry = self.entries.get(name)
        if entry is None:
            entry = self.entries[name] = _Entry(self.registry.get(name))
        return entry

    def of(self, script: Any) -> _Entry:
        """The entry of a script object (another registry's: a fresh one)."""
        entry = self.entries.get(script.name)
        return _Entry(script) if entry is None or entry.script is not script else entry


@final
class ScriptCaller:
    """The twin of the Cython core's ``ScriptCaller`` (``sync/call.pxi``): runs script
    ``name`` on a connection of ``pool`` and records the call's duration, in the same steps."""

    def __init__(
        self,
        pool: Any,
        scripts: Any,
        settings: Any,
        with_meta: Callable[..., Any],
        failed: Callable[..., Any],
        record: Callable[..., Any],
        fold_at: int,
    ) -> None:
        self._pool = pool
        self._idle = pool.idle_connections
        self._scripts = _Scripts(scripts, settings, with_meta)
        self._failed = failed
        self._record = record
        self._fold_at = fold_at

    def use(self, scripts: Any, settings: Any) -> None:
        """Run the scripts of ``scripts`` with ``settings`` from now on."""
        self._scripts = _Scripts(scripts, settings, self._scripts.with_meta)

    def call(self, name: str, keys: Any = (), args: Any = (), *, busy_timeout: float | None = None) -> Any:
        """Run script ``name`` with ``keys`` and ``args`` (see ``Client.call``)."""
        scripts = self._scripts
        entry = scripts.named(name)
        if entry.meta:
            args = scripts.with_meta(entry.script, args)
        return self._run(entry, keys, args, scripts.settings, busy_timeout)

    def call_script(
        self, script: Any, keys: Any, args: Any, settings: Any, busy_timeout: float | None
    ) -> Any:
        """Run ``script`` with ``args`` as sent (its meta values included)."""
        return self._run(self._scripts.of(script), keys, args, settings, busy_timeout)

    def _run(self, entry: _Entry, keys: Any, args: Any, settings: Any, busy_timeout: float | None) -> Any:
        start = monotonic()
        pool = self._pool
        try:
            conn = self._idle.pop()
        except IndexError:
            conn = pool.get(start)
        else:
            interval = pool.health_check_interval
            if interval is not None and start - conn.last_used >= interval:
                conn = pool._revive(conn)
        try:
            result = conn.evalsha(entry.sha, keys, args)
        except BaseException as exc:  # noqa: BLE001 - recovered or re-raised by failed()
            result = self._failed(conn, exc, entry.script, keys, args, start, busy_timeout)
        else:
            if conn.broken or pool._closed or conn.generation != pool._generation:
                pool.put(conn)
            else:
                self._idle.append(conn)
                if pool._waiters:
                    pool._wakeups.put(None)
        seconds = monotonic() - start
        durations = entry.durations
        if settings.debug or len(durations) + 1 >= self._fold_at:
            self._record(entry.script, settings, seconds)
        else:
            durations.append(seconds)
        return result


@final
class SlotRouter:
    """The twin of the Cython core's ``SlotRouter`` (``sync/call.pxi``): routes a call of
    script ``name`` to the ``ScriptCaller`` of the primary of its first key's slot, in the
    same steps."""

    def __init__(
        self,
        scripts: Any,
        settings: Any,
        with_meta: Callable[..., Any],
        slots: dict[Any, int],
        routes: list[Any],
        slot_of: Callable[[Any], int],
        route: Callable[[int], Any],
        failed: Callable[..., Any],
    ) -> None:
        self._scripts = _Scripts(scripts, settings, with_meta)
        self._slots = slots
        self._routes = routes
        self._slot_of = slot_of
        self._route = route
        self._failed = failed

    def call(self, name: str, keys: Any = (), args: Any = (), *, busy_timeout: float | None = None) -> Any:
        """Run script ``name`` with ``keys`` and ``args`` (see ``Client.call``)."""
        scripts = self._scripts
        entry = scripts.named(name)
        if entry.meta:
            args = scripts.with_meta(entry.script, args)
        slot = self._slots.get(keys[0]) if keys else None
        if slot is None:
            slot = self._slot_of(keys)
        caller = self._routes[slot]
        if caller is None:
            caller = self._route(slot)
        settings = scripts.settings
        try:
            return caller._run(entry, keys, args, settings, busy_timeout)
        except (ResponseError, ConnectionError) as exc:
            return self._failed(exc, slot, entry.script, keys, args, settings, busy_timeout)
