# A pipeline's queue (included by ``_core.pyx``): commands and script calls encoded into one
# buffer as they are queued (a script call with its EVALSHA head, as ``ScriptCaller.call``),
# sent in one write by ``Connection.send_batch``. The pure-Python twin is in ``sync/conn_py.py``.


@cython.final
cdef class Batch:
    """Commands and calls of the scripts of ``caller`` (a ``ScriptCaller``: its registry,
    settings and meta values), encoded as they are queued, invalid ones refused then, unsent;
    ``call`` and ``command`` return ``owner`` (the ``Pipeline``, so calls chain).
    ``call_at(i)`` is ``(script, keys, args)`` of item ``i`` when it is a script call (its
    ``args`` without the meta values), else ``None``; ``errors(replies)`` are the indices of
    the error replies."""

    cdef Buf _out
    cdef _Scripts _table
    cdef object _owner
    cdef Items _items  # per queued item: the Script called, its keys, its args as given (None x 3: a command)

    def __cinit__(self):
        buf_init(&self._out, 16384)  # 64 calls of 3 keys and 5 args, without a copy

    def __init__(self, ScriptCaller caller, owner):
        self._table = caller._scripts
        self._owner = owner

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
            put_evalsha(&self._out, entry.sha, keys, sent, entry.head, self._items.len // 3)
        except BaseException:
            self._out.len = start
            raise
        self._push(entry.script, keys, args)
        return self._owner

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
