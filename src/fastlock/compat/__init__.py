"""Drop-in adapters for code written against other libraries' APIs
(:mod:`fastlock.compat.redis_py`: redis-py's ``Lock``). Never imported by the runtime."""
