# A pipeline's queue (included by ``_core.pyx``): commands and script calls encoded into one
# buffer as they are queued (a script call with its EVALSHA head, as ``ScriptCaller.call``),
# sent in one write by ``Connection.send_batch``. Its pure-Python twin: ``call_py.py``.


@cython.final
cdef class CommandQueue:
    """Commands and calls of the scripts of ``caller`` (a ``ScriptCaller``: its registry,
    settings and meta values), encoded as they are queued, invalid ones refused then, unsent;
    ``call`` and ``command`` return ``owner`` (the ``Pipeline``, so calls chain).
    ``call_at(i)`` is ``(script, keys, args)`` of item ``i`` when it is a script call (its
    ``args`` without the meta values), else ``None``; ``errors(replies)`` are the indices of
    the error replies."""

    def __cinit__(self):
        buf_init(&self._out, 16384)  # 64 calls of 3 keys and 5 args, without a copy

    def __init__(self, ScriptCaller caller, owner):
        self._table = caller._scripts
        self._owner = owner
        self._evals = []

    def __dealloc__(self):
        PyMem_Free(self._out.data)
        items_clear(&self._items)
        PyMem_Free(self._items.data)

    def __len__(self):
        return self._items.len // 3

    def call(self, name, keys=(), args=()):
        """Queue a call of script ``name`` with ``keys`` and ``args`` (``EVALSHA``)."""
        cdef _Scripts table = self._table
        cdef _Entry entry = table.named(name)
        cdef Py_ssize_t start = self._out.len
        if type(keys) is not tuple and type(keys) is not list:
            keys = tuple(keys)
        if type(args) is not tuple and type(args) is not list:
            args = tuple(args)
        sent = table.with_meta(entry.script, args) if entry.meta else args
        try:
            put_evalsha(
                &self._out, entry.sha, keys, sent, entry.head if entry.loaded else self._head(entry),
                self._items.len // 3,
            )
        except BaseException:
            self._out.len = start
            raise
        if not entry.loaded:
            self._queued(entry)
        self._push(entry.script, keys, args)
        return self._owner

    cdef bint _first(self, _Entry entry):
        """Whether a call of ``entry`` (a script not seen loaded) would be its first in the
        batch."""
        for queued in self._evals:
            if (<tuple>queued)[1] is entry:
                return False
        return True

    cdef bytes _head(self, _Entry entry):
        """The head of a call of a script not seen loaded: ``EVAL`` for its first call in
        the batch (loading it in place, so the call runs where it is queued), else EVALSHA."""
        if not self._first(entry):
            return entry.head
        if entry.eval is None:
            entry.eval = eval_head(entry.script.body)
        return entry.eval

    cdef int _queued(self, _Entry entry) except -1:
        """Record a call of ``entry`` just queued as ``EVAL`` (its first in the batch)."""
        if self._first(entry):
            self._evals.append((self._items.len // 3, entry))
        return 0

    def evals(self):
        """The indices of the calls sent as ``EVAL``."""
        return [(<tuple>queued)[0] for queued in self._evals] if self._evals else []

    def set_loaded(self, Py_ssize_t i, bint loaded):
        """Whether the script of call ``i`` is held by the server (its next calls in a
        batch: EVALSHA, or EVAL first)."""
        call = self.call_at(i)
        if call is not None:
            self._table.of(call[0]).loaded = loaded

    def command(self, tuple args):
        """Queue command ``args``."""
        cdef Py_ssize_t start = self._out.len
        try:
            put_command(&self._out, args, self._items.len // 3)
        except BaseException:
            self._out.len = start
            raise
        self._push(None, None, None)
        return self._owner

    cdef int _push(self, script, keys, args) except -1:
        items_push(&self._items, script)
        items_push(&self._items, keys)
        return items_push(&self._items, args)

    def call_at(self, Py_ssize_t i):
        """``(script, keys, args)`` of item ``i`` if it is a script call, else ``None``."""
        if not 0 <= i < self._items.len // 3:
            raise IndexError("no such item")
        cdef PyObject** item = self._items.data + 3 * i
        script = <object>item[0]
        return None if script is None else (script, <object>item[1], <object>item[2])

    def errors(self, list replies):
        """The indices of the error replies in ``replies``."""
        cdef Py_ssize_t i
        cdef list found = []
        for i in range(len(replies)):
            if is_error_reply(replies[i]):
                found.append(i)
        return found

    def clear(self):
        """Drop what was queued."""
        self._out.len = 0
        items_clear(&self._items)
        self._evals = []
