"""``Client.call`` and a pipeline's queue in pure Python: the twins of the Cython
``_coreparts/call.pxi`` (``ScriptCaller``, ``SlotRouter``) and ``_coreparts/call_batch.pxi``
(``CommandQueue``), in the same steps, writing with the encoders of :mod:`fastlock._coreparts.resp_py`."""

from __future__ import annotations

from collections.abc import Callable
from time import monotonic
from typing import Any, final

from ..exceptions import ConnectionError, ResponseError
from .resp_py import encode_command, evalsha_head, put_command, put_evalsha

__all__ = ["CommandQueue", "ScriptCaller", "SlotRouter"]


class _Entry:
    """What a call of one script needs, read once (the twin of ``_coreparts/call.pxi``'s)."""

    __slots__ = ("durations", "eval", "head", "loaded", "meta", "script", "sha")

    def __init__(self, script: Any) -> None:
        self.script = script
        self.sha = script.sha
        self.head = evalsha_head(self.sha)
        self.durations: list[float] = script.stats.durations
        self.meta = bool(script.meta)
        self.loaded = False
        self.eval: bytes | None = None


class _Scripts:
    """The scripts a caller runs by name, an ``_Entry`` per name called (the twin of
    ``_coreparts/call.pxi``'s)."""

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
    """The twin of the Cython core's ``ScriptCaller`` (``_coreparts/call.pxi``): runs script
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
        self._gate: Callable[[], Any] | None = None
        self._gate_key = ""
        self._on_call: Callable[[str, float], None] | None = None

    def use(self, scripts: Any, settings: Any) -> None:
        """Run the scripts of ``scripts`` with ``settings`` from now on."""
        self._scripts = _Scripts(scripts, settings, self._scripts.with_meta)

    def observe(
        self, gate: Callable[[], Any] | None, key: str, on_call: Callable[[str, float], None] | None
    ) -> None:
        """From now on, after each call that succeeded, ``on_call(name, seconds)`` while
        ``gate().get(key)`` is not ``None`` (``gate`` ``None``: never; a tracer's observer)."""
        self._gate, self._gate_key, self._on_call = gate, key, on_call

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
                conn = pool.revive(conn)
        try:
            result = conn._evalsha(entry.sha, keys, args, entry.head)
        except BaseException as exc:  # noqa: BLE001 - recovered or re-raised by failed()
            result = self._failed(conn, exc, entry.script, keys, args, start, busy_timeout)
        else:
            if conn.broken or conn.generation != pool.generation:  # closed: a new generation
                pool.put(conn)
            else:
                self._idle.append(conn)
                if pool.waiters:
                    pool.wakeups.put(None)
        seconds = monotonic() - start
        durations = entry.durations
        if settings.debug or len(durations) + 1 >= self._fold_at:
            self._record(entry.script, settings, seconds)
        else:
            durations.append(seconds)
        if self._gate is not None and self._gate().get(self._gate_key) is not None:
            self._on_call(entry.script.name, seconds)  # type: ignore[misc]  # (set with the gate)
        return result


@final
class SlotRouter:
    """The twin of the Cython core's ``SlotRouter`` (``_coreparts/call.pxi``): routes a call of
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


@final
class CommandQueue:
    """The twin of the Cython core's ``CommandQueue`` (``_coreparts/call_batch.pxi``): commands
    and script calls encoded as they are queued, for ``Connection.send_batch``."""

    def __init__(self, caller: ScriptCaller, owner: Any) -> None:
        self._table = caller._scripts
        self._owner = owner
        self._out: list[bytes] = []
        self._scripts: list[Any] = []
        self._keys: list[Any] = []
        self._args: list[Any] = []
        self._evals: list[tuple[int, _Entry]] = []

    def __len__(self) -> int:
        return len(self._scripts)

    def call(self, name: str, keys: Any = (), args: Any = ()) -> Any:
        """Queue a call of script ``name`` with ``keys`` and ``args`` (``EVALSHA``)."""
        table = self._table
        entry = table.named(name)
        keys = keys if type(keys) in (tuple, list) else tuple(keys)
        args = args if type(args) in (tuple, list) else tuple(args)
        sent = table.with_meta(entry.script, args) if entry.meta else args
        head = entry.head if entry.loaded else self._head(entry)
        out: list[bytes] = []
        try:
            put_evalsha(out, entry.sha, keys, sent, head, len(self._scripts))
        except BaseException:
            if head is not entry.head:
                self._evals.pop()
            raise
        self._out += out
        self._scripts.append(entry.script)
        self._keys.append(keys)
        self._args.append(args)
        return self._owner

    def _head(self, entry: _Entry) -> bytes:
        """The head of a call of a script not seen loaded: ``EVAL`` for its first call in
        the batch, else EVALSHA."""
        for _, queued in self._evals:
            if queued is entry:
                return entry.head
        if entry.eval is None:  # ``EVAL`` and the body: what replaces the EVALSHA head
            entry.eval = encode_command("EVAL", entry.script.body)[len(b"*2\r\n") :]
        self._evals.append((len(self._scripts), entry))
        return entry.eval

    def evals(self) -> list[int]:
        """The indices of the calls sent as ``EVAL``."""
        return [i for i, _ in self._evals]

    def set_loaded(self, i: int, loaded: bool) -> None:
        """Whether the script of call ``i`` is held by the server."""
        call = self.call_at(i)
        if call is not None:
            self._table.of(call[0]).loaded = loaded

    def command(self, args: tuple[Any, ...]) -> Any:
        """Queue command ``args``."""
        if not isinstance(args, tuple):
            raise TypeError(f"Argument 'args' has incorrect type (expected tuple, got {type(args).__name__})")
        out: list[bytes] = []
        put_command(out, args, len(self._scripts))
        self._out += out
        self._scripts.append(None)
        self._keys.append(None)
        self._args.append(None)
        return self._owner

    def call_at(self, i: int) -> tuple[Any, Any, Any] | None:
        """``(script, keys, args)`` of item ``i`` if it is a script call, else ``None``."""
        script = self._scripts[i]
        return None if script is None else (script, self._keys[i], self._args[i])

    def errors(self, replies: list[Any]) -> list[int]:
        """The indices of the error replies in ``replies``."""
        return [i for i, reply in enumerate(replies) if isinstance(reply, ResponseError)]

    def clear(self) -> None:
        """Drop what was queued."""
        del self._out[:], self._scripts[:], self._keys[:], self._args[:], self._evals[:]
