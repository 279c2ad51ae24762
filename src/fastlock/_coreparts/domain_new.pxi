# A lock built by the Cython core (included by ``_core.pyx``): ``_lock_new(cls, manager,
# digest, name, type, ttl, timeout, limit, job_id, on_conflict)`` is ``cls(manager, digest,
# name, type=type, ttl=ttl, ...)`` for ``cls`` a ``LockBase`` subclass (``locks/base.py``),
# its pure-Python twin ``domain_py._lock_new`` (the class call). For the common options it
# sets the slots ``LockBase.__init__`` sets, in C, without the class call. Any other options go to that call,
# which checks them or refuses them as it always does: a type given other than as a LockType
# member or a known name, a ttl, timeout or limit not an exact float or int in range (or no
# ttl for a type whose spec requires one), a job id not a non-empty exact str, a conflict
# strategy (or a type whose spec forces one: not in the specs handed over). ``_lock_spec``
# hands it the lock vocabulary once (``locks/base.py``, at import). Sans I/O.

from libc.math cimport round as c_round

cdef extern from "Python.h":
    double PyFloat_AS_DOUBLE(object)
    object PyLong_FromDouble(double)
    Py_ssize_t PyTuple_GET_SIZE(object)

cdef tuple LOCK_SLOTS = (  # LockBase.__init__'s slots, in the order _lock_new sets them
    "type", "ttl", "timeout", "limit", "manager", "digest", "name", "_job_id", "_serial",
    "_ttl_ms", "_flags", "_call", "_spec", "_main_scope", "_strategies",
)
cdef dict lock_setters = {}  # lock class -> the data descriptors of its LOCK_SLOTS
cdef object lock_type_class = None  # LockType
cdef dict lock_specs = None  # the types built here -> their LockSpec (locks/types.py)
cdef dict lock_type_names = None  # every type's name and alias -> the type
cdef object lock_no_strategies = None
cdef double lock_max_duration = 0.0
cdef long lock_max_limit = 0


def _lock_spec(lock_type, dict specs, dict names, no_strategies, double max_duration,
               long max_limit):
    """Hand ``_lock_new`` the lock vocabulary of ``locks/types.py`` and ``locks/base.py``."""
    global lock_type_class, lock_specs, lock_type_names
    global lock_no_strategies, lock_max_duration, lock_max_limit
    lock_type_class = lock_type
    lock_specs, lock_type_names, lock_no_strategies = specs, names, no_strategies
    lock_max_duration, lock_max_limit = max_duration, max_limit


cdef tuple lock_slot_setters(type cls):
    found = lock_setters.get(cls)
    if found is None:
        descriptors = tuple([getattr(cls, slot) for slot in LOCK_SLOTS])
        for descriptor in descriptors:
            kind = type(descriptor)
            if (<PyTypeObject*>kind).tp_descr_set == NULL:
                raise ArgumentTypeError(f"{cls.__qualname__}: {descriptor!r} is not a settable slot")
        found = lock_setters[cls] = descriptors
    return <tuple>found


cdef double py_round(double x):
    """``round(x)`` of a Python float: half to even."""
    cdef double rounded = c_round(x)
    if fabs(x - rounded) == 0.5:
        rounded = 2.0 * c_round(x / 2.0)
    return rounded


def _lock_new(type cls, manager, digest, name, kind, ttl, timeout, limit, job_id, on_conflict):
    """``cls(manager, digest, name, type=kind, ttl=ttl, ...)``, the common options' slots set
    in C (see above)."""
    cdef long long whole
    cdef double seconds
    cdef int overflow = 0
    cdef tuple setters, values
    cdef Py_ssize_t i
    given = kind
    if type(kind) is not lock_type_class:
        kind = lock_type_names.get(kind) if type(kind) is str else None
    spec = lock_specs.get(kind)
    if (spec is None or on_conflict is not None
            or not (job_id is None or (type(job_id) is str and len(<str>job_id)))):
        return cls(manager, digest, name, type=given, ttl=ttl, timeout=timeout, limit=limit,
                   job_id=job_id, on_conflict=on_conflict)
    if type(timeout) is float:
        seconds = PyFloat_AS_DOUBLE(timeout)
        if not 0.0 <= seconds <= lock_max_duration:
            kind = None
    elif type(timeout) is int:
        whole = PyLong_AsLongLongAndOverflow(timeout, &overflow)
        if overflow or not 0 <= whole <= <long long>lock_max_duration:
            kind = None
    else:
        kind = None
    if type(limit) is int:
        whole = PyLong_AsLongLongAndOverflow(limit, &overflow)
        if overflow or not 1 <= whole <= lock_max_limit:
            kind = None
    else:
        kind = None
    if ttl is None:
        if spec.ttl_required:
            kind = None
        ttl_ms = 0
    elif type(ttl) is float:
        seconds = PyFloat_AS_DOUBLE(ttl)
        if 0.001 <= seconds <= lock_max_duration:
            ttl_ms = PyLong_FromDouble(py_round(seconds * 1000.0))
        else:
            kind = None
    elif type(ttl) is int:
        whole = PyLong_AsLongLongAndOverflow(ttl, &overflow)
        if not overflow and 1 <= whole <= <long long>lock_max_duration:
            ttl_ms = whole * 1000
        else:
            kind = None
    else:
        kind = None
    if kind is None:
        return cls(manager, digest, name, type=given, ttl=ttl, timeout=timeout, limit=limit,
                   job_id=job_id, on_conflict=on_conflict)
    setters = lock_slot_setters(cls)
    lock = new_slots_object(cls)
    values = (kind, ttl, timeout, limit, manager, digest, name, job_id, None, ttl_ms,
              manager.flags, manager.call, spec, None, lock_no_strategies)
    for i in range(PyTuple_GET_SIZE(setters)):
        slot_set(<object>PyTuple_GET_ITEM(setters, i), lock, <object>PyTuple_GET_ITEM(values, i))
    return lock
