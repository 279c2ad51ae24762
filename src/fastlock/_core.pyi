"""Type stubs for the Cython core (``_core.pyx``); ``_core_py.py`` has the same API (checked
by ``tests/protocol/test_stubs.py``), and both satisfy :class:`fastlock._impl.Core`."""

import socket
from collections.abc import Callable, Iterable, Sequence
from typing import Any, final

__all__ = [
    "DEBUG",
    "NOT_ENOUGH",
    "Batch",
    "Connection",
    "ReplyReader",
    "ScriptCaller",
    "SlotRouter",
    "encode_command",
    "encode_evalsha",
    "encode_pipeline",
]

DEBUG: bool  # True in a FASTLOCK_DEBUG=1 build, whose invariant checks raise AssertionError

def encode_command(*args: Any) -> bytes: ...
def encode_evalsha(sha: str | bytes, keys: Iterable[Any], args: Iterable[Any]) -> bytes: ...
def encode_pipeline(commands: Iterable[tuple[Any, ...]]) -> bytes: ...

NOT_ENOUGH: Any

@final
class ReplyReader:
    def __init__(self, max_length: int = ..., max_elements: int = ...) -> None: ...
    def feed(self, data: Any, offset: int = 0, length: int = -1) -> None: ...
    def has_data(self) -> bool: ...
    def gets(self) -> Any: ...

@final
class Connection:
    @property
    def sock(self) -> socket.socket: ...
    @property
    def broken(self) -> bool: ...
    last_used: float
    generation: int
    @property
    def round_trips(self) -> int: ...
    def __init__(self, sock: socket.socket) -> None: ...
    def close(self) -> None: ...
    def execute(self, args: tuple[Any, ...]) -> Any: ...
    def evalsha(self, sha: str | bytes, keys: Iterable[Any], args: Iterable[Any]) -> Any: ...
    def pipeline(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]: ...
    def send_batch(self, batch: Batch) -> list[Any]: ...

@final
class ScriptCaller:
    def __init__(
        self,
        pool: Any,
        scripts: Any,
        settings: Any,
        with_meta: Callable[..., Any],
        failed: Callable[..., Any],
        record: Callable[..., Any],
        fold_at: int,
    ) -> None: ...
    def use(self, scripts: Any, settings: Any) -> None: ...
    def call(
        self, name: str, keys: Any = (), args: Any = (), *, busy_timeout: float | None = None
    ) -> Any: ...
    def call_script(
        self, script: Any, keys: Any, args: Any, settings: Any, busy_timeout: float | None
    ) -> Any: ...

@final
class SlotRouter:
    def __init__(
        self,
        scripts: Any,
        settings: Any,
        with_meta: Callable[..., Any],
        slots: dict[Any, int],
        routes: list[Any],
        slot_of: Callable[[Any], int],
        route: Callable[[int], Any],
        failed: Callable[..., Any],
    ) -> None: ...
    def call(
        self, name: str, keys: Any = (), args: Any = (), *, busy_timeout: float | None = None
    ) -> Any: ...

@final
class Batch:
    def __init__(self, caller: ScriptCaller, owner: Any) -> None: ...
    def __len__(self) -> int: ...
    def call(self, name: str, keys: Any = (), args: Any = ()) -> Any: ...
    def command(self, args: tuple[Any, ...]) -> Any: ...
    def call_at(self, i: int) -> tuple[Any, Any, Any] | None: ...
    def errors(self, replies: list[Any]) -> list[int]: ...
    def clear(self) -> None: ...
