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
#
# ``_manager_lock(manager, method, plain, constructor)`` is a manager's ``lock`` (``method``:
# its class's ``LockManager.lock`` or ``AsyncLockManager.lock``) as a function of the same
# keywords, read by its own argument parsing (a Python method's keyword-only parameters cost a
# kwdefaults lookup each per call, its ``**more`` a dict). A common call is answered here
# without a Python frame: no keyword beyond the common ones, an exact str ``queue`` or none, and
# a valid digest given (with an exact str name or none) or an exact str name whose canonical
# JSON this core writes (``_canonical_json``), hashed by ``constructor`` (the manager's
# digester's hashlib constructor; ``None`` for a hash function): the digest
# ``Namespace.lock_digest`` gives, then ``_lock_new``'s ``plain`` lock. Any other call is
# ``method``'s (``renew``, an unknown keyword, another name or digest, json's values). Its twin
# ``domain_py._manager_lock`` is ``None``: the method itself.

from cpython.object cimport PyObject_Call
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
    return lock_new(cls, manager, digest, name, kind, ttl, timeout, limit, job_id, on_conflict)


def _manager_lock(manager, method, type plain, constructor):
    """``manager.lock``, its keywords read in C (see above): the function to bind as the
    manager's ``lock``."""
    defaults = method.__kwdefaults__
    default_type, ttl_required = defaults["type"], defaults["ttl"]

    def lock(name=None, *, digest=None, queue=None, args=None, type=default_type, ttl=ttl_required,
             timeout=0.0, limit=1, job_id=None, on_conflict=None, **more):
        """A lock on ``digest``, or on the digest of (``name``, ``queue``, ``args``): the
        manager's ``lock`` (see there), its keywords read in C."""
        if not more:
            found = lock_digest(name, digest, queue, args, constructor)
            if found is not None:
                return lock_new(plain, manager, found, name, type, ttl, timeout, limit, job_id, on_conflict)
        given = {"digest": digest, "queue": queue, "args": args, "type": type, "ttl": ttl,
                 "timeout": timeout, "limit": limit, "job_id": job_id, "on_conflict": on_conflict}
        given.update(more)
        # PyObject_Call, not a Cython call with keywords: that would pass a dict to the core's
        # fast-call helper, and gcc would then drop the helper's copy specialised for calls
        # without one (every other call of the core: client.call measured 14 instructions more)
        return PyObject_Call(method, (manager, name), given)

    return lock


cdef object lock_digest(name, digest, queue, args, constructor):
    """The digest of a common call (see above), or ``None``."""
    if queue is not None and type(queue) is not str:
        return None
    if digest is not None:
        return digest if (name is None or type(name) is str) and is_digest(digest) else None
    if type(name) is not str or constructor is None:
        return None
    data = canonical_json(name, queue, args)
    return None if data is None else constructor(data).hexdigest()


cdef object lock_new(type cls, manager, digest, name, kind, ttl, timeout, limit, job_id, on_conflict):
    """``_lock_new``'s lock."""
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
