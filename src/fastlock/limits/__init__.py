"""Rate limiters: the shared base and the sync shell (generated from ``aio/limiter.py``)."""
