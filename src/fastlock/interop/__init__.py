"""Interop with other clients (redis-py, valkey-py)."""
