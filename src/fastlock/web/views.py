"""The dashboard's pages as HTML text. Every value from the server (names, ids, payloads,
errors, digests) passes through :func:`esc`; the markup around it is constant. No page has a
script: the overview refreshes with a meta refresh, the style sheet is a file of the app."""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import quote, urlencode

from ..locks.keys import ChangelogEntry, LockEntry
from ..locks.reaping import ReaperRun
from ..locks.types import Holder
from ..queues.admin import STATES, JobInfo, Page, describe_time
from .reads import QueueRow

__all__ = ["STYLE", "confirm", "esc", "job", "layout", "lock", "locks", "message", "overview", "queue"]

STYLE = """body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
th{background:#f3f3f3}pre{background:#f7f7f7;padding:.6em;white-space:pre-wrap;word-break:break-all}
h1{word-break:break-all}
nav a{margin-right:1em}form.inline{display:inline}.danger{color:#a00}.muted{color:#777}
"""


def esc(value: object) -> str:
    """``value`` as HTML text (``None``: empty); bytes are decoded with escapes."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    return html.escape(str(value), quote=True)


def _q(value: str) -> str:
    return esc(quote(value, safe=""))


def _when(at: float | None, now: float) -> str:
    return describe_time(at, now, "%Y-%m-%d %H:%M:%S UTC")


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], empty: str = "none") -> str:
    """A table of trusted cells (each already escaped markup)."""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="muted">{esc(empty)}</p>'
    return "<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in headers) + f"</tr>{body}</table>"


def layout(title: str, body: str, *, refresh: int | None = None, read_only: bool = False) -> str:
    """A whole page around ``body`` (trusted markup); ``refresh``: reload every so many seconds."""
    meta = f'<meta http-equiv="refresh" content="{int(refresh)}">' if refresh else ""
    mode = ' <span class="muted">(read-only)</span>' if read_only else ""
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">{meta}'
        f'<title>{esc(title)} - fastlock</title><link rel="stylesheet" href="/static/style.css"></head>'
        f'<body><nav><a href="/">queues</a><a href="/locks">locks</a><a href="/reaper">reaper</a>{mode}</nav>'
        f"<h1>{esc(title)}</h1>{body}</body></html>"
    )


def _action(url: str, label: str, fields: dict[str, str]) -> str:
    """A link to the confirmation page of a mutation (GET never changes anything)."""
    return f'<a class="danger" href="{esc(url)}?{esc(urlencode(fields))}">{esc(label)}</a>'


def overview(rows: Sequence[QueueRow], rates: Mapping[str, Sequence[float | None]]) -> str:
    """Every queue's counts, its oldest ready job's age, whether claims are paused, and its
    claims per minute."""
    cells = [
        [f'<a href="/queues/{_q(r.name)}">{esc(r.name)}</a>', *(esc(getattr(r.stats, s)) for s in STATES),
         "\u2013" if r.oldest is None else esc(f"{r.oldest:,.1f} s"),
         esc("yes" if r.stats.paused else ""), *(_per_minute(rate) for rate in rates[r.name]),
         f'<a href="/queues/{_q(r.name)}?state=dead">dead letters</a>']
        for r in rows
    ]  # fmt: skip
    note = (
        '<p class="muted">Refreshes every 5 s. Claims per minute: from this page\'s own readings'
        " (shown once they span a tenth of the window).</p>"
    )
    per_minute = ("claims/min, 1 min", "claims/min, 15 min")
    headers = ("queue", *STATES, "oldest ready", "claims paused", *per_minute, "")
    return note + _table(headers, cells, "no queue configured (--queue NAME)")


def _per_minute(rate: float | None) -> str:
    return "\u2013" if rate is None else esc(f"{rate:,.1f}")


def queue(name: str, page: Page, count: int, read_only: bool) -> str:
    """One page of a queue's jobs in one state."""
    base = f"/queues/{_q(name)}"
    tabs = " ".join(
        f"<b>{esc(s)}</b>" if s == page.state else f'<a href="{base}?state={s}">{esc(s)}</a>' for s in STATES
    )
    rows = []
    for j in page.jobs:
        link = f'<a href="{base}/jobs/{_q(j.id)}">{esc(j.id)}</a>'
        size = "gone" if j.payload_size is None else j.payload_size
        row = [link, esc(j.attempts), esc(j.priority), esc(j.token), esc(_when(j.at, page.now)), esc(size),
               esc((j.error or "").partition("\n")[0])]  # fmt: skip
        if page.state == "dead" and not read_only:
            row.append(
                _action(f"{base}/dead/requeue", "requeue", {"id": j.id})
                + " " + _action(f"{base}/dead/delete", "delete", {"id": j.id})
            )  # fmt: skip
        rows.append(row)
    at = {"delayed": "due", "active": "lease deadline", "dead": "died"}.get(page.state, "at")
    headers = ["id", "attempts", "priority", "token (holder)", at, "bytes", "error"]
    if page.state == "dead" and not read_only:
        headers.append("")
    shown = f"{page.offset + 1}-{page.offset + len(page.jobs)}" if page.jobs else "none"
    pager = []
    if page.offset > 0:
        pager.append(
            f'<a href="{base}?state={page.state}&amp;offset={max(page.offset - count, 0)}">previous</a>'
        )
    if page.offset + len(page.jobs) < page.total:
        pager.append(f'<a href="{base}?state={page.state}&amp;offset={page.offset + count}">next</a>')
    bulk = ""
    if page.state == "dead" and page.total and not read_only:
        bulk = (
            "<p>" + _action(f"{base}/dead/requeue", "requeue the oldest 1000", {"all": "1"})
            + " " + _action(f"{base}/dead/purge", "purge the oldest 1000", {"all": "1"}) + "</p>"
        )  # fmt: skip
    summary = f"<p>{esc(page.state)}: {shown} of {page.total}</p>"
    return f"<p>{tabs}</p>{summary}{bulk}{_table(headers, rows)}<p>{' '.join(pager)}</p>"


def job(name: str, info: JobInfo) -> str:
    """One job: its fields, its payload's preview and, when dead, its error and traceback."""
    error = info.error or ""
    first, _, trace = error.partition("\n")
    fields = [
        ("queue", esc(name)), ("state", esc(info.state)), ("attempts", esc(info.attempts)),
        ("priority", esc(info.priority)), ("token", esc(info.token)), ("unique", esc(info.unique)),
        ("at", esc(_when(info.at, time.time()))), ("bytes", esc(info.payload_size)), ("error", esc(first)),
    ]  # fmt: skip
    body = _table(("field", "value"), ([esc(k), v] for k, v in fields))
    body += f'<h2>payload (first bytes)</h2><pre id="payload">{esc(info.preview)}</pre>'
    if trace:
        body += f'<h2>traceback</h2><pre id="traceback">{esc(trace)}</pre>'
    return body + f'<p><a href="/queues/{_q(name)}?state={esc(info.state)}">back to {esc(info.state)}</a></p>'


def locks(entries: Sequence[LockEntry], cursor: str, next_cursor: str) -> str:
    """One page of the tracked lock scopes."""
    rows = [
        [f'<a href="/locks/{_q(e.digest)}">{esc(e.digest)}</a>',
         esc("runtime" if e.runtime else "queue-time"), esc(e.limit)]
        for e in entries
    ]  # fmt: skip
    more = f'<p><a href="/locks?cursor={_q(next_cursor)}">next page</a></p>' if next_cursor != "0" else ""
    first = '<p><a href="/locks">first page</a></p>' if cursor != "0" else ""
    return _table(("digest", "scope", "limit"), rows, "no tracked lock") + more + first


def reaper(runs: Sequence[ReaperRun]) -> str:
    """The reaper's last passes, newest first (every process's reaper of the namespace)."""
    now = time.time()
    rows = [
        [esc(_when(r.at, now)), esc(f"{r.seconds:.3f} s"), esc(r.examined), esc(r.dropped), esc(r.released),
         esc(r.runner)]
        for r in runs
    ]  # fmt: skip
    headers = ("ended", "took", "examined", "index entries dropped", "orphans released", "runner")
    return _table(headers, rows, "no pass logged yet (a reaper logs each pass it makes)")


def lock(digest: str, holders: Sequence[Holder], log: Sequence[ChangelogEntry], read_only: bool) -> str:
    """One lock's holders (both scopes) and its changelog entries."""
    rows = [
        [esc(h.job_id), esc(h.token), esc("runtime" if h.runtime else "queue-time"),
         esc("never" if h.ttl is None else f"{h.ttl:.3f} s")]
        for h in holders
    ]  # fmt: skip
    body = "<h2>holders</h2>" + _table(("job", "token", "scope", "expires in"), rows, "no holder")
    events = [
        [esc(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.time_ms / 1000))), esc(e.event), esc(e.scope),
         esc(e.job_id), esc(e.token)]
        for e in log
    ]  # fmt: skip
    body += "<h2>changelog</h2>" + _table(
        ("time (UTC)", "event", "scope", "job", "token"), events, "no entry"
    )
    if not read_only:
        body += "<p>" + _action(f"/locks/{_q(digest)}/delete", "delete this lock", {}) + "</p>"
    return body


def confirm(question: str, action: str, fields: dict[str, str], csrf: str, back: str) -> str:
    """The confirmation step of a mutation: one POST form carrying the CSRF token."""
    hidden = "".join(f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">' for k, v in fields.items())
    return (
        f'<p>{esc(question)}</p><form method="post" action="{esc(action)}">'
        f'<input type="hidden" name="csrf" value="{esc(csrf)}">{hidden}'
        f'<button type="submit" id="confirm">Yes, do it</button> <a href="{esc(back)}">cancel</a></form>'
    )


def message(text: str, back: str) -> str:
    return f'<p id="message">{esc(text)}</p><p><a href="{esc(back)}">back</a></p>'
