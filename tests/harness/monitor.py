"""Record what a server runs (MONITOR) and check that every script call stays in one cluster
slot: its declared KEYS and the keys of every command it ran inside share one slot, every
inner key is declared, and top-level commands are single-slot. The server itself says which
arguments of each recorded command are keys (``COMMAND GETKEYS``)."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import fastlock
from fastlock.protocol.slots import key_slot

_LINE = re.compile(r"^\+?(?P<stamp>\d+\.\d+) \[\d+ (?P<who>[^\]]+)\] (?P<args>.*)$")
_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|.)")
_SIMPLE = {"n": b"\n", "r": b"\r", "t": b"\t", "a": b"\a", "b": b"\b"}


def _unescape(text: str) -> bytes:
    def one(match: re.Match[str]) -> str:
        code = match[1]
        if code[0] == "x" and len(code) == 3:
            return chr(int(code[1:], 16))
        return _SIMPLE.get(code, code.encode()).decode("latin-1")

    return _ESCAPE.sub(one, text).encode("latin-1")


def parse_monitor(text: str) -> list[tuple[bool, list[bytes]]]:
    """(from Lua?, arguments) for each MONITOR line."""
    return [(lua, args) for _, lua, args in stamped(text)]


def stamped(text: str) -> list[tuple[float, bool, list[bytes]]]:
    """(server time in seconds, from Lua?, arguments) for each MONITOR line."""
    commands = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            args = [_unescape(arg) for arg in _ARG.findall(match["args"])]
            commands.append((float(match["stamp"]), match["who"] == "lua", args))
    return commands


@contextmanager
def monitor(path: str) -> Iterator[list[str]]:
    """Record MONITOR output of the server at unix socket ``path`` while the block runs."""
    chunks: list[str] = []
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(path)
    sock.sendall(b"MONITOR\r\n")
    assert sock.recv(5) == b"+OK\r\n"

    def read() -> None:
        while data := sock.recv(1 << 16):
            chunks.append(data.decode("latin-1"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out: list[str] = []
    try:
        yield out
        sock.sendall(b"PING\r\n")  # MONITOR echoes it: everything before has been read
        deadline = time.monotonic() + 5
        while '"PING"' not in "".join(chunks)[-200:] and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        sock.shutdown(socket.SHUT_RDWR)  # the reader's recv returns b"": it ends
        reader.join(5)
        assert not reader.is_alive(), "the MONITOR reader did not end"
        sock.close()  # only now: closing under a blocked recv raises EBADF in the reader
    out.append("".join(chunks))


def scripts_in_one_slot(client: Any, recorded: str) -> set[str]:
    """Check every command of the MONITOR text ``recorded`` (see the module docstring);
    returns the names of the scripts that ran."""
    names = {script.sha.encode(): name for name, script in client.scripts.loaded.items()}
    getkeys: dict[tuple[bytes, ...], list[bytes]] = {}

    def _queue_of(key: bytes, declared: set[bytes]) -> bool:
        """A lock scope's hand-over queue keys: its declared wake key + ``q`` or ``a``
        (shared/_lock_wake.lua; the same hash tag, so the same slot)."""
        return key[-1:] in (b"q", b"a") and key[:-1].endswith(b":w") and key[:-1] in declared

    def keys_of(args: list[bytes]) -> list[bytes]:
        if tuple(args) not in getkeys:
            try:
                getkeys[tuple(args)] = client.execute("COMMAND", "GETKEYS", *args)
            except fastlock.ResponseError:  # a command without key arguments
                getkeys[tuple(args)] = []
        return getkeys[tuple(args)]

    scripts_run: set[str] = set()
    script: tuple[str, set[bytes]] | None = None
    for from_lua, args in parse_monitor(recorded):
        name = args[0].upper()
        if from_lua:
            assert script is not None, f"inner command {args} without a script"
            keys = keys_of(args)
            undeclared = {key for key in keys if key not in script[1] and not _queue_of(key, script[1])}
            assert not undeclared, f"{script[0]} touched undeclared keys {undeclared}"
            scripts_run.add(script[0])
            continue
        if name == b"MONITOR" or name == b"COMMAND":
            continue
        keys = keys_of(args)
        assert len({key_slot(key) for key in keys}) <= 1, f"{args[:1]} spans slots: {keys}"
        script = (names[args[1]], set(keys)) if name == b"EVALSHA" else None
    return scripts_run
