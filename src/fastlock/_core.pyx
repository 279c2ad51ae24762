# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: autotestdict=False, auto_pickle=False
"""The Cython core, one extension built from its parts, sans I/O: ``_coreparts/resp_numbers.pxi``
(numbers as text), ``_coreparts/resp_writer.pxi`` (the RESP writer into one growable C buffer) and
``_coreparts/resp_reader.pxi`` (the incremental reply reader); then ``_coreparts/conn.pxi``
(the blocking connection doing one ``send`` and one ``recv`` per command),
``_coreparts/call.pxi`` (``Client.call`` itself: the script, pool, EVALSHA, stats),
``_coreparts/call_batch.pxi`` (a pipeline's queue, encoded as it is queued) and the
``_coreparts/domain_*.pxi`` helpers of digests, locks, claims and ids. Included, not imported,
so calls between the parts are direct C calls; what they share (structs, cross-part cdef
functions, the extension types) is declared in ``_core.pxd``.

``_core_py.py`` is the pure-Python twin with the same API and the same bytes (its parts are
the ``_coreparts/*_py.py`` twins).
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.exc cimport PyErr_CheckSignals
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject, PyObject_TypeCheck, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_GET_ITEM
from libc.errno cimport EAGAIN, EINTR, errno
from libc.math cimport fabs, isfinite, signbit
from libc.string cimport memchr, memcpy, memmove, strerror, strlen
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

import builtins
import collections
import collections.abc
import socket

import hiredis

from . import exceptions
from .exceptions import (
    ArgumentError, ArgumentTypeError, ConnectionError, ProtocolError, ResponseError, TimeoutError,
)
from .protocol import arguments
from .protocol.arguments import (
    argument_type_error, argument_value_error, feed_range_error, reply_too_long, too_long,
)
from .protocol.replies import response_error

__all__ = [
    "DEBUG", "NOT_ENOUGH", "CommandQueue", "Connection", "MuxCaller", "MuxConnection", "ReplyReader",
    "ScriptCaller", "SlotRouter",
    "_canonical_json", "_claimed_jobs", "_completed_jobs", "_digest_bucket", "_enqueued", "_fresh",
    "_fresh_id", "_is_digest", "_lock_new", "_lock_scope", "_lock_spec", "_manager_lock", "_numbered",
    "encode_command", "encode_evalsha", "encode_pipeline",
]

cdef extern from *:
    """
    #ifndef FASTLOCK_DEBUG
    #define FASTLOCK_DEBUG 0
    #endif
    """
    # 1 only in a FASTLOCK_DEBUG=1 build (setup.py): the ``if FASTLOCK_DEBUG`` checks
    # then run; otherwise the C compiler drops them.
    int FASTLOCK_DEBUG

DEBUG = bool(FASTLOCK_DEBUG)

# The limits and messages as C globals: no module-dict lookup on the hot path, and no
# public names beyond the API of ``_core.pyi``.
cdef long long MAX_BULK_LENGTH = arguments.MAX_BULK_LENGTH
cdef long long MAX_REPLY_ELEMENTS = arguments.MAX_REPLY_ELEMENTS
cdef str BAD_MAP_KEY = arguments.BAD_MAP_KEY
cdef str NOT_CONTIGUOUS = arguments.NOT_CONTIGUOUS
cdef str NOT_FINITE = arguments.NOT_FINITE
cdef str NOT_UTF8 = arguments.NOT_UTF8
cdef str OUT_OF_STEP = exceptions.OUT_OF_STEP


cdef int invariant(bint holds, str what) except -1:
    """An invariant check of the debug build."""
    if not holds:
        raise AssertionError(f"fastlock._core invariant broken: {what}")
    return 0


cdef int items_push(Items* a, object value) except -1:
    """Append a reference to ``value``; the capacity doubles when full and is kept."""
    cdef PyObject** data
    if a.len == a.cap:
        data = <PyObject**>PyMem_Realloc(a.data, (a.cap * 2 + 16) * sizeof(PyObject*))
        if data == NULL:
            raise MemoryError()
        a.data = data
        a.cap = a.cap * 2 + 16
    Py_INCREF(value)
    a.data[a.len] = <PyObject*>value
    a.len += 1
    return 0


cdef void items_clear(Items* a) noexcept:
    """Drop every reference (NULL: none), the last first (a destructor run meanwhile may
    even push)."""
    while a.len > 0:
        a.len -= 1
        Py_XDECREF(a.data[a.len])


include "_coreparts/resp_numbers.pxi"
include "_coreparts/resp_writer.pxi"
include "_coreparts/resp_reader.pxi"
include "_coreparts/conn.pxi"
include "_coreparts/call.pxi"
include "_coreparts/call_batch.pxi"
include "_coreparts/aio_reply.pxi"
include "_coreparts/aio_conn.pxi"
include "_coreparts/muxcall.pxi"
include "_coreparts/domain_digest.pxi"
include "_coreparts/domain_keys.pxi"
include "_coreparts/domain_new.pxi"
include "_coreparts/domain_jobs.pxi"
