"""``python -m fastlock locks ...`` and ``python -m fastlock queue ...``: the admin operations
of :mod:`fastlock.locks.admin` and :mod:`fastlock.queues.admin` on the command line, as
tables or (``--json``) one JSON document on stdout.

Exit codes: 0 done, 1 not found (no such job, lock or holder), 2 usage (a wrong argument),
3 refused (a job that cannot be cancelled in its state), 4 the server failed or is
unreachable. Errors are one line on stderr."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .. import Client, LockManager
from ..digest import check_digest
from ..exceptions import ArgumentError, ArgumentTypeError, FastlockError
from ..locks.keys import LockEntry
from ..queues.admin import STATES, WINDOW, JobInfo
from ..queues.admin import describe_time as _when
from ..queues.queue import Queue

__all__ = ["add_commands", "run"]

DEFAULT_URL = "redis://127.0.0.1:6379/0"
OK, NOT_FOUND, USAGE, REFUSED, SERVER = 0, 1, 2, 3, 4


class Done(Exception):
    """Ends a command with an exit code and one line for stderr."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# ---- output


def _plain(value: Any) -> Any:
    """``value`` as JSON data: records as objects, bytes as text (undecodable bytes escaped)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {name: _plain(item) for name, item in value._asdict().items()}
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return value


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    cells = [list(headers), *[["" if cell is None else str(cell) for cell in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def _job_rows(jobs: Iterable[JobInfo], now: float) -> list[list[Any]]:
    return [
        [j.id, j.state, j.attempts, j.priority, (j.unique or "")[:12], j.token, _when(j.at, now),
         "gone" if j.payload_size is None else j.payload_size, j.error or ""]
        for j in jobs
    ]  # fmt: skip


JOB_HEADERS = ("id", "state", "attempts", "priority", "unique", "token", "at", "bytes", "error")


# ---- locks


def _manager(client: Client, args: argparse.Namespace) -> LockManager:
    return LockManager(client, prefix=args.prefix or "fastlock", buckets=args.buckets)


def _digest(manager: LockManager, args: argparse.Namespace) -> str:
    if args.name:
        return manager.digest(args.target, args.lock_queue, json.loads(args.args) if args.args else None)
    return check_digest(args.target)


def locks_list(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    manager = _manager(client, args)
    cursor, entries = args.cursor, list[LockEntry]()
    while len(entries) < args.count:
        cursor, found = manager.scan(cursor, match=args.match, count=args.count - len(entries))
        entries += found
        if cursor == "0":
            break
    rows = [[e.digest, "runtime" if e.runtime else "queue-time", e.limit] for e in entries]
    human = _table(("digest", "scope", "limit"), rows) + f"\n{len(entries)} scopes; next cursor {cursor}"
    return {"cursor": cursor, "entries": entries}, human, OK


def locks_inspect(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    manager = _manager(client, args)
    digest = _digest(manager, args)
    holders = manager.inspect(digest, runtime=args.runtime, limit=args.limit)
    if not holders:
        raise Done(NOT_FOUND, f"no holder of lock {digest}")
    rows = [[h.job_id, h.token, "never" if h.ttl is None else f"{h.ttl:.3f} s"] for h in holders]
    return {"digest": digest, "holders": holders}, _table(("job", "token", "expires"), rows), OK


def locks_delete(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    manager = _manager(client, args)
    digest = _digest(manager, args)
    removed = manager.delete(digest, limit=args.limit)
    if not removed:
        raise Done(NOT_FOUND, f"no holder of lock {digest}")
    return {"digest": digest, "removed": removed}, f"removed {removed} holders of {digest}", OK


def locks_reap(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    result = _manager(client, args).reaper(batch=args.batch).run_once()
    if result is None:
        raise Done(REFUSED, "another reaper holds the reaper lock: try again later")
    human = f"examined {result.examined} entries, dropped {result.dropped} stale, released {result.released}"
    return result, human, OK


# ---- queues


def _queue(client: Client, args: argparse.Namespace) -> Queue:
    return client.queue(args.queue, prefix=args.prefix or "fl")


def queue_stats(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    stats = _queue(client, args).stats()
    return stats, _table(stats._fields, [stats]), OK


def queue_pause(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    queue = _queue(client, args)
    changed = queue.pause() if args.action == "pause" else queue.resume()
    state = "paused" if args.action == "pause" else "running"
    data = {"queue": queue.name, "paused": args.action == "pause", "changed": changed}
    return data, f"{queue.name}: {state}" + ("" if changed else " (already)"), OK


def queue_schedules(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    rows = _queue(client, args).schedules()
    data = [{"name": row.name, **json.loads(row.spec.text()), "due": row.due} for row in rows]
    now = time.time()
    table = [[row.name, row.spec.every_ms / 1000 or row.spec.cron, row.spec.tz, row.spec.catch_up,
              _when(row.due, now)] for row in rows]  # fmt: skip
    return data, _table(("name", "every/cron", "tz", "catch_up", "due"), table), OK


def queue_unschedule(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    removed = _queue(client, args).unschedule(args.name)
    return {"name": args.name, "removed": removed}, f"{args.name}: " + ("removed" if removed else "none"), OK


def queue_schedule(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    with contextlib.suppress(KeyboardInterrupt):
        _queue(client, args).run_schedules()
    return {"queue": args.queue, "stopped": True}, f"{args.queue}: scheduler stopped", OK


def queue_peek(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    page = _queue(client, args).peek(args.state, offset=args.offset, count=args.count)
    shown = f"{page.offset + 1}-{page.offset + len(page.jobs)}" if page.jobs else "none"
    human = _table(JOB_HEADERS, _job_rows(page.jobs, page.now)) + f"\n{args.state}: {shown} of {page.total}"
    return page, human, OK


def queue_job(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    info = _queue(client, args).job(args.id, window=args.window)
    if info.state == "missing":
        raise Done(NOT_FOUND, f"no job {args.id!r} in queue {args.queue!r}")
    lines = [f"{name}: {'' if value is None else value}" for name, value in _plain(info).items()]
    names = [f.name for f in dataclasses.fields(info)]
    if info.at is not None:
        lines[names.index("at")] = f"at: {_when(info.at, time.time())}"
    if info.progress is not None:
        lines[names.index("progress")] = f"progress: {json.dumps(info.progress, ensure_ascii=False)}"
    return info, "\n".join(lines), OK


def queue_dead(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    jobs = _queue(client, args).dead(args.limit, older_than=args.older_than)
    now = time.time()
    rows = [[j.id, j.attempts, _when(j.died_at, now), j.error] for j in jobs]
    return jobs, _table(("id", "attempts", "died", "error"), rows) + f"\n{len(jobs)} dead jobs", OK


def _dead_change(method: Callable[..., int], args: argparse.Namespace, verb: str) -> tuple[Any, str, int]:
    count = method(args.ids or None, limit=args.limit, older_than=args.older_than)
    code = NOT_FOUND if args.ids and not count else OK
    return {verb: count}, f"{verb} {count} dead jobs", code


def queue_requeue(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    return _dead_change(_queue(client, args).requeue_dead, args, "requeued")


def queue_purge(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    return _dead_change(_queue(client, args).purge_dead, args, "purged")


_REFUSALS = {
    "dead": "is dead (purge it with: queue purge QUEUE ID)",
    "queued": "is deeper in the backlog than the search window (raise --window)",
}


def queue_cancel(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    done, state = _queue(client, args).cancel(args.id, window=args.window)
    if state == "missing":
        raise Done(NOT_FOUND, f"no job {args.id!r} in queue {args.queue!r}")
    if not done:
        raise Done(REFUSED, f"not cancelled: job {args.id!r} {_REFUSALS.get(state, state)}")
    human = f"cancelled {state} job {args.id}" + (
        " (its worker stops it at its next check)" if state == "active" else ""
    )
    return {"cancelled": args.id, "state": state}, human, OK


def queue_locks(client: Client, args: argparse.Namespace) -> tuple[Any, str, int]:
    queue = _queue(client, args)
    if args.digest:
        lock = queue.unique_lock(args.digest)
        if lock is None:
            raise Done(NOT_FOUND, f"no unique lock on {args.digest} in queue {args.queue!r}")
        locks, cursor = [lock], 0
    else:
        cursor, locks = queue.unique_locks(args.cursor, count=args.count)
    rows = [[lock.digest, lock.job_id, lock.kind, lock.ttl] for lock in locks]
    human = _table(("digest", "job", "kind", "ttl"), rows) + f"\n{len(locks)} locks; next cursor {cursor}"
    return {"cursor": cursor, "locks": locks}, human, OK


# ---- the parsers


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {value}")
    return value


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``locks`` and ``queue`` command groups to the subparsers ``commands``;
    ``common`` holds ``--url``, ``--prefix`` and ``--json``."""
    locks = commands.add_parser("locks", help="list, inspect, delete and reap locks").add_subparsers(
        dest="action", required=True
    )
    listing = locks.add_parser("list", parents=[common], help="tracked lock scopes, one bounded page")
    listing.add_argument("--match", help="glob on the scope (<digest> or <digest>:run)")
    listing.add_argument("--count", type=_positive, default=100, help="most scopes to show (default 100)")
    listing.add_argument("--cursor", default="0", help="continue from a cursor a listing printed")
    for name, doc in (("inspect", "holders of a lock"), ("delete", "delete a lock, whoever holds it")):
        one = locks.add_parser(name, parents=[common], help=doc)
        one.add_argument("target", help="the lock's digest (or its name, with --name)")
        one.add_argument("--name", action="store_true", help="TARGET is a lock name: use its digest")
        one.add_argument("--args", help="with --name: the lock's args, as JSON")
        one.add_argument("--queue", dest="lock_queue", help="with --name: the lock's queue")
        one.add_argument("--limit", type=_positive, help="the lock's limit (default: the tracked one)")
        if name == "inspect":
            one.add_argument("--runtime", action="store_true", help="the runtime (:run) scope")
    reap = locks.add_parser("reap", parents=[common], help="one bounded reaper pass (drops stale entries)")
    reap.add_argument("--batch", type=_positive, default=1000, help="most index entries examined")
    for parser in locks.choices.values():
        parser.add_argument("--buckets", type=_positive, default=1024, help="the namespace's buckets")
        parser.set_defaults(group="locks")

    queue = commands.add_parser("queue", help="look into a queue and fix it").add_subparsers(
        dest="action", required=True
    )
    actions = {
        "stats": "job counts, and whether claims are paused",
        "pause": "stop every claim until resume",
        "resume": "let claims go on after pause",
        "peek": "one page of ready, delayed, active or dead jobs",
        "job": "look a job up by id",
        "dead": "the oldest dead jobs",
        "requeue": "move dead jobs back to ready",
        "purge": "delete dead jobs",
        "cancel": "remove a waiting job, or end a running one (its worker stops it)",
        "locks": "the queue's unique locks",
        "schedules": "the queue's periodic jobs, the next due first",
        "unschedule": "remove a periodic job",
        "schedule": "run a scheduler of the queue's periodic jobs (until interrupted)",
    }
    for name, doc in actions.items():
        parser = queue.add_parser(name, parents=[common], help=doc)
        parser.add_argument("queue", help="the queue's name")
        parser.set_defaults(group="queue")
    queue.choices["peek"].add_argument("--state", choices=STATES, default="ready")
    queue.choices["peek"].add_argument("--offset", type=int, default=0, help="skip this many jobs")
    queue.choices["peek"].add_argument("--count", type=_positive, default=20, help="jobs to show (≤ 1000)")
    for name in ("job", "cancel"):
        queue.choices[name].add_argument("id", help="the job id")
        queue.choices[name].add_argument(
            "--window", type=_positive, default=WINDOW, help="entries searched at each end of each structure"
        )
    for name in ("dead", "requeue", "purge"):
        parser = queue.choices[name]
        if name != "dead":
            parser.add_argument("ids", nargs="*", help="these dead jobs (default: the oldest --limit)")
        parser.add_argument("--limit", type=_positive, default=100, help="most jobs (≤ 1000)")
        parser.add_argument("--older-than", type=float, help="only jobs dead this many seconds or more")
    queue.choices["unschedule"].add_argument("name", help="the schedule's name")
    queue.choices["locks"].add_argument("digest", nargs="?", help="one lock (held or ttl) by digest")
    queue.choices["locks"].add_argument("--cursor", type=int, default=0, help="continue a listing")
    queue.choices["locks"].add_argument("--count", type=_positive, default=100, help="HSCAN count hint")


def common_options() -> argparse.ArgumentParser:
    """``--url``, ``--prefix`` and ``--json``, shared by every admin command."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=os.environ.get("FASTLOCK_URL", DEFAULT_URL),
                        help=f"server URL (default: $FASTLOCK_URL, else {DEFAULT_URL})")  # fmt: skip
    common.add_argument("--prefix", help="key prefix (default: fastlock for locks, fl for queues)")
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return common


COMMANDS: dict[tuple[str, str], Callable[[Client, argparse.Namespace], tuple[Any, str, int]]] = {
    ("locks", "list"): locks_list,
    ("locks", "inspect"): locks_inspect,
    ("locks", "delete"): locks_delete,
    ("locks", "reap"): locks_reap,
    ("queue", "stats"): queue_stats,
    ("queue", "pause"): queue_pause,
    ("queue", "resume"): queue_pause,
    ("queue", "peek"): queue_peek,
    ("queue", "job"): queue_job,
    ("queue", "dead"): queue_dead,
    ("queue", "requeue"): queue_requeue,
    ("queue", "purge"): queue_purge,
    ("queue", "cancel"): queue_cancel,
    ("queue", "locks"): queue_locks,
    ("queue", "schedules"): queue_schedules,
    ("queue", "unschedule"): queue_unschedule,
    ("queue", "schedule"): queue_schedule,
}


def run(args: argparse.Namespace, error: Callable[[str], None]) -> int:
    """Run one admin command: print its result and return the exit code; ``error`` prints
    one line on stderr."""
    try:
        with Client(args.url) as client:
            data, human, code = COMMANDS[args.group, args.action](client, args)
    except Done as done:
        error(str(done))
        return done.code
    except (ArgumentError, ArgumentTypeError) as exc:
        error(f"usage: {exc}")
        return USAGE
    except FastlockError as exc:
        error(f"{type(exc).__name__}: {exc}")
        return SERVER
    except (ValueError, TypeError) as exc:
        error(f"usage: {exc}")
        return USAGE
    print(json.dumps(_plain(data)) if args.json else human)
    return code
