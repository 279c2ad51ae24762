# The fast path of ``Client.call`` (included by ``_core.pyx``): a connection from the pool,
# EVALSHA on it (its command name and sha encoded once per script), the connection back and
# the call's duration in the script's stats, without a Python frame; on a cluster,
# ``SlotRouter`` picks the ScriptCaller of the primary of the first key's slot first. The
# pure-Python twins are in ``sync/conn_py.py``.


cdef inline double _monotonic():
    cdef timespec now
    clock_gettime(CLOCK_MONOTONIC, &now)
    return now.tv_sec + now.tv_nsec * 1e-9


@cython.final
cdef class ScriptCaller:
    """Runs a script on a connection of ``pool`` (a ``ConnectionPool``) and records the
    call's duration; ``failed(conn, exc, script, keys, args, start, busy_timeout)`` takes
    over when the call raises (the connection policy and the recovery) and returns the
    result; ``record(script, settings, seconds)`` records when the stats fold or the debug
    log is on (``fold_at`` durations pending), otherwise the duration is appended here.

    ``call`` is the fast path. The pool's own methods do the rare parts: opening or
    waiting (the pool is empty), the health check of an idle connection, closing a broken
    or pre-fork connection.
    """

    cdef object _pool
    cdef object _idle
    cdef object _failed
    cdef object _record
    cdef Py_ssize_t _fold_at
    cdef dict _heads  # sha -> its EVALSHA head, encoded once

    def __init__(self, pool, failed, record, Py_ssize_t fold_at):
        self._pool = pool
        self._idle = pool.idle_connections
        self._failed = failed
        self._record = record
        self._fold_at = fold_at
        self._heads = {}

    def call(self, script, keys, args, settings, busy_timeout):
        return self._call(script, keys, args, settings, busy_timeout)

    cdef object _call(self, script, keys, args, settings, busy_timeout):
        cdef double start = _monotonic()
        cdef Connection conn
        cdef list durations
        pool = self._pool
        try:
            conn = <Connection?>self._idle.pop()
        except IndexError:
            conn = <Connection?>pool.get(start)
        else:
            interval = pool.health_check_interval
            if interval is not None and start - conn.last_used >= <double>interval:
                conn = <Connection?>pool._revive(conn)
        try:
            sha = script.sha
            head = self._heads.get(sha)
            if head is None:
                head = self._heads[sha] = evalsha_head(sha)
            result = conn._evalsha(sha, keys, args, <bytes>head)
        except BaseException as exc:  # recovered or re-raised by failed()
            result = self._failed(conn, exc, script, keys, args, start, busy_timeout)
        else:
            if conn.broken or pool._closed or conn.generation != pool._generation:
                pool.put(conn)
            else:
                self._idle.append(conn)
                if pool._waiters:
                    pool._wakeups.put(None)
        seconds = _monotonic() - start
        durations = <list?>script.stats.durations
        if settings.debug or len(durations) + 1 >= self._fold_at:
            self._record(script, settings, seconds)
        else:
            durations.append(seconds)
        return result


@cython.final
cdef class SlotRouter:
    """``ClusterClient``'s script call (its ``Client.call`` fast path): the slot of the first
    key from ``slots`` (``key -> slot``, kept by the caller), else ``slot_of(keys)`` (a
    miss, or no keys); the ``ScriptCaller`` of that slot's primary from ``routes`` (one entry
    per slot), else ``route(slot)`` (``None`` there: it finds the node and fills the entry);
    then the call. A ``ResponseError`` or ``ConnectionError`` (a redirect, a node down) goes
    to ``failed(exc, slot, script, keys, args, settings, busy_timeout)``, which returns the
    result or raises. No Python frame between ``Client.call`` and the ``ScriptCaller``.
    """

    cdef dict _slots
    cdef list _routes
    cdef object _slot_of
    cdef object _route
    cdef object _failed

    def __init__(self, dict slots, list routes, slot_of, route, failed):
        self._slots = slots
        self._routes = routes
        self._slot_of = slot_of
        self._route = route
        self._failed = failed

    def call(self, script, keys, args, settings, busy_timeout):
        cdef object found = None
        if keys:
            found = self._slots.get(keys[0])
        if found is None:
            found = self._slot_of(keys)
        cdef Py_ssize_t slot = found
        caller = self._routes[slot]
        if caller is None:
            caller = self._route(slot)
        try:
            return (<ScriptCaller?>caller)._call(script, keys, args, settings, busy_timeout)
        except (ResponseError, ConnectionError) as exc:
            return self._failed(exc, slot, script, keys, args, settings, busy_timeout)
