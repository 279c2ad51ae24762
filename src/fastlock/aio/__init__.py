"""fastlock on asyncio: :class:`Client` (also ``fastlock.AsyncClient``), an
:class:`~fastlock.operations.AsyncRunner` with automatic pipelining and cancellation safety."""

from .client import Client
from .pipeline import BoundScript, Pipeline

__all__ = ["BoundScript", "Client", "Pipeline"]
