"""The dashboard as an ASGI app (Starlette): :func:`app` over any asyncio client (standalone,
cluster, sentinel), :func:`serve` runs it with uvicorn. Every read is one bounded admin call
(:mod:`fastlock.queues.admin`, :mod:`fastlock.locks.admin`); every change is a POST carrying
a CSRF token, reached through a confirmation page, and refused in read-only mode."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qsl, quote

from starlette.applications import Starlette
from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..aio.manager import AsyncLockManager
from ..aio.queue import AsyncQueue
from ..aio.reaper import AsyncReaper
from ..digest import check_digest
from ..exceptions import ArgumentError, FastlockError
from ..locks.keys import LockEntry
from ..operations import AsyncRunner
from . import views
from .reads import Throughput, read_overview
from .security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    HEADERS,
    Auth,
    check_bind,
    csrf_valid,
    host_is_loopback,
    new_csrf,
)

__all__ = ["PAGE", "app", "serve"]

PAGE = 50
"""Rows per page."""
SCANS = 8
"""Most bounded scan calls one page of locks makes (enough for 2,048 empty buckets)."""
BULK = 1000
"""Dead jobs one bulk requeue or purge moves (the oldest)."""
FORM, MAX_FORM = "application/x-www-form-urlencoded", 65536
_DEAD_VERBS = {
    "requeue": ("Requeue", "requeued"),
    "delete": ("Delete", "deleted"),
    "purge": ("Purge", "purged"),
}


class _Guard:
    """Authentication and the security headers, around every response. Without auth, only
    requests naming a loopback host are served: a page of another site that rebinds its name
    to 127.0.0.1 gets nothing."""

    def __init__(self, inner: ASGIApp, auth: Auth) -> None:
        self.inner, self.auth = inner, auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
            await send(message)

        headers = Headers(scope=scope)
        if not self.auth.enabled and not host_is_loopback(headers.get("host", "")):
            refused = PlainTextResponse("without auth, only a loopback Host is served (DNS rebinding)", 400)
            await refused(scope, receive, sending)
            return
        if not self.auth.allows(headers.get("authorization")):
            refused = PlainTextResponse(
                "authentication required", 401, headers={"www-authenticate": 'Basic realm="fastlock"'}
            )
            await refused(scope, receive, sending)
            return
        await self.inner(scope, receive, sending)


class _Dashboard:
    """The pages over one client and its settings."""

    client: AsyncRunner
    manager: AsyncLockManager

    def __init__(
        self, source: ClientSource, queues: Sequence[str], queue_prefix: str, lock_prefix: str, buckets: int,
        read_only: bool, secret: bytes,
    ) -> None:  # fmt: skip
        self.source, self.queue_names, self.queue_prefix = source, tuple(queues), queue_prefix
        self.lock_prefix, self.buckets, self.read_only, self.secret = lock_prefix, buckets, read_only, secret
        self.connected: AsyncRunner | None = None
        self.throughput = Throughput()
        if not callable(source):
            self._use(source)

    def _use(self, client: AsyncRunner) -> None:
        self.client = self.connected = client
        self.manager = AsyncLockManager(client, prefix=self.lock_prefix, buckets=self.buckets)

    async def connect(self) -> None:
        """Build the client from its factory on the serving loop, once (the first request)."""
        if self.connected is None:
            assert callable(self.source)
            client = await self.source()
            if self.connected is None:
                self._use(client)
            else:  # another request connected meanwhile
                await client.close()

    def queue(self, name: str) -> AsyncQueue:
        return AsyncQueue(self.client, name, prefix=self.queue_prefix)

    def page(self, title: str, body: str, status: int = 200, refresh: int | None = None) -> HTMLResponse:
        return HTMLResponse(views.layout(title, body, refresh=refresh, read_only=self.read_only), status)

    # ---- reads

    async def overview(self, request: Request) -> Response:
        rows = await read_overview([self.queue(name) for name in self.queue_names])
        return self.page("queues", views.overview(rows, self.throughput.add(rows)), refresh=5)

    async def jobs(self, request: Request) -> Response:
        name = request.path_params["name"]
        state = request.query_params.get("state", "ready")
        offset = _number(request.query_params.get("offset", "0"))
        page = await self.queue(name).peek(state, offset=offset, count=PAGE)
        return self.page(f"queue {name}: {state}", views.queue(name, page, PAGE, self.read_only))

    async def job(self, request: Request) -> Response:
        name, job_id = request.path_params["name"], request.path_params["job_id"]
        info = await self.queue(name).job(job_id)
        status = 404 if info.state == "missing" else 200
        return self.page(f"job {job_id}", views.job(name, info), status)

    async def locks(self, request: Request) -> Response:
        cursor = next_cursor = request.query_params.get("cursor", "0")
        bucket = cursor.partition(":")[0]
        if not bucket.isdigit() or int(bucket) >= self.manager.buckets:
            raise ArgumentError(f"a locks cursor is 0 or one a page linked to, not {cursor!r:.80}")
        entries: list[LockEntry] = []
        for _ in range(SCANS):  # each scan visits at most BUCKETS_PER_CALL empty buckets
            next_cursor, found = await self.manager.scan(next_cursor, count=PAGE - len(entries))
            entries += found
            if next_cursor == "0" or len(entries) == PAGE:
                break
        return self.page("locks", views.locks(entries, cursor, next_cursor))

    async def reaper(self, request: Request) -> Response:
        runs = await AsyncReaper(self.manager).runs()
        return self.page("reaper", views.reaper(runs))

    async def lock(self, request: Request) -> Response:
        digest = check_digest(request.path_params["digest"])
        holders = await self.manager.inspect(digest) + await self.manager.inspect(digest, runtime=True)
        log = await self.manager.changelog(digest, count=PAGE)
        return self.page(f"lock {digest}", views.lock(digest, holders, log, self.read_only))

    # ---- changes: a confirmation page (GET), then the POST

    def _confirm(self, request: Request, question: str, fields: dict[str, str], back: str) -> Response:
        if self.read_only:
            return self.page("refused", views.message("read-only mode: nothing can be changed", back), 403)
        token = request.cookies.get(CSRF_COOKIE, "")
        if not csrf_valid(self.secret, token, token):
            token = new_csrf(self.secret)
        response = self.page(
            "confirm", views.confirm(question, quote(request.scope["path"]), fields, token, back)
        )
        response.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict", path="/")
        return response

    async def _checked_form(self, request: Request) -> dict[str, str] | Response:
        """The POST's fields, or the refusal (read-only, no valid CSRF token)."""
        if self.read_only:
            return PlainTextResponse("read-only mode: nothing can be changed", 403)
        body = await request.body()
        if len(body) > MAX_FORM or request.headers.get("content-type", "").split(";")[0] != FORM:
            return PlainTextResponse("an urlencoded form of at most 64 KiB is expected", 400)
        fields = dict(parse_qsl(body.decode("latin-1")))
        if not csrf_valid(self.secret, request.cookies.get(CSRF_COOKIE), fields.get(CSRF_FIELD)):
            return PlainTextResponse("missing or invalid CSRF token", 403)
        return fields

    async def dead_confirm(self, request: Request) -> Response:
        name, verb = request.path_params["name"], request.path_params["verb"]
        if verb not in _DEAD_VERBS:
            return PlainTextResponse("not found", 404)
        job_id = request.query_params.get("id", "")
        what = f"job {job_id}" if job_id else f"the oldest {BULK} dead jobs"
        fields = {"id": job_id} if job_id else {}
        back = f"/queues/{quote(name, safe='')}?state=dead"
        return self._confirm(request, f"{_DEAD_VERBS[verb][0]} {what} of queue {name}?", fields, back)

    async def dead_change(self, request: Request) -> Response:
        fields = await self._checked_form(request)
        if isinstance(fields, Response):
            return fields
        name, verb = request.path_params["name"], request.path_params["verb"]
        if verb not in _DEAD_VERBS:
            return PlainTextResponse("not found", 404)
        queue, ids = self.queue(name), [fields["id"]] if fields.get("id") else None
        method = queue.requeue_dead if verb == "requeue" else queue.purge_dead
        count = await method(ids, limit=BULK)
        back = f"/queues/{quote(name, safe='')}?state=dead"
        return self.page("done", views.message(f"{_DEAD_VERBS[verb][1]} {count} dead jobs", back))

    async def lock_confirm(self, request: Request) -> Response:
        digest = check_digest(request.path_params["digest"])
        return self._confirm(request, f"Delete lock {digest}, whoever holds it?", {}, f"/locks/{digest}")

    async def lock_change(self, request: Request) -> Response:
        fields = await self._checked_form(request)
        if isinstance(fields, Response):
            return fields
        removed = await self.manager.delete(check_digest(request.path_params["digest"]))
        return self.page("done", views.message(f"removed {removed} holders", "/locks"))


def _number(text: str) -> int:
    return int(text) if text.isdigit() else -1  # -1: refused by the admin call's checks


Endpoint = Callable[[Request], Awaitable[Response]]


def _handled(board: _Dashboard, endpoint: Endpoint) -> Endpoint:
    """The endpoint, once the client is there, with a refused argument or a server failure
    shown as a page."""

    async def handle(request: Request) -> Response:
        try:
            await board.connect()
            return await endpoint(request)
        except FastlockError as exc:
            status = 400 if isinstance(exc, ValueError | TypeError) else 502
            body = views.message(f"{type(exc).__name__}: {exc}", "/")
            return HTMLResponse(views.layout("error", body), status)

    return handle


ClientSource = AsyncRunner | Callable[[], Awaitable[AsyncRunner]]
"""An asyncio client, or an async factory of one (such as ``AsyncSentinelClient.connect``)."""


def app(
    client: ClientSource,
    *,
    queues: Sequence[str] = (),
    queue_prefix: str = "fl",
    lock_prefix: str = "fastlock",
    buckets: int = 1024,
    read_only: bool = False,
    auth: Auth | None = None,
    secret: bytes | None = None,
    close_client: bool = False,
) -> ASGIApp:
    """The dashboard over ``client`` (an asyncio client: standalone, cluster or sentinel, or
    an async factory called on the serving loop at the first request, e.g.
    ``lambda: AsyncSentinelClient.connect(sentinels, service)``) for the queues named in
    ``queues``, mountable in any ASGI app. ``auth``: required credentials
    (none by default: put an exposed mount behind an :class:`~fastlock.web.Auth`); ``secret``
    signs the CSRF tokens (default: random per app); ``close_client``: close it at shutdown."""
    secret = secret or secrets.token_bytes(32)
    board = _Dashboard(client, queues, queue_prefix, lock_prefix, buckets, read_only, secret)

    async def style(request: Request) -> Response:
        return Response(views.STYLE, media_type="text/css")

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        if close_client and board.connected is not None:
            await board.connected.close()  # type: ignore[attr-defined] # every asyncio client has one

    verb = "{verb:str}"
    routes = [
        Route("/", _handled(board, board.overview)),
        Route("/static/style.css", style),
        # a queue's name may hold "/": the longer routes first (a name ending in /dead/purge loses)
        Route("/queues/{name:path}/jobs/{job_id}", _handled(board, board.job)),
        Route(f"/queues/{{name:path}}/dead/{verb}", _handled(board, board.dead_confirm), methods=["GET"]),
        Route(f"/queues/{{name:path}}/dead/{verb}", _handled(board, board.dead_change), methods=["POST"]),
        Route("/queues/{name:path}", _handled(board, board.jobs)),
        Route("/locks", _handled(board, board.locks)),
        Route("/reaper", _handled(board, board.reaper)),
        Route("/locks/{digest}", _handled(board, board.lock)),
        Route("/locks/{digest}/delete", _handled(board, board.lock_confirm), methods=["GET"]),
        Route("/locks/{digest}/delete", _handled(board, board.lock_change), methods=["POST"]),
    ]
    return _Guard(Starlette(routes=routes, lifespan=lifespan), auth or Auth())


def serve(
    url: str, *, host: str = "127.0.0.1", port: int = 8080, auth: Auth | None = None, **settings: Any
) -> None:
    """Serve the dashboard over a new :class:`~fastlock.aio.Client` of ``url`` until
    interrupted; a bind beyond loopback without ``auth`` is refused before anything starts."""
    import uvicorn

    from ..aio.client import Client

    auth = auth or Auth()
    check_bind(host, auth)
    board = app(Client(url), auth=auth, close_client=True, **settings)
    uvicorn.run(board, host=host, port=port, log_level="warning", lifespan="on")
