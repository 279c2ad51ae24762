# The canonical JSON of a digest (``fastlock.digest.canonical``) for the common values, in C
# (included by ``_core.pyx``; ``digest.py`` calls it and keeps the json module's encoder as its
# pure-Python twin, used for every value this one leaves to it). Sans I/O.
#
# ``_canonical_json(name, queue, args)`` is the UTF-8 bytes of ``[name, queue, args]`` exactly
# as ``digest.py``'s json encoder writes them (keys sorted, separators "," and ":", no ASCII
# escaping), or ``None`` for a value outside what it encodes itself: exact str, int, float
# (finite), bool, None, list, tuple and dict with str keys, nested at most CANON_DEPTH deep.
# Anything else (subclasses, dates, Decimals, UUIDs, NaN, non-str keys, lone surrogates,
# cycles) gets ``None``, and json then produces the bytes or the exception it always did.

from cpython.dict cimport PyDict_Keys
from cpython.list cimport PyList_Sort

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object, Py_ssize_t*) except NULL
    bint PyUnicode_IS_COMPACT_ASCII(object)
    void* PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    long long PyLong_AsLongLongAndOverflow(object, int*) except? -1

cdef int CANON_DEPTH = 32  # deeper values (and cycles) are json's
cdef int CANON_UNSUPPORTED = 1  # a put_canon result: the value is left to json
cdef const char* CANON_HEX = b"0123456789abcdef"


cdef inline int put_canon_char(Buf* b, char c) except -1:
    buf_reserve(b, 1)
    b.data[b.len] = c
    b.len += 1
    return 0


cdef bint CANON_PLAIN[256]  # written as it is: not a control character, a quote or a backslash
cdef int canon_byte
for canon_byte in range(256):
    CANON_PLAIN[canon_byte] = canon_byte >= 0x20 and canon_byte != 0x22 and canon_byte != 0x5c


cdef int put_canon_text(Buf* b, const char* data, Py_ssize_t n) except -1:
    """Write ``"data"`` with json's escapes: ``\\"``, ``\\\\``, ``\\b \\f \\n \\r \\t``, other
    control characters as ``\\u00XX``; every other byte as it is."""
    cdef Py_ssize_t i = 0, start
    cdef unsigned char c
    cdef char* p
    buf_reserve(b, n + 2)  # the quotes and the bytes; each escape reserves its own room
    b.data[b.len] = b'"'
    b.len += 1
    while True:
        start = i
        while i < n and CANON_PLAIN[<unsigned char>data[i]]:
            i += 1
        memcpy(b.data + b.len, data + start, i - start)
        b.len += i - start
        if i == n:
            break
        buf_reserve(b, n - i + 6)  # this escape's 6 bytes at most, the rest and the quote
        c = <unsigned char>data[i]
        i += 1
        p = b.data + b.len
        p[0] = b'\\'
        if c == 0x22 or c == 0x5c:
            p[1] = <char>c
        elif c == 0x08:
            p[1] = b'b'
        elif c == 0x0c:
            p[1] = b'f'
        elif c == 0x0a:
            p[1] = b'n'
        elif c == 0x0d:
            p[1] = b'r'
        elif c == 0x09:
            p[1] = b't'
        else:
            p[1], p[2], p[3], p[4], p[5] = b'u', b'0', b'0', CANON_HEX[c >> 4], CANON_HEX[c & 15]
            b.len += 6
            continue
        b.len += 2
    b.data[b.len] = b'"'
    b.len += 1
    return 0


cdef int put_canon_ascii(Buf* b, str text) except -1:
    """Write the characters of ``text``, known to be ASCII and to need no escape (a number)."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    buf_reserve(b, n)
    memcpy(b.data + b.len, PyUnicode_DATA(text), n)
    b.len += n
    return 0


cdef int put_canon_integer(Buf* b, long long value) except -1:
    """Write ``value`` in decimal, as ``repr`` does."""
    cdef char digits[20]
    cdef int i = 20
    cdef unsigned long long u = <unsigned long long>value
    if value < 0:
        put_canon_char(b, b'-')
        u = 0 - u
    while True:
        i -= 1
        digits[i] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    buf_reserve(b, 20 - i)
    memcpy(b.data + b.len, digits + i, 20 - i)
    b.len += 20 - i
    return 0


cdef int put_canon_str(Buf* b, str value) except -1:
    cdef Py_ssize_t n
    cdef const char* data
    if PyUnicode_IS_COMPACT_ASCII(value):
        return put_canon_text(b, <const char*>PyUnicode_DATA(value), PyUnicode_GET_LENGTH(value))
    try:
        data = PyUnicode_AsUTF8AndSize(value, &n)
    except UnicodeEncodeError:  # a lone surrogate: json's own error
        return CANON_UNSUPPORTED
    return put_canon_text(b, data, n)


cdef int put_canon(Buf* b, object value, int depth) except -1:
    """Write ``value``'s canonical JSON; CANON_UNSUPPORTED (written partly) when it is json's."""
    cdef type t = type(value)
    cdef Py_ssize_t i, n
    cdef int overflow = 0
    cdef long long v
    cdef list keys
    cdef double x
    if t is str:
        return put_canon_str(b, <str>value)
    if t is int:
        v = PyLong_AsLongLongAndOverflow(value, &overflow)
        if overflow:
            return put_canon_ascii(b, repr(value))
        return put_canon_integer(b, v)
    if value is None or value is True or value is False:
        buf_reserve(b, 5)
        text = b"null" if value is None else b"true" if value is True else b"false"
        memcpy(b.data + b.len, <const char*>text, len(text))
        b.len += len(text)
        return 0
    if t is float:
        x = value
        if not isfinite(x):
            return CANON_UNSUPPORTED  # json refuses NaN and infinities
        return put_canon_ascii(b, repr(value))
    if depth >= CANON_DEPTH:
        return CANON_UNSUPPORTED
    if t is list or t is tuple:
        put_canon_char(b, b'[')
        for i in range(len(value)):
            if i:
                put_canon_char(b, b',')
            if put_canon(b, value[i], depth + 1):
                return CANON_UNSUPPORTED
        return put_canon_char(b, b']')
    if t is dict:
        keys = PyDict_Keys(value)
        for key in keys:
            if type(key) is not str:
                return CANON_UNSUPPORTED  # json converts and sorts other keys its own way
        PyList_Sort(keys)  # str keys: json's sorted items, as no two keys are equal
        put_canon_char(b, b'{')
        for i in range(len(keys)):
            if i:
                put_canon_char(b, b',')
            if put_canon_str(b, <str>keys[i]):
                return CANON_UNSUPPORTED
            put_canon_char(b, b':')
            if put_canon(b, (<dict>value)[keys[i]], depth + 1):
                return CANON_UNSUPPORTED
        return put_canon_char(b, b'}')
    return CANON_UNSUPPORTED


def _canonical_json(name, queue, args):
    """``[name, queue, args]`` as canonical JSON in UTF-8, or ``None`` to leave it to json."""
    return canonical_json(name, queue, args)


cdef object canonical_json(name, queue, args):
    """``_canonical_json``'s bytes, or ``None``."""
    cdef Buf b
    buf_init(&b, 256)
    try:
        put_canon_char(&b, b'[')
        if put_canon(&b, name, 1):
            return None
        put_canon_char(&b, b',')
        if put_canon(&b, queue, 1):
            return None
        put_canon_char(&b, b',')
        if put_canon(&b, args, 1):
            return None
        put_canon_char(&b, b']')
        return PyBytes_FromStringAndSize(b.data, b.len)
    finally:
        PyMem_Free(b.data)


cdef inline int hex_value(unsigned char c) noexcept:
    """The value of a lowercase hex digit, or -1."""
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    return -1


def _is_digest(value):
    """Whether ``value`` is a str of 8 to 128 lowercase hex digits (``digest.check_digest``'s test)."""
    return is_digest(value)


cdef bint is_digest(value) noexcept:
    """``_is_digest``'s answer."""
    cdef Py_ssize_t i, n
    cdef const char* data
    if type(value) is not str or not PyUnicode_IS_COMPACT_ASCII(value):
        return False
    n = PyUnicode_GET_LENGTH(value)
    if not 8 <= n <= 128:
        return False
    data = <const char*>PyUnicode_DATA(value)
    for i in range(n):
        if hex_value(<unsigned char>data[i]) < 0:
            return False
    return True
