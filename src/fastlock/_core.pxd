# The declarations the parts of the Cython core share (``_core.pyx`` and the
# ``_coreparts/*.pxi`` it includes, in that order): the C structs, the cdef functions one part
# calls in another, and the extension types with their C attributes and cdef methods, so a
# part may use a type a later part defines. Inline helpers stay in their part (``inline``
# needs the body) and serve only the parts included after it: write_decimal and write_integer
# (resp_numbers) for resp_writer; buf_reserve and seq_item (resp_writer) for domain_digest and
# call; hex_value (domain_digest) for domain_keys.

cimport cython
from cpython.object cimport PyObject


cdef struct Buf:  # resp_writer.pxi: the growable write buffer
    char* data
    Py_ssize_t len
    Py_ssize_t cap


cdef struct Items:  # _core.pyx: a growable array of owned references
    PyObject** data
    Py_ssize_t len
    Py_ssize_t cap


# _core.pyx
cdef int invariant(bint holds, str what) except -1
cdef int items_push(Items* a, object value) except -1
cdef void items_clear(Items* a) noexcept

# resp_writer.pxi
cdef int buf_init(Buf* b, Py_ssize_t cap) except -1
cdef int put_command(Buf* b, tuple args, Py_ssize_t command) except -1
cdef int put_evalsha(Buf* b, object sha, object keys, object args, bytes head, Py_ssize_t command) except -1
cdef int put_pipeline(Buf* b, object commands) except -1
cdef bytes evalsha_head(object sha)
cdef bytes eval_head(object body)


@cython.final
cdef class ReplyReader:  # resp_reader.pxi
    cdef object _feed
    cdef object _gets
    cdef object _has_data
    cdef long long _max_length
    cdef long long _max_elements
    cdef Py_ssize_t _line  # bytes of the current line after its type byte; -1 between items
    cdef char _kind  # the current line's type byte
    cdef bint _passing  # an unknown type byte: hiredis refuses it, nothing more to check
    cdef char _head[20]  # the line's first bytes: enough for any valid length
    cdef str _error  # why the stream was refused, or None
    cdef bint _fresh  # hiredis may hold a reply: bytes came since it last had none
    cdef bint _idle  # hiredis holds nothing: no bytes, no partial reply
    cdef Py_ssize_t _taken
    cdef long long _skip  # payload bytes (CRLF included) still to pass over
    cdef bint _cr  # the last byte scanned was b"\r" (a CRLF may straddle two feeds)
    cdef Items _ready  # replies parsed here (those from _taken on not yet returned)
    cdef inline bint _pending(self)
    cdef int _take(self, bytearray data, Py_ssize_t n) except -1
    cdef int _accept(self, object data, const char* p, Py_ssize_t offset, Py_ssize_t n) except -1
    cdef Py_ssize_t _parse(self, const char* p, Py_ssize_t n) except -1
    cdef object _item(self, const char* p, Py_ssize_t n, Py_ssize_t* used, int depth)
    cdef inline object _take_ready(self)
    cdef Py_ssize_t _move_ready(self, list out, Py_ssize_t at) except -1
    cdef object _next(self)
    cdef int _header(self, const char* line, Py_ssize_t length) except -1
    cdef Py_ssize_t _scan(self, const char* p, Py_ssize_t n) except -1
    cdef Py_ssize_t _scan_items(self, const char* p, Py_ssize_t n) except -1


@cython.final
cdef class Connection:  # conn.pxi
    cdef readonly object sock
    cdef readonly bint broken
    cdef public long generation
    cdef readonly unsigned long long round_trips
    cdef int _fd
    cdef Buf _out
    cdef ReplyReader _reader
    cdef bytearray _in
    cdef char* _in_data
    cdef object __weakref__
    cdef public double last_used  # time.monotonic() of the last reply read
    cdef int _usable(self) except -1
    cdef int _lost(self, exc_type, str what, bint sent) except -1
    cdef int _flush(self) except -1
    cdef int _write(self, const char* data, Py_ssize_t length) except -1
    cdef Py_ssize_t _recv(self) except -1
    cdef object _read_reply(self)
    cdef list _read_replies(self, Py_ssize_t count)
    cdef inline void _touch(self) noexcept
    cdef int _check_drained(self) except -1
    cdef object _roundtrip(self)
    cdef object _evalsha(self, sha, keys, args, bytes head)


@cython.final
cdef class _Entry:  # call.pxi
    cdef object name  # the name it was looked up by
    cdef object script
    cdef object sha
    cdef bytes head
    cdef list durations
    cdef bint meta
    cdef bint loaded  # seen loaded by a pipeline of this caller: its calls there are EVALSHA
    cdef bytes eval  # the EVAL head (``eval_head``), made by the first pipeline that needs it


@cython.final
cdef class _Scripts:  # call.pxi
    cdef object registry
    cdef object settings
    cdef object with_meta
    cdef dict entries
    cdef _Entry last
    cdef _Entry named(self, name)
    cdef _Entry of(self, script)


@cython.final
cdef class ScriptCaller:  # call.pxi
    cdef object _pool
    cdef object _idle
    cdef object _failed
    cdef object _record
    cdef Py_ssize_t _fold_at
    cdef _Scripts _scripts
    cdef object _gate
    cdef object _gate_key
    cdef object _on_call
    cdef object _run(self, _Entry entry, keys, args, settings, busy_timeout)


@cython.final
cdef class SlotRouter:  # call.pxi
    cdef _Scripts _scripts
    cdef dict _slots
    cdef list _routes
    cdef object _slot_of
    cdef object _route
    cdef object _failed
    cdef tuple _last  # (key, slot) of the last first key looked up: a key's slot never changes
    cdef Py_ssize_t _slot(self, keys) except -1


@cython.final
cdef class CommandQueue:  # call_batch.pxi
    cdef Buf _out
    cdef _Scripts _table
    cdef object _owner

    cdef Items _items  # per queued item: the Script called, its keys, its args as given (None x 3: a command)
    cdef list _evals  # (item index, _Entry) of each call sent as EVAL (a script not seen loaded)
    cdef bint _first(self, _Entry entry)
    cdef bytes _head(self, _Entry entry)
    cdef int _queued(self, _Entry entry) except -1
    cdef int _push(self, script, keys, args) except -1


cdef struct Waiter:  # aio_conn.pxi: one request awaiting its reply (or its ``count`` replies)
    PyObject* future  # owned
    PyObject* replies  # owned list (a request of several commands, some answered) or NULL
    Py_ssize_t count  # 0: one command, one reply
    Py_ssize_t end  # while pending: where its bytes end in the write buffer
    double deadline  # on the core's monotonic clock; NaN: none
    unsigned long long seq  # once written: its number in write order


@cython.final
cdef class Reply:  # aio_conn.pxi
    cdef MuxConnection _conn
    cdef int _state
    cdef object _value  # the reply, the exception or the cancel message, once done
    cdef object _callback  # the first done callback (a waiting task's wake-up) and its context
    cdef object _context
    cdef list _more  # further (callback, context) pairs
    cdef public bint _asyncio_future_blocking
    cdef bint _awaited
    cdef int _raise(self) except -1
    cdef int _settle(self, int state, value) except -1
    cdef int _run_callbacks(self) except -1
    cdef object _yielded(self)


@cython.final
cdef class MuxConnection:  # aio_conn.pxi
    cdef readonly str address
    cdef readonly Py_ssize_t load
    cdef readonly unsigned long long writes
    cdef readonly bint closed
    cdef public object on_change
    cdef public object room_waiters  # truthy: on_change after replies (the pool's waiters for room)
    cdef object _loop
    cdef object _transport
    cdef object _write
    cdef object _call_soon
    cdef object _flush_cb
    cdef object _wake_cb
    cdef list _woken  # the done replies whose callbacks run in the next batch
    cdef object _watch
    cdef object _lost
    cdef ReplyReader _reader
    cdef double _watch_at
    cdef double _stalled_after
    cdef bint _flush_scheduled
    cdef bint _paused
    cdef Buf _out
    cdef Waiter* _ring  # written requests from _head, then pending ones; _cap a power of 2
    cdef Py_ssize_t _cap
    cdef Py_ssize_t _head
    cdef Py_ssize_t _written
    cdef Py_ssize_t _pending
    cdef unsigned long long _sent  # requests written so far (the next one's seq)
    cdef unsigned long long _answered  # written requests answered (or dropped by a close) so far
    cdef int _answer(self, Waiter* w, object reply) except -1
    cdef Reply _send_evalsha(self, _Entry entry, keys, args, double deadline)
    cdef Reply _send_command(self, tuple args, double deadline)
    cdef Reply _new_future(self)
    cdef int _wake_later(self, Reply reply) except -1
    cdef int _queued(self, object future, Py_ssize_t count, double deadline) except -1
    cdef int _grow(self) except -1
    cdef int _arm(self, double deadline) except -1
    cdef int _fail(self, written_error) except -1
    cdef void _drop_all(self) noexcept
    cdef object _closed_event(self)


@cython.final
cdef class MuxCaller:  # muxcall.pxi
    cdef object _pool
    cdef object _refuse
    cdef object _again
    cdef list _connections
    cdef _Scripts _scripts
    cdef object _slow
    cdef object _failed
    cdef object _record
    cdef Py_ssize_t _fold_at
    cdef object _timeout
    cdef object _gate
    cdef object _gate_key
    cdef object _on_call
    cdef MuxConnection _pick(self)


@cython.final
cdef class _MuxCall:  # muxcall.pxi
    cdef MuxCaller _caller
    cdef object _name
    cdef object _keys
    cdef object _args
    cdef object _busy_timeout
    cdef object _timeout
    cdef _Entry _entry
    cdef Reply _future
    cdef object _inner  # the client's coroutine it handed over to
    cdef double _start_time
    cdef int _state
    cdef bint _command  # a command (execute), not a script call
    cdef object _result  # the reply, from its arrival to the end of the call
    cdef object _finished(self)
    cdef object _resume(self)
    cdef object _begin(self)
    cdef object _begin_command(self)
    cdef object _command_done(self, reply)
    cdef object _command_failed(self, exc)
    cdef object _done(self, reply)
    cdef object _slow(self)
    cdef object _hand_over(self, failure)
    cdef object _start(self, inner)
    cdef object _forward(self, value, typ, rest, int arity)
