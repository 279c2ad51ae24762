"""Job claiming with leases: jobs and their replies, :class:`~fastlock.Queue`, the worker."""
