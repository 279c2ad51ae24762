"""The refusal of connection-state commands: its cache of allowed names never lets a
refused command through and stays bounded."""

from __future__ import annotations

import pytest

import fastlock
from fastlock.protocol import commands
from fastlock.protocol.commands import refuse_connection_state


def test_allowed_names_are_cached_without_letting_a_refused_command_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(commands, "_ALLOWED", set())
    for allowed in (
        ("GET", "k"),
        (b"get", "k"),
        ("CLIENT", "ID"),
        ("Client", "GETNAME"),
        (bytearray(b"GET"), "k"),
    ):
        refuse_connection_state(allowed)
        refuse_connection_state(allowed)  # the second time from the cache
    assert {"GET", b"get"} == commands._ALLOWED  # CLIENT is looked at by subcommand, never cached
    for refused in (
        ("CLIENT", "REPLY", "OFF"),
        ("client", "setname", "x"),
        ("multi",),
        (b"EXEC",),
        (bytearray(b"exec"),),
    ):
        with pytest.raises(fastlock.ArgumentError, match="pooled connection"):
            refuse_connection_state(refused)


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands, "_ALLOWED", set())
    for n in range(commands._ALLOWED_MAX + 100):
        refuse_connection_state((f"CMD{n}",))
    assert len(commands._ALLOWED) == commands._ALLOWED_MAX
