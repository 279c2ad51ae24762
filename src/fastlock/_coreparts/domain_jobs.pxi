# The queue's per-job client work in C (included by ``_core.pyx``), each with its pure-Python
# twin (``domain_py.py``): fresh job ids (``_numbered``) and claim replies read
# into jobs (``_claimed_jobs``; ``queues/jobs.py``'s ``claimed`` calls it first and is its
# twin, run for every reply this one leaves to it). Sans I/O.
#
# ``_numbered(head, numbers, n)`` is ``[f"{head}{number:x}" for number in islice(numbers, n)]``;
# ``_fresh(prefix, numbers, n, now, delay_ms)`` is ``_numbered(f"~{due:x}.{prefix}", numbers, n)``
# with ``due = int(now * 1000) + delay_ms`` (``now``: seconds since the epoch, a clock reading
# the caller makes: this part reads no clock), and ``_fresh_id(prefix, numbers, now,
# delay_ms)`` the one id ``f"~{due:x}.{prefix}{next(numbers):x}"``.
#
# ``_claimed_jobs(reply, job_type, batch_type)`` reads a claim reply ``now, next_due, member,
# payload, ...`` with at least one job: a ``batch_type()`` of ``job_type`` objects, each built
# as ``job_type(id, payload, attempt, token, member)`` would build it (the fields set in C,
# ``lost`` False), or ``None`` for any other reply (an empty claim, a member whose token or
# attempt is not plain digits, an id that is not UTF-8, a reply of another shape): ``claimed``
# then returns the same batch or raises the same error.
#
# ``_enqueued(reply, job_id)`` reads an enqueue reply that added the job: ``job_id`` for ``[1,
# the id's bytes]`` (an ASCII id, as every fresh one), ``None`` for any other reply
# (``enqueued``, its twin, then reads it: the id, the owner's id, or the same error).
#
# ``_completed_jobs(reply, job_type, batch_type)`` reads a complete reply ``[lost indexes, claim
# reply]`` that lost no lease and claimed jobs (``[[], claim reply with at least one job]``):
# the batch ``_claimed_jobs`` reads from its claim reply, or ``None`` for any other reply
# (``completed``, its twin, then reads it: the same batch or the same error).

from cpython.list cimport PyList_Append
from cpython.unicode cimport PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8
from libc.string cimport memcmp, memmove

from itertools import islice

cdef extern from "Python.h":
    object PyLong_FromLongLong(long long)
    unsigned long long PyLong_AsUnsignedLongLong(object) noexcept
    void PyErr_Clear() noexcept
    PyObject* PyErr_Occurred() noexcept

cdef tuple CLAIM_FIELDS = ("id", "payload", "attempt", "token", "member", "lost")
cdef type claim_type = None  # the job type whose field setters are claim_setters
cdef tuple claim_setters = None  # its fields' descriptors (their __set__), in CLAIM_FIELDS order


cdef int claim_fields(type job_type) except -1:
    """Look up ``job_type``'s field descriptors once (a slots class: member descriptors)."""
    global claim_type, claim_setters
    setters = tuple(job_type.__dict__[name] for name in CLAIM_FIELDS)
    if not all(type(d).__name__ == "member_descriptor" for d in setters):
        raise TypeError(f"{job_type.__qualname__} is not a slots class of fields {CLAIM_FIELDS}")
    claim_type, claim_setters = job_type, setters
    return 0


cdef Py_ssize_t claim_number(const char* data, Py_ssize_t start, Py_ssize_t end, long long* value) noexcept:
    """Parse the digits ``data[start:end]`` (1 to 18 of them) into ``value``; -1 if not that."""
    cdef Py_ssize_t i
    cdef long long v = 0
    if not 0 < end - start <= 18:
        return -1
    for i in range(start, end):
        if not 48 <= data[i] <= 57:
            return -1
        v = v * 10 + (data[i] - 48)
    value[0] = v
    return 0


cdef object claim_job(type job_type, bytes member, object payload):
    """The job of one lease member ``<token>|<attempt>|<priority>|<unique>|<id>``, or None."""
    cdef const char* data = PyBytes_AS_STRING(member)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(member), i
    cdef Py_ssize_t bars[4]
    cdef int found = 0
    cdef long long token, attempt
    for i in range(n):
        if data[i] == b'|':
            bars[found] = i
            found += 1
            if found == 4:
                break
    if found < 4:
        return None
    if claim_number(data, 0, bars[0], &token) < 0 or claim_number(data, bars[0] + 1, bars[1], &attempt) < 0:
        return None
    try:
        job_id = PyUnicode_DecodeUTF8(data + bars[3] + 1, n - bars[3] - 1, NULL)
    except UnicodeDecodeError:
        return None
    job = new_slots_object(job_type)  # _coreparts/domain_keys.pxi, included before
    setters = claim_setters
    slot_set(setters[0], job, job_id)
    slot_set(setters[1], job, payload)
    slot_set(setters[2], job, PyLong_FromLongLong(attempt))
    slot_set(setters[3], job, PyLong_FromLongLong(token))
    slot_set(setters[4], job, member)
    slot_set(setters[5], job, False)
    return job


def _claimed_jobs(reply, type job_type, type batch_type):
    """The jobs of a claim reply (see above), or ``None`` to leave the reply to ``claimed``."""
    return claimed_jobs(reply, job_type, batch_type)


def _enqueued(reply, job_id):
    """``job_id`` if the enqueue reply added it (see above), or ``None`` to leave it to ``enqueued``."""
    cdef Py_ssize_t n
    if type(reply) is not list or len(<list>reply) != 2:
        return None
    added, owner = (<list>reply)[0], (<list>reply)[1]
    if type(added) is not int or added != 1 or type(owner) is not bytes:
        return None
    if type(job_id) is not str or not PyUnicode_IS_COMPACT_ASCII(job_id):
        return None
    n = PyUnicode_GET_LENGTH(job_id)
    if PyBytes_GET_SIZE(owner) != n or memcmp(PyBytes_AS_STRING(owner), PyUnicode_DATA(job_id), n):
        return None
    return job_id


def _completed_jobs(reply, type job_type, type batch_type):
    """The jobs a complete reply claimed (see above), or ``None`` to leave it to ``completed``."""
    if type(reply) is not list or len(<list>reply) != 2:
        return None
    lost = (<list>reply)[0]
    if type(lost) is not list or len(<list>lost):
        return None
    return claimed_jobs((<list>reply)[1], job_type, batch_type)


cdef object claimed_jobs(reply, type job_type, type batch_type):
    """``_claimed_jobs``'s batch, or ``None``."""
    cdef Py_ssize_t i, n
    if type(reply) is not list:
        return None
    n = len(<list>reply)
    if n < 4 or n % 2:
        return None
    if job_type is not claim_type:
        claim_fields(job_type)
    batch = batch_type()
    for i in range(2, n, 2):
        member = (<list>reply)[i]
        if type(member) is not bytes:
            return None
        job = claim_job(job_type, <bytes>member, (<list>reply)[i + 1])
        if job is None:
            return None
        PyList_Append(batch, job)
    return batch


cdef unsigned long long CLAIM_NOT_UNSIGNED = 0xFFFFFFFFFFFFFFFF  # also the largest: written by f-string


cdef unsigned long long claim_unsigned(object value):
    """``value`` if it is an int from 0 to 2**64 - 2, else CLAIM_NOT_UNSIGNED."""
    cdef unsigned long long number
    if type(value) is not int:
        return CLAIM_NOT_UNSIGNED
    number = PyLong_AsUnsignedLongLong(value)
    if number == CLAIM_NOT_UNSIGNED and PyErr_Occurred():  # negative, or 2**64 and more
        PyErr_Clear()
    return number


cdef char* hex_before(char* end, unsigned long long number) noexcept:
    """``number`` in lowercase hex ending just before ``end``; its first digit's place."""
    while True:
        end -= 1
        end[0] = CANON_HEX[number & 15]
        number >>= 4
        if number == 0:
            return end


cdef inline unsigned long long due_ms(double now, long long delay_ms) noexcept:
    """When a job made at ``now`` (s since the epoch) is due, in ms: ``_due``'s twin."""
    cdef double ms = now * 1000
    return <unsigned long long>ms + delay_ms if ms > 0 else delay_ms


cdef str fresh_head(str prefix, double now, long long delay_ms):
    """``~``, the due time (``now`` s as ms, plus ``delay_ms``) in hex, ``.``, then ``prefix``."""
    cdef char text[40]
    text[39] = b"."
    cdef char* p = hex_before(text + 39, due_ms(now, delay_ms)) - 1
    p[0] = b"~"
    return PyUnicode_DecodeASCII(p, text + 40 - p, NULL) + prefix


def _fresh(str prefix, numbers, n, double now, long long delay_ms):
    """``n`` fresh job ids due ``delay_ms`` after ``now`` (see above)."""
    return _numbered(fresh_head(prefix, now, delay_ms), numbers, n)


def _fresh_id(str prefix, numbers, double now, long long delay_ms):
    """One fresh job id due ``delay_ms`` after ``now``, the next number of ``numbers`` (see above)."""
    cdef char text[200]
    cdef Py_ssize_t size = PyUnicode_GET_LENGTH(prefix)
    cdef unsigned long long number
    cdef char* p
    cdef char* start
    value = next(numbers)
    number = claim_unsigned(value)
    if number == CLAIM_NOT_UNSIGNED or not PyUnicode_IS_COMPACT_ASCII(prefix) or size > 140:
        return f"{fresh_head(prefix, now, delay_ms)}{value:x}"
    p = hex_before(text + 200, number) - size
    memcpy(p, PyUnicode_DATA(prefix), size)
    p -= 1
    p[0] = b"."
    start = hex_before(p, due_ms(now, delay_ms)) - 1
    start[0] = b"~"
    return PyUnicode_DecodeASCII(start, text + 200 - start, NULL)


def _numbered(str head, numbers, n):
    """``n`` ids: ``head`` then each of the next ``n`` numbers of ``numbers`` in lowercase hex."""
    cdef Py_ssize_t size = PyUnicode_GET_LENGTH(head)
    cdef unsigned long long number
    cdef char text[160]
    cdef char* p
    cdef list result = []
    if not PyUnicode_IS_COMPACT_ASCII(head) or size > 140:
        return [f"{head}{value:x}" for value in islice(numbers, n)]
    memcpy(text, PyUnicode_DATA(head), size)
    for value in islice(numbers, n):
        number = claim_unsigned(value)
        if number == CLAIM_NOT_UNSIGNED:
            result.append(f"{head}{value:x}")
            continue
        p = text + size + 16
        while True:  # the digits from the end of a 16-digit field, then moved up to the head
            p -= 1
            p[0] = CANON_HEX[number & 15]
            number >>= 4
            if number == 0:
                break
        memmove(text + size, p, text + size + 16 - p)
        result.append(PyUnicode_DecodeASCII(text, size + (text + size + 16 - p), NULL))
    return result
