# ``Client.call`` itself (included by ``_core.pyx``): the script looked up by name, its
# ``#meta`` values appended, a connection from the pool, EVALSHA on it (its command name and
# sha encoded once per script), the connection back and the call's duration in the script's
# stats, without a Python frame; on a cluster, ``SlotRouter`` picks the ScriptCaller of the
# primary of the first key's slot first. The pure-Python twins are in ``_coreparts/conn_py.py``.


cdef object _pop = collections.deque.pop  # called unbound: no method lookup, no bound method
cdef object _append = collections.deque.append


cdef inline double _monotonic():
    cdef timespec now
    clock_gettime(CLOCK_MONOTONIC, &now)
    return now.tv_sec + now.tv_nsec * 1e-9


@cython.final
cdef class _Entry:
    """What a call of one script needs, read once: the script, its EVALSHA head (the command
    name and sha, encoded), its stats' pending durations (the same list for the script's
    life) and whether it declares ``#meta`` fields; for pipelines, whether one saw it loaded
    and its EVAL head."""

    def __init__(self, name, script):
        self.name = name
        self.script = script
        self.sha = script.sha
        self.head = evalsha_head(self.sha)
        self.durations = <list?>script.stats.durations
        self.meta = bool(script.meta)


@cython.final
cdef class _Scripts:
    """The scripts a caller runs by name: ``registry`` (a ``ScriptRegistry``, whose names
    never change script), ``settings`` (``ScriptSettings``), ``with_meta(script, args)``
    (``args`` with the script's ``#meta`` values), and an ``_Entry`` per name called, the
    last one found first (a name is usually the same str object call after call)."""

    def __init__(self, registry, settings, with_meta):
        self.registry = registry
        self.settings = settings
        self.with_meta = with_meta
        self.entries = {}

    cdef _Entry named(self, name):
        cdef _Entry last = self.last
        if last is not None and last.name is name:
            return last
        entry = self.entries.get(name)
        if entry is None:
            entry = self.entries[name] = _Entry(name, self.registry.get(name))
        self.last = <_Entry>entry
        return <_Entry>entry

    cdef _Entry of(self, script):
        """The entry of a script object (another registry's: a fresh one)."""
        entry = self.entries.get(script.name)
        if entry is None or (<_Entry>entry).script is not script:
            return _Entry(script.name, script)
        return <_Entry>entry


@cython.final
cdef class ScriptCaller:
    """``Client.call``: runs script ``name`` of ``scripts`` (a ``ScriptRegistry``; ``settings``
    the ``ScriptSettings``; ``with_meta(script, args)`` appends the ``#meta`` values) on a
    connection of ``pool`` (a ``ConnectionPool``) and records the call's duration.
    ``failed(conn, exc, script, keys, args, start, busy_timeout)`` takes over when the
    call raises (the connection policy and the recovery) and returns the result;
    ``record(script, settings, seconds)`` records when the stats fold or the debug log is on
    (``fold_at`` durations pending), otherwise the duration is appended here.

    ``call`` is the fast path; ``call_script`` runs a script object whose ``args`` have the
    meta values already (a call sent again elsewhere); ``use`` swaps the registry and the
    settings (a client sharing another's); ``observe`` reports each call to a tracer. The
    pool's own methods do the rare parts: opening or waiting (the pool is empty), the health
    check of an idle connection, closing a broken or pre-fork connection.
    """

    def __init__(self, pool, scripts, settings, with_meta, failed, record, Py_ssize_t fold_at):
        self._pool = pool
        self._idle = pool.idle_connections
        self._scripts = _Scripts(scripts, settings, with_meta)
        self._failed = failed
        self._record = record
        self._fold_at = fold_at

    def use(self, scripts, settings):
        """Run the scripts of ``scripts`` with ``settings`` from now on."""
        self._scripts = _Scripts(scripts, settings, self._scripts.with_meta)

    def observe(self, gate, key, on_call):
        """From now on, after each call that succeeded, ``on_call(name, seconds)`` while
        ``gate().get(key)`` is not ``None`` (``gate`` ``None``: never; a tracer's observer)."""
        self._gate, self._gate_key, self._on_call = gate, key, on_call

    def call(self, name, keys=(), args=(), *, busy_timeout=None):
        """Run script ``name`` with ``keys`` and ``args`` (see ``Client.call``)."""
        cdef _Scripts scripts = self._scripts
        cdef _Entry entry = scripts.named(name)
        if entry.meta:
            args = scripts.with_meta(entry.script, args)
        return self._run(entry, keys, args, scripts.settings, busy_timeout)

    def call_script(self, script, keys, args, settings, busy_timeout):
        """Run ``script`` with ``args`` as sent (its meta values included)."""
        return self._run(self._scripts.of(script), keys, args, settings, busy_timeout)

    cdef object _run(self, _Entry entry, keys, args, settings, busy_timeout):
        cdef double start = _monotonic()
        cdef Connection conn
        cdef list durations
        pool = self._pool
        try:
            conn = <Connection?>_pop(self._idle)
        except IndexError:
            conn = <Connection?>pool.get(start)
        else:
            interval = pool.health_check_interval
            if interval is not None and start - conn.last_used >= <double>interval:
                conn = <Connection?>pool.revive(conn)
        try:
            result = conn._evalsha(entry.sha, keys, args, entry.head)
        except BaseException as exc:  # recovered or re-raised by failed()
            result = self._failed(conn, exc, entry.script, keys, args, start, busy_timeout)
        else:
            if conn.broken or conn.generation != pool.generation:  # closed: a new generation
                pool.put(conn)
            else:
                _append(self._idle, conn)
                if pool.waiters:
                    pool.wakeups.put(None)
        seconds = _monotonic() - start
        durations = entry.durations
        if settings.debug or len(durations) + 1 >= self._fold_at:
            self._record(entry.script, settings, seconds)
        else:
            durations.append(seconds)
        if self._gate is not None and self._gate().get(self._gate_key) is not None:
            self._on_call(entry.name, seconds)
        return result


@cython.final
cdef class SlotRouter:
    """``ClusterClient.call``: script ``name`` of ``scripts`` (with ``settings`` and
    ``with_meta`` as for ``ScriptCaller``), then the slot of the first key from ``slots``
    (``key -> slot``, kept by the caller), else ``slot_of(keys)`` (a miss, or no keys); the
    ``ScriptCaller`` of that slot's primary from ``routes`` (one entry per slot), else
    ``route(slot)`` (``None`` there: it finds the node and fills the entry); then the call. A
    ``ResponseError`` or ``ConnectionError`` (a redirect, a node down) goes to
    ``failed(exc, slot, script, keys, args, settings, busy_timeout)`` (``args`` with the meta
    values), which returns the result or raises. No Python frame on the way.
    """

    def __init__(self, scripts, settings, with_meta, dict slots, list routes, slot_of, route, failed):
        self._scripts = _Scripts(scripts, settings, with_meta)
        self._slots = slots
        self._routes = routes
        self._slot_of = slot_of
        self._route = route
        self._failed = failed

    def call(self, name, keys=(), args=(), *, busy_timeout=None):
        """Run script ``name`` with ``keys`` and ``args`` (see ``Client.call``)."""
        cdef _Scripts scripts = self._scripts
        cdef _Entry entry = scripts.named(name)
        if entry.meta:
            args = scripts.with_meta(entry.script, args)
        cdef Py_ssize_t slot = self._slot(keys)
        caller = self._routes[slot]
        if caller is None:
            caller = self._route(slot)
        settings = scripts.settings
        try:
            return (<ScriptCaller?>caller)._run(entry, keys, args, settings, busy_timeout)
        except (ResponseError, ConnectionError) as exc:
            return self._failed(exc, slot, entry.script, keys, args, settings, busy_timeout)

    cdef Py_ssize_t _slot(self, keys) except -1:
        if type(keys) is tuple or type(keys) is list:
            if not len(keys):
                return self._slot_of(keys)
            first = seq_item(keys, 0)
        elif keys:
            first = keys[0]
        else:
            return self._slot_of(keys)
        last = self._last
        if last is not None and last[0] is first:
            return last[1]
        found = self._slots.get(first)
        if found is None:
            found = self._slot_of(keys)
        self._last = (first, found)
        return found
