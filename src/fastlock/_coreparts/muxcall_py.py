"""``AsyncClient.call`` and ``AsyncClient.execute`` in pure Python: the twin of the Cython
``_coreparts/muxcall.pxi`` (``MuxCaller``), in the same steps, over the connections of
:mod:`fastlock._coreparts.aio_py` (``call`` and ``execute`` are ``async def`` coroutines here)."""

from __future__ import annotations

import math
from collections.abc import Callable, Coroutine
from time import monotonic
from typing import Any, final

from ..exceptions import ConnectionError, ResponseError, TimeoutError

__all__ = ["MuxCaller"]


@final
class MuxCaller:
    """The twin of the Cython core's ``MuxCaller`` (``_coreparts/muxcall.pxi``): ``call`` is
    a coroutine running script ``name`` on the least loaded connection of ``pool``, in the
    same steps."""

    def __init__(
        self,
        pool: Any,
        scripts: Any,
        settings: Any,
        with_meta: Callable[..., Any],
        slow: Callable[..., Any],
        failed: Callable[..., Any],
        record: Callable[..., Any],
        fold_at: int,
        timeout: float | None,
        refuse: Callable[[tuple[Any, ...]], None],
        again: Callable[..., Any],
    ) -> None:
        from .call_py import _Scripts

        self._refuse = refuse
        self._again = again
        self._pool = pool
        self._connections: list[Any] = pool.connections
        self._scripts = _Scripts(scripts, settings, with_meta)
        self._slow = slow
        self._failed = failed
        self._record = record
        self._fold_at = fold_at
        self._timeout = timeout
        self._gate: Callable[[], Any] | None = None
        self._gate_key = ""
        self._on_call: Callable[[str, float], None] | None = None

    def observe(
        self, gate: Callable[[], Any] | None, key: str, on_call: Callable[[str, float], None] | None
    ) -> None:
        """From now on, after each call that succeeded, ``on_call(name, seconds)`` while
        ``gate().get(key)`` is not ``None`` (``gate`` ``None``: never; a tracer's observer)."""
        self._gate, self._gate_key, self._on_call = gate, key, on_call

    def call(
        self,
        name: str,
        keys: Any = (),
        args: Any = (),
        *,
        busy_timeout: float | None = None,
        timeout: float | None = None,
    ) -> Coroutine[Any, Any, Any]:
        """A coroutine running script ``name`` with ``keys`` and ``args`` (see ``AsyncClient.call``)."""
        return self._call(name, keys, args, busy_timeout, timeout)

    async def _call(
        self, name: str, keys: Any, args: Any, busy_timeout: float | None, timeout: float | None
    ) -> Any:
        scripts = self._scripts
        entry = scripts.named(name)
        given = args
        if entry.meta:
            settings = scripts.settings
            if settings.server_version is None and "server_version" in entry.script.meta:
                return await self._slow(name, keys, args, busy_timeout, timeout)
            args = scripts.with_meta(entry.script, args)
        conn = self._pick()
        if conn is None:
            return await self._slow(name, keys, given, busy_timeout, timeout)
        within = self._timeout if timeout is None else timeout
        start = monotonic()
        deadline = math.nan if within is None else start + within
        future = None
        try:
            future = conn._send_evalsha(entry, keys, args, deadline)
            reply = await future
        except BaseException as exc:  # noqa: BLE001 - handed over (recorded or sent again there)
            if future is not None and not future.done():  # given up: never written, or its reply dropped
                future.cancel()
            return await self._failed(exc, entry.script, keys, args, start, busy_timeout, timeout)
        if isinstance(reply, ResponseError):
            return await self._failed(reply, entry.script, keys, args, start, busy_timeout, timeout)
        seconds = monotonic() - start
        durations = entry.durations
        settings = scripts.settings
        if settings.debug or len(durations) + 1 >= self._fold_at:
            self._record(entry.script, settings, seconds)
        else:
            durations.append(seconds)
        if self._gate is not None and self._gate().get(self._gate_key) is not None:
            self._on_call(entry.script.name, seconds)  # type: ignore[misc]  # (set with the gate)
        return reply

    def execute(self, *args: Any, timeout: float | None = None) -> Coroutine[Any, Any, Any]:
        """A coroutine running command ``args`` (see ``AsyncClient.execute``)."""
        return self._execute(args, timeout)

    async def _execute(self, args: tuple[Any, ...], timeout: float | None) -> Any:
        self._refuse(args)
        conn = self._pick()
        if conn is None:
            return await self._again(args, timeout, False)
        within = self._timeout if timeout is None else timeout
        deadline = math.nan if within is None else monotonic() + within
        try:
            future = conn._send_command(args, deadline)
        except ConnectionError as exc:  # a closed connection: nothing sent
            return await self._command_failed(exc, args, timeout)
        try:
            reply = await future
        except BaseException as exc:  # noqa: BLE001 - raised, or sent again if lost unwritten
            if not future.done():  # given up: never written, or its reply dropped
                future.cancel()
            return await self._command_failed(exc, args, timeout)
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    async def _command_failed(self, exc: BaseException, args: tuple[Any, ...], timeout: float | None) -> Any:
        """A command's failure: raised, or, lost before it was written, sent once more."""
        if isinstance(exc, ConnectionError) and not exc.sent and not isinstance(exc, TimeoutError):
            return await self._again(args, timeout, True)
        raise exc

    def _pick(self) -> Any:
        """The least loaded connection with room, or None."""
        best = None
        load = self._pool.max_in_flight
        for conn in self._connections:
            if conn.load < load:
                best, load = conn, conn.load
        return best
