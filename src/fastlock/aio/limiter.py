"""Rate limiters on the server clock: GCRA or a sliding window, one script on one key per
decision (:class:`~fastlock.limits.base.LimiterBase`: options, key, arguments; semantics in
``docs/limits.md``). ``aio/limiter.py``, the asyncio limiter, is the source of the sync
``limits/limiter.py``: ``tools/async_to_sync.py`` writes it."""

from __future__ import annotations

from ..limits.base import Decision, LimiterBase, decided
from ..operations import AsyncRunner

__all__ = ["AsyncLimiter"]


class AsyncLimiter(LimiterBase[AsyncRunner]):
    """A rate limiter on a runner (:class:`~fastlock.operations.AsyncRunner`) such as
    :class:`fastlock.aio.Client` (options in :class:`~fastlock.limits.base.LimiterBase`).
    Every decision is one round trip; arguments are checked before anything is sent."""

    async def try_acquire(self, n: int = 1) -> Decision:
        """Admit ``n`` at once now, or not (nothing is taken then): the :class:`Decision`
        says which, the allowance left and, when denied, the seconds until it would be admitted."""
        return decided(await self.client.call(self.script, self.keys, self._args(n)))

    async def acquire(self, n: int = 1, *, timeout: float | None = None) -> Decision:
        """Admit ``n`` at once, waiting up to ``timeout`` seconds (``None``: as long as it
        takes): each denial's ``retry_after`` is slept, then the limiter asked again. Returns
        the denial at once when its ``retry_after`` would end past the timeout."""
        return await self.client.run(self._acquire(n, timeout))

    async def reset(self) -> None:
        """Forget every admission (the key deleted): the full allowance is back."""
        await self.client.execute("DEL", self.key)

    if True:  # ASYNC (the sync Limiter's is LimiterBase's)

        def __repr__(self) -> str:
            return f"<fastlock.aio.AsyncLimiter {self.name!r} {self.kind} rate={self.rate} per={self.per}>"
