"""One multiplexed asyncio connection: many tasks' commands coalesced into one write per loop
iteration, their replies matched in order.

:meth:`Connection.send` appends an encoded request (one command, or several sent together)
to the pending buffer and returns a future (a script call of ``client.call`` is encoded there
by the core's ``MuxCaller``); the first request of an iteration schedules one flush
(``loop.call_soon``), which writes every pending request in one ``transport.write``. Replies
are read with the core's ``ReplyReader`` and handed, in FIFO order, to the written requests'
futures. The protocol is the core's (``MuxConnection``: the write buffer and the waiters in C
on the Cython core); this module opens it.

Cancellation and timeouts (the caller's future is then done before its reply came):

- a request whose future is done before the flush is never written;
- a written request keeps its place in the reply order: its reply is read and dropped, and
  the connection stays open and in step;
- a deadline expiring sets :class:`~fastlock.TimeoutError` on the future, ``sent`` saying
  whether the request was written. One timer per connection watches the earliest deadline;
- a written request still unanswered :data:`STALLED_AFTER` seconds past its deadline means
  the server stopped answering: the connection is closed, its other written requests fail
  with ``TimeoutError(sent=True)`` and the pool opens a fresh one.

Losing the connection fails written requests with ``ConnectionError(sent=True)`` and
unwritten ones with ``sent=False`` (safe to send again on another connection).
"""

from __future__ import annotations

import asyncio
import builtins
from typing import cast

from .._impl import Core, CoreMuxConnection
from ..exceptions import ConnectionError, TimeoutError
from ..params import ConnectionParams, Load, first_write

__all__ = ["STALLED_AFTER", "Connection", "open_connection"]

STALLED_AFTER = 5.0
"""Seconds a written request may stay unanswered past its deadline before its connection is
closed as stalled (a slow reply inside this grace is read and dropped, the connection kept)."""


Connection = CoreMuxConnection
"""A multiplexed connection: the core's ``MuxConnection`` (``_coreparts/aio_conn.pxi``, its
twin ``_coreparts/aio_py.py``), an asyncio protocol. ``send(payload, count, timeout)`` queues
encoded commands and returns the future of their reply (``count`` 0: one command) or of the
list of their ``count`` replies (error replies are values); ``load``, ``writes``,
``awaiting_replies``, ``closed``, ``on_change``, ``close()`` and ``wait_closed()`` as
described above."""


async def open_connection(params: ConnectionParams, core: Core, load: Load | None = None) -> Connection:
    """Connect (TCP, unix socket or TLS) within ``params.connect_timeout`` and send the
    handshake (AUTH, SELECT, CLIENT SETNAME), then ``load`` (a client's warm-up), in one write."""
    loop = asyncio.get_running_loop()
    address = params.address

    def make() -> asyncio.Protocol:  # duck-typed: the loops only call the protocol's methods
        return cast("asyncio.Protocol", core.MuxConnection(loop, address, STALLED_AFTER))

    try:
        async with asyncio.timeout(params.connect_timeout):
            if params.path:
                _, protocol = await loop.create_unix_connection(make, params.path)
            else:
                _, protocol = await loop.create_connection(
                    make,
                    params.host,
                    params.port,
                    ssl=params.ssl_context,
                    server_hostname=params.host if params.ssl_context else None,
                )
    except builtins.TimeoutError as exc:
        raise TimeoutError(f"connecting to {address} timed out", sent=False) from exc
    except OSError as exc:
        raise ConnectionError(f"cannot connect to {address}: {exc}", sent=False) from exc
    conn = cast(Connection, protocol)
    commands, check = first_write(params, load)
    if commands:
        try:
            async with asyncio.timeout(params.connect_timeout):
                check(await conn.send(core.encode_pipeline(commands), len(commands)))
        except BaseException:
            conn.close()
            raise
    return conn
