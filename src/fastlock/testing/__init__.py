"""Helpers for testing code that uses fastlock against a real server (never imported by the runtime)."""
