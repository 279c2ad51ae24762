"""Unique-job locks: types, scopes and keys, :class:`~fastlock.Lock`, the manager, conflicts, the reaper."""
