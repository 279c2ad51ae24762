# A lock built by the Cython core (included by ``_core.pyx``): ``_lock_new(cls, manager,
# digest, name, options)`` is ``cls(manager, digest, name, **options)`` for ``cls`` a
# ``LockBase`` subclass (``locks/base.py``) and ``options`` a ``LockOptions`` dict, its
# pure-Python twin ``locks.base._new_lock``. For the common options it sets the slots
# ``LockBase.__init__`` sets, in C, without the class call. Any other options go to the twin,
# which checks them or refuses them as it always does: an unknown option, a type given other
# than as a LockType member or a known name, a ttl, timeout or limit not an exact float or int
# in range (or no ttl for a type whose spec requires one), a job id not a non-empty exact str,
# a conflict strategy (or a type whose spec forces one: not in the specs handed over).
# ``_lock_spec`` hands it the lock vocabulary and ``LockBase.__init__``'s defaults once
# (``locks/base.py``, at import). Sans I/O.

from cpython.dict cimport PyDict_GetItem, PyDict_Size
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
cdef object lock_fallback = None  # locks.base._new_lock
cdef object lock_default_type = None  # LockBase.__init__'s defaults
cdef object lock_default_ttl = None
cdef object lock_default_timeout = None
cdef object lock_default_limit = None


def _lock_spec(lock_type, dict specs, dict names, no_strategies, double max_duration,
               long max_limit, fallback, dict defaults):
    """Hand ``_lock_new`` the lock vocabulary of ``locks/types.py`` and ``locks/base.py``."""
    global lock_type_class, lock_specs, lock_type_names
    global lock_no_strategies, lock_max_duration, lock_max_limit, lock_fallback
    global lock_default_type, lock_default_ttl, lock_default_timeout, lock_default_limit
    lock_type_class = lock_type
    lock_specs, lock_type_names, lock_no_strategies = specs, names, no_strategies
    lock_max_duration, lock_max_limit, lock_fallback = max_duration, max_limit, fallback
    lock_default_type, lock_default_ttl = defaults["type"], defaults["ttl"]
    lock_default_timeout, lock_default_limit = defaults["timeout"], defaults["limit"]


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


cdef inline object lock_option(dict options, str key, object default, Py_ssize_t* found):
    """``options[key]`` counted in ``found``, else ``default``."""
    cdef PyObject* value = PyDict_GetItem(options, key)
    if value == NULL:
        return default
    found[0] += 1
    return <object>value


def _lock_new(type cls, manager, digest, name, dict options):
    """``cls(manager, digest, name, **options)``, the common options' slots set in C (see
    above)."""
    cdef long long whole
    cdef double seconds
    cdef int overflow = 0
    cdef tuple setters, values
    cdef Py_ssize_t i, found = 0
    kind = lock_option(options, "type", lock_default_type, &found)
    ttl = lock_option(options, "ttl", lock_default_ttl, &found)
    timeout = lock_option(options, "timeout", lock_default_timeout, &found)
    limit = lock_option(options, "limit", lock_default_limit, &found)
    job_id = lock_option(options, "job_id", None, &found)
    if type(kind) is not lock_type_class:
        kind = lock_type_names.get(kind) if type(kind) is str else None
    spec = lock_specs.get(kind)
    if (spec is None or found != PyDict_Size(options)  # on_conflict or an unknown option
            or not (job_id is None or (type(job_id) is str and len(<str>job_id)))):
        return lock_fallback(cls, manager, digest, name, options)
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
        return lock_fallback(cls, manager, digest, name, options)
    setters = lock_slot_setters(cls)
    lock = new_slots_object(cls)
    values = (kind, ttl, timeout, limit, manager, digest, name, job_id, None, ttl_ms,
              manager.flags, manager.call, spec, None, lock_no_strategies)
    for i in range(PyTuple_GET_SIZE(setters)):
        slot_set(<object>PyTuple_GET_ITEM(setters, i), lock, <object>PyTuple_GET_ITEM(values, i))
    return lock
