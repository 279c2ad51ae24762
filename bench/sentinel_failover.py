"""Resume time of the Sentinel clients after a failover (issue 13's target: 200 ms at most).

A master, a replica and three sentinels (``fastlock.testing.sentinel``); a ``SentinelClient``
(a thread) and an ``AsyncSentinelClient`` (a task on a loop of its own) each acquire and
release a lock in a loop, 1 ms apart. A separate subscriber listens to ``+switch-master`` on
every sentinel. Each round runs ``SENTINEL FAILOVER`` and measures, per client, the time from
the first announcement the subscriber saw to the first lock acquired by a call sent to the
new master (a call the client addressed to it: one that got there after a ``READONLY`` on the
old master counts from the next one). Between rounds the demoted master is left to become a
synced replica again.

``python bench/sentinel_failover.py [--flavour redis|valkey] [--failovers 5] [--poll-interval 5]
[--elsewhere]`` prints every round and the median and maximum per client. ``SENTINEL FAILOVER``
goes to the first sentinel, the clients' first (the one they subscribe to); with
``--elsewhere`` the clients list it last, so they follow a sentinel that learns of the new
master from the leader's hello messages.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import threading
import time
from typing import Any

import flavours

import fastlock
from fastlock import _core_py as core
from fastlock.cluster.sentinel import SentinelClient
from fastlock.cluster.sentinel_aio import AsyncSentinelClient
from fastlock.testing.cluster import wait_until
from fastlock.testing.sentinel import TempSentinels

Address = tuple[str, int]


class Announcements:
    """``+switch-master`` messages on every sentinel: the first time each new master was announced."""

    def __init__(self, sentinels: list[str]) -> None:
        self.first: dict[int, float] = {}
        self._lock = threading.Lock()
        for address in sentinels:
            host, port = address.rsplit(":", 1)
            sock = socket.create_connection((host, int(port)))
            sock.sendall(core.encode_command("SUBSCRIBE", "+switch-master"))
            threading.Thread(target=self._listen, args=(sock,), daemon=True).start()

    def _listen(self, sock: socket.socket) -> None:
        reader = core.ReplyReader()
        while data := sock.recv(65536):
            now = time.monotonic()
            reader.feed(data)
            while (reply := reader.gets()) is not core.NOT_ENOUGH:
                if reply[0] == b"message":
                    port = int(reply[2].split()[-1])
                    with self._lock:
                        self.first.setdefault(port, now)


class Resumes:
    """The first success, per new master, of calls addressed to it."""

    def __init__(self) -> None:
        self.first: dict[Address, float] = {}
        self.errors = 0

    def success(self, addressed: Address) -> None:
        self.first.setdefault(addressed, time.monotonic())


def sync_writer(client: SentinelClient, resumes: Resumes, stop: threading.Event) -> None:
    lock = client.lock("bench-sync", ttl=10)
    while not stop.is_set():
        addressed = client.master
        try:
            if lock.acquire("w") is not None:
                resumes.success(addressed)
                lock.release("w")
        except fastlock.FastlockError:
            resumes.errors += 1
        time.sleep(0.001)


async def async_writer(
    listed: list[str], service: str, resumes: Resumes, stop: threading.Event, poll: float
) -> None:
    client = await AsyncSentinelClient.connect(listed, service, poll_interval=poll)
    async with client:
        lock = client.lock("bench-async", ttl=10)
        while not stop.is_set():
            addressed = client.master
            try:
                if await lock.acquire("w") is not None:
                    resumes.success(addressed)
                    await lock.release("w")
            except fastlock.FastlockError:
                resumes.errors += 1
            await asyncio.sleep(0.001)


def settled(sentinels: TempSentinels) -> bool:
    """The demoted master replicates the new one again and every sentinel knows it."""
    _, replica = sentinels.current()
    info = replica.raw_command("INFO", "replication")
    return b"role:slave" in info and b"master_link_status:up" in info


def run(flavour: str, binary: str, failovers: int, poll: float, elsewhere: bool) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {"sync": [], "async": []}
    with TempSentinels(binary, flavour) as sentinels:
        announcements = Announcements(sentinels.sentinels)
        listed = sentinels.sentinels[1:] + sentinels.sentinels[:1] if elsewhere else sentinels.sentinels
        stop = threading.Event()
        resumes = {"sync": Resumes(), "async": Resumes()}
        client = SentinelClient(listed, sentinels.service, poll_interval=poll)
        threads = [
            threading.Thread(target=sync_writer, args=(client, resumes["sync"], stop)),
            threading.Thread(
                target=lambda: asyncio.run(
                    async_writer(listed, sentinels.service, resumes["async"], stop, poll)
                )
            ),
        ]
        for thread in threads:
            thread.start()
        try:
            for n in range(failovers):
                wait_until(lambda: settled(sentinels), 60, "settled", step=0.05)
                time.sleep(1.0)  # the sentinels' hello period: every one sees the settled replica
                address = ("127.0.0.1", sentinels.current()[1].port)
                for resume in resumes.values():
                    resume.first.pop(address, None)  # no call addresses the replica
                announcements.first.pop(address[1], None)  # late copies of an earlier round's
                sentinels.failover(timeout=60)
                wait_until(lambda a=address: a[1] in announcements.first, 30, "announced")  # type: ignore[misc]
                wait_until(
                    lambda a=address: all(a in r.first for r in resumes.values()),  # type: ignore[misc]
                    30,
                    "resumed",
                )
                announced = announcements.first.pop(address[1])
                line = [f"{flavour} failover {n + 1}:"]
                for kind, resume in resumes.items():
                    results[kind].append(resume.first.pop(address) - announced)
                    line.append(f"{kind} {results[kind][-1] * 1e3:6.1f} ms")
                print(" ".join(line), flush=True)
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
            client.close()
        for kind, resume in resumes.items():
            print(f"{flavour} {kind}: errors raised to callers {resume.errors}")
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    flavours.add_option(parser)
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--poll-interval", type=float, default=5.0)
    parser.add_argument("--elsewhere", action="store_true")
    options = parser.parse_args(argv)
    summary: list[str] = []
    for flavour, binary in flavours.binaries(options.flavour):
        for kind, times in run(
            flavour, binary, options.failovers, options.poll_interval, options.elsewhere
        ).items():
            ms: list[Any] = [t * 1e3 for t in times]
            summary.append(
                f"{flavour} {kind}: resume after +switch-master over {len(ms)} failovers:"
                f" median {statistics.median(ms):.1f} ms, max {max(ms):.1f} ms (target <= 200 ms)"
            )
    print("\n".join(summary))


if __name__ == "__main__":
    main()
