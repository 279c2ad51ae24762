"""The script-call policy, written once for every transport (sans-IO: steps, no socket or sleep).

A call runs by ``EVALSHA``; a transport sends it directly (the hot path), appends
:func:`meta_values` when the script declares ``#meta`` fields and records the call with
:func:`record_call`. When the ``EVALSHA`` gets an error reply, the transport runs
:func:`recover`, an :data:`~fastlock.operations.Operation`:

- ``NOSCRIPT`` (restart, failover, ``SCRIPT FLUSH``; a script cannot return that reply:
  :func:`~fastlock.scripts.registry.guard` raises it instead) means the script did not run:
  ``SCRIPT LOAD`` and ``EVALSHA`` are sent again in one write, at most :data:`MAX_RELOADS`
  times per call;
- ``BUSY`` (another script runs past ``busy-reply-threshold``) is retried after jittered
  exponential sleeps until the call's ``busy_timeout``, then
  :class:`~fastlock.ScriptBusyError`; ``SCRIPT KILL`` (or ``FUNCTION KILL``) is sent once the
  call has waited ``kill_busy_after``, if set;
- any other error reply becomes a :class:`~fastlock.LuaError` report
  (:func:`~fastlock.scripts.errors.lua_error`).

A failed call is counted with :func:`record_failure`. Warm-up loading is
:func:`load_commands` sent in one write, its replies checked by :func:`check_loaded`.
What every client offers alike: :class:`ScriptSettingsAccess` (the settings as attributes,
the counters) and :func:`register`.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import metrics
from ..exceptions import (
    BusyError,
    NoScriptError,
    NotBusyError,
    ResponseError,
    ScriptBusyError,
    UnkillableError,
)
from ..operations import Command, Commands, Operation, Sleep
from .errors import lua_error
from .registry import Script, ScriptCounters, ScriptRegistry, ScriptStats

__all__ = [
    "BUSY_FIRST_DELAY",
    "BUSY_MAX_DELAY",
    "MAX_RELOADS",
    "ScriptSettings",
    "ScriptSettingsAccess",
    "check_loaded",
    "kill_busy_script",
    "load_commands",
    "meta_values",
    "call_recorder",
    "read_server_version",
    "record_call",
    "record_failure",
    "recover",
    "register",
]

MAX_RELOADS = 3
"""Most ``SCRIPT LOAD`` + ``EVALSHA`` retries one call makes after ``NOSCRIPT``."""
BUSY_FIRST_DELAY = 0.002
"""Longest first sleep (seconds) after a ``BUSY`` reply; each later one may be twice as long."""
BUSY_MAX_DELAY = 0.1
"""Longest sleep (seconds) between two tries while the server is busy."""

_log = logging.getLogger("fastlock.scripts")


@dataclass(slots=True)
class ScriptSettings:
    """The script-call policy a transport holds: ``busy_timeout`` (seconds) bounds the wait
    while the server is busy with another script; ``kill_busy_after`` (seconds, ``None``:
    never) sends ``SCRIPT KILL`` once a call has waited that long; ``debug`` and
    ``max_history`` are passed to scripts that declare them, and ``debug`` logs each call;
    ``server_version`` caches the server's ``redis_version`` (``None``: not read yet, or
    forgotten after a ``NOSCRIPT``, as the server may have changed)."""

    busy_timeout: float = 5.0
    kill_busy_after: float | None = None
    debug: bool = False
    max_history: int = 1000
    server_version: str | None = None


_META_VALUES: dict[str, Callable[[Script, ScriptSettings], Any]] = {
    "now": lambda script, settings: time.time(),
    "debug": lambda script, settings: settings.debug,
    "max_history": lambda script, settings: settings.max_history,
    "script_name": lambda script, settings: script.name,
    "server_version": lambda script, settings: settings.server_version,
}


def meta_values(script: Script, settings: ScriptSettings) -> list[Any]:
    """The values of ``script``'s ``#meta`` fields, appended to its arguments. Run
    :func:`read_server_version` first when the script declares ``server_version`` and
    ``settings.server_version`` is ``None``."""
    return [_META_VALUES[field](script, settings) for field in script.meta]


def read_server_version(settings: ScriptSettings) -> Operation[str]:
    """The server's ``redis_version`` (Valkey: its Redis compatibility version), read by
    ``INFO server`` unless ``settings`` has it cached, and cached there."""
    version = settings.server_version
    if version is None:
        info = yield Command(("INFO", "server"))
        version = settings.server_version = info.decode().partition("redis_version:")[2].split()[0]
    return version


def observed_calls(
    observer: metrics.Observer | None,
) -> tuple[Callable[[], Any], str, Callable[[str, float], None]] | None:
    """What a client made now reports each call with: ``(gate, key, on_call)``, calling
    ``on_call(name, seconds)`` while ``gate().get(key)`` is not ``None``, for a
    :attr:`~fastlock.metrics.Observer.per_call` observer; ``None`` for any other."""
    if observer is None or not observer.per_call:
        return None
    gate, key = observer.call_gate() or (_OPEN_GATE.copy, "open")
    return gate, key, observer.script_call


def call_recorder(
    observer: metrics.Observer | None = None,
) -> Callable[[Script, ScriptSettings, float], None]:
    """How a client records a call that succeeded: its duration counted (folded every
    ``ScriptStats.FOLD_AT`` calls), logged when debugging and reported as
    :func:`observed_calls` says (the core's ``ScriptCaller.observe`` does that in C)."""
    fold_at = ScriptStats.FOLD_AT
    gate, key, on_call = observed_calls(observer) or (None, "", None)

    def record_call(script: Script, settings: ScriptSettings, seconds: float) -> None:
        stats = script.stats
        durations = stats.durations
        durations.append(seconds)
        if len(durations) >= fold_at:
            stats.fold()
        if settings.debug:
            _log.debug("script %s took %.3f ms", script.name, seconds * 1e3)
        if gate is not None and gate().get(key) is not None:
            on_call(script.name, seconds)  # type: ignore[misc]  # (set with the gate)

    return record_call


_OPEN_GATE = {"open": True}
record_call = call_recorder()
"""Count a call of a script that succeeded after some seconds (and log it when debugging)."""


def record_failure(script: Script, settings: ScriptSettings, seconds: float, failure: BaseException) -> None:
    """Count a call of ``script`` that raised ``failure`` after ``seconds`` (and log it when debugging)."""
    script.stats.record_error(seconds)
    observer = metrics.observer
    if observer is not None:
        observer.script_failed(script.name, seconds, type(failure).__name__)
    if settings.debug:
        _log.debug("script %s failed after %.3f ms: %r", script.name, seconds * 1e3, failure)


def recover(
    script: Script,
    keys: Sequence[Any],
    args: Sequence[Any],
    error: ResponseError,
    started: float,
    settings: ScriptSettings,
    busy_timeout: float | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> Operation[Any]:
    """The rest of a call of ``script`` whose ``EVALSHA`` (``args`` with the meta values
    appended) got error reply ``error``; ``started`` is the call's start on ``clock``,
    ``busy_timeout`` overrides the settings' one. Returns the script's reply."""
    reloads = 0
    delay = BUSY_FIRST_DELAY
    kill_after = settings.kill_busy_after
    evalsha = ("EVALSHA", script.sha, len(keys), *keys, *args)
    while True:
        if isinstance(error, NoScriptError) and reloads < MAX_RELOADS:
            reloads += 1
            script.stats.record_reload()
            if (observer := metrics.observer) is not None:
                observer.script_reloaded(script.name)
            settings.server_version = None
            loaded, reply = yield Commands([("SCRIPT", "LOAD", script.body), evalsha])
            if isinstance(loaded, ResponseError) and not isinstance(loaded, BusyError):
                raise lua_error(loaded, script) from None  # e.g. it does not compile
            if not isinstance(reply, ResponseError):
                return reply
            error = reply
            continue
        if not isinstance(error, BusyError):
            raise lua_error(error, script) from None
        waited = clock() - started
        timeout = settings.busy_timeout if busy_timeout is None else busy_timeout
        if waited >= timeout:
            raise ScriptBusyError(error.text, script=script.name, waited=waited) from None
        if kill_after is not None and waited >= kill_after:
            kill_after = None
            if (yield from kill_busy_script(error)):
                delay = 0.0
        pause = min(random.uniform(delay / 2, delay), timeout - waited)
        if (observer := metrics.observer) is not None:
            observer.busy_waited(script.name, pause)
        yield Sleep(pause)
        delay = min(max(delay * 2, BUSY_FIRST_DELAY), BUSY_MAX_DELAY)
        try:
            return (yield Command(evalsha))
        except ResponseError as retry_error:
            error = retry_error


def kill_busy_script(busy: BusyError) -> Operation[bool]:
    """Send the kill the BUSY reply names; returns True when the server is no longer busy."""
    command = ("FUNCTION", "KILL") if "FUNCTION KILL" in busy.text else ("SCRIPT", "KILL")
    try:
        yield Command(command)
    except NotBusyError:
        return True
    except UnkillableError:
        _log.warning("%s refused: the busy script has written; waiting for it", " ".join(command))
        return False
    _log.warning("sent %s to end another client's long-running script", " ".join(command))
    return True


def load_commands(scripts: Sequence[Script]) -> list[tuple[Any, ...]]:
    """The ``SCRIPT LOAD`` commands that load ``scripts`` (warm-up), to send in one write."""
    return [("SCRIPT", "LOAD", script.body) for script in scripts]


def check_loaded(scripts: Sequence[Script], replies: Sequence[Any]) -> None:
    """Raise the :class:`~fastlock.LuaError` of the first script whose ``SCRIPT LOAD`` failed."""
    for script, reply in zip(scripts, replies, strict=True):
        if isinstance(reply, ResponseError):
            raise lua_error(reply, script)


def register(scripts: ScriptRegistry, source: str | bytes, name: str | None = None) -> Script:
    """Add ``source`` to ``scripts`` as ``name`` (default ``script_<sha1 prefix>``)."""
    text = source.decode() if isinstance(source, bytes) else source
    return scripts.add(name or f"script_{hashlib.sha1(text.encode()).hexdigest()[:16]}", text)


class ScriptSettingsAccess:
    """For a client holding its :class:`ScriptSettings` in ``script_settings`` and its
    scripts in ``scripts``: the four settings as attributes, and the call counters."""

    script_settings: ScriptSettings
    scripts: ScriptRegistry

    @property
    def debug(self) -> bool:
        return self.script_settings.debug

    @debug.setter
    def debug(self, value: bool) -> None:
        self.script_settings.debug = value

    @property
    def max_history(self) -> int:
        return self.script_settings.max_history

    @max_history.setter
    def max_history(self, value: int) -> None:
        self.script_settings.max_history = value

    @property
    def busy_timeout(self) -> float:
        return self.script_settings.busy_timeout

    @busy_timeout.setter
    def busy_timeout(self, value: float) -> None:
        self.script_settings.busy_timeout = value

    @property
    def kill_busy_after(self) -> float | None:
        return self.script_settings.kill_busy_after

    @kill_busy_after.setter
    def kill_busy_after(self, value: float | None) -> None:
        self.script_settings.kill_busy_after = value

    def script_stats(self) -> dict[str, ScriptCounters]:
        """Counters of every script rendered so far, by name."""
        return {name: script.stats.snapshot() for name, script in self.scripts.loaded.items()}
