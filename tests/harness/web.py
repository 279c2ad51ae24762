"""A dashboard served by uvicorn from a thread, on a free loopback port, for the suite."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn

from fastlock.testing.servers import free_port
from fastlock.web import app


class Running:
    """The dashboard over ``client`` (an asyncio client, closed at shutdown): ``url`` is its root."""

    def __init__(self, client: Any, **settings: Any) -> None:
        port = free_port()
        board = app(client, close_client=True, **settings)
        config = uvicorn.Config(board, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if self.errors or not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the dashboard did not start: {self.errors}")
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{port}"

    def _serve(self) -> None:
        try:
            self.server.run()
        except BaseException as exc:  # noqa: BLE001 - reaches the test through stop()
            self.errors.append(exc)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        assert not self.thread.is_alive(), "the dashboard did not stop"
        assert self.errors == []
