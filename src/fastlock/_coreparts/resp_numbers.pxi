# Numbers as text, sans I/O (included by ``_core.pyx`` before the writer): decimal integers,
# and floats printed exactly as ``repr()`` prints them without CPython's dtoa when they are
# short.


cdef inline char* write_decimal(char* p, unsigned long long u) noexcept:
    """Write ``u`` in decimal at ``p`` (room for 20 digits); return the end."""
    cdef char tmp[20]
    cdef int i = 20
    if u < 10:  # the common header lengths: one or two digits, no loop
        p[0] = <char>(48 + u)
        return p + 1
    if u < 100:
        p[0] = <char>(48 + u // 10)
        p[1] = <char>(48 + u % 10)
        return p + 2
    while u:
        i -= 1
        tmp[i] = <char>(48 + u % 10)
        u //= 10
    memcpy(p, tmp + i, 20 - i)
    return p + 20 - i


cdef inline char* write_integer(char* p, long long value) noexcept:
    """Write a 64-bit integer in decimal at ``p`` (room for 20 bytes); return the end."""
    if value < 0:
        p[0] = b'-'
        return write_decimal(p + 1, <unsigned long long>0 - <unsigned long long>value)
    return write_decimal(p, <unsigned long long>value)


cdef double[20] POW10  # 10**0 .. 10**19, exact doubles
POW10[:] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
            1e17, 1e18, 1e19]


cdef Py_ssize_t short_repr(double value, char* out) noexcept:
    """Write ``repr(value)`` to ``out`` (32 bytes) and return its length when it has at most
    15 significant digits in fixed notation (1e-4 <= |value| < 1e15, or a zero), else 0.

    Exact: for the smallest ``k`` with ``n = round(|value| * 10**k)`` below 10**15 and
    ``n / 10**k == |value|`` (both exact doubles: one correctly rounded division), the decimal
    ``n * 10**-k`` reads back as ``value``, and no other of at most 15 digits does (DBL_DIG is
    15): it is the shortest, the one repr prints, and ``n`` has no trailing zero. The product
    is within 0.3 of ``n`` whenever such a decimal exists at ``k``, so none is missed."""
    cdef double a = fabs(value), scaled
    cdef unsigned long long n = 0, whole
    cdef int k, i
    cdef char* p = out
    if signbit(value):
        p[0] = b'-'
        p += 1
    if a == 0.0:
        memcpy(p, b"0.0", 3)
        return p + 3 - out
    if not (a >= 1e-4 and a < 1e15):
        return 0
    for k in range(20):
        scaled = a * POW10[k]
        if scaled >= 1e15:
            return 0
        n = <unsigned long long>(scaled + 0.5)
        if <double>n / POW10[k] == a:
            break
    else:
        return 0
    whole = n // <unsigned long long>POW10[k]
    p = write_decimal(p, whole)
    p[0] = b'.'
    p += 1
    if k == 0:
        p[0] = b'0'
        return p + 1 - out
    n -= whole * <unsigned long long>POW10[k]
    for i in range(k - 1, -1, -1):  # the k fraction digits, leading zeros included
        p[i] = <char>(48 + n % 10)
        n //= 10
    return p + k - out
