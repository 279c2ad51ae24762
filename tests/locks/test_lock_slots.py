"""Every key each lock script touches hashes to one cluster slot, checked on a standalone server.

A MONITOR connection records a lifecycle that runs every lock script and admin call; the
server itself says which arguments of each recorded command are keys (``COMMAND GETKEYS``).
For every script call, its declared KEYS and the keys of every command it ran inside must
share one slot, and every inner key must be declared. Top-level commands (EXISTS, BLPOP,
ZSCAN, ...) must be single-slot too.
"""

from __future__ import annotations

import itertools
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import fastlock
from fastlock.protocol.slots import key_slot

LUA = Path(__file__).resolve().parents[2] / "lua"
_LINE = re.compile(r"^\+?\d+\.\d+ \[\d+ (?P<who>[^\]]+)\] (?P<args>.*)$")
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
    commands = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            commands.append((match["who"] == "lua", [_unescape(arg) for arg in _ARG.findall(match["args"])]))
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


def lifecycle(client: Any, prefix: str = "fastlock") -> None:
    """Run every lock script and admin entry point at least once."""
    manager = fastlock.LockManager(client, prefix=prefix, buckets=8, max_history=50)
    lock = manager.lock("slots", ttl=30)
    lock.acquire("a")
    lock.acquire("a")
    assert manager.lock("slots", ttl=30).acquire("b", timeout=0.05) is None  # flags the holder
    lock.extend("a")
    lock.holders()
    lock.locked()
    lock.release("a")  # wakes the (timed-out) waiter's list
    pool = manager.lock("pool", limit=3, ttl=30)
    for job in ("a", "b", "c", "d"):
        pool.acquire(job)
    pool.release("b")
    both = manager.lock("both", type="until_and_while_executing", ttl=30)
    both.enqueue("j")
    both.execute("j", both.info)
    manager.lock("dead", limit=2).acquire("ghost")
    manager.reaper(alive=lambda entry, job_id: job_id != "ghost").run_once()
    manager.lock("gone", ttl=0.01).acquire("x")
    time.sleep(0.02)
    manager.reaper().run_once()
    list(manager.entries())
    manager.inspect(pool.digest)
    manager.changelog(pool.digest)
    manager.delete(lock.digest)
    manager.delete_matching("*")


@pytest.mark.parametrize("prefix", ["fastlock", "app:{locks}", "{", "}", "a{b", "}{", "x}{y", "{a{}}"])
def test_every_key_of_every_script_shares_one_slot(server: Any, redis_url: str, prefix: str) -> None:
    with fastlock.Client(redis_url) as client:
        client.execute("PING")
        with monitor(server.unix_path) as recorded:
            lifecycle(client, prefix)
        names = {script.sha.encode(): name for name, script in client.scripts.loaded.items()}
        getkeys: dict[tuple[bytes, ...], list[bytes]] = {}

        def keys_of(args: list[bytes]) -> list[bytes]:
            if tuple(args) not in getkeys:
                try:
                    getkeys[tuple(args)] = client.execute("COMMAND", "GETKEYS", *args)
                except fastlock.ResponseError:  # a command without key arguments
                    getkeys[tuple(args)] = []
            return getkeys[tuple(args)]

        commands = parse_monitor(recorded[0])
        scripts_run: set[str] = set()
        script: tuple[str, set[bytes]] | None = None
        for from_lua, args in commands:
            name = args[0].upper()
            if from_lua:
                assert script is not None, f"inner command {args} without a script"
                keys = keys_of(args)
                assert set(keys) <= script[1], f"{script[0]} touched undeclared keys {keys}"
                scripts_run.add(script[0])
                continue
            if name == b"MONITOR" or name == b"COMMAND":
                continue
            keys = keys_of(args)
            assert len({key_slot(key) for key in keys}) <= 1, f"{args[:1]} spans slots: {keys}"
            script = (names[args[1]], set(keys)) if name == b"EVALSHA" else None
        expected = {path.stem for path in LUA.glob("lock_*.lua")}
        assert scripts_run == expected


def test_any_prefix_gives_one_slot_per_script_or_is_refused(redis_url: str) -> None:
    """Every prefix of up to 5 characters from ``{``, ``}``, ``a``, ``:``: either refused with
    ValueError, or every key a script of a digest can take (both scopes, limit 3, the bucket's
    index, counter, changelog) shares one slot. Refused: exactly the prefixes whose first
    ``{`` is followed by ``}`` (an empty hash tag makes the server hash each key whole)."""
    with fastlock.Client(redis_url) as client:  # for the eviction-policy check at first use
        digests = [f"{i:08x}" + "0" * 56 for i in range(0, 2**32, 2**28)]
        for size in range(6):
            for chars in itertools.product("{}a:", repeat=size):
                prefix = "".join(chars)
                start = prefix.find("{")
                if start >= 0 and prefix[start + 1 : start + 2] == "}":
                    with pytest.raises(ValueError, match="hash tag"):
                        fastlock.LockManager(client, prefix=prefix, buckets=16)
                    continue
                manager = fastlock.LockManager(client, prefix=prefix, buckets=16)
                for digest in digests:
                    queue, runtime = manager.scope(digest, "", 3), manager.scope(digest, ":run", 3)
                    slots = {key_slot(key) for key in (*queue.keys, *runtime.keys)}
                    assert len(slots) == 1, (prefix, digest)
