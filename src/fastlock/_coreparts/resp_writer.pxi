# The RESP writer, sans I/O (included by ``_core.pyx``): commands encoded into one growable C
# buffer (``Buf`` and the ``put_*`` functions, the ``encode_*`` entry points). Nothing here
# touches a socket, a clock or a thread.

cdef extern from *:
    """
    #include <string.h>
    /* memcpy of a few bytes without a call: overlapping fixed-size copies, reading only the
       n bytes at src. */
    static inline void fl_copy(char *dst, const char *src, Py_ssize_t n) {
        if (n > 32) {
            memcpy(dst, src, (size_t)n);
        } else if (n >= 16) {
            char a[16], b[16];
            memcpy(a, src, 16); memcpy(b, src + n - 16, 16);
            memcpy(dst, a, 16); memcpy(dst + n - 16, b, 16);
        } else if (n >= 8) {
            char a[8], b[8];
            memcpy(a, src, 8); memcpy(b, src + n - 8, 8);
            memcpy(dst, a, 8); memcpy(dst + n - 8, b, 8);
        } else if (n >= 4) {
            char a[4], b[4];
            memcpy(a, src, 4); memcpy(b, src + n - 4, 4);
            memcpy(dst, a, 4); memcpy(dst + n - 4, b, 4);
        } else if (n > 0) {  /* 1 to 3 bytes: the first, the middle and the last */
            dst[0] = src[0]; dst[n / 2] = src[n / 2]; dst[n - 1] = src[n - 1];
        }
    }
    """
    void fl_copy(char* dst, const char* src, Py_ssize_t n) noexcept


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object, Py_ssize_t*) except NULL
    long long PyLong_AsLongLongAndOverflow(object, int*) except? -1
    bint PyUnicode_IS_COMPACT_ASCII(object)
    void* PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    double PyFloat_AS_DOUBLE(object)
    char* PyOS_double_to_string(double, char, int, int, int*) except NULL
    int Py_DTSF_ADD_DOT_0


# --- the write buffer -----------------------------------------------------------------

cdef int check_buf(Buf* b, Py_ssize_t free) except -1:
    """The buffer is allocated, its length within its capacity, with ``free`` bytes left."""
    return invariant(b.data != NULL and 0 <= b.len and b.len + free <= b.cap, "write buffer bounds")


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


cdef inline int put_header(Buf* b, char kind, Py_ssize_t n) except -1:
    """Write ``*n\\r\\n`` or ``$n\\r\\n`` (``n`` >= 0)."""
    buf_reserve(b, 23)
    cdef char* p = b.data + b.len
    p[0] = kind
    p = write_decimal(p + 1, <unsigned long long>n)
    p[0] = 13
    p[1] = 10
    b.len = p + 2 - b.data
    if FASTLOCK_DEBUG:
        check_buf(b, 0)
    return 0


cdef inline int put_bulk(Buf* b, const char* data, Py_ssize_t n) except -1:
    """Write ``$n\\r\\n<data>\\r\\n`` (``n`` is at most MAX_BULK_LENGTH)."""
    buf_reserve(b, n + 25)  # the header's 23 bytes at most, the payload and its CRLF
    cdef char* p = b.data + b.len
    p[0] = b'$'
    p = write_decimal(p + 1, <unsigned long long>n)
    p[0] = 13
    p[1] = 10
    fl_copy(p + 2, data, n)
    p[n + 2] = 13
    p[n + 3] = 10
    b.len = p + n + 4 - b.data
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
    cdef char digits[21]
    return put_bulk(b, digits, write_integer(digits, value) - digits)


cdef int put_long(Buf* b, object value) except -1:
    cdef int overflow = 0
    cdef long long v = PyLong_AsLongLongAndOverflow(value, &overflow)
    cdef bytes text
    if overflow:
        text = (b"%d" % value)
        return put_bulk(b, PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text))
    return put_integer(b, v)


cdef int put_float(Buf* b, double value, int kind, Py_ssize_t index, Py_ssize_t command) except -1:
    """Write ``repr(value)``: :func:`short_repr` when it can, else CPython's own repr."""
    cdef char digits[32]
    cdef Py_ssize_t n = short_repr(value, digits)
    if n:
        return put_bulk(b, digits, n)
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
    if PyUnicode_IS_COMPACT_ASCII(value):  # its characters are its UTF-8 bytes
        data = <const char*>PyUnicode_DATA(value)
        return put_sized(b, data, PyUnicode_GET_LENGTH(value), kind, index, command)
    try:
        data = PyUnicode_AsUTF8AndSize(value, &n)
    except UnicodeEncodeError:
        raise argument_value_error(kind, index, command, NOT_UTF8) from None
    return put_sized(b, data, n, kind, index, command)


cdef int put_arg(Buf* b, object value, int kind, Py_ssize_t index, Py_ssize_t command) except -1:
    """Normalise one argument and write it as a bulk string (the rules in README): the exact
    common types here, in one piece, the rest by :func:`put_other`."""
    cdef const char* data
    cdef Py_ssize_t n
    cdef char digits[32]
    cdef int overflow = 0
    cdef long long v
    if type(value) is str and PyUnicode_IS_COMPACT_ASCII(value):  # its characters are its UTF-8
        data = <const char*>PyUnicode_DATA(value)
        n = PyUnicode_GET_LENGTH(value)
        if n > MAX_BULK_LENGTH:
            raise argument_value_error(kind, index, command, too_long(n))
    elif type(value) is bytes:
        data = PyBytes_AS_STRING(value)
        n = PyBytes_GET_SIZE(value)
        if n > MAX_BULK_LENGTH:
            raise argument_value_error(kind, index, command, too_long(n))
    elif type(value) is int:
        v = PyLong_AsLongLongAndOverflow(value, &overflow)
        if overflow:
            return put_long(b, value)
        data = digits
        n = write_integer(digits, v) - digits
    elif type(value) is float:
        data = digits
        n = short_repr(PyFloat_AS_DOUBLE(value), digits)
        if n == 0:
            return put_float(b, PyFloat_AS_DOUBLE(value), kind, index, command)
    elif value is True:
        data, n = b"1", 1
    elif value is False or value is None:
        data, n = b"0", 1
    else:
        return put_other(b, value, kind, index, command)
    return put_bulk(b, data, n)


cdef int put_other(Buf* b, object value, int kind, Py_ssize_t index, Py_ssize_t command) except -1:
    """:func:`put_arg` of the other values: subclasses, buffers, non-ASCII str, refusals."""
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
        raise ArgumentError("a command needs at least its name")
    put_header(b, b'*', n)
    for i in range(n):
        put_arg(b, args[i], 0, i, command)
    return 0


cdef inline object seq_item(object seq, Py_ssize_t i):
    """``seq[i]`` of a tuple or a list, ``i`` >= 0 (bounds checked: a list may have shrunk
    since its length was read)."""
    if type(seq) is tuple:
        return <object>PyTuple_GET_ITEM(seq, i)
    if i < PyList_GET_SIZE(seq):
        return <object>PyList_GET_ITEM(seq, i)
    raise IndexError("list index out of range")


cdef int put_evalsha(Buf* b, object sha, object keys, object args, bytes head, Py_ssize_t command) except -1:
    """``EVALSHA sha len(keys) *keys *args``; ``head``, when not None, is the command name and
    the sha already encoded (:func:`evalsha_head`), copied instead of ``sha``; ``command`` is
    the call's index in a pipeline (for the errors), or -1."""
    cdef Py_ssize_t i
    if type(keys) is not tuple and type(keys) is not list:
        keys = tuple(keys)
    if type(args) is not tuple and type(args) is not list:
        args = tuple(args)
    cdef Py_ssize_t nk = len(keys), na = len(args), n
    put_header(b, b'*', 3 + nk + na)
    if head is None:
        put_bulk(b, b"EVALSHA", 7)
        put_arg(b, sha, 0, 1, command)
    else:
        n = PyBytes_GET_SIZE(head)
        buf_reserve(b, n)
        memcpy(b.data + b.len, PyBytes_AS_STRING(head), n)
        b.len += n
    put_integer(b, nk)
    for i in range(nk):
        put_arg(b, seq_item(keys, i), 1, i, command)
    for i in range(na):
        put_arg(b, seq_item(args, i), 2, i, command)
    return 0


cdef bytes evalsha_head(object sha):
    """The static part of a script's EVALSHA: the command name and ``sha``, encoded."""
    cdef Buf b
    buf_init(&b, 64)
    try:
        put_bulk(&b, b"EVALSHA", 7)
        put_arg(&b, sha, 0, 1, -1)
        return take(&b)
    finally:
        PyMem_Free(b.data)


cdef bytes eval_head(object body):
    """What replaces a script's EVALSHA head when it may not be loaded: ``EVAL`` and its
    body (the rest of the command is the same)."""
    cdef Buf b
    buf_init(&b, 64)
    try:
        put_bulk(&b, b"EVAL", 4)
        put_arg(&b, body, 0, 1, -1)
        return take(&b)
    finally:
        PyMem_Free(b.data)


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
        put_evalsha(&b, sha, keys, args, None, -1)
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
