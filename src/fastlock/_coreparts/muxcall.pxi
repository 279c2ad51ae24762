# ``client.call`` and ``client.execute`` of the asyncio client (included by ``_core.pyx``):
# ``MuxCaller.call`` and ``MuxCaller.execute`` return a ``_MuxCall``, a coroutine object of the
# core's own (``send``, ``throw``, ``close``, ``__await__``), so ``await client.call(...)`` is
# one C call and the await. Awaited, a call looks the script up, appends its ``#meta`` values,
# picks the least loaded connection, encodes the EVALSHA into it and waits on the request's
# future; the reply comes back through C, the duration goes to the script's stats. The rare
# parts are coroutines of the client it hands over to (``slow``: no connection with room, a
# server version to read first; ``failed``: an error reply, a failure, a request lost before
# it was written). A command (``execute``) is refused or encoded into the least loaded
# connection the same way and its error reply raised; its rare parts go to the client's
# ``again``. The twin: ``muxcall_py.py``.

cdef enum:
    CALL_NEW, CALL_WAITING, CALL_INNER, CALL_DONE

cdef object _FINISHED = object()  # what _MuxCall._resume returns once the reply is in _result


@cython.final
cdef class MuxCaller:
    """``AsyncClient.call``: runs script ``name`` of ``scripts`` (a ``ScriptRegistry``;
    ``settings`` the ``ScriptSettings``; ``with_meta(script, args)`` appends the ``#meta``
    values) on the least loaded of ``pool.connections`` (``MuxConnection``s with a load under
    ``pool.max_in_flight``) within ``timeout`` (the default of a call's own), and records the
    call's duration as ``ScriptCaller`` does (``record`` when the stats fold, ``fold_at``).
    ``slow(name, keys, args, busy_timeout, timeout)`` and ``failed(failure, script, keys,
    args, start, busy_timeout, timeout)`` are the client's coroutine functions taking over
    (see the part's header). ``execute(*args, timeout=None)``: a command, refused first by
    ``refuse(args)`` (commands changing a shared connection's state), its error reply raised;
    ``again(args, timeout, lost)`` takes it over when no connection has room (``lost``
    false) or when it was lost before it was written (``lost`` true: once more)."""

    def __init__(
        self, pool, scripts, settings, with_meta, slow, failed, record, Py_ssize_t fold_at, timeout,
        refuse, again,
    ):
        self._refuse = refuse
        self._again = again
        self._pool = pool
        self._connections = <list?>pool.connections
        self._scripts = _Scripts(scripts, settings, with_meta)
        self._slow = slow
        self._failed = failed
        self._record = record
        self._fold_at = fold_at
        self._timeout = timeout

    def observe(self, gate, key, on_call):
        """From now on, after each call that succeeded, ``on_call(name, seconds)`` while
        ``gate().get(key)`` is not ``None`` (``gate`` ``None``: never; a tracer's observer)."""
        self._gate, self._gate_key, self._on_call = gate, key, on_call

    def call(self, name, keys=(), args=(), *, busy_timeout=None, timeout=None):
        """A coroutine running script ``name`` with ``keys`` and ``args`` (see ``AsyncClient.call``)."""
        cdef _MuxCall call = _MuxCall.__new__(_MuxCall)
        call._caller = self
        call._name = name
        call._keys = keys
        call._args = args
        call._busy_timeout = busy_timeout
        call._timeout = timeout
        return call

    def execute(self, *args, timeout=None):
        """A coroutine running command ``args`` (see ``AsyncClient.execute``)."""
        cdef _MuxCall call = _MuxCall.__new__(_MuxCall)
        call._caller = self
        call._args = args
        call._timeout = timeout
        call._command = True
        return call

    cdef MuxConnection _pick(self):
        """The least loaded connection with room, or None."""
        cdef MuxConnection best = None, conn
        cdef Py_ssize_t load = self._pool.max_in_flight
        for item in self._connections:
            conn = <MuxConnection?>item
            if conn.load < load:
                best, load = conn, conn.load
        return best


@cython.final
@cython.freelist(256)
cdef class _MuxCall:
    """One awaited ``MuxCaller.call``: a coroutine (see the part's header)."""

    def __await__(self):
        return self

    def __next__(self):  # the type's slot is _mux_call_next (below): this is its Python face
        result = self._resume()
        if result is _FINISHED:
            raise StopIteration(self._finished())
        return result

    def send(self, value):
        """Resume (``value`` is what a future's wake-up sends: ignored, the future is read)."""
        if self._state == CALL_INNER:
            return self._forward(value, None, None, 0)
        result = self._resume()
        if result is _FINISHED:
            raise StopIteration(self._finished())
        return result

    cdef object _finished(self):
        result, self._result = self._result, None
        return result

    def throw(self, typ, val=None, tb=None):
        """Raise ``typ`` (an exception, or a class and ``val``) where the call waits."""
        if self._state == CALL_INNER:
            return self._forward(None, typ, (val, tb), 1 if val is None and tb is None else 3)
        if isinstance(typ, BaseException):
            exc = typ
        elif isinstance(val, BaseException):
            exc = val
        else:
            exc = typ() if val is None else typ(val)
        if self._state != CALL_WAITING:
            self._state = CALL_DONE
            raise exc
        if self._future._state == REPLY_PENDING:  # given up: never written, or its reply dropped
            self._future.cancel()
        return self._command_failed(exc) if self._command else self._hand_over(exc)

    def close(self):
        if self._state == CALL_INNER:
            self._inner.close()
        elif self._state == CALL_WAITING and self._future._state == REPLY_PENDING:
            self._future.cancel()
        self._state = CALL_DONE

    cdef object _resume(self):
        cdef Reply future
        if self._state == CALL_WAITING:
            future = self._future
            if self._command:
                if future._state == REPLY_DONE:
                    return self._command_done(future._value)
                return self._command_failed(
                    future._value if future._state == REPLY_FAILED else _cancelled(future._value)
                )
            if future._state == REPLY_DONE:
                return self._done(future._value)
            if future._state == REPLY_FAILED:
                return self._hand_over(future._value)
            if future._state == REPLY_CANCELLED:
                return self._hand_over(_cancelled(future._value))
            raise RuntimeError("await wasn't used with future")
        if self._state == CALL_NEW:
            return self._begin()
        if self._state == CALL_INNER:
            return self._forward(None, None, None, 0)
        raise RuntimeError("cannot reuse already awaited coroutine")

    cdef object _begin_command(self):
        cdef MuxCaller caller = self._caller
        cdef MuxConnection conn
        cdef Reply future
        self._state = CALL_DONE  # until it waits
        caller._refuse(self._args)
        conn = caller._pick()
        if conn is None:
            return self._start(caller._again(self._args, self._timeout, False))
        timeout = caller._timeout if self._timeout is None else self._timeout
        cdef double deadline = NO_DEADLINE() if timeout is None else _monotonic() + <double>timeout
        try:
            future = conn._send_command(self._args, deadline)
        except ConnectionError as exc:  # a closed connection: nothing sent
            return self._command_failed(exc)
        future._asyncio_future_blocking = True
        future._awaited = True
        self._future = future
        self._state = CALL_WAITING
        return future

    cdef object _command_done(self, reply):
        self._state = CALL_DONE
        self._future = None
        if is_error_reply(reply):
            raise reply
        self._result = reply
        return _FINISHED

    cdef object _command_failed(self, exc):
        """A command's failure: raised, or, lost before it was written, sent once more."""
        self._state = CALL_DONE
        self._future = None
        if isinstance(exc, ConnectionError) and not exc.sent and not isinstance(exc, TimeoutError):
            return self._start(self._caller._again(self._args, self._timeout, True))
        raise exc

    cdef object _begin(self):
        if self._command:
            return self._begin_command()
        cdef MuxCaller caller = self._caller
        cdef _Scripts scripts = caller._scripts
        cdef MuxConnection conn
        cdef Reply future
        cdef double deadline
        self._state = CALL_DONE  # until it waits
        cdef _Entry entry = scripts.named(self._name)
        args = self._args
        if entry.meta:
            settings = scripts.settings
            if settings.server_version is None and "server_version" in entry.script.meta:
                return self._slow()
            args = scripts.with_meta(entry.script, args)
        conn = caller._pick()
        if conn is None:
            return self._slow()
        timeout = caller._timeout if self._timeout is None else self._timeout
        self._entry = entry
        self._args = args
        self._start_time = _monotonic()
        deadline = NO_DEADLINE() if timeout is None else self._start_time + <double>timeout
        try:
            future = conn._send_evalsha(entry, self._keys, args, deadline)
        except BaseException as exc:  # an argument refused (nothing sent), a closed connection
            self._state = CALL_WAITING
            return self._hand_over(exc)
        future._asyncio_future_blocking = True
        future._awaited = True
        self._future = future
        self._state = CALL_WAITING
        return future

    cdef object _slow(self):
        """The client's ``slow`` coroutine takes the call over (nothing sent yet)."""
        slow = self._caller._slow
        return self._start(slow(self._name, self._keys, self._args, self._busy_timeout, self._timeout))

    cdef object _done(self, reply):
        """The reply: an error one handed over, else the duration recorded and the reply
        kept for the end (``_FINISHED``)."""
        cdef MuxCaller caller = self._caller
        cdef _Entry entry = self._entry
        cdef list durations = entry.durations
        if is_error_reply(reply):
            return self._hand_over(reply)
        self._state = CALL_DONE
        self._future = None
        cdef double seconds = _monotonic() - self._start_time
        settings = caller._scripts.settings
        if settings.debug or len(durations) + 1 >= caller._fold_at:
            caller._record(entry.script, settings, seconds)
        else:
            durations.append(seconds)
        if caller._gate is not None and caller._gate().get(caller._gate_key) is not None:
            caller._on_call(entry.name, seconds)
        self._result = reply
        return _FINISHED

    cdef object _hand_over(self, failure):
        """The client's ``failed`` coroutine takes the call over (an error reply, an exception)."""
        self._future = None
        return self._start(self._caller._failed(
            failure, self._entry.script, self._keys, self._args, self._start_time, self._busy_timeout,
            self._timeout,
        ))

    cdef object _start(self, inner):
        self._state = CALL_INNER
        self._inner = inner
        return self._forward(None, None, None, 0)

    cdef object _forward(self, value, typ, rest, int arity):
        """``send(value)`` (``arity`` 0) or ``throw`` (``typ`` and ``arity`` - 1 of ``rest``)
        to the coroutine handed over to; done when it ends."""
        try:
            if arity == 0:
                return self._inner.send(value)
            if arity == 1:
                return self._inner.throw(typ)
            return self._inner.throw(typ, *rest)
        except BaseException:
            self._state = CALL_DONE
            self._inner = None
            raise


cdef PyObject* _mux_call_next(object self) except NULL:
    """``_MuxCall``'s ``tp_iternext`` (what a task's step and an ``await`` call): the object
    to yield, or the end, its ``StopIteration`` set in C (raised from Cython, an exception
    gets a traceback entry per function it leaves: not on the path of every call)."""
    cdef _MuxCall call = <_MuxCall>self
    result = call._resume()
    if result is _FINISHED:
        return fastlock_stop_iteration(call._finished())
    Py_INCREF(result)
    return <PyObject*>result


fastlock_set_iternext(_MuxCall, <void*>_mux_call_next)
collections.abc.Coroutine.register(_MuxCall)
