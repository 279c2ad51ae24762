"""The pure-Python core: the same API and the same bytes as the Cython ``_core``.

It needs no compiler and no hiredis. Select it with ``FASTLOCK_IMPL=python`` (or
``Client(impl="python")``). Its parts, the twins of ``_core.pyx``'s: :mod:`fastlock._coreparts.resp_py`
(encoders and the reply reader), :mod:`fastlock._coreparts.conn_py` (the connection),
:mod:`fastlock._coreparts.call_py` (``Client.call`` itself, routed on a cluster, and a pipeline's
queue), :mod:`fastlock._coreparts.aio_py` (the asyncio connection),
:mod:`fastlock._coreparts.muxcall_py` (``AsyncClient.call`` and ``execute``) and
:mod:`fastlock._coreparts.domain_py` (the helpers of digests, locks, claims and ids).
"""

from ._coreparts.aio_py import MuxConnection
from ._coreparts.call_py import CommandQueue, ScriptCaller, SlotRouter
from ._coreparts.conn_py import Connection
from ._coreparts.domain_py import (
    _canonical_json,
    _claimed_jobs,
    _completed_jobs,
    _digest_bucket,
    _enqueued,
    _fresh,
    _fresh_id,
    _is_digest,
    _lock_new,
    _lock_scope,
    _lock_spec,
    _manager_lock,
    _numbered,
)
from ._coreparts.muxcall_py import MuxCaller
from ._coreparts.resp_py import NOT_ENOUGH, ReplyReader, encode_command, encode_evalsha, encode_pipeline

__all__ = [
    "DEBUG",
    "NOT_ENOUGH",
    "CommandQueue",
    "Connection",
    "MuxCaller",
    "MuxConnection",
    "ReplyReader",
    "ScriptCaller",
    "SlotRouter",
    "_canonical_json",
    "_claimed_jobs",
    "_completed_jobs",
    "_digest_bucket",
    "_enqueued",
    "_is_digest",
    "_lock_new",
    "_lock_scope",
    "_lock_spec",
    "_manager_lock",
    "_fresh",
    "_fresh_id",
    "_numbered",
    "encode_command",
    "encode_evalsha",
    "encode_pipeline",
]

DEBUG = False
"""This core has no debug build (the Cython core's ``DEBUG`` says whether it is one)."""
