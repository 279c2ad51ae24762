"""The same-bytes floor: a lifecycle's exact bytes replayed from C and from a raw Python
socket loop, the limit a client of that lifecycle can reach on this server.

:func:`record` runs a workload on a client whose one connection goes through a recording
unix-socket relay and keeps what the client wrote, write by write (a write is one round
trip; its commands are counted, one reply each). Replays (:func:`replay_c`, compiled here
with gcc from ``replay.c``; :func:`replay_python`) connect to the server, ``SELECT`` a
spare database and ``FLUSHDB`` it, send the untimed prefix (set-up and warm-up) and time
the recorded operations: the same scripts, keys, job ids, digests and fencing tokens,
from the same empty database the recording started from, so the server does the same Lua
work as for fastlock (each replay runs each recorded lifecycle once).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..sync.client import Client

__all__ = ["Recording", "build_replay", "preload", "record", "replay_c", "replay_python"]

REPLAY_DB = 9
"""The database recordings and replays flush and use (the measured workloads use database 0)."""


@dataclass
class Recording:
    """The writes of one client: ``(commands, bytes)`` each, the first ``prefix`` untimed;
    ``ops`` operations in the timed ones."""

    writes: list[tuple[int, bytes]]
    prefix: int
    ops: int

    def save(self, path: Path) -> None:
        """The file ``replay.c`` reads: u32 prefix, then per write u32 commands, u32 length, bytes."""
        with path.open("wb") as out:
            out.write(struct.pack("=I", self.prefix))
            for commands, data in self.writes:
                out.write(struct.pack("=II", commands, len(data)) + data)


def _commands(data: bytes) -> tuple[int, int]:
    """Complete RESP arrays of bulk strings at the start of ``data``: (count, bytes used)."""
    count = pos = 0
    while pos < len(data):
        start, eol = pos, data.find(b"\r\n", pos)
        if eol < 0:
            break
        pos = eol + 2
        for _ in range(int(data[start + 1 : eol])):
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                return count, start
            pos = eol + 2 + int(data[pos + 1 : eol]) + 2
            if pos > len(data):
                return count, start
        count += 1
        used = pos
    return count, used if count else 0


class _Relay:
    """A unix-socket relay to ``upstream`` (a connected socket factory) for one client
    connection, recording the client's writes as whole commands."""

    def __init__(self, directory: str, upstream: Callable[[], socket.socket]) -> None:
        self.path = os.path.join(directory, "relay.sock")
        self.writes: list[tuple[int, bytes]] = []
        self._upstream = upstream
        self._listener = socket.socket(socket.AF_UNIX)
        self._listener.bind(self.path)
        self._listener.listen(1)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def join(self) -> None:
        """Wait until the client has closed its connection and everything is recorded."""
        self._thread.join(10)

    def _serve(self) -> None:
        with self._listener:
            client, _ = self._listener.accept()
        with client, self._upstream() as server:
            pump = threading.Thread(target=self._pump, args=(server, client), daemon=True)
            pump.start()
            pending = b""
            while chunk := client.recv(1 << 20):
                pending += chunk
                count, used = _commands(pending)
                if count:
                    self.writes.append((count, pending[:used]))
                    pending = pending[used:]
                server.sendall(chunk)
            server.shutdown(socket.SHUT_WR)
            pump.join(10)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(1 << 20):
                sink.sendall(chunk)


def _connector(url: str) -> tuple[Callable[[], socket.socket], str]:
    """A socket factory for ``url`` (unix or plain TCP, no auth) and the replay's target."""
    if url.startswith("unix://"):
        path = url.removeprefix("unix://").split("?")[0]

        def unix() -> socket.socket:
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(path)
            return sock

        return unix, path
    host, _, port = url.split("://", 1)[1].split("/")[0].rpartition(":")
    address = (host.rpartition("@")[2] or "127.0.0.1", int(port or 6379))
    return lambda: socket.create_connection(address), f"{address[0]}:{address[1]}"


def record(
    url: str, setup: Callable[[Client], Callable[[], object]], ops: int, warmup: int = 10
) -> Recording:
    """Run ``setup(client)`` and ``warmup`` + ``ops`` operations on one connection, recorded.

    The recording starts from the state a replay starts from: database :data:`REPLAY_DB`
    flushed, and every script the workload calls already loaded (every built-in one, then
    a first, unrecorded run of set-up and warm-up there), so no NOSCRIPT recovery is
    recorded (replayed, its second attempt would run the script twice)."""
    from ..sync.client import Client

    connect, _ = _connector(url)
    preload(url, [setup], warmup)
    with tempfile.TemporaryDirectory(prefix="fastlock-floor-") as tmp:
        relay = _Relay(tmp, connect)
        with Client(f"unix://{relay.path}", db=REPLAY_DB, max_connections=1) as client:
            op = setup(client)
            for _ in range(warmup):
                op()
            client.execute("PING")  # the boundary: the writes before it are the prefix
            prefix = len(relay.writes)
            for _ in range(ops):
                op()
        relay.join()
    if any(b"SCRIPT" in data for _, data in relay.writes[prefix:]):
        raise RuntimeError("a script was loaded during the recorded operations: warm up longer")
    return Recording(relay.writes, prefix, ops)


def preload(url: str, setups: Iterable[Callable[[Client], Callable[[], object]]], warmup: int = 1) -> None:
    """Load on the server at ``url`` every script the workloads of ``setups`` call: every
    built-in one, then each set-up and ``warmup`` operations, unrecorded, in database
    :data:`REPLAY_DB`, flushed after (a recording or a replay then starts from it empty)."""
    from ..sync.client import Client

    with Client(url, db=REPLAY_DB, max_connections=1, warm_up=True) as loader:
        for setup in setups:
            op = setup(loader)
            for _ in range(warmup):
                op()
        loader.execute("FLUSHDB")


def build_replay(directory: str) -> str | None:
    """Compile ``replay.c`` into ``directory``; ``None`` without gcc."""
    if shutil.which("gcc") is None:
        return None
    binary = os.path.join(directory, "replay")
    source = files("fastlock.tools").joinpath("replay.c")
    with source.open("rb") as src, open(binary + ".c", "wb") as dst:
        dst.write(src.read())
    subprocess.run(["gcc", "-O2", "-o", binary, binary + ".c"], check=True, capture_output=True)
    return binary


def replay_c(binary: str, url: str, recording_file: Path, cpu: int | None = None) -> float:
    """Seconds the C replay took for the timed writes."""
    command = [binary, _connector(url)[1], str(recording_file), str(REPLAY_DB)]
    if cpu is not None and shutil.which("taskset"):
        command = ["taskset", "-c", str(cpu), *command]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300).stdout
    return int(out.strip()) / 1e9


def replay_python(url: str, recording: Recording) -> float:
    """Seconds a raw Python socket + ``hiredis.Reader`` loop took for the timed writes."""
    import hiredis

    sock = _connector(url)[0]()
    reader, buf = hiredis.Reader(), bytearray(1 << 20)
    feed: Any = reader.feed  # hiredis takes a bytearray with offset and length
    select = f"*2\r\n$6\r\nSELECT\r\n$1\r\n{REPLAY_DB}\r\n*1\r\n$7\r\nFLUSHDB\r\n".encode()

    def roundtrip(commands: int, data: bytes) -> None:
        sock.sendall(data)
        while commands:
            reply = reader.gets()
            while reply is False:
                feed(buf, 0, sock.recv_into(buf))
                reply = reader.gets()
            commands -= 1

    with sock:
        roundtrip(2, select)
        for commands, data in recording.writes[: recording.prefix]:
            roundtrip(commands, data)
        timed = recording.writes[recording.prefix :]
        started = time.perf_counter()
        for commands, data in timed:
            roundtrip(commands, data)
        return time.perf_counter() - started


@contextlib.contextmanager
def replay_binary() -> Iterator[str | None]:
    """The compiled C replay in a temporary folder (``None`` without gcc)."""
    with tempfile.TemporaryDirectory(prefix="fastlock-replay-") as tmp:
        yield build_replay(tmp)
