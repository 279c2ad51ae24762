# The future of an asyncio connection's request (included by ``_core.pyx``): ``Reply``,
# asyncio's future protocol with its state in C, whose done callbacks its ``MuxConnection``
# runs by batches (``aio_conn.pxi``); and the end of a core iterator (``StopIteration`` set
# in C, without the traceback entries Cython adds to an exception raised through it). The
# pure-Python twin uses ``asyncio.Future`` (``aio_py.py``).


cdef object _InvalidStateError = None  # asyncio's: set by the first MuxConnection (not at import)
cdef object _CancelledError = None


cdef int _load_asyncio() except -1:
    global _InvalidStateError, _CancelledError
    if _InvalidStateError is None:
        import asyncio
        _CancelledError = asyncio.CancelledError
        _InvalidStateError = asyncio.InvalidStateError
    return 0


cdef enum:
    REPLY_PENDING, REPLY_DONE, REPLY_FAILED, REPLY_CANCELLED


@cython.final
@cython.freelist(256)
cdef class Reply:
    """The future of a ``MuxConnection`` request: asyncio's future protocol (``done``,
    ``result``, ``exception``, ``cancel``, ``add_done_callback``, ``get_loop``,
    ``_asyncio_future_blocking``; awaitable), its state in C. Done, it hands its callbacks
    (the waiting task's wake-up) to its connection, which runs every one of a batch from
    one ``call_soon``: no handle and no lookup per reply. A task awaiting it sees an
    ordinary future; cancelling it (the task cancelled) is ``Future.cancel``'s."""

    def get_loop(self):
        return self._conn._loop

    def done(self):
        return self._state != REPLY_PENDING

    def cancelled(self):
        return self._state == REPLY_CANCELLED

    def result(self):
        if self._state == REPLY_DONE:
            return self._value
        self._raise()

    def exception(self):
        if self._state == REPLY_FAILED:
            return self._value
        if self._state == REPLY_DONE:
            return None
        self._raise()

    cdef int _raise(self) except -1:
        if self._state == REPLY_FAILED:
            raise self._value
        if self._state == REPLY_CANCELLED:
            raise _cancelled(self._value)
        raise _InvalidStateError("Result is not set.")

    def add_done_callback(self, fn, *, context=None):
        if self._state != REPLY_PENDING:
            self._conn._loop.call_soon(fn, self, context=context)
        elif self._callback is None:
            self._callback, self._context = fn, context
        else:
            if self._more is None:
                self._more = []
            self._more.append((fn, context))

    def remove_done_callback(self, fn):
        cdef Py_ssize_t removed = 0
        if self._callback is not None and self._callback == fn:
            self._callback = self._context = None
            removed += 1
        if self._more is not None:
            kept = [(f, c) for f, c in self._more if f != fn]
            removed += len(self._more) - len(kept)
            self._more = kept
        return removed

    def cancel(self, msg=None):
        if self._state != REPLY_PENDING:
            return False
        self._settle(REPLY_CANCELLED, msg)
        return True

    def set_result(self, result):
        if self._state != REPLY_PENDING:
            raise _InvalidStateError("invalid state")
        self._settle(REPLY_DONE, result)

    def set_exception(self, exception):
        if self._state != REPLY_PENDING:
            raise _InvalidStateError("invalid state")
        if isinstance(exception, type):
            exception = exception()
        self._settle(REPLY_FAILED, exception)

    cdef int _settle(self, int state, value) except -1:
        """Done: ``value`` (the reply, the exception, the cancel message); its callbacks to
        its connection's next batch of wake-ups."""
        self._state = state
        self._value = value
        if self._callback is not None or self._more is not None:
            self._conn._wake_later(self)
        return 0

    cdef int _run_callbacks(self) except -1:
        fn, context, more = self._callback, self._context, self._more
        self._callback = self._context = self._more = None
        if fn is not None:
            _run_callback(self, fn, context)
        if more is not None:
            for fn, context in more:
                _run_callback(self, fn, context)
        return 0

    def __await__(self):
        return self

    def __iter__(self):
        return self

    def __next__(self):  # the slot is _reply_next (below): this is its Python face
        if self._state == REPLY_PENDING:
            return self._yielded()
        raise StopIteration(self.result())

    cdef object _yielded(self):
        if self._awaited:
            raise RuntimeError("await wasn't used with future")
        self._awaited = True
        self._asyncio_future_blocking = True
        return self

    @property
    def _loop(self):
        return self._conn._loop


cdef object _cancelled(message):
    """The ``CancelledError`` of a future cancelled with ``message`` (asyncio's)."""
    return _CancelledError() if message is None else _CancelledError(message)


cdef int _run_callback(Reply reply, fn, context) except -1:
    """``fn(reply)`` in ``context`` (``None``: the current one), an exception reported to the
    loop's handler as asyncio reports a callback's."""
    try:
        if context is None:
            fn(reply)
        else:
            context.run(fn, reply)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:
        reply._conn._loop.call_exception_handler(
            {"message": f"Exception in callback {fn!r}", "exception": exc, "future": reply}
        )
    return 0


cdef PyObject* _reply_next(object self) except NULL:
    """``Reply``'s ``tp_iternext`` (``await conn.send(...)``): itself while pending, then the
    end, its ``StopIteration`` set in C (no traceback entries)."""
    cdef Reply reply = <Reply>self
    if reply._state == REPLY_PENDING:
        result = reply._yielded()
    elif reply._state == REPLY_DONE:
        return fastlock_stop_iteration(reply._value)
    else:
        reply._raise()
    Py_INCREF(result)
    return <PyObject*>result


cdef extern from *:
    """
    /* Set StopIteration(value) as the error, without a traceback; NULL (a tp_iternext's end). */
    static PyObject* fastlock_stop_iteration(PyObject* value) {
        PyObject* stop = PyObject_CallOneArg(PyExc_StopIteration, value);
        if (stop != NULL) {
            PyErr_SetObject(PyExc_StopIteration, stop);
            Py_DECREF(stop);
        }
        return NULL;
    }
    static void fastlock_set_iternext(PyObject* type, void* next) {
        ((PyTypeObject*)type)->tp_iternext = (iternextfunc)next;
    }
    """
    PyObject* fastlock_stop_iteration(object value)
    void fastlock_set_iternext(object type, void* next)


fastlock_set_iternext(Reply, <void*>_reply_next)


cdef extern from *:
    """
    static double fastlock_aio_nan(void) { return __builtin_nan(""); }
    """
    double NO_DEADLINE "fastlock_aio_nan"()
