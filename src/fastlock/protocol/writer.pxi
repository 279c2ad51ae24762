# The RESP writer, sans I/O (included by ``_core.pyx``): commands encoded into one growable C
# buffer (``Buf`` and the ``put_*`` functions, the ``encode_*`` entry points). Nothing here
# touches a socket, a clock or a thread.

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object, Py_ssize_t*) except NULL
    long long PyLong_AsLongLongAndOverflow(object, int*) except? -1
    char* PyOS_double_to_string(double, char, int, int, int*) except NULL
    int Py_DTSF_ADD_DOT_0


# --- the write buffer -----------------------------------------------------------------

cdef struct Buf:
    char* data
    Py_ssize_t len
    Py_ssize_t cap


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


cdef int put_evalsha(Buf* b, object sha, object keys, object args, bytes head) except -1:
    """``EVALSHA sha len(keys) *keys *args``; ``head``, when not None, is the command name and
    the sha already encoded (:func:`evalsha_head`), copied instead of ``sha``."""
    cdef Py_ssize_t i
    if type(keys) is not tuple and type(keys) is not list:
        keys = tuple(keys)
    if type(args) is not tuple and type(args) is not list:
        args = tuple(args)
    cdef Py_ssize_t nk = len(keys), na = len(args), n
    put_header(b, b'*', 3 + nk + na)
    if head is None:
        put_bulk(b, b"EVALSHA", 7)
        put_arg(b, sha, 0, 1, -1)
    else:
        n = PyBytes_GET_SIZE(head)
        buf_reserve(b, n)
        memcpy(b.data + b.len, PyBytes_AS_STRING(head), n)
        b.len += n
    put_integer(b, nk)
    for i in range(nk):
        put_arg(b, keys[i], 1, i, -1)
    for i in range(na):
        put_arg(b, args[i], 2, i, -1)
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
        put_evalsha(&b, sha, keys, args, None)
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
