# generated from src/fastlock/aio/limiter.py by tools/async_to_sync.py, do not edit
"""Rate limiters on the server clock: GCRA or a sliding window, one script on one key per
decision (:class:`~fastlock.limits.base.LimiterBase`: options, key, arguments; semantics in
``docs/limits.md``). ``aio/limiter.py``, the asyncio limiter, is the source of the sync
``limits/limiter.py``: ``tools/async_to_sync.py`` writes it."""

from __future__ import annotations

from ..limits.base import Decision, LimiterBase, decided
from ..operations import Runner

__all__ = ["Limiter"]


class Limiter(LimiterBase[Runner]):
    """A rate limiter on a runner (:class:`~fastlock.operations.Runner`) such as
    :class:`fastlock.Client` (options in :class:`~fastlock.limits.base.LimiterBase`).
    Every decision is one round trip; arguments are checked before anything is sent."""

    def try_acquire(self, n: int = 1) -> Decision:
        """Admit ``n`` at once now, or not (nothing is taken then): the :class:`Decision`
        says which, the allowance left and, when denied, the seconds until it would be admitted."""
        return decided(self.client.call(self.script, self.keys, self._args(n)))

    def acquire(self, n: int = 1, *, timeout: float | None = None) -> Decision:
        """Admit ``n`` at once, waiting up to ``timeout`` seconds (``None``: as long as it
        takes): each denial's ``retry_after`` is slept, then the limiter asked again. Returns
        the denial at once when its ``retry_after`` would end past the timeout."""
        return self.client.run(self._acquire(n, timeout))

    def reset(self) -> None:
        """Forget every admission (the key deleted): the full allowance is back."""
        self.client.execute("DEL", self.key)
