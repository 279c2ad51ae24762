# The asyncio connection (included by ``_core.pyx``): ``MuxConnection``, an asyncio protocol
# multiplexing many tasks' commands on one socket. Requests are encoded straight into one
# growable C buffer (``Buf``) and their waiters kept in a C ring, oldest first: the written
# ones, then the pending ones; one flush per loop iteration (one ``call_soon``) writes every
# pending request still wanted in one ``transport.write``; ``data_received`` feeds the core's
# ``ReplyReader`` and resolves the written requests' futures in order. The pure-Python twin is
# ``_coreparts/aio_py.py``. asyncio itself is imported by the first connection made, never
# with the core (a sync client does not load it).

@cython.final
cdef class MuxConnection:
    """An asyncio protocol speaking RESP2 to one server for many tasks (see
    ``fastlock.aio.connection``): ``send`` (an encoded request) and ``_send_evalsha`` (a
    script call encoded here) return a future; ``load`` counts the requests not answered yet
    (those whose callers gave up too: they still take a reply), ``writes`` the transport
    writes; ``on_change(conn)`` is called when the connection closed, when a flush dropped
    every request, and after replies while ``room_waiters`` is truthy (the pool's waiters for
    room). A written request unanswered ``stalled_after`` seconds past its deadline closes
    the connection."""

    def __cinit__(self):
        buf_init(&self._out, 4096)
        self._cap = 64
        self._ring = <Waiter*>PyMem_Malloc(self._cap * sizeof(Waiter))
        if self._ring == NULL:
            raise MemoryError()

    def __init__(self, loop, str address="", double stalled_after=5.0):
        _load_asyncio()
        self.address = address
        self._loop = loop
        self._reader = ReplyReader()
        self._stalled_after = stalled_after
        self._call_soon = loop.call_soon
        self._flush_cb = self._flush
        self._wake_cb = self._wake
        self._woken = []
        self._lost = None

    def __dealloc__(self):
        self._drop_all()
        PyMem_Free(self._ring)
        PyMem_Free(self._out.data)

    # ---- asyncio.Protocol

    def connection_made(self, transport):
        self._transport = transport
        self._write = transport.write
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)

    def data_received(self, data):
        cdef Waiter* w
        cdef ReplyReader reader = self._reader
        cdef Py_ssize_t mask = self._cap - 1
        if type(data) is not bytes:
            data = bytes(data)
        try:
            reader._accept(data, PyBytes_AS_STRING(data), 0, PyBytes_GET_SIZE(data))
            reply = reader._next()
            while reply is not _NOT_ENOUGH:
                if self._written == 0:
                    raise ProtocolError(OUT_OF_STEP)
                w = &self._ring[self._head]
                if w.count == 0:
                    self._answer(w, reply)
                else:
                    if w.replies == NULL:
                        replies = []
                        Py_INCREF(replies)
                        w.replies = <PyObject*>replies
                    (<list>w.replies).append(reply)
                    if PyList_GET_SIZE(<object>w.replies) == w.count:
                        self._answer(w, <object>w.replies)
                reply = reader._next()
        except ProtocolError as exc:
            text = str(exc)
            self._fail(lambda: ProtocolError(text))
            return
        if self.room_waiters and self.on_change is not None:
            self.on_change(self)

    cdef int _answer(self, Waiter* w, object reply) except -1:
        """Pop the oldest written request (``w``) and give its future ``reply``."""
        cdef Reply future = <Reply>w.future
        Py_XDECREF(w.replies)
        w.replies = NULL
        w.future = NULL
        self._head = (self._head + 1) & (self._cap - 1)
        self._written -= 1
        self._answered += 1
        self.load -= 1
        if future._state == REPLY_PENDING:  # else its caller gave up (cancelled, timed out): dropped
            future._settle(REPLY_DONE, reply)
        Py_DECREF(future)  # the ring's reference
        return 0

    cdef int _wake_later(self, Reply reply) except -1:
        """Run ``reply``'s callbacks in the next batch (one ``call_soon`` per batch)."""
        self._woken.append(reply)
        if len(self._woken) == 1:
            self._call_soon(self._wake_cb)
        return 0

    def _wake(self):
        """Run the callbacks of the replies done since the last batch, in order."""
        woken, self._woken = self._woken, []
        for reply in woken:
            (<Reply>reply)._run_callbacks()

    def eof_received(self):
        return None  # the transport closes; connection_lost follows

    def connection_lost(self, exc):
        message = f"connection to {self.address} lost" + (f": {exc}" if exc else " (closed by the server)")
        self._fail(lambda: ConnectionError(message, sent=True))
        self._closed_event().set()

    def pause_writing(self):
        self._paused = True

    def resume_writing(self):
        self._paused = False
        if self._pending and not self._flush_scheduled:
            self._flush_scheduled = True
            self._call_soon(self._flush_cb)

    # ---- requests

    def send(self, bytes payload, Py_ssize_t count=0, timeout=None):
        """Queue ``payload`` (``count`` commands, 0: one) for the next flush; the future gets
        its reply, or the list of its ``count`` replies. Error replies are values. After
        ``timeout`` seconds (``None``: never) the future gets a ``TimeoutError``."""
        cdef Py_ssize_t n = PyBytes_GET_SIZE(payload)
        cdef double deadline = NO_DEADLINE() if timeout is None else _monotonic() + <double>timeout
        future = self._new_future()
        buf_reserve(&self._out, n)
        memcpy(self._out.data + self._out.len, PyBytes_AS_STRING(payload), n)
        self._out.len += n
        self._queued(future, count, deadline)
        return future

    cdef Reply _send_evalsha(self, _Entry entry, keys, args, double deadline):
        """EVALSHA of ``entry``'s script encoded into the write buffer; its future."""
        future = self._new_future()
        cdef Py_ssize_t before = self._out.len
        try:
            put_evalsha(&self._out, entry.sha, keys, args, entry.head, -1)
        except BaseException:
            self._out.len = before  # nothing of it stays
            raise
        self._queued(future, 0, deadline)
        return future

    cdef Reply _send_command(self, tuple args, double deadline):
        """Command ``args`` encoded into the write buffer; its future."""
        future = self._new_future()
        cdef Py_ssize_t before = self._out.len
        try:
            put_command(&self._out, args, -1)
        except BaseException:
            self._out.len = before  # nothing of it stays
            raise
        self._queued(future, 0, deadline)
        return future

    cdef Reply _new_future(self):
        """A request's future, once the connection is known usable and has room for it."""
        if self.closed:
            raise ConnectionError(f"connection to {self.address} is closed", sent=False)
        if self._written + self._pending == self._cap:
            self._grow()
        cdef Reply reply = Reply.__new__(Reply)
        reply._conn = self
        return reply

    cdef int _queued(self, object future, Py_ssize_t count, double deadline) except -1:
        """Add a pending request (``future``, room made by ``_new_future``) whose bytes end
        the write buffer."""
        cdef Waiter* w = &self._ring[(self._head + self._written + self._pending) & (self._cap - 1)]
        Py_INCREF(future)
        w.future = <PyObject*>future
        w.replies = NULL
        w.count = count
        w.end = self._out.len
        w.deadline = deadline
        self._pending += 1
        self.load += 1
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._call_soon(self._flush_cb)
        if deadline == deadline and (self._watch is None or deadline < self._watch_at):  # not NaN
            self._arm(deadline)
        return 0

    cdef int _grow(self) except -1:
        """Double the ring, its entries moved to its start in order."""
        cdef Py_ssize_t n = self._written + self._pending, i
        cdef Waiter* ring = <Waiter*>PyMem_Malloc(2 * self._cap * sizeof(Waiter))
        if ring == NULL:
            raise MemoryError()
        for i in range(n):
            ring[i] = self._ring[(self._head + i) & (self._cap - 1)]
        PyMem_Free(self._ring)
        self._ring = ring
        self._head = 0
        self._cap *= 2
        return 0

    @property
    def awaiting_replies(self):
        """Written requests whose replies have not come yet."""
        return self._written

    def _flush(self):
        """Write every pending request whose future is not done yet, in one write."""
        cdef Py_ssize_t mask = self._cap - 1, first = self._head + self._written
        cdef Py_ssize_t i, kept = 0, start = 0, at = 0, size
        cdef Waiter* w
        cdef bint dropped = False
        self._flush_scheduled = False
        if self._paused or self.closed or self._pending == 0:
            return
        for i in range(self._pending):
            w = &self._ring[(first + i) & mask]
            size = w.end - start
            start = w.end
            if (<Reply>w.future)._state != REPLY_PENDING:  # cancelled or timed out before written: dropped
                Py_DECREF(<object>w.future)
                w.future = NULL
                self.load -= 1
                dropped = True
                continue
            if dropped:  # move it (and its bytes) down over the dropped ones
                memmove(self._out.data + at, self._out.data + w.end - size, size)
                self._ring[(first + kept) & mask] = w[0]
            at += size
            w = &self._ring[(first + kept) & mask]
            w.seq = self._sent
            self._sent += 1
            kept += 1
        self._pending = 0
        self._out.len = 0
        if kept:
            self._written += kept
            self.writes += 1
            self._write(PyBytes_FromStringAndSize(self._out.data, at))
        elif self.on_change is not None:
            self.on_change(self)

    # ---- deadlines

    cdef int _arm(self, double deadline) except -1:
        if self._watch is not None:
            self._watch.cancel()
        self._watch_at = deadline
        self._watch = self._loop.call_later(max(0.0, deadline - _monotonic()), self._expire)
        return 0

    def _expire(self):
        """Time out every request past its deadline; watch the next deadline."""
        cdef double now = _monotonic(), earliest = NO_DEADLINE()
        cdef Py_ssize_t i, mask = self._cap - 1
        cdef Waiter* w
        cdef bint sent
        self._watch = None
        for i in range(self._written + self._pending):
            w = &self._ring[(self._head + i) & mask]
            if not (w.deadline == w.deadline) or (<Reply>w.future)._state != REPLY_PENDING:  # NaN: none
                continue
            if w.deadline <= now:
                sent = i < self._written
                where = "after it was sent" if sent else "before it was sent"
                (<Reply>w.future)._settle(
                    REPLY_FAILED,
                    TimeoutError(f"no reply from {self.address} in time ({where})", sent=sent)
                )
                if sent:
                    self._loop.call_later(self._stalled_after, self._check_stalled, w.seq)
            elif not (earliest == earliest) or w.deadline < earliest:
                earliest = w.deadline
        if earliest == earliest:
            self._arm(earliest)

    def _check_stalled(self, unsigned long long seq):
        """Close the connection if written request ``seq``, past its deadline, is unanswered."""
        if self.closed or self._answered > seq:
            return
        message = f"{self.address} stopped answering: the connection was closed"
        self._fail(lambda: TimeoutError(message, sent=True))

    # ---- closing

    cdef int _fail(self, written_error) except -1:
        """Close and fail every request: written ones with a ``written_error()`` each (they
        may have run), unwritten ones with an unsent ``ConnectionError``."""
        cdef Py_ssize_t i, mask = self._cap - 1
        cdef Waiter* w
        if self.closed:
            return 0
        self.closed = True
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        futures = []
        for i in range(self._written + self._pending):
            w = &self._ring[(self._head + i) & mask]
            if w.future != NULL:
                futures.append((i < self._written, <object>w.future))
        self._drop_all()
        unsent = f"connection to {self.address} closed before the command was sent"
        for written, future in futures:
            if (<Reply>future)._state == REPLY_PENDING:
                (<Reply>future)._settle(
                    REPLY_FAILED, written_error() if written else ConnectionError(unsent, sent=False)
                )
        self.load = 0
        self._out.len = 0
        if self._transport is None:
            self._closed_event().set()
        else:
            self._transport.abort()
        if self.on_change is not None:
            self.on_change(self)
        return 0

    cdef void _drop_all(self) noexcept:
        """Let go of every request (their futures untouched)."""
        cdef Py_ssize_t i, mask = self._cap - 1
        cdef Waiter* w
        for i in range(self._written + self._pending):
            w = &self._ring[(self._head + i) & mask]
            Py_XDECREF(w.future)
            Py_XDECREF(w.replies)
            w.future = w.replies = NULL
        self._answered += self._written
        self._head = self._written = self._pending = 0

    cdef object _closed_event(self):
        if self._lost is None:
            import asyncio
            self._lost = asyncio.Event()
        return self._lost

    def close(self):
        """Close now: requests not answered fail with ``ConnectionError``."""
        message = f"connection to {self.address} closed by the client"
        self._fail(lambda: ConnectionError(message, sent=True))

    def wait_closed(self):
        """Wait until the transport has let go of the socket (a coroutine)."""
        return self._closed_event().wait()
