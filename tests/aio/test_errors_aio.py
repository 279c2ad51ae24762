"""The asyncio side of tests/test_errors.py: errors on bad input and misuse are
``FastlockError`` on ``fastlock.aio`` too, both cores (issue 23, defect 2)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import fastlock
import fastlock.aio
from fastlock.operations import Operation

Run = Callable[[Coroutine[Any, Any, Any]], Any]


def _bad_operation() -> Operation[None]:
    yield "not a step"  # type: ignore[misc]


def test_asyncio_errors_on_bad_input_are_fastlock_errors(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> list[str]:
        failures = []
        async with fastlock.aio.Client(redis_url, impl=impl) as client:
            queue = client.queue("errors")
            reaper = client.locks.reaper(interval=60)
            reaper.start()
            cases: list[tuple[str, Callable[[], Any]]] = [
                ("lock.extend without a ttl", lambda: client.lock("no-ttl", ttl=None).extend()),
                ("enqueue a job_id of the fresh mark", lambda: queue.enqueue(b"p", job_id="~x")),
                ("peek an unknown state", lambda: queue.peek("bogus")),
                ("an empty pipeline command", lambda: client.pipeline().execute_command()),
                ("an empty command", lambda: client.execute()),
                ("an operation yielding a non-step", lambda: client.run(_bad_operation())),
                ("a reaper started twice", reaper.start),
                ("no connections", lambda: fastlock.aio.Client(redis_url, max_connections=0)),
            ]
            for name, action in cases:
                try:
                    result = action()
                    if isinstance(result, Coroutine):
                        await result
                except fastlock.FastlockError:
                    continue
                except Exception as exc:  # noqa: BLE001 - the failure this test is about
                    failures.append(f"{name}: {type(exc).__qualname__} is not a FastlockError: {exc}")
                else:
                    failures.append(f"{name}: nothing raised")
            await reaper.stop()
        try:
            await client.execute("PING")
        except fastlock.FastlockError:
            pass
        except Exception as exc:  # noqa: BLE001
            failures.append(f"a closed client: {type(exc).__qualname__}: {exc}")
        return failures

    failures = run(main())
    assert not failures, "\n".join(failures)
