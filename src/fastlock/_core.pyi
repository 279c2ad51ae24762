"""Type stubs for the Cython core (``_core.pyx``); ``_core_py.py`` has the same API (checked
by ``tests/protocol/test_stubs.py``), and both satisfy :class:`fastlock._impl.Core`."""

import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar, final

__all__ = [
    "DEBUG",
    "NOT_ENOUGH",
    "CommandQueue",
    "Connection",
    "ReplyReader",
    "ScriptCaller",
    "SlotRouter",
    "_canonical_json",
    "_claimed_jobs",
    "_digest_bucket",
    "_is_digest",
    "_lock_new",
    "_lock_scope",
    "_lock_spec",
    "_numbered",
    "encode_command",
    "encode_evalsha",
    "encode_pipeline",
]

DEBUG: bool  # True in a FASTLOCK_DEBUG=1 build, whose invariant checks raise AssertionError

def encode_command(*args: Any) -> bytes: ...
def encode_evalsha(sha: str | bytes, keys: Iterable[Any], args: Iterable[Any]) -> bytes: ...
def encode_pipeline(commands: Iterable[tuple[Any, ...]]) -> bytes: ...

NOT_ENOUGH: Any

_T = TypeVar("_T")

# the domain helpers (``_coreparts/domain_*.pxi``)
def _canonical_json(name: str, queue: str | None, args: Any) -> bytes | None: ...
def _is_digest(value: object) -> bool: ...
def _digest_bucket(digest: str, buckets: int) -> int: ...
def _lock_scope(space: Any, scope_type: type[_T], digest: str, suffix: str, limit: int) -> _T | None: ...
def _lock_spec(
    lock_type: Any,
    specs: dict[Any, Any],
    names: dict[Any, Any],
    no_strategies: Any,
    max_duration: float,
    max_limit: int,
) -> None: ...
def _lock_new(
    cls: type[_T],
    manager: Any,
    digest: str,
    name: str | None,
    kind: Any,
    ttl: float | None,
    timeout: float,
    limit: int,
    job_id: str | None,
    on_conflict: Any,
) -> _T: ...
def _claimed_jobs(reply: Any, job_type: type[Any], batch_type: type[_T]) -> _T | None: ...
def _numbered(head: str, numbers: Iterator[int], n: int) -> list[str]: ...

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
    def send_batch(self, batch: CommandQueue) -> list[Any]: ...

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
class CommandQueue:
    def __init__(self, caller: ScriptCaller, owner: Any) -> None: ...
    def __len__(self) -> int: ...
    def call(self, name: str, keys: Any = (), args: Any = ()) -> Any: ...
    def command(self, args: tuple[Any, ...]) -> Any: ...
    def call_at(self, i: int) -> tuple[Any, Any, Any] | None: ...
    def errors(self, replies: list[Any]) -> list[int]: ...
    def evals(self) -> list[int]: ...
    def set_loaded(self, i: int, loaded: bool) -> None: ...
    def clear(self) -> None: ...
