"""The pure-Python core: the same API and the same bytes as the Cython ``_core``.

It needs no compiler and no hiredis. Select it with ``FASTLOCK_IMPL=python`` (or
``Client(impl="python")``). Its parts: :mod:`fastlock.protocol.resp_py` (encoders and the
reply reader) and :mod:`fastlock.sync.conn_py` (the connection and the fast path of
``Client.call``, routed on a cluster).
"""

from .protocol.resp_py import NOT_ENOUGH, ReplyReader, encode_command, encode_evalsha, encode_pipeline
from .sync.conn_py import Connection, ScriptCaller, SlotRouter

__all__ = [
    "DEBUG",
    "NOT_ENOUGH",
    "Connection",
    "ReplyReader",
    "ScriptCaller",
    "SlotRouter",
    "encode_command",
    "encode_evalsha",
    "encode_pipeline",
]

DEBUG = False
"""This core has no debug build (the Cython core's ``DEBUG`` says whether it is one)."""
