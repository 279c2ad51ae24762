"""The blocking transport: connections, the pool, :class:`~fastlock.Client` and its pipelines."""
