"""fastlock on asyncio: :class:`AsyncClient` (also ``fastlock.AsyncClient``; ``Client`` is the
same class under its first name), an :class:`~fastlock.operations.AsyncRunner` with automatic
pipelining and cancellation safety, and the locks, queue and worker over it (:class:`AsyncLock`,
:class:`AsyncLockManager`, :class:`AsyncReaper`, :class:`AsyncRWLock`, :class:`AsyncQueue`,
:class:`AsyncWorker`)."""

from .client import Client
from .limiter import AsyncLimiter
from .locks import AsyncLock, AsyncLockManager, AsyncReaper
from .pipeline import BoundScript, Pipeline
from .queue import AsyncQueue
from .rwlock import AsyncRWLock, AsyncRWSide
from .worker import AsyncWorker

AsyncClient = Client

__all__ = [
    "AsyncClient",
    "AsyncLimiter",
    "AsyncLock",
    "AsyncLockManager",
    "AsyncQueue",
    "AsyncReaper",
    "AsyncRWLock",
    "AsyncRWSide",
    "AsyncWorker",
    "BoundScript",
    "Client",
    "Pipeline",
]
