# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The Cython core: a RESP writer into one growable C buffer, hiredis's reply reader,
and a connection doing one ``send`` and one ``recv`` per command.

``_core_py.py`` is the pure-Python twin with the same API and the same bytes.
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.exc cimport PyErr_CheckSignals
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.errno cimport EAGAIN, EINTR, errno
from libc.math cimport isfinite
from libc.string cimport memcpy, strerror, strlen
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

import builtins
import socket

import hiredis

from ._arguments import (
    MAX_BULK_LENGTH,
    NOT_CONTIGUOUS,
    NOT_FINITE,
    NOT_UTF8,
    argument_type_error,
    argument_value_error,
    too_long,
)
from .exceptions import (
    OUT_OF_STEP,
    ConnectionError,
    ProtocolError,
    ResponseError,
    TimeoutError,
    response_error,
)

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object, Py_ssize_t*) except NULL
    long long PyLong_AsLongLongAndOverflow(object, int*) except? -1
    char* PyOS_double_to_string(double, char, int, int, int*) except NULL
    int Py_DTSF_ADD_DOT_0

cdef extern from "errno.h":
    int EWOULDBLOCK

cdef extern from "sys/socket.h" nogil:
    ssize_t c_send "send"(int, const void*, size_t, int)
    ssize_t c_recv "recv"(int, void*, size_t, int)
    int MSG_NOSIGNAL
    int MSG_DONTWAIT

cdef extern from *:
    """
    #ifndef FASTLOCK_DEBUG
    #define FASTLOCK_DEBUG 0
    #endif
    """
    # 1 only in a FASTLOCK_DEBUG=1 build (setup.py): the ``if FASTLOCK_DEBUG`` checks
    # below then run; otherwise the C compiler drops them.
    int FASTLOCK_DEBUG

DEF READ_SIZE = 65536

DEBUG = bool(FASTLOCK_DEBUG)

cdef object _NOT_ENOUGH = object()
cdef object _socket_type = socket.socket
cdef tuple _TIMEOUTS = (builtins.TimeoutError, BlockingIOError)


# --- invariant checks of the debug build --------------------------------------------

cdef int invariant(bint holds, str what) except -1:
    if not holds:
        raise AssertionError(f"fastlock._core invariant broken: {what}")
    return 0


cdef int check_buf(Buf* b, Py_ssize_t free) except -1:
    """The buffer is allocated, its length within its capacity, with ``free`` bytes left."""
    return invariant(b.data != NULL and 0 <= b.len and b.len + free <= b.cap, "write buffer bounds")


# --- the write buffer -----------------------------------------------------------------

cdef struct Buf:
    char* data
    Py_ssize_t len
    Py_ssize_t cap


cdef int buf_init(Buf* b, Py_ssize_t cap) except -1:
    b.data = <char*>PyMem_Malloc(cap)
    if b.data == NULL:
        raise MemoryError()
    b.len = 0
    b.cap = cap
    return 0


cdef int buf_grow(Buf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap = b.cap * 2
    cdef char* data
    while cap < b.len + extra:
        cap *= 2
    data = <char*>PyMem_Realloc(b.data, cap)
    if data == NULL:
        raise MemoryError()
    b.data = data
    b.cap = cap
    return 0


cdef inline int buf_reserve(Buf* b, Py_ssize_t extra) except -1:
    if b.len + extra > b.cap:
        buf_grow(b, extra)
    if FASTLOCK_DEBUG:
        check_buf(b, extra)
    return 0


cdef inline void put_decimal(Buf* b, long long value):
    """Write a decimal integer; the caller has reserved 21 bytes."""
    cdef char tmp[24]
    cdef int i = 24
    cdef unsigned long long u = <unsigned long long>(-value) if value < 0 else <unsigned long long>value
    while True:
        i -= 1
        tmp[i] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    if value < 0:
        i -= 1
        tmp[i] = b'-'
    memcpy(b.data + b.len, tmp + i, 24 - i)
    b.len += 24 - i


cdef inline int put_header(Buf* b, char kind, Py_ssize_t n) except -1:
    """Write ``*n\\r\\n`` or ``$n\\r\\n``."""
    buf_reserve(b, 24)
    b.data[b.len] = kind
    b.len += 1
    put_decimal(b, n)
    b.data[b.len] = 13
    b.data[b.len + 1] = 10
    b.len += 2
    if FASTLOCK_DEBUG:
        check_buf(b, 0)
    return 0


cdef inline int put_bulk(Buf* b, const char* data, Py_ssize_t n) except -1:
    put_header(b, b'$', n)
    buf_reserve(b, n + 2)
    memcpy(b.data + b.len, data, n)
    b.data[b.len + n] = 13
    b.data[b.len + n + 1] = 10
    b.len += n + 2
    if FASTLOCK_DEBUG:
        check_buf(b, 0)
    return 0


cdef int put_sized(
    Buf* b, const char* data, Py_ssize_t n, int kind, Py_ssize_t index, Py_ssize_t command
) except -1:
    if n > MAX_BULK_LENGTH:
        raise argument_value_error(kind, index, command, too_long(n))
    return put_bulk(b, data, n)


cdef int put_integer(Buf* b, long long value) except -1:
    """Write a 64-bit integer as a decimal bulk string."""
    cdef char digits[24]
    cdef Buf tmp
    tmp.data = digits
    tmp.len = 0
    tmp.cap = 24
    put_decimal(&tmp, value)
    return put_bulk(b, digits, tmp.len)


cdef int put_long(Buf* b, object value) except -1:
    cdef int overflow = 0
    cdef long long v = PyLong_AsLongLongAndOverflow(value, &overflow)
    cdef bytes text
    if overflow:
        text = (b"%d" % value)
        return put_bulk(b, PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text))
    return put_integer(b, v)


cdef int put_float(Buf* b, double value, int kind, Py_ssize_t index, Py_ssize_t command) except -1:
    if not isfinite(value):
        raise argument_value_error(kind, index, command, NOT_FINITE)
    cdef char* text = PyOS_double_to_string(value, b'r', 0, Py_DTSF_ADD_DOT_0, NULL)
    try:
        put_bulk(b, text, <Py_ssize_t>strlen(text))
    finally:
        PyMem_Free(text)
    return 0


cdef int put_buffer(Buf* b, object value, int kind, Py_ssize_t index, Py_ssize_t command) except -1:
    cdef Py_buffer view
    try:
        PyObject_GetBuffer(value, &view, PyBUF_SIMPLE)
    except BufferError:
        raise argument_value_error(kind, index, command, NOT_CONTIGUOUS) from None
    try:
        put_sized(b, <const char*>view.buf, view.len, kind, index, command)
    finally:
        PyBuffer_Release(&view)
    return 0


cdef int put_str(Buf* b, object value, int kind, Py_ssize_t index, Py_ssize_t command) except -1:
    cdef Py_ssize_t n
    cdef const char* data
    try:
        data = PyUnicode_AsUTF8AndSize(value, &n)
    except UnicodeEncodeError:
        raise argument_value_error(kind, index, command, NOT_UTF8) from None
    return put_sized(b, data, n, kind, index, command)


cdef int put_arg(Buf* b, object value, int kind, Py_ssize_t index, Py_ssize_t command) except -1:
    """Normalise one argument and write it as a bulk string (the rules in README)."""
    cdef type t = type(value)
    if t is bytes:
        return put_sized(b, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value), kind, index, command)
    if t is str:
        return put_str(b, value, kind, index, command)
    if t is int:
        return put_long(b, value)
    if t is float:
        return put_float(b, value, kind, index, command)
    if value is True:
        return put_bulk(b, b"1", 1)
    if value is False or value is None:
        return put_bulk(b, b"0", 1)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return put_buffer(b, value, kind, index, command)
    if isinstance(value, str):
        return put_str(b, value, kind, index, command)
    if isinstance(value, int):
        return put_long(b, value)
    if isinstance(value, float):
        return put_float(b, value, kind, index, command)
    raise argument_type_error(kind, index, command, value)


cdef int put_command(Buf* b, tuple args, Py_ssize_t command) except -1:
    cdef Py_ssize_t i, n = len(args)
    if n == 0:
        raise ValueError("a command needs at least its name")
    put_header(b, b'*', n)
    for i in range(n):
        put_arg(b, args[i], 0, i, command)
    return 0


cdef int put_evalsha(Buf* b, object sha, object keys, object args) except -1:
    cdef Py_ssize_t i
    if type(keys) is not tuple and type(keys) is not list:
        keys = tuple(keys)
    if type(args) is not tuple and type(args) is not list:
        args = tuple(args)
    cdef Py_ssize_t nk = len(keys), na = len(args)
    put_header(b, b'*', 3 + nk + na)
    put_bulk(b, b"EVALSHA", 7)
    put_arg(b, sha, 0, 1, -1)
    put_integer(b, nk)
    for i in range(nk):
        put_arg(b, keys[i], 1, i, -1)
    for i in range(na):
        put_arg(b, args[i], 2, i, -1)
    return 0


cdef int put_pipeline(Buf* b, object commands) except -1:
    cdef Py_ssize_t i = 0
    for command in commands:
        put_command(b, <tuple?>command, i)
        i += 1
    return 0


cdef bytes take(Buf* b):
    return PyBytes_FromStringAndSize(b.data, b.len)


def encode_command(*args):
    """Encode one command as a RESP array of bulk strings."""
    cdef Buf b
    buf_init(&b, 256)
    try:
        put_command(&b, args, -1)
        return take(&b)
    finally:
        PyMem_Free(b.data)


def encode_evalsha(sha, keys, args):
    """Encode ``EVALSHA sha len(keys) *keys *args``."""
    cdef Buf b
    buf_init(&b, 256)
    try:
        put_evalsha(&b, sha, keys, args)
        return take(&b)
    finally:
        PyMem_Free(b.data)


def encode_pipeline(commands):
    """Encode several commands back to back, as one write."""
    cdef Buf b
    buf_init(&b, 1024)
    try:
        put_pipeline(&b, commands)
        return take(&b)
    finally:
        PyMem_Free(b.data)


# --- the reply reader -----------------------------------------------------------------

@cython.final
cdef class ReplyReader:
    """hiredis's C reader; error replies come back as typed ``ResponseError`` values."""

    cdef object _reader
    cdef object _feed
    cdef object _gets

    def __cinit__(self):
        self._reader = hiredis.Reader(
            protocolError=ProtocolError, replyError=response_error, notEnoughData=_NOT_ENOUGH
        )
        self._feed = self._reader.feed
        self._gets = self._reader.gets

    def feed(self, data, Py_ssize_t offset=0, Py_ssize_t length=-1):
        """Add received bytes (any buffer; ``offset``/``length`` select a slice)."""
        if length < 0:
            length = len(data) - offset
        self._feed(data, offset, length)

    def gets(self):
        """Return the next complete reply, or ``False`` when more bytes are needed."""
        reply = self._gets()
        return False if reply is _NOT_ENOUGH else reply

    def has_data(self):
        """True when bytes not yet returned as a reply are buffered."""
        return self._reader.has_data()


# --- the connection -------------------------------------------------------------------

@cython.final
cdef class Connection:
    """One socket to one server. Plain TCP and unix sockets are driven with ``send`` and
    ``recv`` on the file descriptor (timeouts are the socket's SO_SNDTIMEO/SO_RCVTIMEO);
    TLS sockets through their Python methods. Any I/O failure closes the connection, and
    so do bytes left in the reader after a command's reply(ies): ``ProtocolError``.
    ``round_trips`` counts the writes sent (a pipeline is one).
    """

    cdef readonly object sock
    cdef readonly bint broken
    cdef public double last_used  # time.monotonic() of the last reply read
    cdef public long generation
    cdef readonly unsigned long long round_trips
    cdef int _fd
    cdef Buf _out
    cdef object _feed
    cdef object _gets
    cdef object _has_data
    cdef bytearray _in
    cdef char* _in_data
    cdef object __weakref__

    def __cinit__(self, sock):
        buf_init(&self._out, 4096)
        self.sock = sock
        self._fd = sock.fileno() if type(sock) is _socket_type else -1
        reader = hiredis.Reader(
            protocolError=ProtocolError, replyError=response_error, notEnoughData=_NOT_ENOUGH
        )
        self._feed = reader.feed
        self._gets = reader.gets
        self._has_data = reader.has_data
        self._in = bytearray(READ_SIZE)
        self._in_data = PyByteArray_AS_STRING(self._in)

    def __dealloc__(self):
        PyMem_Free(self._out.data)

    def close(self):
        """Close the socket; the connection cannot be used again."""
        self.broken = True
        self.sock.close()

    cdef int _usable(self) except -1:
        if self.broken:
            raise ConnectionError("connection is closed", sent=False)
        if FASTLOCK_DEBUG:  # leftovers would be sent again, or read as the next command's reply
            invariant(self._out.len == 0, "unsent bytes in the write buffer before a command")
            invariant(not self._has_data(), "unread reply bytes in the reader before a command")
        return 0

    cdef int _lost(self, exc_type, str what, bint sent) except -1:
        self.close()
        raise exc_type(what, sent=sent)

    cdef int _flush(self) except -1:
        cdef Py_ssize_t total = 0, length = self._out.len
        cdef ssize_t n
        cdef int err
        self._out.len = 0
        self.round_trips += 1
        if self._fd < 0:
            try:
                self.sock.sendall(PyBytes_FromStringAndSize(self._out.data, length))
            except OSError as exc:
                # sendall does not say how much left; assume the worst.
                self._lost(TimeoutError if isinstance(exc, _TIMEOUTS) else ConnectionError,
                           f"send failed: {exc}", True)
            return 0
        # First try without releasing the GIL: a command fits in the socket buffer, so this
        # never blocks. Only a full buffer (a huge payload, a stalled server) waits, nogil.
        n = c_send(self._fd, self._out.data, <size_t>length, MSG_NOSIGNAL | MSG_DONTWAIT)
        if n > 0:
            total = n
        while total < length:
            with nogil:
                n = c_send(self._fd, self._out.data + total, <size_t>(length - total), MSG_NOSIGNAL)
            if n >= 0:
                total += n
                continue
            err = errno
            if err == EINTR:
                PyErr_CheckSignals()
            elif err == EAGAIN or err == EWOULDBLOCK:
                self._lost(TimeoutError, "timed out sending the command", total > 0)
            else:
                self._lost(ConnectionError, f"send failed: {strerror(err).decode()}", total > 0)
        if FASTLOCK_DEBUG:
            invariant(total == length, "sent more or less than the command")
        return 0

    cdef Py_ssize_t _recv(self) except -1:
        cdef ssize_t n = 0
        cdef int err
        if self._fd < 0:
            try:
                n = self.sock.recv_into(self._in)
            except OSError as exc:
                self._lost(TimeoutError if isinstance(exc, _TIMEOUTS) else ConnectionError,
                           f"receive failed: {exc}", True)
        else:
            while True:
                with nogil:
                    n = c_recv(self._fd, self._in_data, READ_SIZE, 0)
                if n >= 0:
                    break
                err = errno
                if err == EINTR:
                    PyErr_CheckSignals()
                elif err == EAGAIN or err == EWOULDBLOCK:
                    self._lost(TimeoutError, "timed out waiting for the reply", True)
                else:
                    self._lost(ConnectionError, f"receive failed: {strerror(err).decode()}", True)
        if n == 0:
            self._lost(ConnectionError, "connection closed by the server", True)
        if FASTLOCK_DEBUG:
            invariant(0 < n <= READ_SIZE, "received more than the read buffer holds")
        return n

    cdef object _read_reply(self):
        cdef timespec now
        reply = self._gets()
        try:
            while reply is _NOT_ENOUGH:
                self._feed(self._in, 0, self._recv())
                reply = self._gets()
        except ProtocolError:
            self.close()
            raise
        clock_gettime(CLOCK_MONOTONIC, &now)
        self.last_used = now.tv_sec + now.tv_nsec * 1e-9
        return reply

    cdef int _check_drained(self) except -1:
        """Raise if anything follows the last reply read: the stream is out of step."""
        if self._has_data():
            self.close()
            raise ProtocolError(OUT_OF_STEP)
        return 0

    cdef object _roundtrip(self):
        self._flush()
        reply = self._read_reply()
        self._check_drained()
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    def execute(self, tuple args):
        """Send one command and return its reply; an error reply is raised."""
        self._usable()
        try:
            put_command(&self._out, args, -1)
        except BaseException:
            self._out.len = 0
            raise
        return self._roundtrip()

    def evalsha(self, sha, keys, args):
        """Run ``EVALSHA sha len(keys) *keys *args``; an error reply is raised."""
        self._usable()
        try:
            put_evalsha(&self._out, sha, keys, args)
        except BaseException:
            self._out.len = 0
            raise
        return self._roundtrip()

    def pipeline(self, commands):
        """Send commands in one write, read all replies; error replies are returned."""
        cdef Py_ssize_t count = len(commands)
        self._usable()
        try:
            put_pipeline(&self._out, commands)
        except BaseException:
            self._out.len = 0
            raise
        self._flush()
        replies = [self._read_reply() for _ in range(count)]
        self._check_drained()
        return replies
