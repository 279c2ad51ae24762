# The incremental RESP reply reader, sans I/O (included by ``_core.pyx``): ``ReplyReader``
# parses the common replies itself and the rest with hiredis, bounded in size. Nothing here
# touches a socket, a clock or a thread.

cdef extern from "Python.h":
    PyObject* list_get "PyList_GET_ITEM"(object, Py_ssize_t)  # borrowed
    void list_put "PyList_SET_ITEM"(object, Py_ssize_t, PyObject*)  # steals the reference

cdef object _NOT_ENOUGH = object()
NOT_ENOUGH = _NOT_ENOUGH  # what ReplyReader.gets returns while a reply is incomplete


cdef inline bint is_type_byte(char c) noexcept:
    """One of the reply types hiredis knows."""
    return c in b"+-:,_#($=*%~>|"


cdef inline bint header_length(const char* s, Py_ssize_t n, long long* value) noexcept:
    """hiredis's strict integer (``0`` or ``-?[1-9][0-9]*``, 64 bits) as a header length;
    every negative one reads as -1 (hiredis itself refuses the others)."""
    cdef bint negative = n > 0 and s[0] == 45  # -
    cdef Py_ssize_t i = negative
    cdef unsigned long long v = 0
    if i >= n or n - i > 19 or (s[i] == 48 and n != 1):  # a leading 0
        return False
    while i < n:
        if s[i] < 48 or s[i] > 57:
            return False
        v = v * 10 + <unsigned long long>(s[i] - 48)
        i += 1
    if negative:
        if v > 9223372036854775808ULL:
            return False
        value[0] = -1
    elif v > 9223372036854775807ULL:
        return False
    else:
        value[0] = <long long>v
    return True


cdef inline bint short_integer(const char* s, Py_ssize_t n, long long* value) noexcept:
    """An integer reply hiredis would read as ``value``, of at most 18 digits (no overflow):
    ``0`` or ``-?[1-9][0-9]*``."""
    cdef bint negative = n > 0 and s[0] == 45  # -
    cdef Py_ssize_t i = negative
    cdef long long v = 0
    if i >= n or n - i > 18 or (s[i] == 48 and n != 1):  # empty, too long, a leading 0 or -0
        return False
    while i < n:
        if s[i] < 48 or s[i] > 57:
            return False
        v = v * 10 + (s[i] - 48)
        i += 1
    value[0] = -v if negative else v
    return True


DEF FAST_DEPTH = 8  # aggregates nested deeper are left to hiredis


@cython.final
cdef class ReplyReader:
    """hiredis's C reader behind a header check, and a parser of its own for the common
    replies; error replies come back as typed ``ResponseError`` values.

    While hiredis holds nothing (no bytes, no partial reply), the whole replies at the start
    of the bytes received that are integers, bulk strings, nulls, simple strings or arrays of
    them (up to ``FAST_DEPTH`` deep) within the limits are parsed here into the objects
    hiredis makes (``int``, ``bytes``, ``None``, ``list``), without a call to it; hiredis
    parses everything from the first other reply on (errors, RESP3 types, a partial reply,
    anything odd, anything over a limit), until it holds nothing again.

    hiredis buffers a declared bulk string until it is complete and allocates an aggregate
    at its header, whatever length they declare. So every byte given to hiredis is scanned
    first for item boundaries (a ``memchr`` per line, payloads skipped): a bulk string or
    line over ``max_length`` bytes, or an aggregate over ``max_elements``, is held back from
    hiredis, and ``ProtocolError`` is raised once hiredis has returned the replies before it.
    """

    def __init__(self, long long max_length=MAX_BULK_LENGTH, long long max_elements=MAX_REPLY_ELEMENTS):
        reader = hiredis.Reader(
            protocolError=ProtocolError, replyError=response_error, notEnoughData=_NOT_ENOUGH
        )
        self._feed = reader.feed
        self._gets = reader.gets
        self._has_data = reader.has_data
        self._max_length = max_length
        self._max_elements = max_elements
        self._line = -1
        self._idle = True

    def __dealloc__(self):
        items_clear(&self._ready)
        PyMem_Free(self._ready.data)

    def feed(self, data, Py_ssize_t offset=0, Py_ssize_t length=-1):
        """Add received bytes (any buffer; ``offset``/``length`` select a slice, ``length`` -1
        to the end): as hiredis, any other range than one inside the buffer is refused."""
        cdef Py_buffer view
        cdef Py_ssize_t taken = length
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            if taken == -1:
                taken = view.len - offset if 0 <= offset <= view.len else -1
            if offset < 0 or offset > view.len or taken < 0 or taken > view.len - offset:  # no overflow
                raise feed_range_error(offset, length, view.len)
            length = taken
            self._accept(data, <const char*>view.buf, offset, length)
        finally:
            PyBuffer_Release(&view)

    def has_data(self):
        """Whether received bytes wait to be parsed (a partial or a further reply)."""
        return self._taken < self._ready.len or self._line >= 0 or self._skip > 0 or self._has_data()

    def gets(self):
        """Return the next complete reply, or :data:`NOT_ENOUGH` when more bytes are needed."""
        return self._next()

    cdef inline bint _pending(self):
        """``has_data()`` without a call, valid right after ``_next`` returned a reply."""
        return (
            self._taken < self._ready.len or self._fresh or self._line >= 0 or self._skip > 0
            or self._error is not None
        )

    cdef int _take(self, bytearray data, Py_ssize_t n) except -1:
        """Feed the first ``n`` bytes of ``data``."""
        return self._accept(data, PyByteArray_AS_STRING(data), 0, n)

    cdef int _accept(self, object data, const char* p, Py_ssize_t offset, Py_ssize_t n) except -1:
        """Take ``n`` bytes at ``p + offset`` (``data``'s buffer): the common replies first
        while hiredis holds nothing, then the rest, scanned, to hiredis."""
        cdef Py_ssize_t used
        if self._idle and not (self._skip or self._line >= 0 or self._passing or self._error is not None):
            used = self._parse(p + offset, n)
            offset += used
            n -= used
            if n == 0:
                return 0
        n = self._scan(p + offset, n)
        if n:
            self._feed(data, offset, n)
            self._fresh = True
            self._idle = False
        return 0

    cdef Py_ssize_t _parse(self, const char* p, Py_ssize_t n) except -1:
        """Parse the whole replies of the common kinds at the start of these ``n`` bytes
        into ``_ready``; return the bytes they took."""
        cdef Py_ssize_t at = 0, used = 0
        while at < n:
            reply = self._item(p + at, n - at, &used, 0)
            if reply is _NOT_ENOUGH:
                break
            items_push(&self._ready, reply)
            at += used
        return at

    cdef object _item(self, const char* p, Py_ssize_t n, Py_ssize_t* used, int depth):
        """The item at ``p`` and its size in ``used``, or ``NOT_ENOUGH`` when hiredis must
        read it: not one of the common kinds, not whole in these ``n`` bytes, over a limit,
        or anything hiredis might read otherwise (a bulk string not followed by CRLF, a
        bare \\r in a line)."""
        cdef const char* nl = <const char*>memchr(p + 1, 10, <size_t>(n - 1)) if n > 1 else NULL
        cdef Py_ssize_t k, at, i, size = 0
        cdef long long value
        cdef char kind = p[0]
        cdef list items
        if nl == NULL or nl == p + 1 or (nl - 1)[0] != 13:
            return _NOT_ENOUGH
        k = nl - p - 2  # the line's length, its CRLF excluded
        at = k + 3
        if k > self._max_length:
            return _NOT_ENOUGH
        if kind == 58:  # :
            if not short_integer(p + 1, k, &value):
                return _NOT_ENOUGH
            used[0] = at
            return value
        if kind == 43:  # +
            if memchr(p + 1, 13, <size_t>k) != NULL:
                return _NOT_ENOUGH
            used[0] = at
            return PyBytes_FromStringAndSize(p + 1, k)
        if kind != 36 and (kind != 42 or depth >= FAST_DEPTH):  # $ *
            return _NOT_ENOUGH
        if not header_length(p + 1, k, &value):
            return _NOT_ENOUGH
        if value < 0:
            if k != 2 or p[2] != 49:  # -1 only
                return _NOT_ENOUGH
            used[0] = at
            return None
        if kind == 36:
            if value > self._max_length or value + 2 > n - at:
                return _NOT_ENOUGH
            i = <Py_ssize_t>value
            if p[at + i] != 13 or p[at + i + 1] != 10:
                return _NOT_ENOUGH
            used[0] = at + i + 2
            return PyBytes_FromStringAndSize(p + at, i)
        if value > self._max_elements or value * 3 > n - at:  # an item takes 3 bytes at least
            return _NOT_ENOUGH
        items = [None] * <Py_ssize_t>value
        for i in range(<Py_ssize_t>value):
            item = self._item(p + at, n - at, &size, depth + 1)
            if item is _NOT_ENOUGH:
                return _NOT_ENOUGH
            items[i] = item
            at += size
        used[0] = at
        return items

    cdef inline object _take_ready(self):
        """The next reply parsed here (there is one): its reference moves to the caller."""
        cdef PyObject* item = self._ready.data[self._taken]
        reply = <object>item
        Py_XDECREF(item)
        self._ready.data[self._taken] = NULL  # returned: no longer held here
        self._taken += 1
        if self._taken == self._ready.len:
            self._ready.len = self._taken = 0
        return reply

    cdef Py_ssize_t _move_ready(self, list out, Py_ssize_t at) except -1:
        """Put replies parsed here into ``out`` (a list of ``None``) from index ``at`` on,
        while both last; return how many."""
        cdef Py_ssize_t n = 0, room = len(out) - at
        while self._taken < self._ready.len and n < room:
            Py_XDECREF(list_get(out, at + n))
            list_put(out, at + n, self._ready.data[self._taken])  # the reference moves
            self._ready.data[self._taken] = NULL
            self._taken += 1
            n += 1
        if self._taken == self._ready.len:
            self._ready.len = self._taken = 0
        return n

    cdef object _next(self):
        """The next complete reply, or ``NOT_ENOUGH``; hiredis is not asked again until
        bytes arrive once it has said it needs more or has none left."""
        if self._taken < self._ready.len:
            return self._take_ready()
        if self._fresh:
            try:
                reply = self._gets()
            except TypeError:  # hiredis could not use an aggregate as a dict key
                raise ProtocolError(BAD_MAP_KEY) from None
            if reply is not _NOT_ENOUGH:
                self._fresh = self._has_data()
                self._idle = not self._fresh
                return reply
            self._fresh = False
        if self._error is not None:
            raise ProtocolError(self._error)
        return _NOT_ENOUGH

    cdef int _header(self, const char* line, Py_ssize_t length) except -1:
        """Check a complete line of ``length`` bytes: return 1 (and keep the error) when
        it is refused, else 0, noting the payload a bulk header announces."""
        cdef long long value
        self._line = -1
        if length > self._max_length:
            self._error = str(reply_too_long("line", self._max_length))
        elif self._kind in b"$=*%~>|" and header_length(line, length, &value):
            if self._kind not in b"$=":
                if value > self._max_elements:
                    self._error = str(reply_too_long(f"aggregate length {value}", self._max_elements))
            elif value > self._max_length:
                self._error = str(reply_too_long(f"bulk string length {value}", self._max_length))
            elif value >= 0:
                self._skip = value + 2
        return self._error is not None

    cdef Py_ssize_t _scan(self, const char* p, Py_ssize_t n) except -1:
        """Return how many of these ``n`` bytes hiredis may parse: all of them, or those
        before the first refused line (hiredis may hold its start, never its end).

        The loop here takes the usual replies, whole well-formed items within the feed,
        with no state but the position; ``_scan_items`` takes over for anything else."""
        cdef Py_ssize_t i = 0, k
        cdef const char* nl
        cdef long long value
        cdef char kind
        if self._skip or self._line >= 0 or self._passing or self._error is not None:
            return self._scan_items(p, n)
        while i < n:
            kind = p[i]
            nl = <const char*>memchr(p + i + 1, 10, <size_t>(n - i - 1)) if i + 1 < n else NULL
            if nl == NULL or nl == p + i + 1 or (nl - 1)[0] != 13 or nl - p - i - 2 > self._max_length:
                break
            k = nl - p - i - 2  # the line's length
            if kind in b"$=":
                if not header_length(p + i + 1, k, &value) or value > self._max_length:
                    break
                i += k + 3
                if value >= 0:
                    if value + 2 > n - i:
                        self._skip = value + 2 - (n - i)
                        return n
                    i += <Py_ssize_t>value + 2
            elif kind in b"*%~>|":
                if not header_length(p + i + 1, k, &value) or value > self._max_elements:
                    break
                i += k + 3
            elif kind in b"+-:,_#(":
                i += k + 3
            else:
                break
        return n if i == n else i + self._scan_items(p + i, n - i)

    cdef Py_ssize_t _scan_items(self, const char* p, Py_ssize_t n) except -1:
        """``_scan`` for any bytes, one state change at a time: a partial item, a line
        spanning feeds or holding a bare \\r or \\n, an unknown type byte, a refusal."""
        cdef Py_ssize_t i = 0, start = 0, k
        cdef const char* nl
        if self._error is not None:
            return 0
        while i < n and not self._passing:
            if self._skip:
                k = <Py_ssize_t>self._skip if self._skip < n - i else n - i
                self._skip -= k
                i += k
                continue
            if self._line < 0:
                if not is_type_byte(p[i]):
                    self._passing = True
                    break
                self._kind = p[i]
                i += 1
                start = i  # hiredis may see the type byte: a too deep aggregate fails first
                nl = <const char*>memchr(p + i, 10, <size_t>(n - i)) if i < n else NULL
                if nl != NULL and nl > p + i and (nl - 1)[0] == 13:  # the usual case: a whole line
                    k = nl - 1 - (p + i)
                    i += k + 2
                    if self._kind in b"+-:,_#(" and k <= self._max_length:
                        continue
                    self._line = 0
                    if self._header(p + i - k - 2, k):
                        return start
                    continue
                self._line = 0
                self._cr = False
                continue
            # a line that spans feeds, or holds a bare \r or \n
            nl = <const char*>memchr(p + i, 10, <size_t>(n - i))
            k = nl - (p + i) if nl != NULL else n - i
            if self._line < 20:
                memcpy(self._head + self._line, p + i, k if k < 20 - self._line else 20 - self._line)
            self._line += k
            if nl == NULL:
                self._cr = p[n - 1] == 13
                i = n
            elif p[i + k - 1] == 13 if k > 0 else self._cr:
                i += k + 1
                if self._header(self._head, self._line - 1):
                    return start
                continue
            else:
                self._line += 1
                self._cr = False
                i += k + 1
            if self._line >= self._max_length + 2:
                self._error = str(reply_too_long("line", self._max_length))
                return start
        return n
