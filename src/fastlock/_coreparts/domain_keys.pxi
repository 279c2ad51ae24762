# The keys of a lock scope built in C (included by ``_core.pyx``), each function with its
# pure-Python twin in ``domain_py.py``: ``_digest_bucket`` is ``locks.keys.bucket_of``, and
# ``_lock_scope`` is ``KeySpace.scope`` (it returns None for what it leaves to it). Sans I/O.
#
# ``_lock_scope(space, scope_type, digest, suffix, limit)`` builds ``scope_type(digest + suffix,
# (index, counter, changelog, wake, slot, ...))`` for an ASCII digest starting with 8 lowercase
# hex digits, as ``space.scope`` (a ``KeySpace``) does: the bucket's keys from
# ``space._bucket_keys``, made as ``space._new_bucket(bucket)`` makes them on first use; its two
# slots set in C.

from cpython.object cimport PyObject, PyTypeObject

cdef extern from *:
    """
    static int slot_set(PyObject* descr, PyObject* obj, PyObject* value) {
        return Py_TYPE(descr)->tp_descr_set(descr, obj, value);
    }
    """
    int slot_set(object descr, object obj, object value) except -1

cdef tuple NO_ARGS = ()
cdef type keys_scope_type = None  # the scope class whose slot setters are keys_setters
cdef tuple keys_setters = None  # its "name" and "keys" member descriptors


cdef object new_slots_object(type kind):
    """A new, empty instance of the slots class ``kind`` (``object.__new__(kind)``); its slots
    are then set with ``slot_set`` and their member descriptors (``_coreparts/domain_jobs.pxi`` too)."""
    return (<PyTypeObject*>kind).tp_new(kind, <PyObject*>NO_ARGS, NULL)


cdef long keys_bucket(str digest, long buckets) except -2:
    """The bucket of ``digest`` (its first 8 characters lowercase hex), or -1."""
    cdef unsigned long value = 0
    cdef int i, digit
    cdef const char* data
    if buckets <= 0 or not PyUnicode_IS_COMPACT_ASCII(digest) or PyUnicode_GET_LENGTH(digest) < 8:
        return -1
    data = <const char*>PyUnicode_DATA(digest)
    for i in range(8):
        digit = hex_value(<unsigned char>data[i])
        if digit < 0:
            return -1
        value = value * 16 + <unsigned long>digit
    return <long>(value % <unsigned long>buckets)


def _digest_bucket(str digest, long buckets):
    """``int(digest[:8], 16) % buckets`` (``locks.keys.bucket_of``), the same result or error."""
    cdef long bucket = keys_bucket(digest, buckets)
    return bucket if bucket >= 0 else int(digest[:8], 16) % buckets


def _lock_scope(space, type scope_type, str digest, str suffix, long limit):
    """The scope ``space.scope`` (a ``KeySpace``) builds, or None to leave the digest to it."""
    global keys_scope_type, keys_setters
    cdef long bucket = keys_bucket(digest, space.buckets)
    cdef long i
    cdef str name, base, prefix
    cdef tuple keys
    if bucket < 0 or not 1 <= limit <= 1000:
        return None
    buckets = <dict>space._bucket_keys
    found = buckets.get(bucket)
    if found is None:  # KeySpace._new_bucket's keys
        prefix = f"{space.prefix}:{bucket}:" if space._tagged else f"{space.prefix}:{{{bucket}}}:"
        found = buckets[bucket] = ((prefix + "idx", prefix + "seq", prefix + "log"), prefix)
    keys, prefix = found
    name = digest + suffix
    base = prefix + name
    if limit == 1:
        keys = keys + (base + ":w", base)
    else:
        keys = keys + (base + ":w", base) + tuple([f"{base}:{i}" for i in range(1, limit)])
    if scope_type is not keys_scope_type:
        keys_setters = (scope_type.__dict__["name"], scope_type.__dict__["keys"])
        keys_scope_type = scope_type
    scope = new_slots_object(scope_type)
    slot_set(keys_setters[0], scope, name)
    slot_set(keys_setters[1], scope, keys)
    return scope
