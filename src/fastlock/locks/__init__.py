"""Unique-job locks: the vocabulary (``types``), the key layout (``keys``), reply parsers
(``replies``), the wait for a release (``waiting``), conflicts, a namespace's shared state,
:class:`~fastlock.locks.base.LockBase` (a lock without I/O), :class:`~fastlock.Lock` (its
blocking shell), admin operations, the reaper and :class:`~fastlock.LockManager`
(each module imports only the ones before it in this list)."""
