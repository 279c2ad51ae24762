"""A client's wake-up listener per process: made at the first wait, and again in a fork's
child, which closes the parent's descriptors without any I/O on them (``forsake``)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["ListenerSlot"]


class PerProcess(Protocol):
    """What the slot needs of a listener: the pid it was made in, ``forsake`` and ``close``."""

    pid: int

    def forsake(self) -> None: ...

    def close(self) -> None: ...


L = TypeVar("L", bound=PerProcess)


class ListenerSlot(Generic[L]):
    """A client's listener: made at the first wait, and again in a fork's child."""

    __slots__ = ("_listener",)

    def __init__(self) -> None:
        self._listener: L | None = None

    def get(self, make: Callable[[], L]) -> L:
        """This process's listener (``make()`` it if there is none yet)."""
        listener = self._listener
        if listener is not None and listener.pid == os.getpid():
            return listener
        with _MAKING:
            listener = self._listener
            if listener is None or listener.pid != os.getpid():
                if listener is not None:
                    listener.forsake()
                listener = self._listener = make()
        return listener

    def current(self) -> L | None:
        """This process's listener, if made."""
        listener = self._listener
        return listener if listener is not None and listener.pid == os.getpid() else None

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()


_MAKING = threading.Lock()


def _after_fork_in_child() -> None:
    global _MAKING
    _MAKING = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
