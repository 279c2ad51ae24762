# The blocking connection (included by ``_core.pyx``): one ``send`` and one ``recv`` on
# the file descriptor per command, writing with ``Buf`` and reading with ``ReplyReader``.

cdef extern from "errno.h":
    int EWOULDBLOCK

cdef extern from "sys/socket.h" nogil:
    ssize_t c_send "send"(int, const void*, size_t, int)
    ssize_t c_recv "recv"(int, void*, size_t, int)
    int MSG_NOSIGNAL
    int MSG_DONTWAIT

DEF READ_SIZE = 65536

cdef object _socket_type = socket.socket
cdef extern from "Python.h":
    bint PyExceptionInstance_Check(object)  # a type flag test

cdef PyTypeObject* _RESPONSE_ERROR = <PyTypeObject*>ResponseError


cdef inline bint is_error_reply(object reply) noexcept:
    """``isinstance(reply, ResponseError)`` without a call (a reply is rarely an exception)."""
    return PyExceptionInstance_Check(reply) and PyObject_TypeCheck(reply, _RESPONSE_ERROR)

cdef tuple _TIMEOUTS = (builtins.TimeoutError, BlockingIOError)


@cython.final
cdef class Connection:
    """One socket to one server. Plain TCP and unix sockets are driven with ``send`` and
    ``recv`` on the file descriptor (timeouts are the socket's SO_SNDTIMEO/SO_RCVTIMEO);
    TLS sockets through their Python methods. Any I/O failure closes the connection, and
    so do bytes left in the reader after a command's reply(ies): ``ProtocolError``.
    ``round_trips`` counts the writes sent (a pipeline is one).
    """

    def __cinit__(self):
        buf_init(&self._out, 4096)
        self._fd = -1
        self._reader = ReplyReader()
        self._in = bytearray(READ_SIZE)
        self._in_data = PyByteArray_AS_STRING(self._in)

    def __init__(self, sock):
        self.sock = sock
        self._fd = sock.fileno() if type(sock) is _socket_type else -1

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
            invariant(not self._reader.has_data(), "unread reply bytes in the reader before a command")
        return 0

    cdef int _lost(self, exc_type, str what, bint sent) except -1:
        self.close()
        raise exc_type(what, sent=sent)

    cdef int _flush(self) except -1:
        cdef Py_ssize_t length = self._out.len
        self._out.len = 0
        return self._write(self._out.data, length)

    cdef int _write(self, const char* data, Py_ssize_t length) except -1:
        """Send ``length`` bytes at ``data``: one write (a round trip)."""
        cdef Py_ssize_t total = 0
        cdef ssize_t n
        cdef int err
        self.round_trips += 1
        if self._fd < 0:
            try:
                self.sock.sendall(PyBytes_FromStringAndSize(data, length))
            except OSError as exc:
                # sendall does not say how much left; assume the worst.
                self._lost(TimeoutError if isinstance(exc, _TIMEOUTS) else ConnectionError,
                           f"send failed: {exc}", True)
            return 0
        # First try without releasing the GIL: a command fits in the socket buffer, so this
        # never blocks. Only a full buffer (a huge payload, a stalled server) waits, nogil.
        n = c_send(self._fd, data, <size_t>length, MSG_NOSIGNAL | MSG_DONTWAIT)
        if n > 0:
            total = n
        while total < length:
            with nogil:
                n = c_send(self._fd, data + total, <size_t>(length - total), MSG_NOSIGNAL)
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
        """The next reply, reading as needed; ``last_used`` is left to the caller."""
        reply = self._reader._next()
        try:
            while reply is _NOT_ENOUGH:
                self._reader._take(self._in, self._recv())
                reply = self._reader._next()
        except ProtocolError:
            self.close()
            raise
        return reply

    cdef list _read_replies(self, Py_ssize_t count):
        """``count`` replies, the stream then checked drained."""
        cdef Py_ssize_t got = 0
        cdef list replies = [None] * count
        while True:
            got += self._reader._move_ready(replies, got)  # those parsed already
            if got == count:
                break
            replies[got] = self._read_reply()
            got += 1
        self._check_drained()
        self._touch()
        return replies

    cdef inline void _touch(self) noexcept:
        cdef timespec now
        clock_gettime(CLOCK_MONOTONIC, &now)
        self.last_used = now.tv_sec + now.tv_nsec * 1e-9

    cdef int _check_drained(self) except -1:
        """Raise if anything follows the last reply read: the stream is out of step."""
        if self._reader._pending():
            self.close()
            raise ProtocolError(OUT_OF_STEP)
        return 0

    cdef object _roundtrip(self):
        self._flush()
        reply = self._read_reply()
        self._check_drained()
        self._touch()
        if is_error_reply(reply):
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
        return self._evalsha(sha, keys, args, None)

    cdef object _evalsha(self, sha, keys, args, bytes head):
        self._usable()
        try:
            put_evalsha(&self._out, sha, keys, args, head, -1)
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
        return self._read_replies(count)

    def send_batch(self, CommandQueue batch):
        """Send the commands of ``batch`` in one write, read all replies; error replies are
        returned. The batch keeps them."""
        self._usable()
        self._write(batch._out.data, batch._out.len)
        return self._read_replies(batch._items.len // 3)
