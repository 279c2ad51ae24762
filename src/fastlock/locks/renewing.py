# generated from src/fastlock/aio/renewing.py by tools/async_to_sync.py, do not edit
"""The renewing lock shell :class:`RenewingLock` (``renew=True``), over
:class:`Lock`: its held locks the client's lock watchdog
(:mod:`fastlock.locks.renewal`) keeps alive. (The source of both shells: ``aio/renewing.py``.)"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..locks.renewal import Held, renewer
from .lock import Lock

__all__ = ["RenewingLock"]


class RenewingLock(Lock):
    """A lock (:class:`Lock`) built with ``renew=True``: while a holder holds it, the client's
    lock watchdog (:mod:`fastlock.locks.renewal`) keeps it alive, one round every ``ttl / 3``
    for all of the client's renewing locks, until the holder releases it, ends (the thread or
    task that took it) or loses it; then :attr:`lost` says so (``docs/locks.md``, "Renewal")."""

    __slots__ = ("__weakref__", "_renewing")
    _renews = True
    _renewing: dict[str, Held]
    """The holders taken through this object (released ones only while lost); set on first use."""

    @property
    def lost(self) -> bool:
        """True when the default holder's lock (of the calling thread or task, or the given
        ``job_id``) was lost while renewed: taken over after an expiry (a paused process, the
        server unreachable for a ttl) or deleted; it stays True after its release."""
        held = self._renewing_by().get(self._holder(None))
        return held is not None and held.gone()

    def acquire(
        self, job_id: str | None = None, *, blocking: bool | None = None, timeout: float | None = None
    ) -> int | None:
        """:meth:`Lock.acquire`, the lock then renewed while held."""
        holder, sent = self._holder(job_id), time.monotonic()
        found = super().acquire(holder, blocking=blocking, timeout=timeout)
        if found is not None:
            alive = threading.current_thread().is_alive
            held = Held(self, holder, found, lambda: not alive(), sent)
            if held.stale():
                sent = time.monotonic()
                held.confirmed(self.manager.runner.call("lock_renew", held.keys, held.args), sent)
            self._keep(renewer(self.manager.runner), held)
        return found

    def release(self, job_id: str | None = None) -> int | None:
        """:meth:`Lock.release`, its renewal stopped first."""
        holder = self._holder(job_id)
        self._unkept(holder)
        return self._freed(holder, super().release(holder))

    def _renewing_by(self) -> dict[str, Held]:
        try:
            return self._renewing
        except AttributeError:
            renewing = self._renewing = {}
            return renewing

    def _keep(self, keeper: Any, held: Held) -> None:
        """Renew ``held`` (instead of an earlier hold of the same holder)."""
        renewing = self._renewing_by()
        previous = renewing.get(held.args[1])
        if previous is not None:
            if not (previous.lost or previous.released) and previous.args[2] == held.args[2]:
                # the same hold taken again: the server kept its expiry, so must the holder
                held.expires = min(held.expires, previous.expires)
            previous.release()
        renewing[held.args[1]] = held
        keeper.hold(held)

    def _unkept(self, holder: str) -> None:
        held = self._renewing_by().get(holder)
        if held is not None:
            held.gone()  # an expiry passed counts as lost before the renewal stops
            held.release()

    def _freed(self, holder: str, freed: int | None) -> int | None:
        """After a release: a holder that freed nothing was lost; one that freed its lock is forgotten."""
        renewing = self._renewing_by()
        held = renewing.get(holder)
        if held is not None:
            if freed is None:
                held.lost = True
            else:
                del renewing[holder]
        return freed
