"""Unique jobs for other job frameworks: :mod:`fastlock.contrib.rq` and
:mod:`fastlock.contrib.celery` (each imports its framework; nothing in the runtime imports
this package). The pieces they share: :mod:`.clients` (one client per process and server) and
:mod:`.jobs` (a task's lock settings and failure policy)."""
