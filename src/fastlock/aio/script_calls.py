"""``call`` for the asyncio cluster client: ``await self._call(...)``, the path its ``wait``
chose, and the meta values that path asks for (the sync twin,
:class:`~fastlock.sync.script_calls.ScriptCalls`, binds the core's method instead)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ..operations import Operation
from ..scripts.calling import ScriptSettings, meta_values, read_server_version
from ..scripts.registry import Script, ScriptRegistry

__all__ = ["AsyncScriptCalls"]

T = TypeVar("T")


class AsyncScriptCalls:
    """``call`` as ``await self._call(...)``; :meth:`_with_meta` appends a script's ``#meta``
    values (the server version read first if needed and not known)."""

    scripts: ScriptRegistry
    script_settings: ScriptSettings
    _call: Callable[..., Awaitable[Any]]

    async def run(self, operation: Operation[T]) -> T:
        raise NotImplementedError

    async def call(
        self,
        name: str,
        keys: Sequence[Any] = (),
        args: Sequence[Any] = (),
        *,
        busy_timeout: float | None = None,
    ) -> Any:
        """Run script ``name`` with ``keys`` and ``args`` and return its reply.

        ``busy_timeout`` overrides the client's for this call. Raises a
        :class:`~fastlock.LuaError` when the script fails, :class:`~fastlock.ScriptBusyError`
        when the server stays busy, :class:`~fastlock.ScriptNotFoundError` for an unknown name.
        """
        return await self._call(name, keys, args, busy_timeout=busy_timeout)

    def _bind_call(self) -> None:
        """Nothing to bind (``call`` awaits ``self._call``): the hook the sync twin fills."""

    async def _with_meta(self, script: Script, args: Sequence[Any]) -> list[Any]:
        """``args`` and the values of ``script``'s ``#meta`` fields."""
        settings = self.script_settings
        if settings.server_version is None and "server_version" in script.meta:
            await self.run(read_server_version(settings))
        return [*args, *meta_values(script, settings)]
