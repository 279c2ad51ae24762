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
