"""``call`` for the clients whose call path is chosen per client: ``self._call`` (the asyncio
cluster client's: the path its ``wait`` chose; awaited), and the meta values it asks for.

``aio/script_calls.py`` is the source of the sync ``sync/script_calls.py``
(``tools/async_to_sync.py`` writes it), where ``self._call`` is the core's ``ScriptCaller.call``
(:class:`~fastlock.Client`) or ``SlotRouter.call`` (:class:`~fastlock.cluster.ClusterClient`)
and :meth:`_bind_call` makes ``client.call`` that core method itself, with no Python frame
(unless a subclass overrides ``call``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ..operations import Operation
from ..scripts.calling import ScriptSettings, meta_values, read_server_version
from ..scripts.registry import Script, ScriptRegistry

__all__ = ["AsyncScriptCalls"]

T = TypeVar("T")


class AsyncScriptCalls:
    """``call`` as ``self._call`` (see the module docstring); :meth:`_with_meta` appends a
    script's ``#meta`` values."""

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
        """Make ``self.call`` be ``self._call`` (the same arguments and reply), unless the
        class overrides :meth:`call` (asyncio: nothing to bind, ``call`` awaits ``self._call``)."""
        if True:  # ASYNC
            pass
        else:
            if type(self).call is AsyncScriptCalls.call:
                vars(self)["call"] = self._call

    async def _with_meta(self, script: Script, args: Sequence[Any]) -> list[Any]:
        """``args`` and the values of ``script``'s ``#meta`` fields (the server version read
        first if needed and not known)."""
        settings = self.script_settings
        if settings.server_version is None and "server_version" in script.meta:
            await self.run(read_server_version(settings))
        return [*args, *meta_values(script, settings)]
