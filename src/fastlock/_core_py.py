"""The pure-Python core: the same API and the same bytes as the Cython ``_core``.

It needs no compiler and no hiredis. Select it with ``FASTLOCK_IMPL=python`` (or
``Client(impl="python")``). Its parts: :mod:`fastlock.protocol.resp_py` (encoders and the
reply reader), :mod:`fastlock.sync.conn_py` (the connection) and
:mod:`fastlock.sync.call_py` (``Client.call`` itself, routed on a cluster, and a pipeline's
queue).
"""

from .protocol.resp_py import NOT_ENOUGH, ReplyReader, encode_command, encode_evalsha, encode_pipeline
from .sync.call_py import Batch, ScriptCaller, SlotRouter
from .sync.conn_py import Connection

__all__ = [
    "DEBUG",
    "NOT_ENOUGH",
    "Batch",
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
